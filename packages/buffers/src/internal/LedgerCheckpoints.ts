/**
 * When a buffer writes its ledger: `ledgerIntervalMs` after the acknowledged prefix advanced, at
 * once (queued on the write lane) once `ledgerEveryAcks` advances are unsaved, and whenever asked
 * (`checkpoint()`, close, a replay of the dead letters).
 *
 * Invariants: at most one scheduled checkpoint waits on the lane at a time, whatever the
 * acknowledgement rate (it saves the state as it is when it runs); a scheduled checkpoint writes
 * only if something the ledger records changed since the last one; every checkpoint fsyncs what
 * was written before it saves, so the ledger never holds an acknowledged position above what is
 * durable (on open, a ledger ahead of the data is taken for another buffer's: `LEDGER_AHEAD`);
 * once stopped, nothing is scheduled again.
 *
 * @module
 */
import type { AckLedger } from './AckLedger.js'
import type { Settings } from './DiskBufferSettings.js'
import { Ledger } from './Ledger.js'

/** What the checkpoints save and where they run: the buffer's acknowledgements, write lane and files. */
export interface LedgerCheckpointsContext {
  readonly settings: Pick<Settings, 'fs' | 'path' | 'ledgerIntervalMs' | 'ledgerEveryAcks' | 'log'>
  readonly acks: AckLedger
  /** Runs a job on the buffer's write lane, after every job queued before it. */
  readonly serial: <T>(job: () => Promise<T>) => Promise<T>
  /** Fsyncs everything written so far (on the lane). */
  readonly sync: () => Promise<void>
  /** The next sequence number and the first sequence number of each segment, as they are now. */
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
  /** Something the ledger records changed since the last checkpoint. */
  #dirty = false

  constructor(context: LedgerCheckpointsContext) {
    this.#c = context
  }

  /** Notes that something the ledger records changed (a record written, a segment added or deleted). */
  changed(): void {
    this.#dirty = true
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

  /** Writes the ledger; call it from a job on the lane. */
  async write(): Promise<void> {
    const { fs, path } = this.#c.settings
    await this.#c.sync()
    const { nextSeq, segments } = this.#c.position()
    const ackedBelow = this.#c.acks.below
    await Ledger.write(fs, path, { nextSeq, ackedBelow, segments })
    this.#c.acks.saved(ackedBelow)
    this.#dirty = false
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

  /** Queues one checkpoint on the lane, unless one is queued already (it will save the latest state). */
  #queue(): void {
    if (this.#pending.kind === 'queued' || this.#pending.kind === 'stopped') return
    if (this.#pending.kind === 'timer') clearTimeout(this.#pending.timer)
    this.#pending = QUEUED
    void this.#c
      .serial(async () => {
        if (this.#pending.kind === 'queued') this.#pending = NONE
        if (this.#dirty) await this.write()
      })
      .catch((error: Error) =>
        this.#c.settings.log(
          `disk buffer ${this.#c.settings.path}: ledger checkpoint failed (${error.message})`,
        ),
      )
  }
}
