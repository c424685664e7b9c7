/**
 * The state behind one batch notifier, and every operation that changes it.
 *
 * Invariant: `live` counts the live references to the batch: one per live handle of each of its
 * events, plus one for the source until it releases the notifier. The batch resolves, exactly
 * once, when `live` reaches zero (or when the leak detector finds the notifier collected with
 * references outstanding).
 *
 * Statuses are folded into the batch as copies report them, not per event first: the batch fold
 * only raises the batch to the worst errored or rejected status it sees, so folding every copy's
 * status directly gives the same result as folding each event's status when its last copy ends.
 * The one per-event fact kept is which events an authoritative sink recorded (their later
 * statuses are ignored), in a set made only for batches that have one. An event is a slot number
 * handed out by a counter: tracking an event costs no memory at all.
 *
 * A batch whose source asked for per-record outcomes also keeps one outcome byte per slot, folded
 * by the event lattice on every report (a record's clones and the merged events carrying it all
 * report on its slot); batches that did not ask keep no array and pay one `undefined` test.
 */
import { BatchStatusReceiver } from '../BatchStatusReceiver.js'
import { FinalizationError } from '../FinalizationError.js'
import { RecordOutcomes } from '../RecordOutcomes.js'
import { idOf, nextStamp } from './batchIds.js'
import { BATCH_UPDATE, batchStatusName, DELIVERED, ERRORED, OUTCOME_UPDATE, REJECTED } from './statusCodes.js'

/** Called once when a batch with live references is found collected; set by the leak detector. */
export type LeakHook = (state: BatchState, handles: number) => void

export class BatchState {
  /** Live references: handles of its events, plus the source's until it releases. */
  live = 1
  /** Events attached so far; the next event gets this slot number. */
  events = 0
  status = DELIVERED
  /** Why the batch has its status: the reason of the first end that gave it `reasonCode`. */
  reason: unknown = undefined
  /** The status code `reason` explains; when it differs from `status`, no reason was given for it. */
  reasonCode = DELIVERED
  released = false
  resolved = false
  /** Slots an authoritative sink recorded; made on the first record. */
  recorded: Set<number> | undefined = undefined
  /** One outcome code per slot, when the source asked for per-record outcomes (capacity may exceed `events`). */
  outcomes: Uint8Array | undefined = undefined
  /** The outcomes once resolved. */
  finalOutcomes: RecordOutcomes | undefined = undefined
  /** The leak detector's group this batch is in, and its place there (see `LeakDetector`). */
  watchGroup: (BatchState | undefined)[] | undefined = undefined
  watchIndex = 0
  /** The creation stamp the id is written from (see `batchIds.ts`). */
  idMs = 0
  idSeq = 0
  #id: string | undefined = undefined
  readonly receiver: BatchStatusReceiver

  constructor(
    readonly sourceId: string | undefined,
    outcomes = false,
  ) {
    nextStamp(this)
    if (outcomes) this.outcomes = new Uint8Array(0)
    this.receiver = new BatchStatusReceiver(this)
  }

