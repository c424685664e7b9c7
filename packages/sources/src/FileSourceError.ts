/**
 * The errors the file source raises when it cannot go on: a checkpoint file it cannot trust or
 * read, a checkpoint directory it cannot write, a dead-letter file it cannot open. Unreadable log
 * files are not errors (they are reported and retried on the next scan).
 *
 * @module
 */

/**
 * What went wrong, as a stable code: a checkpoint file that is not one this source wrote
 * (`CORRUPT_CHECKPOINT`), or that cannot be read, nor its directory made
 * (`CHECKPOINT_READ_FAILED`), or written (`CHECKPOINT_WRITE_FAILED`); a dead-letter file that
 * cannot be opened at start (`DEAD_LETTER_OPEN_FAILED`: a directory in its place, no permission),
 * or whose fsync failed (`DEAD_LETTER_SYNC_FAILED`: what was written to it since its last sync may
 * be lost, so the run ends without a checkpoint past those lines, which a restart reads again);
 * a checkpoint directory in use by another file source of this process (`CHECKPOINTS_IN_USE`: one
 * that is running, or one stopped that did not end within 30 s) or of another process (its lock
 * file held by a live pid, or taken over since by a run elsewhere), its field `checkpoints`.
 */
export type FileSourceErrorCode =
  | 'CORRUPT_CHECKPOINT'
  | 'CHECKPOINT_READ_FAILED'
  | 'CHECKPOINT_WRITE_FAILED'
  | 'DEAD_LETTER_OPEN_FAILED'
  | 'DEAD_LETTER_SYNC_FAILED'
  | 'CHECKPOINTS_IN_USE'

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

  /** The id of the source, where the error knows it. */
  readonly component: string | undefined
  /** The field concerned (`deadLetter`: the dead-letter file; `checkpoints`: the checkpoint file), where one is. */
  readonly field: string | undefined

  constructor(
    /** Stable code. */
    readonly code: FileSourceErrorCode,
    /** The file concerned (a checkpoint file, the dead-letter file). */
    readonly path: string,
    message: string,
    options: ErrorOptions & { readonly component?: string; readonly field?: string } = {},
  ) {
    const { component, field, ...errorOptions } = options
    super(`file source${component === undefined ? '' : ` '${component}'`}: ${message}`, errorOptions)
    this.component = component
    this.field = field
  }
}
