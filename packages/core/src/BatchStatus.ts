/**
 * The status of a whole batch, as its source sees it.
 *
 * Invariant: a batch starts `delivered` and only gets worse: an `errored` event raises it to
 * `errored`, a `rejected` one to `rejected`. `dropped`, `delivered` and `recorded` events leave it
 * as it is, so an event that ends without any status counts as delivered (it was processed as the
 * topology asked), and a `recorded` event was already counted when it was recorded.
 *
 * @module
 */
import type { EventStatus } from './EventStatus.js'
import { BATCH_UPDATE, batchStatusName, deliveryStatusCode, eventStatusCode } from './internal/statusCodes.js'

/** What a source is told about a batch: acknowledge (`delivered`), retry (`errored`), or give up (`rejected`). */
export type BatchStatus = 'delivered' | 'errored' | 'rejected'

/**
 * Companion of the {@link BatchStatus} type.
 *
 * @example
 * ```ts
 * BatchStatus.update('delivered', 'errored') // 'errored'
 * BatchStatus.update('rejected', 'errored')  // 'rejected'
 * BatchStatus.update('errored', 'dropped')   // 'errored'
 * ```
 */
export const BatchStatus = {
  /** Every batch status, best first. */
  values: ['delivered', 'errored', 'rejected'] as const satisfies readonly BatchStatus[],

  /** The status every batch starts with. */
  initial: 'delivered' as BatchStatus,

  /**
   * Folds one event's final status into the batch's status. A `batch` or `event` that is no
   * status of its kind (from untyped code) throws a `FinalizationError` with code
   * `INVALID_STATUS`.
   */
  update(batch: BatchStatus, event: EventStatus): BatchStatus {
    // Codes first: an unknown `batch` or `event` throws, never passed on or replaced silently.
    // The table is the lattice's (derived from its one exhaustive match), without the match's cost.
    return batchStatusName(BATCH_UPDATE[deliveryStatusCode(batch) * 5 + eventStatusCode(event)]!)
  },
} as const
