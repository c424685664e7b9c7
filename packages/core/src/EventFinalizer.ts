/**
 * A view of one event's membership in one batch.
 *
 * Invariant: a finalizer is shared by every copy (clone) of an event. It is a view: it owns no
 * reference and ends nothing.
 *
 * @module
 */
import type { BatchNotifier } from './BatchNotifier.js'
import type { BatchStatusReceiver } from './BatchStatusReceiver.js'
import type { EventStatus } from './EventStatus.js'
import { batchStatusName } from './internal/statusCodes.js'

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

  /**
   * The receiver of that batch: what its source will learn. A runtime that tracks batches keys
   * them by receiver (reading `batchId` writes the batch's UUID, see `BatchNotifier.id`).
   */
  get receiver(): BatchStatusReceiver {
    return this._notifier._state
  }

  /** The source of that batch. */
  get sourceId(): string | undefined {
    return this._notifier.sourceId
  }

  /**
   * `'recorded'` once an authoritative sink recorded the event (what its copies report later is
   * ignored); before that, the status of its **batch** so far: every copy's report of every event
   * of the batch is folded into it as it comes (see RFC 0001, "Representation").
   *
   * It is not this event's own status, which is not kept: two events of one batch read the same
   * value, and an event whose every copy was delivered reads `'errored'` once another event of the
   * batch errored.
   */
  get status(): EventStatus {
    const state = this._notifier._state
    return state.isRecorded(this._slot) ? 'recorded' : batchStatusName(state.code)
  }
}
