/**
 * A durable, segmented record queue on disk that knows nothing of events: byte payloads in,
 * sequence numbers out, acknowledgements in any order.
 *
 * Invariants:
 * - A record is never reported durable to its writer before it is: with `sync: 'always'` an
 *   append resolves only after the write and its fdatasync both succeeded; with group commit an
 *   append may resolve `written` before its write (write-behind), and its `durable` promise
 *   resolves only after the fsync that covers it (see {@link SyncPolicy} for what a crash loses).
 * - A record is deleted only once it, and every record before it in its segment, was
 *   acknowledged: the ledger keeps the contiguous acknowledged prefix, a segment is removed when
 *   the prefix passes its end, and after a crash everything from the first unacknowledged record
 *   on is read again (at-least-once; records acknowledged above a gap may come back too).
 * - A negatively acknowledged record is never deleted: `nack` redelivers it after a back-off,
 *   `deadLetter` moves it durably to the dead-letter queue before acknowledging it here.
 * - The sequence number of a durable record is never given to another record (the ledger keeps
 *   the next number); only a record lost before it was fsynced can see its number reused.
 *
 * Directory layout: `NNNNNNNNNNNNNNNNNNNN.seg` segment files named after their first sequence
 * number, `ledger.json`, `settings.json` (the settings that shape the files), `lock`, and
 * `dead-letter/` (a buffer of the same format).
 *
 * @module
 */
import { DiskBufferError } from './DiskBufferError.js'
import type { DiskBufferOptions } from './DiskBufferOptions.js'
import { AckLedger } from './internal/AckLedger.js'
import { DeadLetterSet } from './internal/DeadLetterSet.js'
import { DiskBufferHooks } from './internal/DiskBufferHooks.js'
import { type Settings, settle } from './internal/DiskBufferSettings.js'
import type { FileLike } from './internal/FileSystem.js'
import { type EncodedBatch, Frame } from './internal/Frame.js'
import { type Held, InFlightRecords } from './internal/InFlightRecords.js'
import { Ledger, type LedgerState } from './internal/Ledger.js'
import { LockFile } from './internal/LockFile.js'
import { ReadCursor } from './internal/ReadCursor.js'
import { Recovery } from './internal/Recovery.js'
import { type Segment, segmentName } from './internal/Segment.js'
import { SegmentReader } from './internal/SegmentReader.js'

/**
 * When written records are fsynced, and so what an append's answer means.
 *
 * - `'always'`: an append resolves only after its `writev` and the `fdatasync` after it both
 *   succeeded (appends waiting meanwhile share the next write and fsync); its `durable` promise is
 *   already resolved. Readers see a record only after that fsync. A process crash or a power
 *   loss loses no append that resolved `written`; an append that had not resolved may or may not
 *   be on disk (if it is, it is delivered: at-least-once).
 * - `{ everyMs, everyWrites }`: group commit, **write-behind**. While at most 4 MiB of appends
 *   wait to be written, an append resolves `written` at once, before its write (beyond that, after
 *   its write); a write that then fails resolves its `durable` promise `failed`. `durable`
 *   resolves `durable` after the first fsync that started after the write, run once `everyWrites`
 *   appends were written or `everyMs` passed, whichever comes first. Readers see a record once
 *   written, before its fsync.
 *   - A process crash loses the appends not yet written (at most 4 MiB); what was written is in
 *     the page cache and survives.
 *   - A power loss or kernel crash loses everything since the last completed fsync: those
 *     appends plus what was written since (at most `everyWrites` appends or `everyMs` of writes).
 *   - In both cases nothing whose `durable` resolved `durable` is lost, so a caller that
 *     acknowledges upstream on `durable` (the edge buffer's `'on-write'`) loses nothing
 *     acknowledged; a caller that trusts `written` alone may.
 */
export type SyncPolicy = 'always' | { readonly everyMs: number; readonly everyWrites: number }

/** Whether a written record reached the disk (`'failed'`: its fsync failed; it may be lost). */
export type DurableStatus = 'durable' | 'failed'

/** What an append reports. */
export type AppendResult =
  | {
      readonly status: 'written'
      /** The sequence number of the first record; the others follow without gaps. */
      readonly firstSeq: number
      readonly count: number
      /**
       * Resolves `durable` once the records are fsynced (already resolved under `'always'`), or
       * `failed` if their write or fsync failed (group commit answers before the write).
       */
      readonly durable: Promise<DurableStatus>
    }
  /** The buffer is at `maxBytes` and the append asked to be refused rather than wait. */
  | { readonly status: 'full' }
  /** The write failed (ENOSPC, EIO…) and was rolled back; nothing of it will be read. */
  | { readonly status: 'failed'; readonly error: DiskBufferError }

