/**
 * A durable, segmented record queue on disk that knows nothing of events: byte payloads in,
 * sequence numbers out, acknowledgements in any order.
 *
 * Invariants:
 * - A record is never reported durable to its writer before it is: with `sync: 'always'` an
 *   append resolves only after its write is durable (on Linux the segment is opened `O_DSYNC`,
 *   so the write is its own fdatasync; elsewhere an fdatasync follows it); with group commit an
 *   append may resolve `written` before its write (write-behind), and its `durable` promise
 *   resolves only after the fsync that covers it (see {@link SyncPolicy} for what a crash loses).
 * - A record is deleted only once it, and every record before it in its segment, was
 *   acknowledged: the ledger keeps the contiguous acknowledged prefix, a segment is removed when
 *   the prefix passes its end (once a checkpoint saved that), and after a crash everything from the first unacknowledged record
 *   on is read again (at-least-once; records acknowledged above a gap may come back too).
 * - A negatively acknowledged record is never deleted: `nack` redelivers it after a back-off,
 *   `deadLetter` moves it durably to the dead-letter queue before acknowledging it here.
 * - The sequence number of a durable record is never given to another record (the ledger keeps
 *   the next number, and a segment, the buffer's last one too, is deleted only after a checkpoint
 *   saved the prefix past it); only a record lost before it was fsynced can see its number
 *   reused. A dead letter is matched on open only below the next number, so a number given again
 *   never takes a record for dead-lettered.
 *
 * Directory layout: `NNNNNNNNNNNNNNNNNNNN.seg` segment files named after their first sequence
 * number, `ledger.json`, `settings.json` (the settings that shape the files), `lock`, and
 * `dead-letter/` (a buffer of the same format).
 *
 * @module
 */
import { MAX_TIMER_MS } from '@ackline/topology'
import { DiskBufferError } from './DiskBufferError.js'
import type { DiskBufferOptions } from './DiskBufferOptions.js'
import { BufferParts, type BufferRemains, type BufferStart } from './internal/BufferParts.js'
import { DeadLetterSet } from './internal/DeadLetterSet.js'
import { DiskBufferHooks } from './internal/DiskBufferHooks.js'
import { type Settings, settle } from './internal/DiskBufferSettings.js'
import {
  type DiskBufferEvent,
  type DiskBufferState,
  liveOf,
  opened,
  remainsOf,
  transition,
} from './internal/DiskBufferState.js'
import type { FileLike } from './internal/FileSystem.js'
import { Frame } from './internal/Frame.js'
import type { Held } from './internal/InFlightRecords.js'
import { LockFile } from './internal/LockFile.js'
import { Recovery } from './internal/Recovery.js'
import { SegmentReader } from './internal/SegmentReader.js'
import { DURABLE } from './internal/SegmentWriter.js'

/**
 * When written records are fsynced, and so what an append's answer means.
 *
 * - `'always'`: an append resolves only after its `writev` is durable: on Linux segments are
 *   opened `O_DSYNC`, so the write returns once its data is on disk, as a write and an
 *   `fdatasync` would; elsewhere an `fdatasync` follows the write (on macOS an `O_DSYNC` write
 *   does not flush the drive's cache, its `fdatasync` does); appends waiting meanwhile share the
 *   next write. Its `durable` promise is already resolved. Readers see a record only
 *   once durable. A process crash or a power
 *   loss loses no append that resolved `written`; an append that had not resolved may or may not
 *   be on disk (if it is, it is delivered: at-least-once).
 * - `{ everyMs, everyWrites }`: group commit, **write-behind**. While at most 4 MiB of appends
 *   wait to be written, an append resolves `written` at once, before its write (beyond that, after
 *   its write); a write that then fails resolves its `durable` promise `failed`. `durable`
 *   resolves `durable` after the first fsync that started after the write, run once `everyWrites`
 *   appends were written or `everyMs` passed, whichever comes first; that fsync's timer holds the
 *   process open (a program whose only work is to await `durable` is answered, not ended before
 *   it). Readers see a record once written, before its fsync.
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
  /** Its sequence number: what `ack`, `nack` and `reject` take. */
  readonly seq: number
  /** The bytes appended, as they were given. */
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
  /** The bytes appended, as they were given. */
  readonly payload: Uint8Array
}

