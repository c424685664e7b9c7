/**
 * The size check both publishing sinks make before a publish.
 *
 * Invariant: a message larger than the server's `max_payload` is refused by the client (and would
 * be by the server) on every attempt, so retrying it would make a poison message that is `errored`
 * forever and takes its batch-mates with it; it is `rejected` alone, before it is published, with
 * a reason that names the sink, the size and the limit.
 *
 * @module
 */
import { RejectError } from '@ackline/topology'

/**
 * The rejection of a message of `bytes` encoded bytes (headers included) published to `subject`,
 * or `undefined` when it fits `maxPayload` (or the limit is not known yet: the client checks it
 * again on publish, and that failure is retried).
 */
export function tooLarge(
  component: string,
  subject: string,
  bytes: number,
  maxPayload: number | undefined,
): RejectError | undefined {
  if (maxPayload === undefined || bytes <= maxPayload) return undefined
  return new RejectError(
    component,
    `the event's message is ${bytes} bytes, over the server's max_payload of ${maxPayload} bytes: not published to '${subject}'`,
  )
}