/** A record handed out by {@link DiskBuffer.read}. */
export interface StoredRecord {
  readonly seq: number
  readonly payload: Uint8Array
  /** How many times it was handed out before in this process (0 the first time). */
  readonly attempt: number
}

/** A record in the dead-letter queue. */
export interface DeadLetter {
  /** Its sequence number in the dead-letter queue. */
  readonly seq: number
  /** Its sequence number in the main queue when it was rejected. */
  readonly originalSeq: number
  readonly payload: Uint8Array
}

/** What replaying the dead letters did. */
export type ReplayResult =
  | { readonly status: 'replayed'; readonly count: number }
  | { readonly status: 'failed'; readonly error: DiskBufferError }

/** A snapshot of a buffer's counters. */
export interface DiskBufferMetrics {
  readonly segments: number
  readonly bytesOnDisk: number
  /** Records written and not acknowledged (including those handed out). */
  readonly unackedRecords: number
  readonly inFlight: number
  readonly retryPending: number
  /** Records written in this process run. */
  readonly written: number
  /** Records acknowledged in this process run. */
  readonly acked: number
  /** Negative acknowledgements (`nack`) in this process run: each is one redelivery. */
  readonly redeliveries: number
  /** Records in the dead-letter queue now. */
  readonly deadLettered: number
  /** Damaged regions skipped while reading (checksum failures), with their bytes. */
  readonly corruptRegions: number
  readonly corruptBytes: number
  /** Sequence numbers found missing (damaged or never fsynced before a crash). */
  readonly recordsLost: number
  /** Bytes of torn writes cut off the last segment when opening. */
  readonly tornBytesTruncated: number
  /** Appends and fsyncs that failed. */
  readonly writeFailures: number
  readonly syncFailures: number
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

interface Deferred<T> {
  readonly promise: Promise<T>
  readonly resolve: (value: T) => void
}

const deferred = <T>(): Deferred<T> => {
  let resolve!: (value: T) => void
  const promise = new Promise<T>((r) => {
    resolve = r
  })
  return { promise, resolve }
}

const DURABLE: Promise<DurableStatus> = Promise.resolve('durable')
/** With group commit, appends are answered before their write while at most this much waits to be written. */
const MAX_GROUP = 512 // appends per write: stays under IOV_MAX (1024) buffers per writev
const WRITE_BEHIND_BYTES = 4 * 1024 * 1024

/**
 * A durable record queue in a directory.
 *
 * @example
 * ```ts
 * const buffer = await DiskBuffer.open({ path: '/var/lib/ackline/http-out' })
 * const written = await buffer.append([Buffer.from('a'), Buffer.from('b')])
 * if (written.status === 'written') await written.durable // fsynced
 * const records = await buffer.read(100) // [{ seq, payload, attempt }, …]
 * for (const r of records ?? []) buffer.ack(r.seq) // in any order
 * await buffer.close()
 * ```
 */
export class DiskBuffer {
  /** The buffer's directory. */
  readonly path: string
  readonly #s: Settings
  /** `crashed`: abandoned by a simulated crash (tests only, through `DiskBufferHooks`); no file is touched again. */
  #state: 'open' | 'draining' | 'closed' | 'crashed' = 'open'
  readonly #segments: Segment[]
  #active: FileLike | undefined = undefined
  /** The next sequence number to write (everything below is in the files, or known missing). */
  #nextSeq: number
  /** The next sequence number to give an append (above `#nextSeq` while appends wait to be written). */
  #assigned: number
  /** Bytes of appends not written yet. */
  #unwritten = 0
  #visibleSeq: number
  readonly #acks: AckLedger
  #bytesOnDisk: number
  #reserved = 0
  // Every change to files goes through this one lane, so writes, fsyncs, rolls and deletions never interleave.
  #lane: Promise<unknown> = Promise.resolve()
  #pending: PendingAppend[] = []
  #writeScheduled = false
  #syncGeneration: Deferred<DurableStatus> | undefined = undefined
  /** The group-commit fsyncs in flight, in order; it never rejects. */
  #syncs: Promise<void> = Promise.resolve()
  #writesSinceSync = 0
  #syncTimer: NodeJS.Timeout | undefined = undefined
  #ledgerTimer: NodeJS.Timeout | undefined = undefined
  #ledgerDirty = false
  /** A checkpoint is queued on the lane (at most one at a time, whatever the acknowledgement rate). */
  #ledgerQueued = false
  readonly #cursor: ReadCursor
  #reading: Promise<unknown> = Promise.resolve()
  readonly #inFlight: InFlightRecords
  #wakeup: Deferred<void> = deferred()
  #spaceWaiters: (() => void)[] = []
  readonly #deadLetters: DiskBuffer | undefined
  /** Records of this queue found in the dead-letter queue at open: sequence number → frame checksum. */
  readonly #deadLettered: DeadLetterSet
  readonly #m = {
    written: 0,
    acked: 0,
    redeliveries: 0,
    corruptRegions: 0,
    corruptBytes: 0,
    recordsLost: 0,
    tornBytesTruncated: 0,
    writeFailures: 0,
    syncFailures: 0,
  }

