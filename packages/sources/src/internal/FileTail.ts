/**
 * One file being tailed: where it is read up to, what is finished, and the bytes of a line not
 * complete yet.
 *
 * Invariant: `readOffset` only moves forward through the file as it is now (a truncation starts a
 * new generation at 0 with a new tracker); every complete line read is tracked, in order, keyed by
 * the offset just past its newline, so the tracker's committable key is an offset from which a
 * restart re-reads exactly the lines that were not finished.
 */
import { createHash } from 'node:crypto'
import type { FileHandle } from 'node:fs/promises'
import { OffsetTracker } from '@ackline/core'
import type { Fingerprint } from './Checkpoints.js'

/** How many first bytes make a fingerprint, at most. */
export const FINGERPRINT_BYTES = 256
const CHUNK = 64 * 1024
const NEWLINE = 0x0a

/** A complete line read from a file. */
export interface Line {
  /** The line's bytes, without the newline (and without a carriage return before it). */
  readonly bytes: Buffer
  /** Offset of the line's first byte. */
  readonly start: number
  /** Offset just past its newline. */
  readonly end: number
  /** The line was longer than the limit; `bytes` holds only its first bytes. */
  readonly overlong: boolean
}

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
  /** Sends not yet settled for this file. */
  readonly inFlight = new Set<Promise<void>>()
  #partial: Buffer[] = []
  #partialBytes = 0
  #partialStart: number
  #overlong = false
  readonly #buffer = Buffer.allocUnsafe(CHUNK)

  constructor(
    public path: string,
    readonly dev: number,
    readonly ino: number,
    public handle: FileHandle | undefined,
    public readOffset: number,
    fingerprint: Fingerprint | undefined,
    readonly maxLineBytes: number,
  ) {
    this.fingerprint = fingerprint
    this.#partialStart = readOffset
    this.tracker = new OffsetTracker<number>({ name: `file ${path}`, initial: readOffset })
  }

  /** The offset a checkpoint may store. */
  get committed(): number {
    return this.tracker.committable() ?? 0
  }

  /** Starts over at offset 0 (the file was truncated); what is in flight settles into the old tracker. */
  restart(): void {
    this.readOffset = 0
    this.#partial = []
    this.#partialBytes = 0
    this.#partialStart = 0
    this.#overlong = false
    this.tracker = new OffsetTracker<number>({ name: `file ${this.path}`, initial: 0 })
  }

  /** Reads up to `size`, calling `onLine` for each complete line in order. */
  async readTo(size: number, onLine: (line: Line) => void): Promise<void> {
    const handle = this.handle
    if (handle === undefined) return
    while (this.readOffset < size) {
      const { bytesRead } = await handle.read(
        this.#buffer,
        0,
        Math.min(CHUNK, size - this.readOffset),
        this.readOffset,
      )
      if (bytesRead === 0) break
      const chunk = this.#buffer.subarray(0, bytesRead)
      const base = this.readOffset
      this.readOffset += bytesRead
      let from = 0
      for (;;) {
        const nl = chunk.indexOf(NEWLINE, from)
        if (nl < 0) {
          this.#keep(chunk.subarray(from))
          break
        }
        this.#keep(chunk.subarray(from, nl))
        let bytes =
          this.#partial.length === 1 ? this.#partial[0]! : Buffer.concat(this.#partial, this.#partialBytes)
        if (bytes.length > 0 && bytes[bytes.length - 1] === 0x0d) bytes = bytes.subarray(0, bytes.length - 1)
        // Copied: the read buffer is reused for the next chunk.
        onLine({
          bytes: Buffer.from(bytes),
          start: this.#partialStart,
          end: base + nl + 1,
          overlong: this.#overlong || this.#partialBytes > this.maxLineBytes,
        })
        this.#partial = []
        this.#partialBytes = 0
        this.#overlong = false
        this.#partialStart = base + nl + 1
        from = nl + 1
      }
    }
  }

  /** Holds bytes of the current line, but never more than the limit: the rest of an overlong line is skipped. */
  #keep(bytes: Buffer): void {
    if (bytes.length === 0) return
    const room = this.maxLineBytes + 1 - this.#partialBytes
    if (room <= 0 || bytes.length > room) this.#overlong = true
    const kept = room <= 0 ? undefined : bytes.length > room ? bytes.subarray(0, room) : bytes
    if (kept === undefined) return
    // Copied: the read buffer is reused for the next chunk.
    this.#partial.push(Buffer.from(kept))
    this.#partialBytes += kept.length
  }
}