/** What replaying the dead letters did. */
export type ReplayResult =
  | { readonly status: 'replayed'; readonly count: number }
  | { readonly status: 'failed'; readonly error: DiskBufferError }

/** A snapshot of a buffer's counters. */
export interface DiskBufferMetrics {
  /** Segment files of the main queue now. */
  readonly segments: number
  /** Bytes of the main queue's segment files now. */
  readonly bytesOnDisk: number
  /** Records written and not acknowledged (including those handed out). */
  readonly unackedRecords: number
  /** Records handed out by `read` and not yet acknowledged, nacked or rejected. */
  readonly inFlight: number
  /** Nacked records waiting for their back-off to pass before they are handed out again. */
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
  /** Bytes of the damaged regions counted in `corruptRegions`. */
  readonly corruptBytes: number
  /** Sequence numbers found missing (damaged or never fsynced before a crash). */
  readonly recordsLost: number
  /** Bytes of torn writes cut off the last segment when opening. */
  readonly tornBytesTruncated: number
  /** Appends and fsyncs that failed. */
  readonly writeFailures: number
  /** Fsyncs of group commit (write-behind) that failed after their appends resolved: their records may be lost (their `durable` resolved `failed`). */
  readonly syncFailures: number
}

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
  /**
   * Where the buffer is in its life, with its live parts while open or draining. Changed only by
   * {@link DiskBuffer.#dispatch}: what each call may do in each state is in `internal/DiskBufferState`.
   */
  #state: DiskBufferState<BufferParts, BufferRemains>
  readonly #deadLetters: DiskBuffer | undefined
  /** The directory as the lock names it ({@link LockFile.canonical}); set by `open`. */
  #lockDir: string
  /** The first `close()`, which every later call waits for. */
  #closing: Promise<void> | undefined = undefined
  /** The last replay of the dead letters (one at a time); it never rejects. */
  #replaying: Promise<unknown> = Promise.resolve()

  private constructor(start: BufferStart, deadLetters: DiskBuffer | undefined) {
    this.#s = start.settings
    this.path = start.settings.path
    this.#lockDir = start.settings.path
    this.#deadLetters = deadLetters
    this.#state = opened(new BufferParts(start, () => this.#state.kind))
  }

  /**
   * Opens (or creates) the buffer in `options.path`, recovering from whatever a crash left:
   * a torn last write is cut off, a missing or damaged ledger is rebuilt from the segments, a
   * leftover temporary ledger is discarded (the old ledger is used), a stale lock is taken over.
   * Throws a {@link DiskBufferError} `LOCKED` when a live process holds the directory.
   */
  static async open(options: DiskBufferOptions): Promise<DiskBuffer> {
    // Untyped code may pass no options at all: `settle` names that, not a TypeError.
    const s = settle(options?.path, options)
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
    // The lock's name for the directory: one for every spelling of it, a symbolic link included.
    const lockDir = s.lock ? await LockFile.canonical(fs, path) : path
    if (s.lock) {
      const { tookOverFrom } = await LockFile.acquire(fs, lockDir)
      if (tookOverFrom !== undefined) {
        s.log(
          `disk buffer ${path}: took over the stale lock of process ${tookOverFrom.pid} on ${tookOverFrom.hostname}`,
        )
      }
    }
    try {
      return await DiskBuffer.#recover(s, lockDir)
    } catch (error) {
      if (s.lock) await LockFile.release(fs, lockDir)
      throw error
    }
  }

  /** Recovers the directory and opens its parts; whatever it opened is closed again if it fails. */
  static async #recover(settings: Settings, lockDir: string): Promise<DiskBuffer> {
    const recovered = await Recovery.run(settings)
    const s = recovered.settings
    let deadLetters: DiskBuffer | undefined
    const deadLettered = new DeadLetterSet()
    try {
      if (s.deadLetters) {
        deadLetters = await DiskBuffer.open({
          path: `${s.path}/${DeadLetterSet.DIR}`,
          segmentBytes: s.segmentBytes,
          maxBytes: Number.MAX_SAFE_INTEGER,
          sync: 'always',
          log: s.log,
          fileSystem: s.fs,
          deadLetters: false,
          lock: false,
        })
        for await (const letter of deadLetters.deadLetterEntries()) {
          // Only a record on disk now (numbered below nextSeq) can be one dead-lettered before a
          // crash. A letter at or above nextSeq names a record the crash took (written and never
          // fsynced, or its segment deleted before the ledger saved nextSeq): its number is given
          // again in this run, and a replay of that very letter would get it, checksum and all.
          const { originalSeq } = letter
          if (originalSeq >= recovered.ackedBelow && originalSeq < recovered.nextSeq) {
            deadLettered.add(originalSeq, letter.crc)
          }
        }
      }
    } catch (error) {
      await recovered.active?.close().catch(() => undefined)
      await deadLetters?.close().catch(() => undefined)
      throw error
    }
    const buffer = new DiskBuffer({ ...recovered, deadLettered }, deadLetters)
    buffer.#lockDir = lockDir
    try {
      if (!recovered.ledgerOk) await buffer.checkpoint()
    } catch (error) {
      // Its files (and those of its dead-letter queue) are closed; the lock goes with the open that failed.
      await buffer.close().catch(() => undefined)
      throw error
    }
    return buffer
  }

  /**
   * The largest payload a record may have: a segment minus the frame header, and at most what a
   * frame's 32-bit length can say (2^32 − 1 bytes, with segments over 4 GiB) less, with a
   * dead-letter queue (the default), the 12 bytes its dead letter adds: 2^32 − 13 bytes, so
   * every record taken can be dead-lettered.
   */
  get maxRecordBytes(): number {
    return Math.min(this.#s.segmentBytes - Frame.HEADER_BYTES, this.#maxFramed)
  }

  /** The longest payload a frame of this queue takes: room left for a dead letter's header. */
  get #maxFramed(): number {
    return Frame.MAX_PAYLOAD_BYTES - (this.#s.deadLetters ? DeadLetterSet.HEADER_BYTES : 0)
  }

  /** The contiguous acknowledged prefix: every record below this sequence number was acknowledged. */
  get ackedBelow(): number {
    return remainsOf(this.#state).ackedBelow
  }

  /** The sequence number the next record will get. */
  get nextSeq(): number {
    return remainsOf(this.#state).nextSeq
  }

  /**
   * Appends records, in order. A payload is bytes, or a string, stored as its UTF-8 encoding (read
   * back as those bytes); a string is encoded straight into the record's frame, without a buffer
   * of its own. Waits while the buffer is at `maxBytes` (or, with `whenFull: 'refuse'`, reports
   * `full` at once). A write failure is reported as `failed` and rolled back. Throws a
   * {@link DiskBufferError} `RECORD_TOO_LARGE` for a payload over {@link DiskBuffer.maxRecordBytes}
   * bytes, `CLOSED` after `close()` or `endWrites()` and `SEQUENCE_EXHAUSTED` when numbering the
   * records would pass 2^53 − 1 (only foreign files bring a buffer there), and a `TypeError` for
   * payloads that are not an array, or a payload that is neither bytes (a `Uint8Array`) nor a
   * string, storing none of them. The payloads must not change until the append resolves: one whose length changed while it waited for room is
   * refused with a `RangeError`, and nothing of that append is stored.
   */
  append(
    payloads: readonly (Uint8Array | string)[],
    options: { readonly whenFull?: 'wait' | 'refuse' } = {},
  ): Promise<AppendResult> {
    return this.#append(payloads, options.whenFull, this.maxRecordBytes)
  }

  /** {@link DiskBuffer.append}, refusing payloads over `maxRecord` bytes. */
  async #append(
    payloads: readonly (Uint8Array | string)[],
    whenFull: 'wait' | 'refuse' | undefined,
    maxRecord: number,
  ): Promise<AppendResult> {
    const state = this.#state
    if (state.kind !== 'open') throw new DiskBufferError('CLOSED', 'append after close', this.path)
    const { writer } = state.live
    // From untyped code: a string was stored as one record per character.
    if (!Array.isArray(payloads)) {
      throw new TypeError(
        `disk buffer ${this.path}: append's payloads must be an array, got ${Object.prototype.toString.call(payloads)}`,
      )
    }
    let bytes = 0
    const lengths = new Array<number>(payloads.length)
    for (let i = 0; i < payloads.length; i++) {
      const payload = payloads[i]!
      // From untyped code: an ArrayBuffer's length (none) made the append wait for room for ever,
      // another typed array was stored one byte an element.
      if (typeof payload !== 'string' && !(payload instanceof Uint8Array)) {
        throw new TypeError(
          `disk buffer ${this.path}: payload ${i} is not bytes (a Uint8Array) or a string, got ${Object.prototype.toString.call(payload)}`,
        )
      }
      const length = Frame.byteLength(payload)
      if (length > maxRecord) {
        throw new DiskBufferError(
          'RECORD_TOO_LARGE',
          `a record of ${length} bytes does not fit ${this.#tooLarge(maxRecord)}`,
          this.path,
          'segmentBytes',
        )
      }
      lengths[i] = length
      bytes += Frame.size(length)
    }
    if (payloads.length === 0)
      return { status: 'written', firstSeq: writer.assigned, count: 0, durable: DURABLE }
    while (!writer.hasRoom(bytes)) {
      if (whenFull === 'refuse') return { status: 'full' }
      await writer.waitForSpace()
      if (this.#state.kind !== 'open') {
        return {
          status: 'failed',
          error: new DiskBufferError('CLOSED', 'closed while waiting for space', this.path),
        }
      }
    }
    // `nextSeq` must stay a safe integer: a frame numbered 2^53 is read as damage, and a ledger
    // saying 2^53 as corrupt, so a record numbered there would be answered written and never read.
    if (writer.assigned + payloads.length > Number.MAX_SAFE_INTEGER) {
      throw new DiskBufferError(
        'SEQUENCE_EXHAUSTED',
        `no sequence number left for ${payloads.length} record(s): the next is ${writer.assigned}, and numbers end at 2^53 − 1 (${Number.MAX_SAFE_INTEGER}). No buffer counts that far: a segment or ledger numbered near it came from elsewhere (copied, edited). Let the buffer drain, then give it a new path`,
        this.path,
        'nextSeq',
      )
    }
    return writer.append(payloads, lengths, bytes)
  }

  /** What a record over `maxRecord` bytes does not fit, for RECORD_TOO_LARGE. */
  #tooLarge(maxRecord: number): string {
    if (maxRecord === this.#s.segmentBytes - Frame.HEADER_BYTES)
      return `a segment of ${this.#s.segmentBytes} bytes`
    if (maxRecord === Frame.MAX_PAYLOAD_BYTES) return `a frame (at most ${maxRecord} bytes)`
    // 12 bytes less than a frame holds, so that every record taken can be dead-lettered.
    return `a frame with its dead-letter header (at most ${maxRecord} bytes)`
  }

  /**
   * Up to `max` records to deliver: records whose redelivery back-off has passed first, then new
   * ones in order, never more than `maxInFlight` unsettled (handed out, or waiting for their
   * redelivery after a `nack`). Waits until there is one. Resolves `undefined` once the buffer is
   * closed, or after `endWrites()` once every record was read and none is in flight, or when
   * `signal` aborts before the read took records (records it took are handed out even so, and
   * must be settled: dropped, they would stay in flight for the run).
   * With `wait: false` it resolves `[]` at once instead of waiting. Each record must be settled
   * with `ack`, `nack` or `deadLetter`. `max` must be a whole number of 1 or more (a safe integer):
   * any other value (0, negative, fractional, `NaN`, `Infinity`, not a number) rejects with a
   * `RangeError` naming it, whatever the buffer's state, and takes nothing (0 waited for ever).
   */
  read(
    max = 1000,
    options: { readonly signal?: AbortSignal | undefined; readonly wait?: boolean | undefined } = {},
  ): Promise<StoredRecord[] | undefined> {
    if (!Number.isSafeInteger(max) || max < 1) {
      return Promise.reject(this.#badArgument('read', 'max', 'a whole number of 1 or more', max))
    }
    const live = liveOf(this.#state)
    if (live === undefined) return Promise.resolve(undefined)
    const { signal } = options
    let started = false
    const read = live.oneReader(() => {
      started = true
      return this.#read(live, max, signal, options.wait !== false)
    })
    if (signal === undefined) return read
    // A read waiting behind another hears its abort at once. One that started hears it itself:
    // it may have taken records, which must be handed to its caller, not dropped.
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        if (!started) resolve(undefined)
      }
      if (signal.aborted) onAbort()
      else signal.addEventListener('abort', onAbort, { once: true })
      read.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort))
    })
  }

  async #read(
    live: BufferParts,
    max: number,
    signal: AbortSignal | undefined,
    wait: boolean,
  ): Promise<StoredRecord[] | undefined> {
    const onAbort = (): void => live.wake()
    signal?.addEventListener('abort', onAbort)
    try {
      for (;;) {
        // The parts are the same object for the buffer's whole life: only whether they are live changes.
        const state = this.#state
        if (liveOf(state) === undefined || signal?.aborted === true) return undefined
        const { inFlight, cursor, writer } = live
        const wakeup = live.wakeup
        const out: StoredRecord[] = []
        const held: Held[] = []
        if (inFlight.retryPending > 0) inFlight.takeDue(Date.now(), max, out, held)
        // Records waiting for their retry count too: a failing sink must not pull the backlog into memory.
        const room = Math.min(max - out.length, this.#s.maxInFlight - inFlight.unsettled - out.length)
        if (room > 0) {
          try {
            await cursor.read(room, out, held)
          } catch (error) {
            // Retries taken above are handed out, not dropped with the error (they left the
            // retries, and nothing else would hand them out again in this run); the next read
            // meets the error again, where the cursor stopped.
            if (out.length === 0) throw error
            this.#s.log(
              `disk buffer ${this.path}: reading failed (${(error as Error).message}); handing out the ${out.length} record(s) due for redelivery`,
            )
          }
        }
        if (out.length > 0) {
          inFlight.hold(out, held)
          return out
        }
        // Drained: every append written (none still behind the write lane), read, and settled.
        if (
          this.#state.kind === 'draining' &&
          writer.assigned <= writer.visibleSeq &&
          cursor.caughtUp() &&
          inFlight.size === 0
        ) {
          return undefined
        }
        if (!wait) return []
        let timer: NodeJS.Timeout | undefined
        const due = inFlight.nextDueAt()
        // A longer wait than a timer keeps is waited out in several (a longer one fires after 1 ms).
        const delay = due === undefined ? undefined : Math.min(MAX_TIMER_MS, Math.max(0, due - Date.now()))
        if (delay !== undefined) timer = setTimeout(() => live.wake(), delay)
        await wakeup
        if (timer !== undefined) clearTimeout(timer)
      }
    } finally {
      signal?.removeEventListener('abort', onAbort)
    }
  }

  /**
   * Acknowledges a record: it will not be read again, and its segment may go. Idempotent. Once
   * the buffer is closed it does nothing: the record stays on disk for the next open. Throws a
   * `RangeError` naming `seq` when it is not a sequence number (a whole number of 0 or more; a
   * fraction was counted as a record acknowledged, and the counters went wrong for the run).
   */
  ack(seq: number): void {
    this.#checkSeq('ack', seq)
    const live = liveOf(this.#state)
    if (live === undefined || seq >= live.writer.nextSeq || live.acks.has(seq)) return
    // A reader held back by maxInFlight may go on once one record is settled, and a draining one
    // may be done: the prefix need not advance (a record below waits out its back-off), and
    // without a wake the drain waited for that back-off and handed the record out again.
    if (
      live.inFlight.settle(seq) &&
      (live.inFlight.unsettled + 1 >= this.#s.maxInFlight || this.#state.kind === 'draining')
    ) {
      live.wake()
    }
    live.counters.acked++
    live.markAcked(seq)
  }

  /**
   * Negative acknowledgement: the sink failed and may succeed later. The record stays on disk and
   * is handed out again after a back-off that doubles with each attempt. A record not in flight
   * (or a closed buffer) is left alone; a `seq` that is no sequence number throws a `RangeError`,
   * as in {@link DiskBuffer.ack}.
   */
  nack(seq: number): void {
    this.#checkSeq('nack', seq)
    const live = liveOf(this.#state)
    if (live === undefined || !live.inFlight.nack(seq, Date.now())) return
    live.counters.redeliveries++
    live.wake()
  }

  /**
   * The sink rejected the record for good: it is written (fsynced) to the dead-letter queue, then
   * acknowledged here, and never handed out again, not even after a crash in between. Reports
   * `failed` (and leaves the record in flight, to be settled again) if the dead-letter write
   * failed, and `unknown` if the record is not in flight (or the buffer is closed). Rejects with a
   * `RangeError` for a `seq` that is no sequence number, as {@link DiskBuffer.ack} throws.
   */
  async deadLetter(seq: number): Promise<'dead-lettered' | 'unknown' | 'failed'> {
    this.#checkSeq('deadLetter', seq)
    const held = liveOf(this.#state)?.inFlight.get(seq)
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
    // A dead letter is the record and a header, so the largest record's is longer than a segment
    // of the dead-letter queue allows: it gets a segment of its own (reading is bounded by the
    // file, not by segmentBytes).
    const letter = DeadLetterSet.encode(seq, held.crc, held.payload)
    const written = await queue.#append([letter], 'wait', Frame.MAX_PAYLOAD_BYTES)
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

  /**
   * @internal The dead-letter records of this (dead-letter) buffer, decoded. `strict`: a segment
   * that cannot be opened for another reason than being gone throws, instead of being skipped
   * (a replay must not take its letters for missing ones).
   */
  async *deadLetterEntries(strict = false): AsyncGenerator<DeadLetter & { readonly crc: number }> {
    for await (const record of this.#scan(strict)) {
      const letter = DeadLetterSet.decode(record)
      if (letter !== undefined) yield letter
    }
  }

  /**
   * Moves every dead letter back into the queue (as new records, fsynced), then removes from the
   * dead-letter queue what it moved, batch by batch: a record dead-lettered while a replay runs
   * stays there, and a replay that failed half-way leaves there only what it did not move. A
   * replay asked for while one runs starts after it. A crash in between may leave a record in
   * both (at-least-once). Never rejects: a failure (a letter that cannot be read, a write or a
   * closing ledger checkpoint that fails) is reported as `failed`, what was moved staying moved.
   */
  replayDeadLetters(): Promise<ReplayResult> {
    const run = this.#replaying.then(() => this.#replay())
    this.#replaying = run.catch(() => undefined)
    return run
  }

  async #replay(): Promise<ReplayResult> {
    const queue = this.#deadLetters
    if (queue === undefined) return { status: 'replayed', count: 0 }
    let batch: Uint8Array[] = []
    /** The dead-letter queue's sequence numbers of the records in `batch`. */
    let letters: number[] = []
    let count = 0
    /**
     * The first number of the dead-letter queue not yet settled by this replay. Numbers the scan
     * skips below a letter it moved hold no letter that can ever be replayed (missing after a
     * failed write or a crash, or damaged): they are settled with the letters around them, or the
     * queue's acknowledged prefix would stop at them, and every restart would replay again the
     * letters above them (acknowledgements above the prefix are not saved).
     */
    let from = liveOf(queue.#state)?.ackedBelow ?? 0
    const flush = async (): Promise<DiskBufferError | undefined> => {
      if (batch.length === 0) return undefined
      let written: AppendResult
      try {
        written = await this.append(batch)
      } catch (error) {
        // Closed meanwhile (or a record too large for today's segments): a failed replay, whose
        // letters stay in the dead-letter queue, not a throw.
        if (error instanceof DiskBufferError) return error
        throw error
      }
      batch = []
      if (written.status === 'failed') return written.error
      if (written.status === 'written' && (await written.durable) !== 'durable') {
        return new DiskBufferError('WRITE_FAILED', 'fsync failed while replaying dead letters', this.path)
      }
      // Back in the queue for good: these (and only these, with the numbers between them that
      // hold no letter) leave the dead-letter queue.
      const to = letters.at(-1)! + 1
      const settled = liveOf(queue.#state)?.markRangeAcked(from, to) ?? 0
      if (settled > letters.length) {
        this.#s.log(
          `disk buffer ${this.path}: ${settled - letters.length} number(s) of the dead-letter queue below ${to} hold no readable letter (missing or damaged); settled with the replayed ones`,
        )
      }
      from = to
      letters = []
      return undefined
    }
    try {
      for await (const letter of queue.deadLetterEntries(true)) {
        batch.push(letter.payload)
        letters.push(letter.seq)
        count++
        if (batch.length >= 1000) {
          const error = await flush()
          if (error !== undefined) return { status: 'failed', error }
        }
      }
    } catch (error) {
      // A segment of the dead-letter queue that cannot be read (EIO): what was moved stays moved,
      // the rest (this batch too) stays in the dead-letter queue for a later replay.
      return {
        status: 'failed',
        error: new DiskBufferError(
          'READ_FAILED',
          `reading the dead letters failed (${(error as Error).message}); ${count - batch.length} replayed, the rest stay`,
          this.path,
          undefined,
          { cause: error },
        ),
      }
    }
    const error = await flush()
    if (error !== undefined) return { status: 'failed', error }
    try {
      await this.checkpoint()
      // Its last segment goes too once everything in it was replayed (and nothing came meanwhile).
      liveOf(queue.#state)?.writer.reclaimActive()
      await queue.checkpoint()
    } catch (error) {
      // The letters are moved (fsynced here, settled there); only where the queues stand was not
      // saved, which a later checkpoint does: a failed replay, as documented, not a rejection.
      return {
        status: 'failed',
        error: new DiskBufferError(
          'WRITE_FAILED',
          `saving the ledgers after replaying dead letters failed (${(error as Error).message}); ${count} replayed, and a crash before the next checkpoint may replay them again`,
          this.path,
          undefined,
          { cause: error },
        ),
      }
    }
    return { status: 'replayed', count }
  }

  /**
   * Every record not yet acknowledged, in order, without handing any out (for inspection). Reads
   * what was written when it started.
   */
  scan(): AsyncGenerator<StoredRecord & { readonly crc: number }> {
    return this.#scan(false)
  }

  /** {@link DiskBuffer.scan}; `strict`: a segment that cannot be opened but is not gone throws. */
  async *#scan(strict: boolean): AsyncGenerator<StoredRecord & { readonly crc: number }> {
    const remains = remainsOf(this.#state)
    const segments = remains.segments.map((seg) => ({ name: seg.name, end: seg.visible }))
    for (const seg of segments) {
      let file: FileLike
      try {
        file = await this.#s.fs.open(`${this.path}/${seg.name}`, 'read')
      } catch (error) {
        if (!strict || (error as NodeJS.ErrnoException).code === 'ENOENT') continue // deleted meanwhile: acknowledged
        throw error
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
            if (remains.acknowledged(item.seq)) continue
            yield { seq: item.seq, payload: item.payload, attempt: 0, crc: item.crc }
          }
        }
      } finally {
        await file.close()
      }
    }
  }

  /**
   * Writes the ledger now (it is otherwise written `ledgerIntervalMs` after an acknowledgement,
   * after `ledgerEveryAcks` of them, and on close). Does nothing once the buffer is closed.
   */
  async checkpoint(): Promise<void> {
    await liveOf(this.#state)?.checkpoints.now()
  }

  /**
   * Fsyncs now whatever was written (with group commit; nothing to fsync under `'always'`), and
   * waits for the ledger checkpoints already queued (under `'always'` they run beside the writes).
   * A no-op once closed.
   */
  async flush(): Promise<void> {
    const live = liveOf(this.#state)
    await live?.writer.serial(() => live.writer.groupSync())
    await live?.checkpoints.settled()
  }

  /** No more appends; `read` hands out what is left, then resolves `undefined`. */
  endWrites(): void {
    this.#dispatch('endWrites')
    liveOf(this.#state)?.wake()
  }

  /**
   * Finishes pending writes, fsyncs, writes the ledger, closes the files and releases the lock.
   * Records not acknowledged stay on disk for the next open. Closing twice is harmless: every
   * call resolves (or rejects) with the first, once it finished.
   *
   * Every step is taken even if one before it failed, so the lock is always released and the
   * buffer can be opened again. A ledger that cannot be written (a full disk) is logged, not
   * thrown: it is only a hint, and the next open redelivers from the last one saved. A file that
   * fails to close is thrown once everything else was released (several: an `AggregateError`).
   */
  close(): Promise<void> {
    this.#closing ??= this.#close()
    return this.#closing
  }

  async #close(): Promise<void> {
    const live = liveOf(this.#dispatch('close'))
    if (live === undefined) return
    live.checkpoints.stop()
    live.wake()
    live.writer.releaseWaiters()
    // A read loading records from a segment goes on to its end: its file is closed after it.
    await live.readsEnded()
    const errors: unknown[] = []
    const step = (run: () => Promise<void>): Promise<void> =>
      run().catch((error: unknown) => void errors.push(error))
    await live.writer.serial(async () => {
      live.stopTimers()
      await live.writer.finish()
      await live.writer.groupSync()
      await live.checkpoints
        .write()
        .catch((error: Error) =>
          this.#s.log(
            `disk buffer ${this.path}: ledger checkpoint at close failed (${error.message}); the next open redelivers from the last checkpoint saved`,
          ),
        )
      await step(() => live.checkpoints.close())
      await step(() => live.writer.closeFile())
      await step(() => live.cursor.close())
    })
    const deadLetters = this.#deadLetters
    if (deadLetters !== undefined) await step(() => deadLetters.close())
    if (this.#s.lock) await step(() => LockFile.release(this.#s.fs, this.#lockDir))
    if (errors.length === 1) throw errors[0]
    if (errors.length > 1)
      throw new AggregateError(errors, `disk buffer ${this.path}: ${errors.length} files failed to close`)
  }

  static {
    // The crash hook is reachable only through the test factory (internal/CrashableDiskBuffer.ts).
    DiskBufferHooks.register({ abandon: (buffer) => buffer.#abandon() })
  }

  /** Stops everything without writing anything, as a crash would (tests only, through the hook). */
  #abandon(): void {
    const live = liveOf(this.#dispatch('abandon'))
    if (live !== undefined) {
      live.stopTimers()
      live.wake()
    }
    if (this.#deadLetters !== undefined) this.#deadLetters.#abandon()
    if (this.#s.lock) LockFile.abandon(this.#s.fs, this.#lockDir)
  }

  /** A snapshot of the counters. */
  metrics(): DiskBufferMetrics {
    const dl = this.#deadLetters
    return {
      ...remainsOf(this.#state).metrics(),
      deadLettered: dl === undefined ? 0 : remainsOf(dl.#state).metrics().unackedRecords,
    }
  }

  /** Throws the `RangeError` of `method` for a `seq` that is not a sequence number. */
  #checkSeq(method: string, seq: number): void {
    if (!Number.isSafeInteger(seq) || seq < 0) {
      throw this.#badArgument(method, 'seq', 'a sequence number (a whole number of 0 or more)', seq)
    }
  }

  /** The `RangeError` for argument `name` of `method`, which must be `what` and is `value`. */
  #badArgument(method: string, name: string, what: string, value: unknown): RangeError {
    const got =
      typeof value === 'number'
        ? String(value)
        : typeof value === 'string'
          ? `the string ${JSON.stringify(value)}`
          : `a ${typeof value}`
    return new RangeError(`disk buffer ${this.path}: ${method}'s ${name} must be ${what}, got ${got}`)
  }

  /**
   * The one place the state changes. Returns the state `event` left, or `undefined` when it
   * changed nothing (so a caller acts only on a change, with the parts it had).
   */
  #dispatch(event: DiskBufferEvent): DiskBufferState<BufferParts, BufferRemains> | undefined {
    const before = this.#state
    this.#state = transition(before, event)
    return this.#state === before ? undefined : before
  }
}
