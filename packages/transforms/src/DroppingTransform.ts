/**
 * The contract of a transform that may discard events.
 *
 * Invariant: a dropping transform never ends a discarded event itself; it hands it to
 * `context.drop(event)`, and the runtime ends it with the transform's {@link DropStatus}
 * (`'delivered'`: without a status; `'rejected'`: with `'rejected'`) and counts the discard.
 *
 * @module
 */
import type { ConfigIssue, Transform } from '@ackline/topology'
import type { DropStatus } from './DropStatus.js'

/**
 * A {@link Transform} that discards some events, and says what a discard means.
 *
 * @example
 * ```ts
 * const onlyErrors: DroppingTransform = filter((e) => e.get('level') === 'error', { dropStatus: 'rejected' })
 * onlyErrors.dropStatus // 'rejected': the runtime ends what it drops with 'rejected'
 * ```
 */
export interface DroppingTransform extends Transform<never> {
  /**
   * How the runtime must settle an event passed to `context.drop`: `'delivered'` ends it without a
   * status (it counts as delivered unless another copy says otherwise), `'rejected'` ends it
   * `'rejected'`. Always set; defaults to `'delivered'`.
   */
  readonly dropStatus: DropStatus
  /** Problems in the options, each naming its field; empty when they are fine. */
  validate(): readonly ConfigIssue[]
}

/** Options every dropping transform accepts. */
export interface DropOptions {
  /** What a discard means to the event's sources; `'delivered'` unless set. */
  readonly dropStatus?: DropStatus
}
