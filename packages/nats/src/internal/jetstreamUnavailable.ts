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
 * not the server's answer about the stream or consumer named (`what` may be empty: the first
 * request, for JetStream itself) (a `JetStreamApiError`, which the
 * caller names itself, by its field): JetStream not enabled or not answering (`CONNECT_FAILED`,
 * field `servers`), or the user not allowed the request (`AUTH_FAILED`, field `user`).
 * `undefined` for a `JetStreamApiError`.
 */
export function jetstreamUnavailable(
  component: string,
  servers: string | readonly string[],
  what: string,
  error: unknown,
): ComponentError | undefined {
  if (error instanceof JetStreamApiError) return undefined
  const text = String(error)
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
      ? `JetStream is not enabled on the server (servers ${serversOf(servers)}): ${text}`
      : `JetStream did not answer ${where}: ${text}`,
    { component, field: 'servers', cause: error },
  )
}
