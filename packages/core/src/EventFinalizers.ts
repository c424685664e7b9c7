/**
 * The set of finalizers an event carries: one per batch it belongs to (more than one after a
 * merge). The set is immutable; a merge makes a new one.
 *
 * Invariant: no (batch, event) pair appears twice in a set, so merging a clone back into its
 * original notifies once.
 *
 * @module
 */
import type { BatchNotifier } from './BatchNotifier.js'
import { EventFinalizer } from './EventFinalizer.js'
import type { EventStatus } from './EventStatus.js'
import { eventStatusCode } from './internal/statusCodes.js'

/**
 * The finalizers of one event.
 *
 * @example
 * ```ts
 * // What an authoritative sink does once it knows the outcome:
 * event.metadata.finalizers.updateStatus('delivered')
 * event.metadata.finalizers.updateSources()
 * ```
 */
export class EventFinalizers implements Iterable<EventFinalizer> {
  /** The set with no finalizer: what events carry when acknowledgements are off. */
  static readonly EMPTY: EventFinalizers = new EventFinalizers([], [])

  /** @internal */
  constructor(
    /** @internal */ readonly _notifiers: readonly BatchNotifier[],
    /** @internal */ readonly _slots: readonly number[],
  ) {}

  /** How many batches the event belongs to. */
  get size(): number {
    return this._notifiers.length
  }

  /** The ids of those batches. */
  get batchIds(): string[] {
    return this._notifiers.map((notifier) => notifier.id)
  }

  *[Symbol.iterator](): Iterator<EventFinalizer> {
    for (let i = 0; i < this._notifiers.length; i++)
      yield new EventFinalizer(this._notifiers[i]!, this._slots[i]!)
  }

  /**
   * Reports `status` for this event to every batch it belongs to, as an end with that status
   * would, without ending any handle (ignored for a batch where the event was recorded). Throws a
   * `FinalizationError` (`USE_AFTER_END`) once a batch has resolved, and one with code
   * `INVALID_STATUS` for a status that is not an {@link EventStatus} (nothing is changed then).
   */
  updateStatus(status: EventStatus): void {
    const code = eventStatusCode(status)
    for (let i = 0; i < this._notifiers.length; i++) this._notifiers[i]!._state.update(this._slots[i]!, code)
  }

  /**
   * Fixes the event's contribution to every batch now and marks it `recorded`: what its copies
   * reported so far counts, later updates from any copy are ignored. The batch still resolves only
   * when every handle has ended. This is what an authoritative sink calls.
   */
  updateSources(): void {
    for (let i = 0; i < this._notifiers.length; i++) this._notifiers[i]!._state.record(this._slots[i]!)
  }

  /** @internal Whether the set holds this (batch, event) pair. */
  _has(notifier: BatchNotifier, slot: number): boolean {
    for (let i = 0; i < this._notifiers.length; i++) {
      if (this._notifiers[i] === notifier && this._slots[i] === slot) return true
    }
    return false
  }
}
