/**
 * The error an {@link OffsetTracker} throws: always a programming error of its caller (a ticket
 * resolved twice, a ticket it never handed out, an unknown status, a bad weight or cap), never a
 * delivery outcome.
 *
 * @module
 */

/** What went wrong, as a stable code. */
export type OffsetTrackerErrorCode =
  | 'UNKNOWN_TICKET'
  | 'ALREADY_FINISHED'
  | 'INVALID_STATUS'
  | 'INVALID_WEIGHT'
  | 'INVALID_OPTION'
  | 'CLOSED'

/**
 * Thrown by an offset tracker on a broken rule; the message names the tracker (its `name` option)
 * and the ticket or field concerned.
 *
 * @example
 * ```ts
 * try { tracker.resolve(ticket, 'delivered') } catch (e) {
 *   if (e instanceof OffsetTrackerError && e.code === 'ALREADY_FINISHED') …
 * }
 * ```
 */
export class OffsetTrackerError extends Error {
  /** `'OffsetTrackerError'`, so a log tells it from other errors. */
  override readonly name = 'OffsetTrackerError'

  constructor(
    /** Stable code of the broken rule. */
    readonly code: OffsetTrackerErrorCode,
    message: string,
  ) {
    super(message)
  }
}
