/**
 * The write lane of a buffer: appends framed and queued, written in groups (one `writev` per
 * segment), fsynced by the sync policy (under `'always'` on Linux by the write itself: segments
 * are opened `O_DSYNC`, one trip through the thread pool per group instead of a write and an
 * fdatasync), segments rolled at `segmentBytes`, a failed group rolled back, finished segments
 * deleted, and each group's bytes handed to the {@link TailCache} once written, for the reader
 * at the tail.
 *
 * Invariants: every change to the buffer's files goes through one lane ({@link SegmentWriter.serial}),
 * so writes, fsyncs, rolls and deletions never interleave (one exception: under `'always'`, the
 * scheduled ledger checkpoints replace the ledger's own file beside the lane, see
 * `LedgerCheckpoints`); a record becomes visible to readers only
 * once its group is written (under `'always'`, fsynced); a `durable` promise resolves `durable` only
 * after an fsync that started after its write; a group whose write failed leaves nothing readable
 * behind, and its sequence numbers are reused only when no later append holds the numbers after
 * them (otherwise they are skipped, as acknowledged); a segment is deleted only once the
 * acknowledged prefix passed its end and a ledger checkpoint saved that, and the segment being written only when everything is
 * acknowledged and a writer waits for room.
 *
 * @module
 */
import type { AppendResult, DurableStatus } from '../DiskBuffer.js'
import { DiskBufferError } from '../DiskBufferError.js'
import type { AckLedger } from './AckLedger.js'
import { type Deferred, deferred } from './Deferred.js'
import type { Settings } from './DiskBufferSettings.js'
import { type FileLike, openExisting } from './FileSystem.js'
import { type EncodedBatch, Frame, type Payload } from './Frame.js'
import { type Segment, segmentName, segmentWriteMode } from './Segment.js'
import type { TailCache } from './TailCache.js'

/** What the writer writes to and reports to: the buffer's segments, acknowledgements and counters. */
export interface SegmentWriterContext {
  readonly settings: Settings
  /** The buffer's segment list (the same array; the writer adds, removes and grows segments in it). */
  readonly segments: Segment[]
  readonly acks: AckLedger
  /** Acknowledges a sequence number a failed group will never write. */
  readonly markAcked: (seq: number) => void
  /** Something the ledger records changed (a record written, a segment added or deleted). */
  readonly changed: () => void
  /** Writes a ledger checkpoint now; call it from a job on the lane. */
  readonly saveLedger: () => Promise<void>
  /** Wakes readers (records became visible, or a write failed). */
  readonly wake: () => void
  /** The buffer was abandoned (a simulated crash): the lane touches no file again. */
  readonly abandoned: () => boolean
  readonly counters: { written: number; writeFailures: number; syncFailures: number }
  /** Where each group's bytes go once written, for the reader at the tail. */
  readonly tail: TailCache
}

/** Where the writer starts: what recovery found. */
export interface SegmentWriterStart {
  /** The last segment's file, open for appending (undefined: the next write rolls a new segment). */
  readonly active: FileLike | undefined
  readonly nextSeq: number
}

interface PendingAppend {
  /** The records, framed with their sequence numbers (encoded in the caller's turn, off the write lane). */
  readonly encoded: EncodedBatch
  readonly count: number
  readonly bytes: number
  readonly firstSeq: number
  readonly resolve: (result: AppendResult) => void
  /** Set when the append was answered before its write (group commit write-behind). */
  readonly durable: Deferred<DurableStatus> | undefined
}

/** The `durable` answer of records already fsynced. */
export const DURABLE: Promise<DurableStatus> = Promise.resolve('durable')
const MAX_GROUP = 512 // appends per write: stays under IOV_MAX (1024) buffers per writev
/** With group commit, appends are answered before their write while at most this much waits to be written. */
const WRITE_BEHIND_BYTES = 4 * 1024 * 1024

