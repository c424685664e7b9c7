/**
 * A view of one event's membership in one batch.
 *
 * Invariant: a finalizer is shared by every copy (clone) of an event; its status is the fold of
 * what every copy reported so far. It is a view: it owns no reference and ends nothing.
 *
 * @module
 */
import type { BatchNotifier } from './BatchNotifier.js'
import type { EventStatus } from './EventStatus.js'
import { EVENT_STATUS_NAMES } from './internal/statusCodes.js'

/**
 * One (batch, event) pair as seen from an event.
 *
 * @example
 * ```ts
 * for (const finalizer of event.metadata.finalizers) console.log(finalizer.batchId, finalizer.status)
 * ```
 */
export class EventFinalizer {
  /** @internal */
  constructor(
    /** @internal */ readonly _notifier: BatchNotifier,
    /** @internal */ readonly _slot: number,
  ) {}

  /** The batch this event belongs to. */
  get batchId(): string {
    return this._notifier.id
  }

  /** The source of that batch. */
  get sourceId(): string | undefined {
    return this._notifier.sourceId
  }

  /** The event's status so far, folded over every copy. */
  get status(): EventStatus {
    return EVENT_STATUS_NAMES[this._notifier._state.statusOf(this._slot)]!
  }
}
