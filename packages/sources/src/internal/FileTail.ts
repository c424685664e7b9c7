/**
 * One file being tailed: where it is read up to, what is finished, and the bytes of a line not
 * complete yet.
 *
 * Invariant: `readOffset` only moves forward through the file as it is now (a truncation starts a
 * new generation at 0 with a new tracker); every complete line read is tracked, in order, keyed by
 * the offset just past its newline, so the tracker's committable key is an offset from which a
 * restart re-reads exactly the lines that were not finished.
 */
import { isUtf8 } from 'node:buffer'
import { createHash } from 'node:crypto'
import type { FileHandle } from 'node:fs/promises'
import { OffsetTracker } from '@ackline/core'
import type { Fingerprint } from './Checkpoints.js'

/** How many first bytes make a fingerprint, at most. */
export const FINGERPRINT_BYTES = 256
const CHUNK = 64 * 1024
const NEWLINE = 0x0a

/**
 * Told of each complete line: its text without the newline (and a carriage return before it),
 * the offset of its first byte, the offset just past its newline, whether it was longer than the
 * limit (then `text` holds only its first 1024 bytes), and its length in the file without its line
 * ending (what the limit counts: bytes that are not text of the encoding decode to more bytes),
 * and whether, decoded as UTF-8, it held bytes that are not UTF-8 (in `text` as U+FFFD; only told
 * of a line within the limit).
 */
export type OnLine = (
  text: string,
  start: number,
  end: number,
  overlong: boolean,
  bytes: number,
  invalid: boolean,
) => void

export async function fingerprintOf(
  handle: FileHandle,
  length = FINGERPRINT_BYTES,
): Promise<Fingerprint | undefined> {
  const buffer = Buffer.alloc(length)
  const { bytesRead } = await handle.read(buffer, 0, length, 0)
  if (bytesRead === 0) return undefined
  return { length: bytesRead, hash: createHash('sha256').update(buffer.subarray(0, bytesRead)).digest('hex') }
}

export class FileTail {
  tracker: OffsetTracker<number>
  fingerprint: Fingerprint | undefined
  /**
   * A multi-line record still open (more lines may join it), with when it last grew, and whether
   * it passed `maxLineBytes` (then `text` holds its first bytes only).
   */
  held: { text: string; start: number; end: number; at: number; overlong: boolean } | undefined = undefined
  /** How many lines of the file were not valid UTF-8 (decoded as UTF-8), for the thinned notice. */
  invalidLines = 0
  /** When the file last grew (ms since the epoch). */
  grewAt = Date.now()
  /**
   * When a scan first found the file renamed away (under a name no longer listed, still linked),
   * in ms since the epoch; `undefined` while it is listed.
   */
  renamedAt: number | undefined = undefined
  /** Sends not yet settled for this file. */
  readonly inFlight = new Set<Promise<void>>()
  /**
   * Whether the checkpoint file on disk names this file, in its current generation, at an offset
   * no later than where that generation began (the offset it was opened at; 0 after a
   * truncation). No line of it may be sent before: a restart would start elsewhere (at its end
   * with `startAt: 'end'`, or at the stale offset of the content before a truncation) and skip
   * the lines sent and not finished.
   */
  recorded: boolean
  #partial: Buffer[] = []
  #partialBytes = 0
  #partialStart: number
  #overlong = false
  /** Two read buffers: one is parsed while the next chunk is read into the other. */
  #buffer = Buffer.allocUnsafe(CHUNK)
  #spare = Buffer.allocUnsafe(CHUNK)
  /** The read of the next chunk, started before the current one was parsed (see `readChunk`). */
  #ahead: { readonly offset: number; readonly read: Promise<{ bytesRead: number }> } | undefined = undefined

  constructor(
    public path: string,
    readonly dev: number,
    readonly ino: number,
    public handle: FileHandle | undefined,
    public readOffset: number,
    fingerprint: Fingerprint | undefined,
    readonly maxLineBytes: number,
    recorded: boolean,
    /** The file's birth time where the file system tells it (see `Checkpoint.born`). */
    readonly born: number | undefined,
  ) {
    this.fingerprint = fingerprint
    this.recorded = recorded
    this.#partialStart = readOffset
    this.tracker = new OffsetTracker<number>({ name: `file ${path}`, initial: readOffset })
  }

  /** The offset a checkpoint may store. */
  get committed(): number {
    return this.tracker.committable() ?? 0
  }

  /**
   * Starts over at offset 0 (the file was truncated); what is in flight settles into the old tracker.
   * The fingerprint goes too (the next read takes it from the new content): kept, it would tell the
   * new content from the old once that grew past it, and the file be read from its start again.
   */
  restart(): void {
    this.readOffset = 0
    this.recorded = false
    this.fingerprint = undefined
    this.#partial = []
    this.#partialBytes = 0
    this.#partialStart = 0
    this.#overlong = false
    this.held = undefined
    this.tracker = new OffsetTracker<number>({ name: `file ${this.path}`, initial: 0 })
    // A read ahead of the old generation may still be writing into its buffer: never reuse it.
    if (this.#ahead !== undefined) {
      this.#ahead = undefined
      this.#spare = Buffer.allocUnsafe(CHUNK)
    }
  }

