/**
 * The set of finalizers an event carries: one per batch it belongs to (more than one after a
 * merge). The set is immutable once anyone else can see it (a clone shares it, `finalizers` hands
 * it out); until then, the one handle that owns it grows it in place on a merge, so a `reduce`
 * folding n events into one pays amortised O(1) per merged reference, not O(n).
 *
 * Invariant: no (batch, event) pair appears twice in a set, so merging a clone back into its
 * original notifies once. Membership is a linear scan while the set is small and a hashed
 * lookup once it is not.
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

  /**
   * @internal Whether exactly one handle holds this set and nobody else has seen it, so a merge
   * may append to it in place. Cleared (for good) when the set is shared or handed out.
   */
  _owned = false
  /** @internal Slots per batch, built once the set outgrows a linear scan. */
  #index: Map<BatchNotifier, Set<number>> | undefined = undefined

  /** @internal */
  constructor(
    /** @internal */ readonly _notifiers: BatchNotifier[],
    /** @internal */ readonly _slots: number[],
  ) {}

  /** How many batches the event belongs to. */
  get size(): number {
    return this._notifiers.length
  }

  /** The ids of those batches. */
  get batchIds(): string[] {
    return this._notifiers.map((notifier) => notifier.id)
  }

  /** Each finalizer of the set, made on demand (a notifier and the slot of the event in it). */
  *[Symbol.iterator](): Iterator<EventFinalizer> {
    for (let i = 0; i < this._notifiers.length; i++)
      yield new EventFinalizer(this._notifiers[i]!, this._slots[i]!)
  }

  /**
   * Reports `status` for this event to every batch it belongs to, as an end with that status
   * would, without ending any handle (ignored for a batch where the event was recorded). Throws a
   * `FinalizationError` (`USE_AFTER_END`) once a batch has resolved, and one with code
   * `INVALID_STATUS` for a status that is not an {@link EventStatus} (nothing is changed then).
   * `'recorded'` changes nothing: {@link EventFinalizers.updateSources} is what records the event.
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
    const n = this._notifiers.length
    if (n <= LINEAR_LIMIT) {
      for (let i = 0; i < n; i++) {
        if (this._notifiers[i] === notifier && this._slots[i] === slot) return true
      }
      return false
    }
    if (this.#index === undefined) {
      const index = new Map<BatchNotifier, Set<number>>()
      for (let i = 0; i < n; i++) indexAdd(index, this._notifiers[i]!, this._slots[i]!)
      this.#index = index
    }
    return this.#index.get(notifier)?.has(slot) === true
  }

  /** @internal Appends a pair the set does not hold (only while `_owned`). */
  _push(notifier: BatchNotifier, slot: number): void {
    this._notifiers.push(notifier)
    this._slots.push(slot)
    if (this.#index !== undefined) indexAdd(this.#index, notifier, slot)
  }
}

/** Up to this many pairs, a scan is cheaper than keeping an index. */
const LINEAR_LIMIT = 8

function indexAdd(index: Map<BatchNotifier, Set<number>>, notifier: BatchNotifier, slot: number): void {
  const slots = index.get(notifier)
  if (slots === undefined) index.set(notifier, new Set([slot]))
  else slots.add(slot)
}