/** Writes a buffer's records into its segment files and frees the segments once acknowledged. */
export class SegmentWriter {
  readonly #c: SegmentWriterContext
  #active: FileLike | undefined
  /** The next sequence number to write (everything below is in the files, or known missing). */
  #nextSeq: number
  /** The next sequence number to give an append (above `#nextSeq` while appends wait to be written). */
  #assigned: number
  /** Every record below this number was written and may be read. */
  #visibleSeq: number
  /**
   * The end of the last group written (under `'always'`, fsynced): below `#visibleSeq` except
   * after a failed group whose numbers were skipped, as they were never written.
   */
  #writtenSeq: number
  /** Bytes of appends not written yet. */
  #unwritten = 0
  #bytesOnDisk: number
  #reserved = 0
  #lane: Promise<unknown> = Promise.resolve()
  #pending: PendingAppend[] = []
  #writeScheduled = false
  #syncGeneration: Deferred<DurableStatus> | undefined = undefined
  /** The group-commit fsyncs in flight, in order; it never rejects. */
  #syncs: Promise<void> = Promise.resolve()
  #writesSinceSync = 0
  #syncTimer: NodeJS.Timeout | undefined = undefined
  #spaceWaiters: (() => void)[] = []
  /**
   * Whether a segment acknowledged whole was left on disk this run (one sheltering a file left
   * alone, one that could not be deleted, or one whose ledger checkpoint before the deletion
   * failed): {@link SegmentWriter.reclaimActive} then never leaves
   * it the last segment on disk, whose records end below the saved prefix (`LEDGER_AHEAD`).
   */
  #keptOnDisk = false

  constructor(context: SegmentWriterContext, start: SegmentWriterStart) {
    this.#c = context
    this.#active = start.active
    this.#nextSeq = start.nextSeq
    this.#assigned = start.nextSeq
    this.#visibleSeq = start.nextSeq
    this.#writtenSeq = start.nextSeq
    this.#bytesOnDisk = context.segments.reduce((n, seg) => n + seg.size, 0)
  }

  /** The next sequence number to write; every record below it is written or known missing. */
  get nextSeq(): number {
    return this.#nextSeq
  }

  /** The sequence number the next append gets. */
  get assigned(): number {
    return this.#assigned
  }

  /** Every record below this number was written and may be read. */
  get visibleSeq(): number {
    return this.#visibleSeq
  }

  /**
   * The end of the last group written (under `'always'`, fsynced), or where the writer started:
   * no record at or above it is in the files. Below {@link SegmentWriter.visibleSeq} only when a
   * failed group's numbers were skipped (counted acknowledged) and nothing was written after them.
   */
  get writtenSeq(): number {
    return this.#writtenSeq
  }

  get bytesOnDisk(): number {
    return this.#bytesOnDisk
  }

  /** Whether an append waits for room. */
  get waitingForSpace(): boolean {
    return this.#spaceWaiters.length > 0
  }

  /** Runs `job` on the lane, after every job queued before it (skipped once the buffer is abandoned). */
  serial<T>(job: () => Promise<T>): Promise<T> {
    const run = this.#lane.then(() => (this.#c.abandoned() ? (undefined as T) : job()))
    this.#lane = run.catch(() => undefined)
    return run
  }

  /** Whether `bytes` more fit under `maxBytes` (an empty buffer takes any one append). */
  hasRoom(bytes: number): boolean {
    const used = this.#bytesOnDisk + this.#reserved
    return used === 0 || used + bytes <= this.#c.settings.maxBytes
  }

