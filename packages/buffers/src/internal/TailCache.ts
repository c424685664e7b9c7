/**
 * The bytes of the last groups written, kept in memory, so that a reader at the tail of the
 * buffer takes the records it reads back from there instead of from the file: the same bytes,
 * parsed and checked the same way, without a trip through the thread pool per pull.
 *
 * Invariants: it holds only bytes whose write completed (under `'always'`, durable): what a
 * reader may see; they are the file's bytes at those offsets, as nothing ever changes a
 * segment's bytes below its end (a failed group is cut off above them, and never added). Groups
 * written one after the other in a segment are copied into one chunk (a view may span them, so a
 * reader takes many small groups in one go); a chunk is only ever appended to, so a view of it
 * never changes. At most {@link TailCache.MAX_BYTES} of chunks are kept, the oldest dropped first,
 * so a lookup scans a handful of chunks; a group larger than that is not held.
 *
 * @module
 */
import type { Segment } from './Segment.js'

interface Chunk {
  readonly segment: Segment
  /** The offset of `bytes[0]` in the segment's file. */
  readonly start: number
  readonly bytes: Buffer
  /** How many of `bytes` hold written bytes (the rest is room for the next groups). */
  fill: number
}

/** The last bytes written to the buffer's segments. */
export class TailCache {
  /** The most bytes held (chunks included whole): enough for a reader that keeps up; one that lags reads the file. */
  static readonly MAX_BYTES = 2 * 1024 * 1024
  /** The size of a chunk (a larger group gets a chunk of its own size). */
  static readonly CHUNK_BYTES = 256 * 1024

  /** Oldest first. */
  #chunks: Chunk[] = []
  #bytes = 0

  /** Holds `parts` (`length` bytes in all), just written at `start` of `segment`'s file. */
  add(segment: Segment, start: number, parts: readonly Uint8Array[], length: number): void {
    if (length === 0 || length > TailCache.MAX_BYTES) return
    let chunk = this.#chunks.at(-1)
    if (
      chunk === undefined ||
      chunk.segment !== segment ||
      chunk.start + chunk.fill !== start ||
      chunk.fill + length > chunk.bytes.length
    ) {
      // Never read past `fill`: the rest of a new chunk is never seen uninitialised.
      chunk = { segment, start, bytes: Buffer.allocUnsafe(Math.max(TailCache.CHUNK_BYTES, length)), fill: 0 }
      this.#chunks.push(chunk)
      this.#bytes += chunk.bytes.length
      let drop = 0
      while (this.#bytes > TailCache.MAX_BYTES && drop < this.#chunks.length - 1) {
        this.#bytes -= this.#chunks[drop++]!.bytes.length
      }
      if (drop > 0) this.#chunks.splice(0, drop)
    }
    for (const part of parts) {
      chunk.bytes.set(part, chunk.fill)
      chunk.fill += part.length
    }
  }

  /**
   * The bytes of `segment`'s file from `pos`: at least `need` and at most `want` of them (a view,
   * not a copy), or `undefined` when the first `need` are not held in one chunk.
   */
  slice(segment: Segment, pos: number, need: number, want: number): Buffer | undefined {
    // The newest first: a reader at the tail reads what was just written.
    for (let i = this.#chunks.length - 1; i >= 0; i--) {
      const { segment: held, start, bytes, fill } = this.#chunks[i]!
      if (held !== segment || pos < start) continue
      const at = pos - start
      if (at + need > fill) return undefined
      return bytes.subarray(at, Math.min(fill, at + Math.max(need, want)))
    }
    return undefined
  }

  /** Bytes held, chunks counted whole (for tests). */
  get bytes(): number {
    return this.#bytes
  }
}
