/**
 * The one table from what became of a message in the pipeline to what the JetStream source tells
 * the server. `rfcs/0007-nats-jetstream-connector.md` prints the same table.
 *
 * | record outcome | delivery count          | action                                              |
 * | ------------ | ------------------------- | --------------------------------------------------- |
 * | `delivered`  | any                       | `ack` (or `ackAck`, awaited, with `doubleAck`)      |
 * | `dropped`    | any                       | `ack`: a transform dropped it on purpose, it is done |
 * | `errored`    | below the delivery bound  | `nak(delay)`, delay = back-off of the delivery count |
 * | `errored`    | at the delivery bound     | `term(reason)`: gave up, said so, never silently    |
 * | `rejected`   | any                       | `term(reason)`                                      |
 * | (invalid JSON, `invalidJson: 'reject'`) | any | `term(reason)` before entering the pipeline |
 *
 * Invariant: `ack` only for `delivered` (or `dropped`, finished on purpose); the switch is exhaustive, so a new status fails to compile.
 *
 * @module
 */
import type { RecordOutcome } from '@ackline/core'

/** What to tell the server about one message. */
export type JetStreamAction =
  | { readonly kind: 'ack' }
  | { readonly kind: 'nak'; readonly delayMs: number }
  | { readonly kind: 'term'; readonly reason: string }

/** The back-off of errored messages: `initialMs * multiplier^(deliveryCount-1)`, capped at `maxMs`. */
export interface NakBackoff {
  readonly initialMs: number
  readonly maxMs: number
  readonly multiplier: number
}

/** The delay before the next delivery after delivery number `deliveryCount` (1-based) errored. */
export function nakDelayMs(backoff: NakBackoff, deliveryCount: number): number {
  const exponent = Math.max(0, deliveryCount - 1)
  return Math.min(backoff.maxMs, Math.round(backoff.initialMs * backoff.multiplier ** exponent))
}

/**
 * The action for a message whose record ended `status` at delivery number `deliveryCount`.
 * `maxDeliveries` bounds the deliveries of an errored message (0 or less: unbounded); `reason` is
 * why the batch was not delivered, for the term's reason.
 */
export function actionFor(
  status: RecordOutcome,
  deliveryCount: number,
  maxDeliveries: number,
  backoff: NakBackoff,
  reason: string | undefined,
): JetStreamAction {
  switch (status) {
    case 'delivered':
    case 'dropped':
      return { kind: 'ack' }
    case 'errored':
      if (maxDeliveries > 0 && deliveryCount >= maxDeliveries) {
        return {
          kind: 'term',
          reason: `errored on each of ${deliveryCount} deliveries (bound ${maxDeliveries}): ${reason ?? 'no reason given'}`,
        }
      }
      return { kind: 'nak', delayMs: nakDelayMs(backoff, deliveryCount) }
    case 'rejected':
      return { kind: 'term', reason: `rejected: ${reason ?? 'no reason given'}` }
  }
}