  /**
   * Reads one chunk (at most 64 KiB, never past `size`), calling `onLine` for each line it
   * completes, in order; returns false when there was nothing left to read below `size`.
   */
  async readChunk(size: number, encoding: BufferEncoding, onLine: OnLine): Promise<boolean> {
    const handle = this.handle
    if (handle === undefined || this.readOffset >= size) return false
    const base = this.readOffset
    // The chunk read ahead by the previous call, when it is the one wanted; else read it now.
    const ahead = this.#ahead
    this.#ahead = undefined
    let bytesRead: number
    if (ahead !== undefined && ahead.offset === base) {
      ;({ bytesRead } = await ahead.read)
      const read = this.#spare
      this.#spare = this.#buffer
      this.#buffer = read
    } else {
      if (ahead !== undefined)
        await ahead.read.catch(() => {}) // its buffer is free only once it is done
      ;({ bytesRead } = await handle.read(this.#buffer, 0, Math.min(CHUNK, size - base), base))
    }
    if (bytesRead === 0) return false
    const chunk = this.#buffer
    this.readOffset += bytesRead
    // Read the next chunk while this one is parsed: the read waits for a thread of the pool,
    // and parsing does not. A failed read ahead throws when (and only if) it is used.
    if (this.readOffset < size) {
      const read = handle.read(this.#spare, 0, Math.min(CHUNK, size - this.readOffset), this.readOffset)
      read.catch(() => {})
      this.#ahead = { offset: this.readOffset, read }
    }
    // One check of the whole chunk, most often valid: only a chunk that is not (or that cuts a
    // character in two at either end) has its lines checked one by one.
    const checkLines = encoding === 'utf8' && !isUtf8(chunk.subarray(0, bytesRead))
    let from = 0
    for (;;) {
      const nl = chunk.indexOf(NEWLINE, from)
      if (nl < 0 || nl >= bytesRead) {
        this.#keep(chunk.subarray(from, bytesRead))
        break
      }
      const end = base + nl + 1
      if (this.#partialBytes === 0 && !this.#overlong) {
        // The common case: the whole line is in this chunk; decode it in place, no copy.
        const stop = nl > from && chunk[nl - 1] === 0x0d ? nl - 1 : nl
        const overlong = stop - from > this.maxLineBytes
        onLine(
          chunk.toString(encoding, from, overlong ? Math.min(stop, from + 1024) : stop),
          base + from,
          end,
          overlong,
          stop - from,
          checkLines && !overlong && !isUtf8(chunk.subarray(from, stop)),
        )
      } else {
        this.#keep(chunk.subarray(from, nl))
        this.#endKept(encoding, onLine, end)
      }
      this.#partialStart = end
      from = nl + 1
    }
    return true
  }

  /**
   * Ends the line still open (the bytes after the last newline) as though a newline followed it,
   * telling `onLine` of it as of any line, its end the read offset; does nothing when no byte is
   * open. Only for a file that can grow no more (deleted, and read to its end): else its newline
   * may still come, and the line would be sent twice (cut here, then whole after a restart).
   */
  endOpenLine(encoding: BufferEncoding, onLine: OnLine): void {
    if (this.#partialBytes === 0 && !this.#overlong) return
    this.#endKept(encoding, onLine, this.readOffset)
    this.#partialStart = this.readOffset
  }

  /** Tells `onLine` of the line whose bytes were kept, ending at `end`, and forgets them. */
  #endKept(encoding: BufferEncoding, onLine: OnLine, end: number): void {
    let bytes =
      this.#partial.length === 1 ? this.#partial[0]! : Buffer.concat(this.#partial, this.#partialBytes)
    if (bytes.length > 0 && bytes[bytes.length - 1] === 0x0d) bytes = bytes.subarray(0, bytes.length - 1)
    const overlong = this.#overlong || bytes.length > this.maxLineBytes
    onLine(
      bytes.toString(encoding, 0, overlong ? Math.min(1024, bytes.length) : bytes.length),
      this.#partialStart,
      end,
      overlong,
      bytes.length,
      encoding === 'utf8' && !overlong && !isUtf8(bytes),
    )
    this.#partial = []
    this.#partialBytes = 0
    this.#overlong = false
  }

  /** Holds bytes of the current line, but never more than the limit: the rest of an overlong line is skipped. */
  #keep(bytes: Buffer): void {
    if (bytes.length === 0) return
    const room = this.maxLineBytes + 2 - this.#partialBytes
    if (room <= 0 || bytes.length > room) this.#overlong = true
    const kept = room <= 0 ? undefined : bytes.length > room ? bytes.subarray(0, room) : bytes
    if (kept === undefined) return
    // Copied: the read buffer is reused for the next chunk.
    this.#partial.push(Buffer.from(kept))
    this.#partialBytes += kept.length
  }
}