  private constructor(
    s: Settings,
    init: {
      segments: Segment[]
      active: FileLike | undefined
      nextSeq: number
      ackedBelow: number
      tornBytes: number
      deadLetters: DiskBuffer | undefined
      deadLettered: DeadLetterSet
    },
  ) {
    this.#s = s
    this.path = s.path
    this.#segments = init.segments
    this.#active = init.active
    this.#nextSeq = init.nextSeq
    this.#assigned = init.nextSeq
    this.#visibleSeq = init.nextSeq
    this.#acks = new AckLedger(init.ackedBelow)
    this.#inFlight = new InFlightRecords({ initialMs: s.retryInitialMs, maxMs: s.retryMaxMs })
    this.#bytesOnDisk = init.segments.reduce((n, seg) => n + seg.size, 0)
    this.#deadLetters = init.deadLetters
    this.#deadLettered = init.deadLettered
    this.#m.tornBytesTruncated = init.tornBytes
    const start = init.segments.findLast((seg) => seg.firstSeq <= init.ackedBelow) ?? init.segments[0]
    this.#cursor = new ReadCursor(
      {
        settings: s,
        segments: this.#segments,
        visibleSeq: () => this.#visibleSeq,
        acks: this.#acks,
        deadLettered: this.#deadLettered,
        markAcked: (seq) => this.#markAcked(seq),
        counters: this.#m,
      },
      start,
      init.ackedBelow,
    )
  }

  /**
   * Opens (or creates) the buffer in `options.path`, recovering from whatever a crash left:
   * a torn last write is cut off, a missing or damaged ledger is rebuilt from the segments, a
   * leftover temporary ledger is discarded (the old ledger is used), a stale lock is taken over.
   * Throws a {@link DiskBufferError} `LOCKED` when a live process holds the directory.
   */
  static async open(options: DiskBufferOptions): Promise<DiskBuffer> {
    const s = settle(options.path, options)
    const { fs, path } = s
    try {
      await fs.mkdir(path)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code !== 'EEXIST' && code !== 'ENOTDIR') throw error
      throw new DiskBufferError(
        'NOT_A_DIRECTORY',
        `${path} is not a directory (it, or a directory above it, is a file): give the buffer a path of its own`,
        path,
        'path',
        { cause: error },
      )
    }
    if (s.lock) {
      const { tookOverFrom } = await LockFile.acquire(fs, path)
      if (tookOverFrom !== undefined) {
        s.log(
          `disk buffer ${path}: took over the stale lock of process ${tookOverFrom.pid} on ${tookOverFrom.hostname}`,
        )
      }
    }
    try {
      return await DiskBuffer.#recover(s)
    } catch (error) {
      if (s.lock) await LockFile.release(fs, path)
      throw error
    }
  }

  static async #recover(settings: Settings): Promise<DiskBuffer> {
    const recovered = await Recovery.run(settings)
    const { settings: s, segments, active, nextSeq, ackedBelow, tornBytes } = recovered
    const { path } = s
    let deadLetters: DiskBuffer | undefined
    const deadLettered = new DeadLetterSet()
    if (s.deadLetters) {
      deadLetters = await DiskBuffer.open({
        path: `${path}/${DeadLetterSet.DIR}`,
        segmentBytes: s.segmentBytes,
        maxBytes: Number.MAX_SAFE_INTEGER,
        sync: 'always',
        log: s.log,
        fileSystem: s.fs,
        deadLetters: false,
        lock: false,
      })
      for await (const letter of deadLetters.deadLetterEntries()) {
        if (letter.originalSeq >= ackedBelow) deadLettered.add(letter.originalSeq, letter.crc)
      }
    }
    const buffer = new DiskBuffer(s, {
      segments,
      active,
      nextSeq,
      ackedBelow,
      tornBytes,
      deadLetters,
      deadLettered,
    })
    // Segments wholly below the acknowledged prefix: a crash came between the ledger and the delete.
    buffer.#releaseSegments()
    if (!recovered.ledgerOk) await buffer.checkpoint()
    return buffer
  }

  /** The largest payload a record may have: a segment minus the frame header. */
  get maxRecordBytes(): number {
    return this.#s.segmentBytes - Frame.HEADER_BYTES
  }

  /** The contiguous acknowledged prefix: every record below this sequence number was acknowledged. */
  get ackedBelow(): number {
    return this.#acks.below
  }

  /** The sequence number the next record will get. */
  get nextSeq(): number {
    return this.#assigned
  }

  /**
   * Appends records, in order. Waits while the buffer is at `maxBytes` (or, with
   * `whenFull: 'refuse'`, reports `full` at once). A write failure is reported as `failed` and
   * rolled back. Throws a {@link DiskBufferError} `RECORD_TOO_LARGE` for a payload over
   * {@link DiskBuffer.maxRecordBytes} and `CLOSED` after `close()` or `endWrites()`.
   */
  async append(
    payloads: readonly Uint8Array[],
    options: { readonly whenFull?: 'wait' | 'refuse' } = {},
  ): Promise<AppendResult> {
    if (this.#state !== 'open') throw new DiskBufferError('CLOSED', 'append after close', this.path)
    let bytes = 0
    for (const payload of payloads) {
      if (payload.length > this.maxRecordBytes) {
        throw new DiskBufferError(
          'RECORD_TOO_LARGE',
          `a record of ${payload.length} bytes does not fit a segment of ${this.#s.segmentBytes} bytes`,
          this.path,
          'segmentBytes',
        )
      }
      bytes += Frame.size(payload.length)
    }
    if (payloads.length === 0)
      return { status: 'written', firstSeq: this.#assigned, count: 0, durable: DURABLE }
    while (!this.#hasRoom(bytes)) {
      if (options.whenFull === 'refuse') return { status: 'full' }
      this.#reclaimActive()
      await new Promise<void>((resolve) => this.#spaceWaiters.push(resolve))
      if (this.#state !== 'open') {
        return {
          status: 'failed',
          error: new DiskBufferError('CLOSED', 'closed while waiting for space', this.path),
        }
      }
    }
    this.#reserved += bytes
    const firstSeq = this.#assigned
    this.#assigned += payloads.length
    // Group commit writes behind: the caller goes on while earlier appends are being written, so
    // encoding and writing overlap and waiting appends share one write. What matters (durable)
    // still resolves only after the fsync; a process crash loses only what nobody was told is durable.
    const early = this.#s.sync !== 'always' && this.#unwritten + bytes <= WRITE_BEHIND_BYTES
    this.#unwritten += bytes
    const encoded = Frame.encode(payloads, firstSeq)
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
   * Up to `max` records to deliver: records whose redelivery back-off has passed first, then new
   * ones in order. Waits until there is one. Resolves `undefined` once the buffer is closed, or
   * after `endWrites()` once every record was read and none is in flight, or when `signal` aborts.
   * With `wait: false` it resolves `[]` at once instead of waiting. Each record must be settled
   * with `ack`, `nack` or `deadLetter`.
   */
  read(
    max = 1000,
    options: { readonly signal?: AbortSignal | undefined; readonly wait?: boolean | undefined } = {},
  ): Promise<StoredRecord[] | undefined> {
    // One reader at a time: the cursor is shared.
    const next = this.#reading.then(() => this.#read(max, options.signal, options.wait !== false))
    this.#reading = next.catch(() => undefined)
    return next
  }

  async #read(
    max: number,
    signal: AbortSignal | undefined,
    wait: boolean,
  ): Promise<StoredRecord[] | undefined> {
    const onAbort = (): void => this.#wake()
    signal?.addEventListener('abort', onAbort)
    try {
      for (;;) {
        if (this.#state === 'closed' || this.#state === 'crashed' || signal?.aborted === true)
          return undefined
        const wakeup = this.#wakeup.promise
        const out: StoredRecord[] = []
        const held: Held[] = []
        if (this.#inFlight.retryPending > 0) this.#inFlight.takeDue(Date.now(), max, out, held)
        const room = Math.min(max - out.length, this.#s.maxInFlight - this.#inFlight.size - out.length)
        if (room > 0) await this.#cursor.read(room, out, held)
        if (out.length > 0) {
          this.#inFlight.hold(out, held)
          return out
        }
        // Drained: every append written (none still behind the write lane), read, and settled.
        if (
          this.#state === 'draining' &&
          this.#assigned <= this.#visibleSeq &&
          this.#cursor.caughtUp() &&
          this.#inFlight.size === 0
        ) {
          return undefined
        }
        if (!wait) return []
        let timer: NodeJS.Timeout | undefined
        const due = this.#inFlight.nextDueAt()
        if (due !== undefined) timer = setTimeout(() => this.#wake(), Math.max(0, due - Date.now()))
        await wakeup
        if (timer !== undefined) clearTimeout(timer)
      }
    } finally {
      signal?.removeEventListener('abort', onAbort)
    }
  }

  /** Acknowledges a record: it will not be read again, and its segment may go. Idempotent. */
  ack(seq: number): void {
    if (seq >= this.#nextSeq || this.#acks.has(seq)) return
    // A reader held back by maxInFlight may go on once one record is settled.
    if (this.#inFlight.settle(seq) && this.#inFlight.size + 1 >= this.#s.maxInFlight) this.#wake()
    this.#m.acked++
    this.#markAcked(seq)
  }

  /**
   * Negative acknowledgement: the sink failed and may succeed later. The record stays on disk and
   * is handed out again after a back-off that doubles with each attempt.
   */
  nack(seq: number): void {
    if (!this.#inFlight.nack(seq, Date.now())) return
    this.#m.redeliveries++
    this.#wake()
  }

  /**
   * The sink rejected the record for good: it is written (fsynced) to the dead-letter queue, then
   * acknowledged here, and never handed out again, not even after a crash in between. Reports
   * `failed` (and leaves the record in flight, to be settled again) if the dead-letter write failed.
   */
  async deadLetter(seq: number): Promise<'dead-lettered' | 'unknown' | 'failed'> {
    const held = this.#inFlight.get(seq)
    if (held === undefined) return 'unknown'
    const queue = this.#deadLetters
    if (queue === undefined) {
      throw new DiskBufferError(
        'INVALID_OPTION',
        'this buffer has no dead-letter queue',
        this.path,
        'deadLetters',
      )
    }
    const written = await queue.append([DeadLetterSet.encode(seq, held.crc, held.payload)])
    if (written.status !== 'written' || (await written.durable) !== 'durable') {
      this.#s.log(`disk buffer ${this.path}: could not dead-letter record ${seq}; it stays in the queue`)
      return 'failed'
    }
    this.ack(seq)
    return 'dead-lettered'
  }

  /** Every record in the dead-letter queue, oldest first, without removing any. */
  async *deadLetters(): AsyncGenerator<DeadLetter> {
    for await (const letter of this.#deadLetters?.deadLetterEntries() ?? []) {
      yield { seq: letter.seq, originalSeq: letter.originalSeq, payload: letter.payload }
    }
  }

  /** @internal The dead-letter records of this (dead-letter) buffer, decoded. */
  async *deadLetterEntries(): AsyncGenerator<DeadLetter & { readonly crc: number }> {
    for await (const record of this.scan()) {
      const letter = DeadLetterSet.decode(record)
      if (letter !== undefined) yield letter
    }
  }

  /**
   * Moves every dead letter back into the queue (as new records, fsynced), then empties the
   * dead-letter queue. A crash in between may leave a record in both (at-least-once).
   */
  async replayDeadLetters(): Promise<ReplayResult> {
    const queue = this.#deadLetters
    if (queue === undefined) return { status: 'replayed', count: 0 }
    let batch: Uint8Array[] = []
    let count = 0
    const flush = async (): Promise<DiskBufferError | undefined> => {
      if (batch.length === 0) return undefined
      const written = await this.append(batch)
      batch = []
      if (written.status === 'failed') return written.error
      if (written.status === 'written' && (await written.durable) !== 'durable') {
        return new DiskBufferError('WRITE_FAILED', 'fsync failed while replaying dead letters', this.path)
      }
      return undefined
    }
    for await (const letter of this.deadLetters()) {
      batch.push(letter.payload)
      count++
      if (batch.length >= 1000) {
        const error = await flush()
        if (error !== undefined) return { status: 'failed', error }
      }
    }
    const error = await flush()
    if (error !== undefined) return { status: 'failed', error }
    await this.checkpoint()
    await queue.#discardAll()
    return { status: 'replayed', count }
  }

  /**
   * Every record not yet acknowledged, in order, without handing any out (for inspection). Reads
   * what was written when it started.
   */
  async *scan(): AsyncGenerator<StoredRecord & { readonly crc: number }> {
    const segments = this.#segments.map((seg) => ({ name: seg.name, end: seg.visible }))
    for (const seg of segments) {
      let file: FileLike
      try {
        file = await this.#s.fs.open(`${this.path}/${seg.name}`, 'read')
      } catch {
        continue // deleted meanwhile: acknowledged
      }
      try {
        const reader = new SegmentReader(file, {
          start: 0,
          end: seg.end,
          maxPayload: Math.max(this.#s.segmentBytes, seg.end),
        })
        for (;;) {
          const items = await reader.read(1024)
          if (items.length === 0) break
          for (const item of items) {
            if (item.kind !== 'record') continue
            if (this.#acks.has(item.seq)) continue
            yield { seq: item.seq, payload: item.payload, attempt: 0, crc: item.crc }
          }
        }
      } finally {
        await file.close()
      }
    }
  }

  /** Writes the ledger now (it is otherwise written `ledgerIntervalMs` after an acknowledgement, after `ledgerEveryAcks` of them, and on close). */
  checkpoint(): Promise<void> {
    return this.#serial(() => this.#writeLedger())
  }

  /** Fsyncs now whatever was written (with group commit; a no-op under `'always'`). */
  flush(): Promise<void> {
    return this.#serial(() => this.#groupSync())
  }

  /** No more appends; `read` hands out what is left, then resolves `undefined`. */
  endWrites(): void {
    if (this.#state === 'open') this.#state = 'draining'
    this.#wake()
  }

  /**
   * Finishes pending writes, fsyncs, writes the ledger, closes the files and releases the lock.
   * Records not acknowledged stay on disk for the next open. Closing twice is harmless.
   */
  async close(): Promise<void> {
    if (this.#state === 'closed' || this.#state === 'crashed') return
    this.#state = 'closed'
    this.#wake()
    for (const waiter of this.#spaceWaiters.splice(0)) waiter()
    await this.#serial(async () => {
      this.#clearTimers()
      await this.#groupSync()
      await this.#writeLedger()
      await this.#active?.close()
      this.#active = undefined
      await this.#cursor.close()
    })
    await this.#deadLetters?.close()
    if (this.#s.lock) await LockFile.release(this.#s.fs, this.path)
  }

  static {
    // The crash hook is reachable only through the test factory (internal/CrashableDiskBuffer.ts).
    DiskBufferHooks.register({ abandon: (buffer) => buffer.#abandon() })
  }

  /** Stops everything without writing anything, as a crash would (tests only, through the hook). */
  #abandon(): void {
    this.#state = 'crashed'
    this.#clearTimers()
    this.#wake()
    if (this.#deadLetters !== undefined) this.#deadLetters.#abandon()
    if (this.#s.lock) LockFile.abandon(this.#s.fs, this.path)
  }

  /** A snapshot of the counters. */
  metrics(): DiskBufferMetrics {
    const dl = this.#deadLetters
    return {
      segments: this.#segments.length,
      bytesOnDisk: this.#bytesOnDisk,
      unackedRecords: this.#nextSeq - this.#acks.below - this.#acks.aboveCount,
      inFlight: this.#inFlight.size,
      retryPending: this.#inFlight.retryPending,
      ...this.#m,
      deadLettered: dl === undefined ? 0 : dl.#nextSeq - dl.#acks.below - dl.#acks.aboveCount,
    }
  }

  // ——— writing ———

  #serial<T>(job: () => Promise<T>): Promise<T> {
    const run = this.#lane.then(() => (this.#state === 'crashed' ? (undefined as T) : job()))
    this.#lane = run.catch(() => undefined)
    return run
  }

  #hasRoom(bytes: number): boolean {
    const used = this.#bytesOnDisk + this.#reserved
    return used === 0 || used + bytes <= this.#s.maxBytes
  }

  #scheduleWrite(): void {
    if (this.#writeScheduled) return
    this.#writeScheduled = true
    void this.#serial(() => this.#writeGroup())
  }

  async #writeGroup(): Promise<void> {
    const group = this.#pending.splice(0, MAX_GROUP)
    this.#writeScheduled = false
    if (this.#pending.length > 0) this.#scheduleWrite()
    if (group.length === 0 || this.#state === 'crashed') return
    const count = group.reduce((n, p) => n + p.count, 0)
    const groupBytes = group.reduce((n, p) => n + p.bytes, 0)
    const firstSeq = group[0]!.firstSeq
    this.#nextSeq = firstSeq
    const before = { segments: this.#segments.length, activeSize: this.#segments.at(-1)?.size ?? 0 }
    const touched: Segment[] = []
    try {
      // Gather the frames into one writev per segment; a record never spans two segments.
      let seg = this.#segments.at(-1)
      let iov: Buffer[] = []
      let queued = 0
      let seq = firstSeq
      const flush = async (): Promise<void> => {
        if (queued === 0) return
        await this.#active!.writev(iov, seg!.size)
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
            (seg.size + waiting > 0 && seg.size + waiting + end - pos > this.#s.segmentBytes)
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
      if (this.#s.sync === 'always') await this.#active!.datasync()
    } catch (error) {
      this.#reserved -= groupBytes
      this.#unwritten -= groupBytes
      this.#m.writeFailures++
      await this.#rollback(before, firstSeq, count)
      const code = (error as NodeJS.ErrnoException).code === 'ENOSPC' ? 'NO_SPACE' : 'WRITE_FAILED'
      const failure = new DiskBufferError(
        code,
        `writing ${count} record(s) failed (${(error as Error).message}); rolled back`,
        this.path,
        undefined,
        { cause: error },
      )
      this.#s.log(failure.message)
      for (const p of group) {
        if (p.durable !== undefined) p.durable.resolve('failed')
        else p.resolve({ status: 'failed', error: failure })
      }
      this.#wake()
      return
    }
    this.#reserved -= groupBytes
    this.#unwritten -= groupBytes
    for (const seg of touched) seg.visible = seg.size
    this.#visibleSeq = this.#nextSeq
    this.#m.written += count
    this.#ledgerDirty = true
    const durable = this.#s.sync === 'always' ? DURABLE : this.#durablePromise()
    for (const p of group) {
      if (p.durable !== undefined) void durable.then(p.durable.resolve)
      else p.resolve({ status: 'written', firstSeq: p.firstSeq, count: p.count, durable })
    }
    this.#wake()
    const policy = this.#s.sync
    if (policy !== 'always') {
      this.#writesSinceSync += group.length
      if (this.#writesSinceSync >= policy.everyWrites) void this.#groupSync()
      else if (this.#syncTimer === undefined) {
        this.#syncTimer = setTimeout(() => {
          this.#syncTimer = undefined
          void this.#serial(async () => {
            void this.#groupSync()
          })
        }, policy.everyMs)
        this.#syncTimer.unref()
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
  #groupSync(): Promise<void> {
    const generation = this.#syncGeneration
    this.#syncGeneration = undefined
    this.#writesSinceSync = 0
    if (this.#syncTimer !== undefined) {
      clearTimeout(this.#syncTimer)
      this.#syncTimer = undefined
    }
    if (generation === undefined) return this.#syncs
    const file = this.#active
    this.#syncs = this.#syncs.then(async () => {
      try {
        if (file === undefined)
          throw new DiskBufferError('WRITE_FAILED', 'no segment open for writing', this.path)
        await file.datasync()
        generation.resolve('durable')
      } catch (error) {
        this.#m.syncFailures++
        this.#s.log(
          `disk buffer ${this.path}: fsync failed (${(error as Error).message}); records may be lost`,
        )
        generation.resolve('failed')
      }
    })
    return this.#syncs
  }

  async #roll(firstSeq: number): Promise<Segment> {
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
    const file = await this.#s.fs.open(`${this.path}/${name}`, 'append')
    const segment: Segment = { firstSeq, name, size: 0, visible: 0, sealed: false }
    this.#segments.push(segment)
    this.#active = file
    this.#ledgerDirty = true
    await this.#s.fs.syncDir(this.path)
    return segment
  }

  /** Undoes a failed write group: removes the segments it created, cuts the one it appended to. */
  async #rollback(
    before: { segments: number; activeSize: number },
    firstSeq: number,
    count: number,
  ): Promise<void> {
    const { fs, path } = this.#s
    await this.#syncs
    try {
      while (this.#segments.length > before.segments) {
        const seg = this.#segments.pop()!
        this.#bytesOnDisk -= seg.size
        await this.#active?.close().catch(() => undefined)
        this.#active = undefined
        await fs.unlink(`${path}/${seg.name}`)
      }
      const last = this.#segments.at(-1)
      if (last !== undefined) {
        this.#active ??= await fs.open(`${path}/${last.name}`, 'append')
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
      // The tail is unknown: seal the segment and never reuse the numbers it may hold.
      const last = this.#segments.at(-1)
      if (last !== undefined) last.sealed = true
      await this.#active?.close().catch(() => undefined)
      this.#active = undefined
      this.#s.log(`disk buffer ${path}: rollback failed (${(error as Error).message}); segment sealed`)
    }
    // Later appends already hold the following numbers: skip these, as acknowledged (they never existed).
    this.#nextSeq = firstSeq + count
    this.#visibleSeq = this.#nextSeq
    for (let seq = firstSeq; seq < firstSeq + count; seq++) if (seq >= this.#acks.below) this.#markAcked(seq)
  }

  // ——— acknowledging and freeing space ———

  #markAcked(seq: number): void {
    if (!this.#acks.mark(seq)) return
    this.#ledgerDirty = true
    if (this.#acks.unsaved >= this.#s.ledgerEveryAcks) this.#checkpointSoon()
    else this.#scheduleLedger()
    this.#releaseSegments()
    if (this.#spaceWaiters.length > 0) this.#reclaimActive()
    if (this.#state === 'draining') this.#wake()
  }

  /** Deletes every segment all of whose records are acknowledged (never the one being written). */
  #releaseSegments(): void {
    while (this.#segments.length > 1 && this.#segments[1]!.firstSeq <= this.#acks.below) {
      const seg = this.#segments.shift()!
      this.#ledgerDirty = true
      void this.#serial(async () => {
        await this.#s.fs.unlink(`${this.path}/${seg.name}`)
        this.#bytesOnDisk -= seg.size
        this.#spaceFreed()
      })
    }
  }

  /** When every record is acknowledged and a writer waits for room, the segment being written goes too. */
  #reclaimActive(): void {
    void this.#serial(async () => {
      const seg = this.#segments.at(-1)
      if (
        seg === undefined ||
        this.#segments.length !== 1 ||
        seg.size === 0 ||
        this.#acks.below < this.#nextSeq ||
        this.#pending.length > 0
      ) {
        return
      }
      await this.#groupSync()
      this.#segments.pop()
      await this.#active?.close()
      this.#active = undefined
      await this.#s.fs.unlink(`${this.path}/${seg.name}`)
      this.#bytesOnDisk -= seg.size
      this.#ledgerDirty = true
      this.#spaceFreed()
    })
  }

  async #discardAll(): Promise<void> {
    await this.#serial(async () => {
      this.#inFlight.clear()
      this.#acks.reset(this.#nextSeq)
      await this.#groupSync()
      await this.#active?.close()
      this.#active = undefined
      await this.#cursor.close()
      for (const seg of this.#segments.splice(0)) await this.#s.fs.unlink(`${this.path}/${seg.name}`)
      this.#bytesOnDisk = 0
      this.#cursor.restart(this.#nextSeq)
      await this.#writeLedger()
    })
  }

  #spaceFreed(): void {
    for (const waiter of this.#spaceWaiters.splice(0)) waiter()
  }

  #scheduleLedger(): void {
    if (this.#ledgerTimer !== undefined || this.#ledgerQueued) return
    if (this.#state === 'closed' || this.#state === 'crashed') return
    this.#ledgerTimer = setTimeout(() => {
      this.#ledgerTimer = undefined
      this.#checkpointSoon()
    }, this.#s.ledgerIntervalMs)
    this.#ledgerTimer.unref()
  }

  /** Queues one checkpoint on the lane, unless one is queued already (it will save the latest state). */
  #checkpointSoon(): void {
    if (this.#ledgerQueued || this.#state === 'closed' || this.#state === 'crashed') return
    if (this.#ledgerTimer !== undefined) clearTimeout(this.#ledgerTimer)
    this.#ledgerTimer = undefined
    this.#ledgerQueued = true
    void this.#serial(async () => {
      this.#ledgerQueued = false
      if (this.#ledgerDirty) await this.#writeLedger()
    }).catch((error: Error) =>
      this.#s.log(`disk buffer ${this.path}: ledger checkpoint failed (${error.message})`),
    )
  }

  async #writeLedger(): Promise<void> {
    // Never checkpoint an acknowledged position above what is durable: on open, a ledger ahead
    // of the data is taken for a ledger of other data (LEDGER_AHEAD).
    await this.#groupSync()
    const state: LedgerState = {
      nextSeq: this.#nextSeq,
      ackedBelow: this.#acks.below,
      segments: this.#segments.map((seg) => seg.firstSeq),
    }
    await Ledger.write(this.#s.fs, this.path, state)
    this.#acks.saved(state.ackedBelow)
    this.#ledgerDirty = false
  }

  #clearTimers(): void {
    if (this.#syncTimer !== undefined) clearTimeout(this.#syncTimer)
    if (this.#ledgerTimer !== undefined) clearTimeout(this.#ledgerTimer)
    this.#syncTimer = undefined
    this.#ledgerTimer = undefined
  }

  // ——— reading ———

  #wake(): void {
    const wakeup = this.#wakeup
    this.#wakeup = deferred()
    wakeup.resolve()
  }
}
