/**
 * Sequential reading of the frames of one segment file, with recovery from damage: a frame that
 * does not check out is skipped by searching forward for the next frame that does
 * (resynchronising on the framing).
 *
 * Invariant: every byte between `start` and `end` is accounted for exactly once, as a valid
 * record, as a damaged region followed by a valid frame (`corrupt`), or as damage that runs to
 * the end (`torn`: a crash cut the last write short, or garbage follows the last frame).
 *
 * @module
 */
import type { FileLike } from './FileSystem.js'
import { Frame } from './Frame.js'

/** What a segment yields, in file order. */
export type SegmentItem =
  | {
      readonly kind: 'record'
      readonly seq: number
      readonly offset: number
      /** The frame's size on disk, header included. */
      readonly size: number
      readonly crc: number
      /** A copy of the payload (empty when the reader was made with `payloads: false`). */
      readonly payload: Buffer
    }
  | { readonly kind: 'corrupt'; readonly offset: number; readonly bytes: number }
  | { readonly kind: 'torn'; readonly offset: number; readonly bytes: number }

const EMPTY = Buffer.alloc(0)

/**
 * The file's bytes from `pos` as held in memory: at least `need` and at most `want` of them, or
 * `undefined` when they are not held (they are then read from the file).
 */
export type TailBytes = (pos: number, need: number, want: number) => Buffer | undefined

/** A reader over `[start, end)` of a segment file; `end` may grow as the writer appends. */
export class SegmentReader {
  readonly #file: FileLike
  readonly #maxPayload: number
  readonly #chunk: number
  readonly #payloads: boolean
  readonly #tail: TailBytes | undefined
  #end: number
  #pos: number
  #buf: Buffer = EMPTY
  #bufStart = 0

  constructor(
    file: FileLike,
    options: {
      start: number
      end: number
      maxPayload: number
      chunkBytes?: number
      payloads?: boolean
      /** Where the file's last bytes written are held in memory (read from there, when they are). */
      tail?: TailBytes
    },
  ) {
    this.#file = file
    this.#pos = options.start
    this.#end = options.end
    this.#maxPayload = options.maxPayload
    this.#chunk = options.chunkBytes ?? 1 << 20
    // Recovery only needs to know where whole frames end: it skips copying 128 MiB of payloads.
    this.#payloads = options.payloads ?? true
    this.#tail = options.tail
  }

  /** The offset of the next frame to read. */
  get position(): number {
    return this.#pos
  }

  /** The offset reading stops at. */
  get end(): number {
    return this.#end
  }

  /** Moves the end (the writer appended more whole frames). */
  setEnd(end: number): void {
    this.#end = end
  }

  /** Whether everything up to `end` has been read. */
  get atEnd(): boolean {
    return this.#pos >= this.#end
  }

  /**
   * Up to `max` items; fewer (or none) only at the end, or when a read of the file failed after
   * some: those are returned, and the failure comes again from the next call (`position` is still
   * the frame it could not load). A failure before any item is thrown.
   */
  async read(max: number): Promise<SegmentItem[]> {
    const out: SegmentItem[] = []
    try {
      await this.#readInto(out, max)
    } catch (error) {
      if (out.length === 0) throw error
    }
    return out
  }

  async #readInto(out: SegmentItem[], max: number): Promise<void> {
    while (out.length < max && this.#pos < this.#end) {
      const pos = this.#pos
      // Synchronous while the frame is in the buffer: no promise per record.
      let state = this.#check(pos)
      if (state > 0) state = await this.#load(pos, state)
      if (state === 0) {
        const length = Frame.length(this.#buf, pos - this.#bufStart)
        const at = pos - this.#bufStart + Frame.HEADER_BYTES
        out.push({
          kind: 'record',
          seq: Frame.seq(this.#buf, pos - this.#bufStart),
          offset: pos,
          size: Frame.HEADER_BYTES + length,
          crc: Frame.crc(this.#buf, pos - this.#bufStart),
          payload: this.#payloads ? Buffer.from(this.#buf.subarray(at, at + length)) : EMPTY,
        })
        this.#pos = pos + Frame.HEADER_BYTES + length
        continue
      }
      const next = await this.#resync(pos + 1)
      if (next === undefined) {
        out.push({ kind: 'torn', offset: pos, bytes: this.#end - pos })
        this.#pos = this.#end
      } else {
        out.push({ kind: 'corrupt', offset: pos, bytes: next - pos })
        this.#pos = next
      }
    }
  }

  /**
   * Whether a whole valid frame starts at `pos`, as far as the buffer tells: 0 valid, -1 not, or
   * the number of bytes from `pos` that must be loaded to tell.
   */
  #check(pos: number): number {
    const header = Frame.HEADER_BYTES
    if (pos + header > this.#end) return -1
    const loaded = this.#bufStart + this.#buf.length
    if (pos < this.#bufStart || pos + header > loaded) return header
    const at = pos - this.#bufStart
    if (!Frame.hasMagic(this.#buf, at)) return -1
    const length = Frame.length(this.#buf, at)
    if (length > this.#maxPayload || pos + header + length > this.#end) return -1
    if (pos + header + length > loaded) return header + length
    return Frame.verify(this.#buf, at) ? 0 : -1
  }

  /** Loads what {@link SegmentReader.#check} asked for and checks again (header, then body). */
  async #load(pos: number, need: number): Promise<number> {
    let state = need
    for (let i = 0; i < 2 && state > 0; i++) {
      if (!(await this.#ensure(pos, state))) return -1
      state = this.#check(pos)
    }
    return state > 0 ? -1 : state
  }

  /** Whether a whole valid frame starts at `pos` (loads it into the buffer if so). */
  async #validAt(pos: number): Promise<boolean> {
    const state = this.#check(pos)
    return (state > 0 ? await this.#load(pos, state) : state) === 0
  }

  /** The offset of the next valid frame at or after `from`, or `undefined`. */
  async #resync(from: number): Promise<number | undefined> {
    let pos = from
    while (pos + Frame.HEADER_BYTES <= this.#end) {
      if (!(await this.#ensure(pos, Math.min(this.#chunk, this.#end - pos)))) return undefined
      const found = this.#buf.indexOf(Frame.MAGIC_BYTES, pos - this.#bufStart)
      if (found < 0) {
        // The magic may straddle the chunk's end: step back three bytes.
        pos = Math.max(pos + 1, this.#bufStart + this.#buf.length - 3)
        continue
      }
      const candidate = this.#bufStart + found
      if (await this.#validAt(candidate)) return candidate
      pos = candidate + 1
    }
    return undefined
  }

  /** Makes `[pos, pos + n)` available in the buffer; false if it runs past `end`. */
  async #ensure(pos: number, n: number): Promise<boolean> {
    if (pos + n > this.#end) return false
    if (pos >= this.#bufStart && pos + n <= this.#bufStart + this.#buf.length) return true
    const length = Math.min(Math.max(this.#chunk, n), this.#end - pos)
    const held = this.#tail?.(pos, n, length)
    if (held !== undefined) {
      this.#buf = held
      this.#bufStart = pos
      return true
    }
    const buf = Buffer.allocUnsafe(length)
    let filled = 0
    while (filled < length) {
      const got = await this.#file.read(buf, filled, length - filled, pos + filled)
      if (got === 0) break
      filled += got
    }
    this.#buf = filled === length ? buf : buf.subarray(0, filled)
    this.#bufStart = pos
    return filled >= n
  }
}
