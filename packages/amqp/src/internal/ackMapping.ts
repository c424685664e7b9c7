/**
 * The one table from what became of a delivery to what the source tells the broker.
 *
 * Invariant: a delivery is acked only when its outcome is `delivered` on the channel generation it
 * came from; nothing is ever acked, nacked or rejected on another generation (its tag means
 * nothing there, and the broker redelivers it anyway). An `errored` delivery is requeued after a
 * back-off until its attempts run out, then dead-lettered like a `rejected` one. The table is
 * printed in `rfcs/0006-rabbitmq-connector.md`:
 *
 * | outcome     | channel  | attempt < maxAttempts | broker action                                   |
 * | ----------- | -------- | --------------------- | ----------------------------------------------- |
 * | any         | dead     | any                   | none: the broker requeues it when the channel died (`abandon`) |
 * | `delivered` | live     | any                   | `basic.ack`                                     |
 * | `dropped`   | live     | any                   | `basic.ack` (a transform dropped it on purpose) |
 * | `errored`   | live     | yes                   | wait the back-off, then `basic.nack(requeue=true)` |
 * | `errored`   | live     | no                    | `basic.nack(requeue=false)` (dead-letter exchange) |
 * | `rejected`  | live     | any                   | `basic.nack(requeue=false)` (dead-letter exchange) |
 */
import type { RecordOutcome } from '@ackline/core'
import { MAX_TIMER_MS } from '@ackline/topology'

/** The retry bound and back-off of errored deliveries. */
export interface RedeliveryPolicy {
  /** Deliveries of one message in all, the first included; the last errored one is dead-lettered. */
  readonly maxAttempts: number
  readonly initialDelayMs: number
  readonly maxDelayMs: number
}

/** What to tell the broker about one delivery. */
export type BrokerAction =
  | { readonly kind: 'ack' }
  | { readonly kind: 'requeue'; readonly delayMs: number }
  | { readonly kind: 'deadLetter'; readonly why: 'rejected' | 'attempts-exhausted' }
  | { readonly kind: 'abandon' }

const ACK: BrokerAction = { kind: 'ack' }
const ABANDON: BrokerAction = { kind: 'abandon' }
const REJECTED: BrokerAction = { kind: 'deadLetter', why: 'rejected' }
const EXHAUSTED: BrokerAction = { kind: 'deadLetter', why: 'attempts-exhausted' }

/**
 * The broker action for a delivery whose record's outcome is `status`, on attempt `attempt` (1 = first
 * delivery), when its channel generation is `live` or not.
 */
export function brokerAction(
  status: RecordOutcome,
  attempt: number,
  live: boolean,
  policy: RedeliveryPolicy,
): BrokerAction {
  if (!live) return ABANDON
  switch (status) {
    case 'delivered':
    case 'dropped':
      return ACK
    case 'errored':
      return attempt < policy.maxAttempts
        ? { kind: 'requeue', delayMs: redeliveryDelay(policy, attempt) }
        : EXHAUSTED
    case 'rejected':
      return REJECTED
    default:
      return assertNever(status)
  }
}

/**
 * The back-off before requeueing attempt `attempt`: doubling from `initialDelayMs`, capped by
 * `maxDelayMs` and by the longest a timer waits.
 */
export function redeliveryDelay(policy: RedeliveryPolicy, attempt: number): number {
  return Math.min(
    MAX_TIMER_MS,
    policy.maxDelayMs,
    policy.initialDelayMs * 2 ** Math.min(30, Math.max(0, attempt - 1)),
  )
}

function assertNever(value: never): never {
  throw new Error(`unknown record outcome ${String(value)}`)
}
