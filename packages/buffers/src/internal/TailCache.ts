/**
 * The bytes of the last groups written, kept in memory, so that a reader at the tail of the
 * buffer takes the records it reads back from there instead of from the file: the same bytes,
 * parsed and checked the same way, without a trip through the thread pool per pull.
 *
 * Invariants: it holds only bytes whose write completed (under `'always'`, durable): what a
 * reader may see; they are the file's bytes at those offsets, as nothing ever changes a
 * segment's bytes below its end (a failed group is cut off above them, and never added); a
 * group's bytes are held whole (whole frames), at most {@link TailCache.MAX_BYTES} in all, the
 * oldest dropped first; a group larger than that is not held.
 *
 * @module
 */
import type { Segment } from './Segment.js'

interface Entry {
  readonly segment: Segment
  /** The offset of `bytes` in the segment's file. */
  readonly start: number
  readonly bytes: Buffer
}

/** The last bytes written to the buffer's segments. */
export class TailCache {
  /** The most bytes held: enough for a reader that keeps up; one that lags reads the file. */
  static readonly MAX_BYTES = 2 * 1024 * 1024

  /** Oldest first. */
  #entries: Entry[] = []
  #bytes = 0

  /** Holds `parts` (`length` bytes in all), just written at `start` of `segment`'s file. */
  add(segment: Segment, start: number, parts: readonly Uint8Array[], length: number): void {
    if (length === 0 || length > TailCache.MAX_BYTES) return
    this.#entries.push({ segment, start, bytes: Buffer.concat(parts, length) })
    this.#bytes += length
    let drop = 0
    while (this.#bytes > TailCache.MAX_BYTES) this.#bytes -= this.#entries[drop++]!.bytes.length
    if (drop > 0) this.#entries.splice(0, drop)
  }

  /**
   * The bytes of `segment`'s file from `pos`: at least `need` and at most `want` of them (a view,
   * not a copy), or `undefined` when the first `need` are not held in one group.
   */
  slice(segment: Segment, pos: number, need: number, want: number): Buffer | undefined {
    // The newest first: a reader at the tail reads what was just written.
    for (let i = this.#entries.length - 1; i >= 0; i--) {
      const { segment: held, start, bytes } = this.#entries[i]!
      if (held !== segment || pos < start) continue
      const at = pos - start
      if (at + need > bytes.length) return undefined
      return bytes.subarray(at, Math.min(bytes.length, at + Math.max(need, want)))
    }
    return undefined
  }

  /** Bytes held (for tests). */
  get bytes(): number {
    return this.#bytes
  }
}