  /** The batch's UUID v7, written on first read from the stamp taken at creation. */
  get id(): string {
    if (this.#id === undefined) this.#id = idOf(this.idMs, this.idSeq)
    return this.#id
  }

  /** Adds `count` events of one live handle each; returns the slot of the first. */
  addSlots(count: number): number {
    if (this.released) {
      throw new FinalizationError(
        'NOTIFIER_RELEASED',
        'cannot attach a batch notifier after its source released it',
        this.sourceId,
        this.id,
      )
    }
    const first = this.events
    this.events = first + count
    this.live += count
    const outcomes = this.outcomes
    if (outcomes !== undefined && outcomes.length < this.events) {
      const grown = new Uint8Array(Math.max(this.events, outcomes.length * 2))
      grown.set(outcomes)
      this.outcomes = grown
    }
    return first
  }

  retain(): void {
    this.live++
  }

  /** Folds an event status code into the batch, unless the event was recorded. */
  update(slot: number, code: number): void {
    if (this.resolved) this.#ended()
    if (this.recorded === undefined || !this.recorded.has(slot)) {
      this.status = BATCH_UPDATE[this.status * 5 + code]!
      const outcomes = this.outcomes
      if (outcomes !== undefined) outcomes[slot] = OUTCOME_UPDATE[outcomes[slot]! * 5 + code]!
    }
  }

  /**
   * Keeps `reason` when the end about to fold `code` (errored or rejected) into the batch is the
   * first to explain the status the batch will have. Called only by ends that carry a reason, so
   * the ends that do not (every delivered one) pay nothing for it.
   */
  explain(slot: number, code: number, reason: unknown): void {
    if (code < ERRORED || this.recorded?.has(slot) === true) return
    const next = BATCH_UPDATE[this.status * 5 + code]!
    if (this.reasonCode !== next) {
      this.reason = reason
      this.reasonCode = next
    }
  }

  /** The reason of the batch's status, or `undefined` when none was given for it. */
  get explanation(): unknown {
    return this.reasonCode === this.status && this.status !== DELIVERED ? this.reason : undefined
  }

  /** Ends one handle, with a status code or without one (`code < 0`). */
  release(slot: number, code: number): void {
    // The hot path of every sink: one fold and one decrement.
    if (code >= 0 && (this.recorded === undefined || !this.recorded.has(slot))) {
      this.status = BATCH_UPDATE[this.status * 5 + code]!
      const outcomes = this.outcomes
      if (outcomes !== undefined) outcomes[slot] = OUTCOME_UPDATE[outcomes[slot]! * 5 + code]!
    }
    if (--this.live === 0) this.finish()
  }

  /**
   * Ends one handle of each of `count` events at once, all with the same code; none was recorded.
   * With per-record outcomes on, the caller folds the code into each slot first.
   */
  releaseRun(count: number, code: number): void {
    if (code >= 0) this.status = BATCH_UPDATE[this.status * 5 + code]!
    this.live -= count
    if (this.live === 0) this.finish()
  }

  /** Marks the event recorded: what it reported so far is already in the batch; later reports are ignored. */
  record(slot: number): void {
    if (this.resolved) this.#ended()
    if (this.recorded === undefined) this.recorded = new Set()
    this.recorded.add(slot)
  }

  isRecorded(slot: number): boolean {
    return this.recorded?.has(slot) === true
  }

  releaseSource(): void {
    if (this.released) return
    this.released = true
    if (--this.live === 0) this.finish()
  }

  /** The leak detector found the notifier collected: settle every outstanding share as errored. */
  leak(report: LeakHook): void {
    if (this.resolved) return
    this.status = BATCH_UPDATE[this.status * 5 + ERRORED]!
    // Which records still had a live handle is not known: every record not finished for good
    // counts as errored, so the source re-sends rather than loses it.
    const outcomes = this.outcomes
    if (outcomes !== undefined) {
      for (let slot = 0; slot < this.events; slot++) {
        if (outcomes[slot] !== REJECTED && !this.isRecorded(slot)) outcomes[slot] = ERRORED
      }
    }
    report(this, this.live)
    this.live = 0
    this.finish()
  }

  #ended(): never {
    throw new FinalizationError(
      'USE_AFTER_END',
      'cannot update the status of an event whose batch has resolved',
      this.sourceId,
      this.id,
    )
  }

  /**
   * The outcomes as a source must be told them when its batch is decided before it resolves (an
   * ack timeout, or every record recorded by an authoritative sink): recorded and rejected
   * records as they stand, every other record `errored` (it may still be in flight). After the
   * batch resolved, the final outcomes. `undefined` when the source did not ask.
   */
  outcomesNow(): RecordOutcomes | undefined {
    if (this.finalOutcomes !== undefined) return this.finalOutcomes
    const outcomes = this.outcomes
    if (outcomes === undefined) return undefined
    const now = new Uint8Array(this.events)
    for (let slot = 0; slot < this.events; slot++) {
      const code = outcomes[slot]!
      now[slot] = code === REJECTED || this.isRecorded(slot) ? code : ERRORED
    }
    return new RecordOutcomes(now)
  }

  private finish(): void {
    this.resolved = true
    const outcomes = this.outcomes
    if (outcomes !== undefined) this.finalOutcomes = new RecordOutcomes(outcomes.subarray(0, this.events))
    // Forgotten by the leak detector: nothing is left to detect.
    const group = this.watchGroup
    if (group !== undefined) {
      group[this.watchIndex] = undefined
      this.watchGroup = undefined
    }
    this.receiver._resolve(batchStatusName(this.status))
  }
}
