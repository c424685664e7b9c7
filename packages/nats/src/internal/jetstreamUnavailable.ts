/**
 * Telling a JetStream request at start that failed because of the servers or the user apart from
 * the server's answer about the stream or consumer it named.
 *
 * @module
 */
import { ComponentError } from '@ackline/topology'
import { JetStreamApiError } from '@nats-io/jetstream'
import { serversOf } from './Connection.js'

/**
 * The error to fail a start with when `error`, met on `what` (a JetStream request at start), is
 * not about the stream or consumer named (the server's answer about them, a `JetStreamApiError`,
 * or the client's refusal of a name, an `InvalidNameError`, which the caller names by its field) (`what` may be empty: the first
 * request, for JetStream itself) (a `JetStreamApiError`, which the
 * caller names itself, by its field): JetStream not enabled, unavailable (an answer of status 503,
 * such as a cluster without a meta leader) or not answering (`CONNECT_FAILED`, field `servers`),
 * or the user not allowed the request (`AUTH_FAILED`, field `user`). `undefined` otherwise.
 */
export function jetstreamUnavailable(
  component: string,
  servers: string | readonly string[],
  what: string,
  error: unknown,
): ComponentError | undefined {
  const text = String(error)
  if (error instanceof JetStreamApiError) {
    if (error.status !== 503) return undefined
    return new ComponentError(
      'CONNECT_FAILED',
      `JetStream is unavailable for ${what === '' ? 'the request for JetStream' : what} (servers ${serversOf(servers)}): ${text}`,
      { component, field: 'servers', cause: error },
    )
  }
  if ((error as Error | undefined)?.name === 'InvalidNameError') return undefined
  const where = `${what === '' ? '' : `${what} `}(servers ${serversOf(servers)})`
  if (/permissions violation/i.test(text)) {
    return new ComponentError('AUTH_FAILED', `the server refused this user ${where}: ${text}`, {
      component,
      field: 'user',
      cause: error,
    })
  }
  const notEnabled = (error as Error | undefined)?.name === 'JetStreamNotEnabled'
  return new ComponentError(
    'CONNECT_FAILED',
    notEnabled
      ? `JetStream is not enabled, on the server or for this user's account (servers ${serversOf(servers)}): ${text}`
      : `JetStream did not answer ${where}: ${text}`,
    { component, field: 'servers', cause: error },
  )
}
