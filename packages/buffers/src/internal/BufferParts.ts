/**
 * The working parts of an open disk buffer, made from what recovery found and wired together:
 * the segment list, the acknowledgement ledger, the segment writer (write lane), the read
 * cursor, the records in flight, the ledger checkpoints, the counters, and what wakes a waiting
 * reader. `DiskBuffer` keeps them in its state while open or draining; once it stopped, its
 * state keeps them only as {@link BufferRemains} (reads only).
 *
 * Invariants: an acknowledgement that advances the prefix frees the segments below it, schedules
 * a checkpoint, and lets an append waiting for room retry; one reader at a time runs
 * ({@link BufferParts.oneReader}); every waiting reader is woken by {@link BufferParts.wake}.
 *
 * @module
 */
import type { DiskBufferMetrics } from '../DiskBuffer.js'
import { AckLedger } from './AckLedger.js'
import type { DeadLetterSet } from './DeadLetterSet.js'
import { type Deferred, deferred } from './Deferred.js'
import type { Settings } from './DiskBufferSettings.js'
import type { DiskBufferKind } from './DiskBufferState.js'
import { InFlightRecords } from './InFlightRecords.js'
import { LedgerCheckpoints } from './LedgerCheckpoints.js'
import { ReadCursor } from './ReadCursor.js'
import type { Recovered } from './Recovery.js'
import type { Segment } from './Segment.js'
import { SegmentWriter } from './SegmentWriter.js'
import { TailCache } from './TailCache.js'

/** What the parts start from: what recovery found, and the records found in the dead-letter queue at open. */
export interface BufferStart extends Omit<Recovered, 'ledgerOk'> {
  readonly deadLettered: DeadLetterSet
}

/** What remains readable of a buffer once it stopped: its counters and its segment list, never a file. */
export interface BufferRemains {
  /** The segments, as they were when the buffer stopped. */
  readonly segments: readonly Segment[]
  /** The contiguous acknowledged prefix. */
  readonly ackedBelow: number
  /** The sequence number the next record would get. */
  readonly nextSeq: number
  /** Whether `seq` was acknowledged. */
  acknowledged(seq: number): boolean
  /** The counters and gauges (without the dead-letter queue's). */
  metrics(): Omit<DiskBufferMetrics, 'deadLettered'>
}

/** The counters of one process run (`tornBytesTruncated`: of the open). */
type Counters = Omit<
  DiskBufferMetrics,
  'segments' | 'bytesOnDisk' | 'unackedRecords' | 'inFlight' | 'retryPending' | 'deadLettered'
>

/** The live parts of one open buffer. */
export class BufferParts implements BufferRemains {
  readonly settings: Settings
  readonly segments: Segment[]
  readonly acks: AckLedger
  readonly inFlight: InFlightRecords
  readonly writer: SegmentWriter
  readonly cursor: ReadCursor
  readonly checkpoints: LedgerCheckpoints
  readonly counters: { -readonly [K in keyof Counters]: number }
  readonly #kind: () => DiskBufferKind
  #wakeup: Deferred<void> = deferred()
  /** The last read (one reader at a time: the cursor is shared); it never rejects. */
  #reading: Promise<unknown> = Promise.resolve()

