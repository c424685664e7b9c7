/**
 * What the broker refuses at setup, told as the option it is about.
 *
 * Invariant: a request the broker answered by closing the channel (a reply code: 404 NOT_FOUND,
 * 403 ACCESS_REFUSED, 405 RESOURCE_LOCKED, 406 PRECONDITION_FAILED) rejects with an
 * {@link AmqpError} `AMQP_DECLARATION_FAILED` naming the component and the option; anything else
 * (the link lost meanwhile) is passed on as it is, so it still reads as a failed connect.
 *
 * @module
 */
import { AmqpError } from '../AmqpError.js'

/**
 * `request`, whose refusal by the broker becomes an `AMQP_DECLARATION_FAILED` naming `component`
 * and `field`, its message `what` followed by the broker's words. A missing queue used to fail as
 * `AMQP_CONNECT_FAILED` naming `url` ('cannot connect to …'), though the broker had been reached.
 */
export async function declared<T>(
  request: Promise<T>,
  component: string,
  field: string,
  what: string,
): Promise<T> {
  try {
    return await request
  } catch (error) {
    if (typeof (error as { code?: unknown } | null)?.code !== 'number') throw error
    const reason = error instanceof Error ? error.message : String(error)
    throw new AmqpError('AMQP_DECLARATION_FAILED', `${what}: ${reason}`, { component, field, cause: error })
  }
}
