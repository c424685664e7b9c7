/**
 * The one error that the acknowledgement machinery throws: always a programming error (a handle
 * ended twice, used after its end, a notifier attached after its release), never a delivery
 * outcome. Outcomes are statuses, not exceptions.
 *
 * @module
 */

/** What went wrong, as a stable code for programs to match on. */
export type FinalizationErrorCode =
  | 'ALREADY_ENDED'
  | 'USE_AFTER_END'
  | 'NOTIFIER_RELEASED'
  | 'INVALID_STATUS_UPDATE'
  /** A status that is not one of the lattice's (from untyped code): nothing was changed. */
  | 'INVALID_STATUS'
  | 'GROUP_CONSUMED'
  | 'SELF_MERGE'

/**
 * Thrown when code breaks an ownership rule of events and finalizers. `sourceId` names the source
 * of the event (or batch) concerned, so the message points at the pipeline that misbehaved.
 *
 * @example
 * ```ts
 * try { event.end() } catch (e) { if (e instanceof FinalizationError && e.code === 'ALREADY_ENDED') … }
 * ```
 */
export class FinalizationError extends Error {
  /** `'FinalizationError'`, so a log tells it from other errors. */
  override readonly name = 'FinalizationError'

  constructor(
    /** Stable code of the broken rule. */
    readonly code: FinalizationErrorCode,
    message: string,
    /** The source of the event or batch concerned, when known. */
    readonly sourceId?: string,
    /** The batch concerned, when known. */
    readonly batchId?: string,
  ) {
    super(
      `${message} (source: ${sourceId ?? 'unknown'}${batchId === undefined ? '' : `, batch: ${batchId}`})`,
    )
  }
}
