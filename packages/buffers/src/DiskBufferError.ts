/**
 * The one error class of `@ackline/buffers`. Errors name the component (the buffer's directory)
 * and, where one is at fault, the option or field.
 *
 * Invariant: only misuse and unusable setups throw (a locked directory, a bad option, a record
 * that can never fit); a failed write is reported as data (`AppendResult`), not thrown.
 *
 * @module
 */
import { ComponentError, type ConfigIssue } from '@ackline/topology'

/** What went wrong. */
export type DiskBufferErrorCode =
  /** Another live process (or another open buffer in this one) holds the directory's lock. */
  | 'LOCKED'
  /** An option is out of range; `field` names it. */
  | 'INVALID_OPTION'
  /** A record is larger than a segment can hold; it can never be written. */
  | 'RECORD_TOO_LARGE'
  /** The buffer was used after `close()`. */
  | 'CLOSED'
  /** A write or fsync failed (`cause` holds the system error; ENOSPC is one). */
  | 'WRITE_FAILED'
  /** A file could not be read (`cause` holds the system error, EIO say). */
  | 'READ_FAILED'
  /** The disk is full (ENOSPC); the write was rolled back. */
  | 'NO_SPACE'
  /**
   * The ledger says records were acknowledged that lie past the records on disk: it does not
   * belong to these segments (restored from another backup, written by a tool). Nothing was
   * deleted; `ackline-buffer <dir> --repair` rebuilds the ledger from the segments.
   */
  | 'LEDGER_AHEAD'
  /** The buffer's path (or a directory above it) is a file; `field` is `path`. */
  | 'NOT_A_DIRECTORY'
  /**
   * No sequence number is left for the next record (they end at 2^53 − 1, which no buffer counts
   * to: a segment or ledger numbered near it came from elsewhere); `field` is `nextSeq`.
   */
  | 'SEQUENCE_EXHAUSTED'

/**
 * An error of a disk buffer: a {@link ComponentError} whose `field` names the option or field at
 * fault, if one is, and whose `path` is the buffer's directory. The message names the directory
 * in front (`disk buffer <path>: …`), since that is what an operator finds on disk; `component`
 * is the id of the sink the buffer feeds when the error knows it.
 *
 * @example
 * ```ts
 * try {
 *   await DiskBuffer.open({ path })
 * } catch (error) {
 *   if (error instanceof DiskBufferError && error.code === 'LOCKED') console.error(error.message)
 * }
 * ```
 */
export class DiskBufferError extends ComponentError<DiskBufferErrorCode> {
  /** `'DiskBufferError'`, so a log tells it from other errors. */
  override readonly name = 'DiskBufferError'

  constructor(
    /** What went wrong. */
    code: DiskBufferErrorCode,
    message: string,
    /** The buffer directory the error is about. */
    readonly path: string,
    /** The option or field at fault, if one is. */
    field?: string,
    options?: { readonly cause?: unknown; readonly component?: string | undefined },
  ) {
    super(code, message, { ...options, field })
    this.message = `disk buffer ${path}: ${message}`
  }

  /** The `INVALID_OPTION` error of the first of `issues` (the schema's wording), or `undefined` when there are none. */
  static ofIssues(issues: readonly ConfigIssue[], path: unknown): DiskBufferError | undefined {
    const first = issues[0]
    if (first === undefined) return undefined
    return new DiskBufferError('INVALID_OPTION', `${first.field} ${first.message}`, String(path), first.field)
  }
}
