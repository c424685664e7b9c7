/**
 * When a buffer writes its ledger: `ledgerIntervalMs` after the acknowledged prefix advanced, at
 * once once `ledgerEveryAcks` advances are unsaved, and whenever asked (`checkpoint()`, close, a
 * replay of the dead letters).
 *
 * Where a checkpoint runs: one asked for runs on the write lane. A scheduled one runs on the write
 * lane too, unless every record a reader can see is durable already (sync `'always'`): then it
 * runs beside the lane, so appends do not wait behind its file operations (HTTP → disk buffer →
 * blackhole ran 1.18 times as fast beside the lane as on it, RFC 0003). Those are one durable
 * write appended to the ledger, which stays open between checkpoints ({@link LedgerFile}); the
 * first checkpoint of a run, and one every 64 KiB, replace the file instead (a write and its
 * fsync, a rename, the directory's fsync). It saves the end of the last group written (fsynced),
 * touches only the ledger's own files, and checkpoints never overlap one another: each waits for
 * the one before.
 *
 * Invariants: at most one scheduled checkpoint waits at a time, whatever the acknowledgement rate
 * (it saves the state as it is when it runs); a scheduled checkpoint writes only if something the
 * ledger records changed since the last one; the ledger never holds an acknowledged position
 * above what is durable (a checkpoint on the lane fsyncs what was written before it reads the
 * position; one beside it needs no fsync, as only fsynced records are visible and so
 * acknowledgeable; and either caps the prefix it saves at the end of the last group written,
 * since numbers a failed group skipped count acknowledged before anything after them is
 * written) — on open, a ledger ahead of the data is taken for another buffer's (`LEDGER_AHEAD`);
 * a prefix held back by the cap is saved by the checkpoint the next change (a group written)
 * queues, or the next advance's; checkpoints write one at a time, in the order they read the
 * position; once stopped, nothing is scheduled again, and a scheduled checkpoint not yet started
 * writes nothing.
 *
 * @module
 */
import type { AckLedger } from './AckLedger.js'
import type { Settings } from './DiskBufferSettings.js'
import { LedgerFile } from './Ledger.js'

/** What the checkpoints save and where they run: the buffer's acknowledgements, write lane and files. */
export interface LedgerCheckpointsContext {
  readonly settings: Pick<Settings, 'fs' | 'path' | 'ledgerIntervalMs' | 'ledgerEveryAcks' | 'log'>
  readonly acks: AckLedger
  /** Runs a job on the buffer's write lane, after every job queued before it. */
  readonly serial: <T>(job: () => Promise<T>) => Promise<T>
  /**
   * Every record a reader can see is fsynced (sync `'always'`): scheduled checkpoints run beside
   * the lane, without an fsync, saving {@link LedgerCheckpointsContext.position} as it is then.
   */
  readonly visibleIsDurable: boolean
  /** Fsyncs everything written so far (on the lane). */
  readonly sync: () => Promise<void>
  /**
   * As they are now: the end of the last group written (`nextSeq`: every record in the files is
   * below it; numbers a failed group skipped, counted acknowledged, may lie at or above it until
   * a group after them is written), and the first sequence number of each segment.
   */
  readonly position: () => { readonly nextSeq: number; readonly segments: readonly number[] }
}

/**
 * Where the next scheduled checkpoint stands: none; a timer running; queued on the lane; or
 * stopped for good. A timer and a queued checkpoint never coexist: queuing cancels the timer.
 */
type Pending =
  | { readonly kind: 'none' | 'queued' | 'stopped' }
  | { readonly kind: 'timer'; readonly timer: NodeJS.Timeout }

const NONE: Pending = { kind: 'none' }
const QUEUED: Pending = { kind: 'queued' }
const STOPPED: Pending = { kind: 'stopped' }

/** Schedules and writes a buffer's ledger checkpoints. */
export class LedgerCheckpoints {
  readonly #c: LedgerCheckpointsContext
  #pending: Pending = NONE
  /** Something the ledger records changed since the last checkpoint read the position. */
  #dirty = false
  /** The checkpoint writing now, if any (it never rejects): the next one waits for it. */
  #writing: Promise<void> = Promise.resolve()
  /** The last checkpoint saved less than the acknowledged prefix (capped at what was written). */
  #heldBack = false
  /** The ledger file, kept open between checkpoints (each one appended). */
  readonly #file: LedgerFile

  constructor(context: LedgerCheckpointsContext) {
    this.#c = context
    this.#file = new LedgerFile(context.settings.fs, context.settings.path)
  }