  /** `kind`: the buffer's state now (the write lane stops once crashed; a draining reader is woken by every advance). */
  constructor(start: BufferStart, kind: () => DiskBufferKind) {
    const s = start.settings
    this.settings = s
    this.#kind = kind
    this.segments = start.segments
    this.counters = {
      written: 0,
      acked: 0,
      redeliveries: 0,
      corruptRegions: 0,
      corruptBytes: 0,
      recordsLost: 0,
      tornBytesTruncated: start.tornBytes,
      writeFailures: 0,
      syncFailures: 0,
    }
    this.acks = new AckLedger(start.ackedBelow)
    this.inFlight = new InFlightRecords({ initialMs: s.retryInitialMs, maxMs: s.retryMaxMs })
    // What the writer just wrote, for the reader: one cache between the two.
    const tail = new TailCache()
    this.writer = new SegmentWriter(
      {
        settings: s,
        segments: this.segments,
        acks: this.acks,
        markAcked: (seq) => this.markAcked(seq),
        changed: () => this.checkpoints.changed(),
        saveLedger: () => this.checkpoints.write(),
        wake: () => this.wake(),
        abandoned: () => kind() === 'crashed',
        counters: this.counters,
        tail,
      },
      { active: start.active, nextSeq: start.nextSeq },
    )
    this.checkpoints = new LedgerCheckpoints({
      settings: s,
      acks: this.acks,
      serial: (job) => this.writer.serial(job),
      visibleIsDurable: s.sync === 'always',
      sync: () => this.writer.groupSync(),
      position: () => ({
        nextSeq: this.writer.writtenSeq,
        segments: this.segments.map((seg) => seg.firstSeq),
      }),
    })
    const first = start.segments.findLast((seg) => seg.firstSeq <= start.ackedBelow) ?? start.segments[0]
    this.cursor = new ReadCursor(
      {
        settings: s,
        segments: this.segments,
        visibleSeq: () => this.writer.visibleSeq,
        acks: this.acks,
        deadLettered: start.deadLettered,
        markAcked: (seq) => this.markAcked(seq),
        markRangeAcked: (from, to) => this.markRangeAcked(from, to),
        counters: this.counters,
        tail,
      },
      first,
      start.ackedBelow,
    )
    // Segments wholly below the acknowledged prefix: a crash came between the ledger and the delete.
    this.writer.releaseSegments()
  }

  get ackedBelow(): number {
    return this.acks.below
  }

  get nextSeq(): number {
    return this.writer.assigned
  }

  acknowledged(seq: number): boolean {
    return this.acks.has(seq)
  }

  metrics(): Omit<DiskBufferMetrics, 'deadLettered'> {
    return {
      segments: this.segments.length,
      bytesOnDisk: this.writer.bytesOnDisk,
      unackedRecords: this.writer.nextSeq - this.acks.below - this.acks.aboveCount,
      inFlight: this.inFlight.size,
      retryPending: this.inFlight.retryPending,
      ...this.counters,
    }
  }

  /** Resolves at the next {@link BufferParts.wake}. */
  get wakeup(): Promise<void> {
    return this.#wakeup.promise
  }

  /** Wakes every waiting reader (records became visible or due, the buffer drains or stops). */
  wake(): void {
    const wakeup = this.#wakeup
    this.#wakeup = deferred()
    wakeup.resolve()
  }

  /** Resolves once every read started so far has ended (they end soon once the buffer stopped). */
  readsEnded(): Promise<unknown> {
    return this.#reading
  }

  /** Runs `read` after every read started before it. */
  oneReader<T>(read: () => Promise<T>): Promise<T> {
    const next = this.#reading.then(read)
    this.#reading = next.catch(() => undefined)
    return next
  }

  /** Marks `seq` acknowledged; when that advances the prefix, frees what it can and checkpoints. */
  markAcked(seq: number): void {
    if (this.acks.mark(seq)) this.#advanced()
  }

  /** Marks `[from, to)` acknowledged as {@link BufferParts.markAcked} does; returns how many were not before. */
  markRangeAcked(from: number, to: number): number {
    const below = this.acks.below
    const marked = this.acks.markRange(from, to)
    if (this.acks.below > below) this.#advanced()
    return marked
  }

  /** The prefix advanced: frees what it can and checkpoints. */
  #advanced(): void {
    this.checkpoints.advanced()
    this.writer.releaseSegments()
    if (this.writer.waitingForSpace) this.writer.reclaimActive()
    if (this.#kind() === 'draining') this.wake()
  }

  /** Cancels every timer (close, or a simulated crash); nothing is scheduled again. */
  stopTimers(): void {
    this.writer.stopTimer()
    this.checkpoints.stop()
  }
}
