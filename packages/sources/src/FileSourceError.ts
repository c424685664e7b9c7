/**
 * The errors the file source raises when it cannot go on: a checkpoint file it cannot trust or
 * read, a checkpoint directory it cannot write. Unreadable log files are not errors (they are reported
 * and retried on the next scan).
 *
 * @module
 */

/**
 * What went wrong, as a stable code: a checkpoint file that is not one this source wrote
 * (`CORRUPT_CHECKPOINT`), or that cannot be read, nor its directory made
 * (`CHECKPOINT_READ_FAILED`), or written (`CHECKPOINT_WRITE_FAILED`).
 */
export type FileSourceErrorCode = 'CORRUPT_CHECKPOINT' | 'CHECKPOINT_READ_FAILED' | 'CHECKPOINT_WRITE_FAILED'

/**
 * Raised by the file source; the message names the file concerned and how to repair it.
 *
 * @example
 * ```ts
 * topology.start().catch((e) => { if (e instanceof FileSourceError) console.error(e.message) })
 * ```
 */
export class FileSourceError extends Error {
  /** `'FileSourceError'`, so a log tells it from other errors. */
  override readonly name = 'FileSourceError'

  constructor(
    /** Stable code. */
    readonly code: FileSourceErrorCode,
    /** The file concerned (a checkpoint file). */
    readonly path: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(`file source: ${message}`, options)
  }
}
