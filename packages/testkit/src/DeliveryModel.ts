/**
 * The reference model of delivery: what a batch must resolve to, given what every copy of its
 * events reported.
 *
 * Invariant: the model is a pure fold over the copies' reports, in the order they ended, using the
 * lattice of `@ackline/core` (`EventStatus.update`, `BatchStatus.update`) and nothing else. A
 * report counts only when its sink acknowledges; an authoritative sink's report is sent to the
 * batch at once (the event becomes `recorded`) and what any copy reports after it is ignored; a
 * copy ended without a status (a drop that counts as delivered, a sink with acknowledgements off)
 * leaves the event as it was.
 *
 * @module
 */
import { BatchStatus, type DeliveryStatus, EventStatus } from '@ackline/core'

/** What one copy of a record reported when it ended: the model's only input. */
export interface CopyReport {
  /** The status the copy ended with; `undefined` for an end without a status (a drop). */
  readonly status: DeliveryStatus | undefined
  /** Whether the component that ended it acknowledges (a sink with acknowledgements off does not). */
  readonly acknowledges: boolean
  /** Whether the component that ended it is an authoritative sink. */
  readonly authoritative: boolean
}

/**
 * What the model says of one record: its folded status, and what its batches learn of it
 * (`'dropped'` counts as delivered to a batch).
 */
export type RecordVerdict = 'dropped' | DeliveryStatus

/**
 * The reference model.
 *
 * @example
 * ```ts
 * DeliveryModel.record([
 *   { status: 'delivered', acknowledges: true, authoritative: false },
 *   { status: 'errored', acknowledges: true, authoritative: false },
 * ]) // 'errored'
 * DeliveryModel.batch(['delivered', 'dropped', 'rejected']) // 'rejected'
 * ```
 */
export const DeliveryModel = {
  /**
   * What a record's batches learn from its copies' reports, given in the order the copies ended.
   * `'dropped'` when no acknowledging component reported a status.
   */
  record(reports: Iterable<CopyReport>): RecordVerdict {
    let status: EventStatus = 'dropped'
    for (const report of reports) {
      if (status === 'recorded') break
      if (!report.acknowledges || report.status === undefined) continue
      status = EventStatus.update(status, report.status)
      // The authoritative sink sends the status folded so far and freezes it.
      if (report.authoritative) return status as RecordVerdict
    }
    return status as RecordVerdict
  },

  /** What a batch resolves to, from the verdicts of its records. A batch of no records is delivered. */
  batch(verdicts: Iterable<RecordVerdict>): BatchStatus {
    let status: BatchStatus = 'delivered'
    for (const verdict of verdicts) status = BatchStatus.update(status, verdict)
    return status
  },

  /**
   * What the source is told of a batch: the batch's status when its acknowledgements are on, and
   * `'delivered'` as soon as it is accepted when they are off (no sink that acknowledges is
   * reachable from the source).
   */
  told(acknowledgements: boolean, verdicts: Iterable<RecordVerdict>): BatchStatus {
    return acknowledgements ? DeliveryModel.batch(verdicts) : 'delivered'
  },
} as const