  /** Resolves once space may have been freed (or the buffer closes: {@link SegmentWriter.releaseWaiters}). */
  waitForSpace(): Promise<void> {
    this.reclaimActive()
    return new Promise<void>((resolve) => this.#spaceWaiters.push(resolve))
  }

  /** Wakes every append waiting for room. */
  releaseWaiters(): void {
    for (const waiter of this.#spaceWaiters.splice(0)) waiter()
  }

  /**
   * Numbers, frames and queues `payloads` (`lengths` bytes each, `bytes` framed; room was checked)
   * for the next group.
   * Group commit writes behind: the caller goes on while earlier appends are being written, so
   * encoding and writing overlap and waiting appends share one write. What matters (durable)
   * still resolves only after the fsync; a process crash loses only what nobody was told is durable.
   */
  append(payloads: readonly Payload[], lengths: readonly number[], bytes: number): Promise<AppendResult> {
    const firstSeq = this.#assigned
    // Framed first: a payload that no longer matches its count throws here, before anything is
    // reserved or numbered.
    const encoded = Frame.encode(payloads, firstSeq, lengths)
    this.#reserved += bytes
    this.#assigned += payloads.length
    const early = this.#c.settings.sync !== 'always' && this.#unwritten + bytes <= WRITE_BEHIND_BYTES
    this.#unwritten += bytes
    return new Promise<AppendResult>((resolve) => {
      const durable = early ? deferred<DurableStatus>() : undefined
      this.#pending.push({ encoded, count: payloads.length, bytes, firstSeq, resolve, durable })
      this.#scheduleWrite()
      if (durable !== undefined) {
        resolve({ status: 'written', firstSeq, count: payloads.length, durable: durable.promise })
      }
    })
  }

  /**
   * Writes every append still waiting (on the lane, at close): a write takes at most 512 appends
   * and queues the next on the lane, where it would come after the close.
   */
  async finish(): Promise<void> {
    while (this.#pending.length > 0 && !this.#c.abandoned()) await this.#writeGroup()
  }

  #scheduleWrite(): void {
    if (this.#writeScheduled) return
    this.#writeScheduled = true
    void this.serial(() => this.#writeGroup())
  }

  async #writeGroup(): Promise<void> {
    const s = this.#c.settings
    const group = this.#pending.splice(0, MAX_GROUP)
    this.#writeScheduled = false
    if (this.#pending.length > 0) this.#scheduleWrite()
    if (group.length === 0 || this.#c.abandoned()) return
    const count = group.reduce((n, p) => n + p.count, 0)
    const groupBytes = group.reduce((n, p) => n + p.bytes, 0)
    const firstSeq = group[0]!.firstSeq
    this.#nextSeq = firstSeq
    const segments = this.#c.segments
    // The segment written last, by identity: acknowledgements may free segments at the front of
    // the list while this group is written (off the lane), so its length says nothing.
    const before = { last: segments.at(-1), activeSize: segments.at(-1)?.size ?? 0 }
    const touched: Segment[] = []
    /** What was written where, for the tail cache once the group succeeded. */
    const written: { segment: Segment; start: number; parts: Buffer[]; length: number }[] = []
    try {
      // Gather the frames into one writev per segment; a record never spans two segments.
      let seg = segments.at(-1)
      let iov: Buffer[] = []
      let queued = 0
      let seq = firstSeq
      const flush = async (): Promise<void> => {
        if (queued === 0) return
        await this.#active!.writev(iov, seg!.size)
        written.push({ segment: seg!, start: seg!.size, parts: iov, length: queued })
        seg!.size += queued
        this.#bytesOnDisk += queued
        if (!touched.includes(seg!)) touched.push(seg!)
        this.#nextSeq = seq
        iov = []
        queued = 0
      }
      for (const p of group) {
        const { bytes, ends } = p.encoded
        let sliceStart = 0
        let pos = 0
        for (const end of ends) {
          const waiting = queued + pos - sliceStart
          if (
            seg === undefined ||
            seg.sealed ||
            this.#active === undefined ||
            (seg.size + waiting > 0 && seg.size + waiting + end - pos > s.segmentBytes)
          ) {
            if (pos > sliceStart) {
              iov.push(bytes.subarray(sliceStart, pos))
              queued += pos - sliceStart
              sliceStart = pos
            }
            await flush()
            seg = await this.#roll(seq)
          }
          pos = end
          seq++
        }
        if (pos > sliceStart) {
          iov.push(bytes.subarray(sliceStart, pos))
          queued += pos - sliceStart
        }
      }
      await flush()
      if (s.sync === 'always' && this.#active!.durableWrites !== true) await this.#active!.datasync()
    } catch (error) {
      this.#reserved -= groupBytes
      this.#unwritten -= groupBytes
      this.#c.counters.writeFailures++
      await this.#rollback(before, firstSeq, count)
      const code = (error as NodeJS.ErrnoException).code === 'ENOSPC' ? 'NO_SPACE' : 'WRITE_FAILED'
      const failure = new DiskBufferError(
        code,
        `writing ${count} record(s) failed (${(error as Error).message}); rolled back`,
        s.path,
        undefined,
        { cause: error },
      )
      s.log(failure.message)
      for (const p of group) {
        if (p.durable !== undefined) p.durable.resolve('failed')
        else p.resolve({ status: 'failed', error: failure })
      }
      this.#c.wake()
      // The group's room is free again: an append waiting for it may go on (no acknowledgement
      // may ever come to wake it, when the buffer holds nothing else).
      this.releaseWaiters()
      return
    }
    this.#reserved -= groupBytes
    this.#unwritten -= groupBytes
    for (const seg of touched) seg.visible = seg.size
    for (const w of written) this.#c.tail.add(w.segment, w.start, w.parts, w.length)
    this.#visibleSeq = this.#nextSeq
    this.#writtenSeq = this.#nextSeq
    this.#c.counters.written += count
    this.#c.changed()
    const durable = s.sync === 'always' ? DURABLE : this.#durablePromise()
    for (const p of group) {
      if (p.durable !== undefined) void durable.then(p.durable.resolve)
      else p.resolve({ status: 'written', firstSeq: p.firstSeq, count: p.count, durable })
    }
    this.#c.wake()
    const policy = s.sync
    if (policy !== 'always') {
      this.#writesSinceSync += group.length
      if (this.#writesSinceSync >= policy.everyWrites) void this.groupSync()
      else if (this.#syncTimer === undefined) {
        // Not unref'd: writes wait for this fsync, and so does every caller of their `durable`.
        // A process with nothing else to do exited before it, the promises never resolved and
        // the program after them (its close) never ran. It is gone once the fsync ran, or at close.
        this.#syncTimer = setTimeout(() => {
          this.#syncTimer = undefined
          void this.serial(async () => {
            void this.groupSync()
          })
        }, policy.everyMs)
      }
    }
  }

  #durablePromise(): Promise<DurableStatus> {
    this.#syncGeneration ??= deferred()
    return this.#syncGeneration.promise
  }

  /**
   * Starts an fsync covering every write made so far and resolves their `durable` promises after
   * it, without holding up the writes that follow (fdatasync and writes to one file may overlap).
   * Resolves once this and every earlier fsync finished. Handles are closed only after `#syncs`.
   */
  groupSync(): Promise<void> {
    const generation = this.#syncGeneration
    this.#syncGeneration = undefined
    this.#writesSinceSync = 0
    this.stopTimer()
    if (generation === undefined) return this.#syncs
    const file = this.#active
    const { path, log } = this.#c.settings
    this.#syncs = this.#syncs.then(async () => {
      try {
        if (file === undefined) throw new DiskBufferError('WRITE_FAILED', 'no segment open for writing', path)
        await file.datasync()
        generation.resolve('durable')
      } catch (error) {
        this.#c.counters.syncFailures++
        log(`disk buffer ${path}: fsync failed (${(error as Error).message}); records may be lost`)
        generation.resolve('failed')
      }
    })
    return this.#syncs
  }

  /** Cancels the group-commit timer (close, or a simulated crash). */
  stopTimer(): void {
    if (this.#syncTimer !== undefined) clearTimeout(this.#syncTimer)
    this.#syncTimer = undefined
  }

  /** Closes the segment being written (on the lane, after {@link SegmentWriter.groupSync}). */
  async closeFile(): Promise<void> {
    await this.#active?.close()
    this.#active = undefined
  }

  async #roll(firstSeq: number): Promise<Segment> {
    const { fs, path } = this.#c.settings
    await this.#syncs
    const old = this.#active
    if (old !== undefined) {
      this.#active = undefined
      try {
        await old.datasync()
      } catch (error) {
        // What the group-commit writers wrote there may be gone: never report it durable.
        this.#syncGeneration?.resolve('failed')
        this.#syncGeneration = undefined
        await old.close().catch(() => undefined)
        throw error
      }
      await old.close()
    }
    const name = segmentName(firstSeq)
    const file = await fs.open(`${path}/${name}`, segmentWriteMode(this.#c.settings.sync))
    const segment: Segment = { firstSeq, name, size: 0, visible: 0, sealed: false }
    this.#c.segments.push(segment)
    this.#active = file
    this.#c.changed()
    await fs.syncDir(path)
    return segment
  }

  /** Undoes a failed write group: removes the segments it created, cuts the one it appended to. */
  async #rollback(
    before: { last: Segment | undefined; activeSize: number },
    firstSeq: number,
    count: number,
  ): Promise<void> {
    const { fs, path, log } = this.#c.settings
    const segments = this.#c.segments
    await this.#syncs
    try {
      // Every segment after the one written last before the group is the group's (all of them
      // when that one was freed meanwhile: it held nothing of the group's, and the older ones
      // went first). Compared by identity at each step: segments may be freed during the awaits.
      const keep = before.last !== undefined && segments.includes(before.last) ? before.last : undefined
      while (segments.length > 0 && segments.at(-1) !== keep) {
        const seg = segments.pop()!
        this.#bytesOnDisk -= seg.size
        await this.#active?.close().catch(() => undefined)
        this.#active = undefined
        await fs.unlink(`${path}/${seg.name}`)
      }
      const last = segments.at(-1)
      if (last !== undefined && last === keep) {
        // Never made: one deleted from outside, made again and cut to its old size, was that many
        // zero bytes posing as its records. Gone (ENOENT), the rollback fails: sealed, below.
        this.#active ??= await openExisting(
          fs,
          `${path}/${last.name}`,
          segmentWriteMode(this.#c.settings.sync),
        )
        await this.#active.truncate(before.activeSize)
        await this.#active.datasync()
        this.#bytesOnDisk -= last.size - before.activeSize
        last.size = before.activeSize
      }
      await fs.syncDir(path)
      if (this.#assigned === firstSeq + count) {
        this.#nextSeq = firstSeq
        this.#assigned = firstSeq
        return
      }
    } catch (error) {
      // Their tails are unknown: seal the segment the group appended to and every one after it
      // still listed (the group's), and never reuse the numbers they may hold.
      const from = before.last === undefined ? 0 : Math.max(0, segments.indexOf(before.last))
      for (const seg of segments.slice(from)) seg.sealed = true
      await this.#active?.close().catch(() => undefined)
      this.#active = undefined
      log(`disk buffer ${path}: rollback failed (${(error as Error).message}); segment sealed`)
    }
    // Later appends already hold the following numbers: skip these, as acknowledged (they never existed).
    this.#nextSeq = firstSeq + count
    this.#visibleSeq = this.#nextSeq
    for (let seq = firstSeq; seq < firstSeq + count; seq++) {
      if (seq >= this.#c.acks.below) this.#c.markAcked(seq)
    }
  }

  /** Deletes every segment all of whose records are acknowledged (never the one being written). */
  releaseSegments(): void {
    const segments = this.#c.segments
    while (segments.length > 1 && segments[1]!.firstSeq <= this.#c.acks.below) {
      const seg = segments.shift()!
      this.#c.changed()
      const end = segments[0]!.firstSeq
      void this.serial(async () => {
        if (await this.#ledgerSavedBelow(end, seg)) await this.#unlinkAcknowledged(seg)
        this.#bytesOnDisk -= seg.size
        this.releaseWaiters()
      })
    }
  }

  /**
   * Makes sure the ledger on disk says every record below `end` (those of `seg`) was acknowledged
   * before `seg` is deleted: a segment gone with records the ledger counts unacknowledged is, on
   * open, records perhaps lost (deleted from outside), which a crash between the delete and the
   * next checkpoint must not look like. One checkpoint a segment deleted, none while the saved
   * prefix is already past it. False (the segment is left on disk, logged, for a later open) when
   * that checkpoint fails.
   */
  async #ledgerSavedBelow(end: number, seg: Segment): Promise<boolean> {
    const { acks } = this.#c
    if (acks.below - acks.unsaved >= end) return true
    try {
      await this.#c.saveLedger()
      return true
    } catch (error) {
      // Left on disk below the prefix a later checkpoint saves: never to become the last one.
      this.#keptOnDisk = true
      const { path, log } = this.#c.settings
      log(
        `disk buffer ${path}: could not save the ledger before deleting segment ${seg.name}, every record of which was acknowledged (${(error as Error).message}); left on disk for a later open`,
      )
      return false
    }
  }

  /**
   * Deletes the file of a segment acknowledged whole and already out of the list. One that cannot
   * be deleted (a directory made read-only) is logged and left: this run never reads it again,
   * and a later open finds it below the acknowledged prefix (and deletes it once a segment
   * follows it). Its room counts as free, or an append waiting for room would wait for ever.
   */
  async #unlinkAcknowledged(seg: Segment): Promise<void> {
    const { fs, path, log } = this.#c.settings
    if (seg.shelters !== undefined) {
      this.#keptOnDisk = true
      log(
        `disk buffer ${path}: kept segment ${seg.name} on disk, though every record of it was acknowledged: ${seg.shelters}, left alone, is named inside its records, and without it the next open would take that file for a segment of this buffer (and delete it, or deliver its records). Move ${seg.shelters} out of the directory; a later open then deletes ${seg.name}`,
      )
      return
    }
    try {
      await fs.unlink(`${path}/${seg.name}`)
    } catch (error) {
      this.#keptOnDisk = true
      log(
        `disk buffer ${path}: could not delete segment ${seg.name}, every record of which was acknowledged (${(error as Error).message}); left on disk for a later open to delete`,
      )
    }
  }

  /**
   * Before the last segment `seg` is deleted while a segment acknowledged whole stays on disk
   * ({@link SegmentWriter.#keptOnDisk}): starts the next segment, named after the next record, as
   * a roll would. Deleted first, the kept segment would be the last on disk, its records ending
   * below the prefix the ledger saved, and every later open refused (`LEDGER_AHEAD`) unless a
   * segment was written after it. False (`seg` is left on disk, logged; its room counts free)
   * when the segment cannot be started.
   */
  async #nextSegmentFirst(seg: Segment): Promise<boolean> {
    if (!this.#keptOnDisk) return true
    try {
      await this.#roll(this.#nextSeq)
      return true
    } catch (error) {
      const { path, log } = this.#c.settings
      log(
        `disk buffer ${path}: could not start segment ${segmentName(this.#nextSeq)} (${(error as Error).message}); left segment ${seg.name}, every record of which was acknowledged, on disk, as a segment kept below it would otherwise be the last`,
      )
      return false
    }
  }

  /** When every record is acknowledged and a writer waits for room, the segment being written goes too. */
  reclaimActive(): void {
    const segments = this.#c.segments
    void this.serial(async () => {
      const seg = segments.at(-1)
      if (
        seg === undefined ||
        segments.length !== 1 ||
        seg.size === 0 ||
        this.#c.acks.below < this.#nextSeq ||
        this.#pending.length > 0
      ) {
        return
      }
      await this.groupSync()
      segments.pop()
      const file = this.#active
      this.#active = undefined
      await file?.close().catch(() => undefined)
      if ((await this.#nextSegmentFirst(seg)) && (await this.#ledgerSavedBelow(this.#nextSeq, seg))) {
        await this.#unlinkAcknowledged(seg)
      }
      this.#bytesOnDisk -= seg.size
      this.#c.changed()
      this.releaseWaiters()
    })
  }
}