  /**
   * Notes that something the ledger records changed (a record written, a segment added or
   * deleted). After a checkpoint that held back part of the acknowledged prefix (see `#save`),
   * the change queues the next one: a write may have put a record past the numbers held back.
   */
  changed(): void {
    this.#dirty = true
    if (this.#heldBack) {
      this.#heldBack = false
      this.#queue()
    }
  }

  /**
   * Notes that the acknowledged prefix advanced: checkpoints at once (queued on the lane) once
   * `ledgerEveryAcks` advances are unsaved, otherwise `ledgerIntervalMs` later.
   */
  advanced(): void {
    this.#dirty = true
    if (this.#c.acks.unsaved >= this.#c.settings.ledgerEveryAcks) this.#queue()
    else this.#schedule()
  }

  /** Writes the ledger now, on the lane (whether or not anything changed). */
  now(): Promise<void> {
    return this.#c.serial(() => this.write())
  }

  /** Writes the ledger, after fsyncing what was written; call it from a job on the lane. */
  write(): Promise<void> {
    return this.#write(true)
  }

  /** Writes the ledger once the checkpoint before it finished (see {@link LedgerCheckpoints.#save}). */
  #write(sync: boolean): Promise<void> {
    return this.#inTurn(() => this.#save(sync))
  }

  /** Runs `job` once the checkpoint before it finished; the next one waits for it in turn. */
  #inTurn(job: () => Promise<void>): Promise<void> {
    const run = this.#writing.then(job)
    this.#writing = run.catch(() => undefined)
    return run
  }

  /**
   * Saves the ledger; call it only in turn (after the checkpoint before it). `sync` first fsyncs
   * what was written (on the lane); without it, the position is saved as readers see it.
   */
  async #save(sync: boolean): Promise<void> {
    if (sync) await this.#c.sync()
    const { nextSeq, segments } = this.#c.position()
    // Never past what is in the files: numbers a failed group skipped count acknowledged before
    // the group that holds the numbers after them is written, and a ledger acknowledging past the
    // last record on disk is taken, on open, for another buffer's (LEDGER_AHEAD).
    const ackedBelow = Math.min(this.#c.acks.below, nextSeq)
    // Cleared before the write: what changes while it runs is for the next checkpoint.
    this.#dirty = false
    try {
      await this.#file.write({ nextSeq, ackedBelow, segments })
    } catch (error) {
      this.#dirty = true
      throw error
    }
    this.#c.acks.saved(ackedBelow)
    // What was held back is saved by the checkpoint after the next change (a group written past
    // it), or the next advance; not by a timer, which would rewrite the same ledger for ever
    // while nothing is written.
    this.#heldBack = ackedBelow < this.#c.acks.below
  }

  /** Resolves once every checkpoint queued beside the lane or writing so far has finished (never rejects). */
  settled(): Promise<void> {
    return this.#writing
  }

  /**
   * Closes the ledger file once the checkpoints writing now finished (at close, after the last
   * one); a checkpoint after this replaces the file and keeps nothing open.
   */
  async close(): Promise<void> {
    await this.#writing
    await this.#file.close()
  }

  /** Cancels the timer and schedules nothing again (close, or a simulated crash). Idempotent. */
  stop(): void {
    if (this.#pending.kind === 'timer') clearTimeout(this.#pending.timer)
    this.#pending = STOPPED
  }

  #schedule(): void {
    if (this.#pending.kind !== 'none') return
    const timer = setTimeout(() => {
      if (this.#pending.kind !== 'timer') return
      this.#pending = NONE
      this.#queue()
    }, this.#c.settings.ledgerIntervalMs)
    timer.unref()
    this.#pending = { kind: 'timer', timer }
  }

  /**
   * Queues one checkpoint (on the lane, or beside it: see the module's doc), unless one is queued
   * already (it will save the latest state).
   */
  #queue(): void {
    if (this.#pending.kind === 'queued' || this.#pending.kind === 'stopped') return
    if (this.#pending.kind === 'timer') clearTimeout(this.#pending.timer)
    this.#pending = QUEUED
    const beside = this.#c.visibleIsDurable
    const checkpoint = async (): Promise<void> => {
      if (this.#pending.kind === 'stopped') return
      this.#pending = NONE
      if (this.#dirty) await (beside ? this.#save(false) : this.#write(true))
    }
    // Beside the lane, in turn with the other checkpoints as one of them.
    void (beside ? this.#inTurn(checkpoint) : this.#c.serial(checkpoint)).catch((error: Error) =>
      this.#c.settings.log(
        `disk buffer ${this.#c.settings.path}: ledger checkpoint failed (${error.message})`,
      ),
    )
  }
}
