/**
 * The read cursor of a buffer: where the next fresh record is read from, segment after segment.
 *
 * Invariants: it only reads what a segment makes visible (whole writes; under `'always'`, fsynced
 * ones), moves to the next segment only from a complete one (all written bytes visible, or
 * sealed), hands out each record not acknowledged once per process run in sequence order, and
 * counts a gap in the numbers (damage, writes lost before their fsync, a frame numbered far
 * ahead) as acknowledged, logged and counted, so the acknowledged prefix can pass it; a gap costs
 * the same whatever its length.
 *
 * @module
 */
import type { StoredRecord } from '../DiskBuffer.js'
import type { AckLedger } from './AckLedger.js'
import type { DeadLetterSet } from './DeadLetterSet.js'
import type { Settings } from './DiskBufferSettings.js'
import type { FileLike } from './FileSystem.js'
import type { Held } from './InFlightRecords.js'
import type { Segment } from './Segment.js'
import { SegmentReader } from './SegmentReader.js'
import type { TailCache } from './TailCache.js'

/** What the cursor reads from and reports to: the buffer's segments, acknowledgements and counters. */
export interface ReadCursorContext {
  readonly settings: Settings
  /** The buffer's segment list (the same array, changed in place as segments come and go). */
  readonly segments: readonly Segment[]
  /** Every record below this number was written and may be read. */
  readonly visibleSeq: () => number
  readonly acks: AckLedger
  readonly deadLettered: DeadLetterSet
  /** Acknowledges a record the cursor found needs no delivery (dead-lettered before a crash). */
  readonly markAcked: (seq: number) => void
  /** Acknowledges numbers `[from, to)` found missing, however many; returns how many were not acknowledged. */
  readonly markRangeAcked: (from: number, to: number) => number
  readonly counters: { corruptRegions: number; corruptBytes: number; recordsLost: number }
  /** The last bytes written, held in memory: a reader at the tail reads them from there. */
  readonly tail: TailCache
}

interface Position {
  segment: Segment | undefined
  file: FileLike | undefined
  reader: SegmentReader | undefined
  /** The next sequence number the reader expects; anything below was seen or is missing. */
  expected: number
}

/** Reads a buffer's records in order. */
export class ReadCursor {
  readonly #c: ReadCursorContext
  readonly #at: Position

  constructor(context: ReadCursorContext, start: Segment | undefined, expected: number) {
    this.#c = context
    this.#at = { segment: start, file: undefined, reader: undefined, expected }
  }

  /** Whether every visible record was read. */
  caughtUp(): boolean {
    const seg = this.#at.segment
    if (seg !== undefined && this.#c.segments.includes(seg)) {
      if (this.#at.reader !== undefined ? this.#at.reader.position < seg.visible : seg.visible > 0) {
        return false
      }
      if (this.#c.segments.some((s) => s.firstSeq > seg.firstSeq)) return false
      return true
    }
    return this.#c.segments.every((s) => s.firstSeq < this.#at.expected && s.visible === 0)
  }

  async close(): Promise<void> {
    const file = this.#at.file
    this.#at.file = undefined
    this.#at.reader = undefined
    await file?.close()
  }

  /**
   * Reads up to `max` records not yet acknowledged into `out` (and their `held`), in order,
   * counting and logging damage and skipping (as acknowledged) the numbers found missing.
   */
  async read(max: number, out: StoredRecord[], held: Held[]): Promise<void> {
    const taken = out.length
    try {
      await this.#take(max, out, held)
    } catch (error) {
      if (out.length === taken) throw error
      // The cursor moved past what it took: those records are handed out now, or this run would
      // never deliver them (nor free their segment). The next read starts where this one failed.
      this.#c.settings.log(
        `disk buffer ${this.#c.settings.path}: reading failed (${(error as Error).message}) after ${out.length - taken} record(s); handing those out`,
      )
    }
  }

  async #take(max: number, out: StoredRecord[], held: Held[]): Promise<void> {
    const cursor = this.#at
    const { fs, path, segmentBytes, log } = this.#c.settings
    const limit = out.length + max
    while (out.length < limit) {
      let seg = cursor.segment
      if (seg === undefined || !this.#c.segments.includes(seg)) {
        await this.close()
        seg = this.#c.segments.findLast((s) => s.firstSeq <= cursor.expected) ?? this.#c.segments[0]
        cursor.segment = seg
        if (seg === undefined) break
      }
      if (cursor.reader === undefined) {
        cursor.file = await fs.open(`${path}/${seg.name}`, 'read')
        cursor.reader = new SegmentReader(cursor.file, {
          start: 0,
          end: seg.visible,
          maxPayload: Math.max(segmentBytes, seg.size),
          tail: (pos, need, want) => this.#c.tail.slice(seg, pos, need, want),
        })
      }
      const reader = cursor.reader
      reader.setEnd(seg.visible)
      if (reader.atEnd) {
        // Move on only from a segment that is complete: its whole content visible, or sealed.
        const complete = seg.sealed || seg.visible === seg.size
        const next = this.#c.segments.find((s) => s.firstSeq > seg.firstSeq)
        if (next === undefined || !complete) break
        await this.close()
        cursor.segment = next
        continue
      }
      const items = await reader.read(limit - out.length)
      for (const item of items) {
        if (item.kind !== 'record') {
          this.#c.counters.corruptRegions++
          this.#c.counters.corruptBytes += item.bytes
          log(
            `disk buffer ${path}: checksum failure in segment ${seg.name} at offset ${item.offset}; skipped ${item.bytes} bytes`,
          )
          continue
        }
        const seq = item.seq
        if (seq < cursor.expected) continue
        if (seq > cursor.expected) this.#missing(cursor.expected, seq, seg.name)
        cursor.expected = seq + 1
        if (this.#c.acks.has(seq)) continue
        if (this.#c.deadLettered.claim(seq, item.crc)) {
          // Dead-lettered before a crash that came before its acknowledgement was checkpointed.
          this.#c.markAcked(seq)
          continue
        }
        out.push({ seq, payload: item.payload, attempt: 0 })
        held.push({ payload: item.payload, crc: item.crc, attempt: 0 })
      }
    }
    if (cursor.expected < this.#c.visibleSeq() && this.caughtUp()) {
      this.#missing(cursor.expected, this.#c.visibleSeq(), cursor.segment?.name ?? '(none)')
      cursor.expected = this.#c.visibleSeq()
    }
  }

  /**
   * Sequence numbers `[from, to)` are not on disk (damaged, lost unsynced, or a frame numbered far
   * ahead, such as one of another buffer's segments): count them acknowledged, as one range, so a
   * jump of any length costs the same.
   */
  #missing(from: number, to: number, segment: string): void {
    const { path, log } = this.#c.settings
    // Those acknowledged already (or never written, like a failed append's) are not counted lost.
    const lost = this.#c.markRangeAcked(from, to)
    if (lost === 0) return
    this.#c.counters.recordsLost += lost
    log(`disk buffer ${path}: records ${from}..${to - 1} missing before segment ${segment}; skipped`)
  }
}
