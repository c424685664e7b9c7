/**
 * A segment file as the buffer tracks it: where it starts, how much is written, how much a
 * reader may see, and whether it may still be written.
 *
 * Invariant: `visible <= size`; a segment's file is named after its first sequence number
 * (twenty digits, `.seg`), so listing the directory in name order lists the segments in order.
 *
 * @module
 */
import type { Settings } from './DiskBufferSettings.js'
import type { OpenMode } from './FileSystem.js'

/** A segment file and what the buffer knows of it. */
export interface Segment {
  readonly firstSeq: number
  readonly name: string
  /** Bytes written to the file. */
  size: number
  /** Bytes the reader may read (whole, and durable under `'always'`). */
  visible: number
  /** No more writes: a failed rollback left its tail unknown. */
  sealed: boolean
  /**
   * The name of a file opening left alone because it is named inside this segment's records, if
   * any: once acknowledged, this segment is dropped from the queue but kept on disk, as it is what
   * tells the next open to leave that file alone again (deleted, the file would be taken in, and
   * deleted unread or delivered, at the next open).
   */
  shelters?: string
}

/** The names of segment files: the first sequence number, twenty digits, then `.seg`. */
export const SEGMENT_NAME = /^(\d{20})\.seg$/

/**
 * The first sequence number a segment file's name gives, or `undefined` when the name is not a
 * segment's, or names a number past 2^53 (no sequence number reaches it: not this buffer's).
 */
export const segmentFirstSeq = (name: string): number | undefined => {
  const match = SEGMENT_NAME.exec(name)
  const first = match === null ? Number.NaN : Number(match[1])
  return Number.isSafeInteger(first) ? first : undefined
}

/** The file name of the segment whose first sequence number is `firstSeq`. */
export const segmentName = (firstSeq: number): string => `${String(firstSeq).padStart(20, '0')}.seg`

/**
 * How a segment is opened for writing: under `'always'` with every write durable by itself where
 * the system makes it so (`O_DSYNC` on Linux: the file's `durableWrites`), which spares each group
 * a second trip through the thread pool for its fdatasync.
 */
export const segmentWriteMode = (sync: Settings['sync']): Extract<OpenMode, 'append' | 'append-dsync'> =>
  sync === 'always' ? 'append-dsync' : 'append'
