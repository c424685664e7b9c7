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
import type { BatchStatus } from '../BatchStatus.js'
import { BatchStatusReceiver, type Listener } from '../BatchStatusReceiver.js'
import { FinalizationError } from '../FinalizationError.js'
import { RecordOutcomes } from '../RecordOutcomes.js'
import { idOf, nextStamp } from './batchIds.js'
import { BATCH_UPDATE, batchStatusName, DELIVERED, ERRORED, OUTCOME_UPDATE, REJECTED } from './statusCodes.js'
import { forget } from './watchGroups.js'

/** What a batch that keeps outcomes starts with: no slot yet (it never holds a byte, so it is shared). */
const NO_OUTCOMES = new Uint8Array(0)

/**
 * Outcome arrays up to this many bytes are cut from a shared slab rather than allocated on their
 * own: a typed array too large for V8 to keep in the JavaScript heap (over 64 bytes) gets a
 * separately allocated backing store, which costs more than folding the outcomes of a batch of a
 * thousand records. A slab is freed once every array cut from it is; a region is never reused,
 * so a new array reads all `DROPPED` (zero).
 */
const SLAB_CUT_MAX = 1024
const SLAB_BYTES = 8 * 1024
let slab = new ArrayBuffer(SLAB_BYTES)
let slabUsed = 0

/** `n` zeroed outcome bytes. */
function outcomeBytes(n: number): Uint8Array {
  if (n <= 64 || n > SLAB_CUT_MAX) return new Uint8Array(n)
  if (slabUsed + n > SLAB_BYTES) {
    slab = new ArrayBuffer(SLAB_BYTES)
    slabUsed = 0
  }
  const bytes = new Uint8Array(slab, slabUsed, n)
  slabUsed += n
  return bytes
}

/** Called once when a batch with live references is found collected; set by the leak detector. */
export type LeakHook = (state: BatchState, handles: number) => void

/**
 * `BatchState.flags` holds the batch's status code (bits 0–2), whether its `hook` is a
 * {@link RareState} (bit 3, {@link HAS_RARE}), and its phase (above them), in one field since
 * every field is paid per batch. Phase {@link OPEN}: the source may still attach events;
 * {@link RELEASED}: the source released its reference, no more events may be attached;
 * {@link RESOLVED}: the batch has resolved. A phase compares as `flags >= phase`.
 */
const OPEN = 0
const RELEASED = 16
const RESOLVED = 32
const CODE_BITS = 7
/** Set once the batch has a rare part: one bit test where an `instanceof` would cost more. */
const HAS_RARE = 8

/**
 * `FLAGS_UPDATE[flags * 5 + event]`: {@link BATCH_UPDATE} over the status bits of `flags`, the
 * other bits kept; one table lookup per fold, as before the two were packed.
 */
const FLAGS_UPDATE: Int8Array = (() => {
  const table = new Int8Array((RESOLVED + 16) * 5)
  for (const phase of [OPEN, RELEASED, RESOLVED]) {
    for (const rare of [0, HAS_RARE]) {
      for (let code = 0; code < 5; code++) {
        for (let event = 0; event < 5; event++) {
          table[(phase + rare + code) * 5 + event] = phase + rare + BATCH_UPDATE[code * 5 + event]!
        }
      }
    }
  }
  return table
})()

/**
 * What only some batches keep: a reason, authoritative records, per-record outcomes. Made on
 * first use, so a batch that is delivered without any of them pays one field for all of them.
 */
class RareState {
  /** Why the batch has its status: the reason of the first end that gave it `reasonCode`. */
  given: unknown = undefined
  /** The status code `given` explains; when it differs from the batch's, no reason was given for it. */
  reasonCode = DELIVERED
  /**
   * Slots an authoritative sink recorded, one bit each (slot `s` is bit `s & 31` of word `s >>> 5`);
   * made on the first record, for every event the batch has then, and grown when a later slot is.
   * A `Set` of slots made an authoritative sink's every record grow a hash table.
   */
  recorded: Uint32Array | undefined = undefined
  /** One outcome code per slot, when the source asked for per-record outcomes (capacity may exceed `events`). */
  outcomeCodes: Uint8Array | undefined = undefined
  /** The outcomes once resolved, made on first read. */
  final: RecordOutcomes | undefined = undefined
  /** The receiver's promise, made when someone awaits the receiver itself. */
  promise: Promise<BatchStatus> | undefined = undefined
  /**
   * How many ms the id's stamp is ahead of `opened`: 0 unless the clock read behind an earlier
   * stamp, since stamps never go backwards (see `batchIds.ts`).
   */
  stampAhead = 0
  /** What the runtime that tracks the batch keeps for it, beyond its receiver; core never reads it. */
  tracking: unknown = undefined
  /** The receiver's listeners, once the batch has a rare part (see `BatchState.hook`). */
  listeners: Listeners = undefined
}

/** The receiver's listeners: none, one (the common case), or an array of several. */
export type Listeners = Listener | Listener[] | undefined

/**
 * The state of one batch. It is also the batch's receiver (it extends the public class), so a
 * batch is two objects: this and its notifier. The notifier must stay a separate object: the
 * leak detector watches notifiers, and a receiver held by the source must not keep one alive.
 * Field names here must not clash with the receiver's public ones (`status`, `reason`, `outcomes`).
 *
 * Every field is paid by every batch in flight (eight fields: 88 bytes with the header), so the
 * state keeps only what a delivered batch needs: the counts, the fold and phase in one field, the
 * listener, the time it was opened, the id's counter, its place with the leak detector and its
 * source. Everything else waits in a {@link RareState} made on first use, which then takes the
 * listener's field. Neither class has private methods or accessors: each class that has them
 * costs every instance a field (its brand). The id is not kept either: it is written from the
 * stamp, the same on every read (see `batchIds.ts`). Its place with the leak detector is one
 * small integer (see `watchGroups.ts`).
 */
export class BatchState extends BatchStatusReceiver {
  /** Live references: handles of its events, plus the source's until it releases. */
  live = 1
  /** Events attached so far; the next event gets this slot number. */
  events = 0
  /** The status code, whether `hook` is the rare part, and the phase (see {@link FLAGS_UPDATE}). */
  flags = OPEN + DELIVERED
  /**
   * The receiver's listeners (usually one: the runtime that tracks the batch) while the batch has
   * no rare part; once it has one, that {@link RareState}, which then keeps the listeners. One
   * field for the two: a batch pays for each field while in flight.
   */
  hook: Listeners | RareState = undefined
  /**
   * When the batch was opened: ms after the epoch (see `epoch.ts`), a small integer kept
   * unboxed; the id's millisecond is this plus `rare.stampAhead`. The receiver's `openedAt` is
   * the same time since 1970.
   */
  opened = 0
  /** The id's counter within its millisecond. */
  idSeq = 0
  /** The batch's place with the leak detector (see `watchGroups.ts`); -1 when it has none. */
  watch = -1
  readonly sourceId: string | undefined

  /**
   * `now`: the time of creation (ms since the epoch) when the caller has just read the clock; -1
   * for a state whose stamp the caller sets ({@link BatchState._restore}).
   */
  constructor(sourceId: string | undefined, outcomes: boolean, now: number) {
    super()
    this.sourceId = sourceId
    if (now >= 0) nextStamp(this, now)
    if (outcomes) this._rare().outcomeCodes = NO_OUTCOMES
  }

  /**
   * The state of a batch kept as a slot until now (see `slots.ts`): released by its source, with
   * the slot's stamp (`opened`, ms after the epoch; `idSeq`; `ahead`, how far the id's millisecond
   * is ahead of `opened`), its events, live references and status code. Not in the leak
   * detector's groups: its block's token is watched instead.
   */
  static _restore(
    sourceId: string | undefined,
    opened: number,
    idSeq: number,
    ahead: number,
    events: number,
    live: number,
    code: number,
  ): BatchState {
    const state = new BatchState(sourceId, false, -1)
    state.flags = RELEASED + code // first: the rare part's bit is set below, if it is made
    state.opened = opened
    state.idSeq = idSeq
    if (ahead !== 0) state._rare().stampAhead = ahead
    state.events = events
    state.live = live
    return state
  }

  /** The batch's status code so far. */
  get code(): number {
    return this.flags & CODE_BITS
  }

  /** Reason, records, outcomes and what the runtime tracks, for the batches that have any (see {@link RareState}). */
  get rare(): RareState | undefined {
    return (this.flags & HAS_RARE) !== 0 ? (this.hook as RareState) : undefined
  }

  /** The rarely used fields, made now if they were not yet. */
  _rare(): RareState {
    if ((this.flags & HAS_RARE) !== 0) return this.hook as RareState
    const rare = new RareState()
    rare.listeners = this.hook as Listeners
    this.hook = rare
    this.flags |= HAS_RARE
    return rare
  }

  /** The receiver's listeners. */
  get listeners(): Listeners {
    return (this.flags & HAS_RARE) !== 0 ? (this.hook as RareState).listeners : (this.hook as Listeners)
  }

  set listeners(listeners: Listeners) {
    if ((this.flags & HAS_RARE) !== 0) (this.hook as RareState).listeners = listeners
    else this.hook = listeners
  }

  /** The batch's UUID v7, written from the stamp taken at creation (the same on every read). */
  get id(): string {
    return idOf(this.opened + (this.rare?.stampAhead ?? 0), this.idSeq)
  }

  get released(): boolean {
    return this.flags >= RELEASED
  }

  get resolved(): boolean {
    return this.flags >= RESOLVED
  }

  /** One outcome code per slot, when the source asked for per-record outcomes. */
  get outcomeCodes(): Uint8Array | undefined {
    return this.rare?.outcomeCodes
  }

  /** Adds `count` events of one live handle each; returns the slot of the first. */
  addSlots(count: number): number {
    if (this.flags >= RELEASED) {
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
    const outcomes = this.rare?.outcomeCodes
    if (outcomes !== undefined && outcomes.length < this.events) {
      // Sized exactly on the first attach (a source's whole batch at once), doubled after.
      const grown = outcomeBytes(
        outcomes.length === 0 ? this.events : Math.max(this.events, outcomes.length * 2),
      )
      grown.set(outcomes)
      this.rare!.outcomeCodes = grown
    }
    return first
  }

  retain(): void {
    this.live++
  }

  /** Folds an event status code into the batch, unless the event was recorded. */
  update(slot: number, code: number): void {
    if (this.flags >= RESOLVED) this._ended()
    this._fold(slot, code)
  }

  /** Folds `code` into the batch and the slot's outcome, unless the slot was recorded. */
  _fold(slot: number, code: number): void {
    const rare = this.rare
    if (rare === undefined) {
      this.flags = FLAGS_UPDATE[this.flags * 5 + code]!
    } else if (!isRecordedIn(rare.recorded, slot)) {
      this.flags = FLAGS_UPDATE[this.flags * 5 + code]!
      const outcomes = rare.outcomeCodes
      if (outcomes !== undefined) outcomes[slot] = OUTCOME_UPDATE[outcomes[slot]! * 5 + code]!
    }
  }

  /**
   * Keeps `reason` when the end about to fold `code` (errored or rejected) into the batch is the
   * first to explain the status the batch will have. Called only by ends that carry a reason, so
   * the ends that do not (every delivered one) pay nothing for it.
   */
  explain(slot: number, code: number, reason: unknown): void {
    if (code < ERRORED || this.isRecorded(slot)) return
    // An end below the batch's status (errored into a rejected batch) does not explain it: its
    // reason would be shown for a status it did not give.
    if (BATCH_UPDATE[this.code * 5 + code]! !== code) return
    const rare = this._rare()
    if (rare.reasonCode !== code) {
      rare.given = reason
      rare.reasonCode = code
    }
  }

  /** The reason of the batch's status, or `undefined` when none was given for it. */
  get _explanation(): unknown {
    const rare = this.rare
    return rare !== undefined && rare.reasonCode === this.code && this.code !== DELIVERED
      ? rare.given
      : undefined
  }

  /** Ends one handle, with a status code or without one (`code < 0`). */
  release(slot: number, code: number): void {
    // The hot path of every sink: one fold and one decrement.
    if (code >= 0) this._fold(slot, code)
    if (--this.live === 0) this.finish()
  }

  /**
   * Ends one handle of each of `count` events at once, all with the same code; none was recorded.
   * With per-record outcomes on, the caller folds the code into each slot first.
   */
  releaseRun(count: number, code: number): void {
    if (code >= 0) this.flags = FLAGS_UPDATE[this.flags * 5 + code]!
    this.live -= count
    if (this.live === 0) this.finish()
  }

  /** Marks the event recorded: what it reported so far is already in the batch; later reports are ignored. */
  record(slot: number): void {
    if (this.flags >= RESOLVED) this._ended()
    const rare = this._rare()
    const word = slot >>> 5
    let bits = rare.recorded
    if (bits === undefined || word >= bits.length) {
      const grown = new Uint32Array(Math.max(word + 1, (this.events + 31) >>> 5, (bits?.length ?? 0) * 2))
      if (bits !== undefined) grown.set(bits)
      rare.recorded = bits = grown
    }
    bits[word]! |= 1 << (slot & 31)
  }

  isRecorded(slot: number): boolean {
    return isRecordedIn(this.rare?.recorded, slot)
  }

  releaseSource(): void {
    if (this.flags >= RELEASED) return
    this.flags += RELEASED
    if (--this.live === 0) this.finish()
  }

  /** The leak detector found the notifier collected: settle every outstanding share as errored. */
  leak(report: LeakHook): void {
    if (this.flags >= RESOLVED) return
    this.flags = FLAGS_UPDATE[this.flags * 5 + ERRORED]!
    // Which records still had a live handle is not known: every record not finished for good
    // counts as errored, so the source re-sends rather than loses it.
    const outcomes = this.rare?.outcomeCodes
    if (outcomes !== undefined) {
      for (let slot = 0; slot < this.events; slot++) {
        if (outcomes[slot] !== REJECTED && !this.isRecorded(slot)) outcomes[slot] = ERRORED
      }
    }
    report(this, this.live)
    this.live = 0
    this.finish()
  }

  _ended(): never {
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
  _outcomesNow(): RecordOutcomes | undefined {
    if (this.flags >= RESOLVED) return this._finalOutcomes()
    const outcomes = this.rare?.outcomeCodes
    if (outcomes === undefined) return undefined
    const now = new Uint8Array(this.events)
    for (let slot = 0; slot < this.events; slot++) {
      const code = outcomes[slot]!
      now[slot] = code === REJECTED || this.isRecorded(slot) ? code : ERRORED
    }
    return new RecordOutcomes(now)
  }

  /** The outcomes once resolved (`undefined` before, and for a batch that keeps none). */
  _finalOutcomes(): RecordOutcomes | undefined {
    const rare = this.rare
    const outcomes = rare?.outcomeCodes
    if (this.flags < RESOLVED || outcomes === undefined) return undefined
    if (rare!.final === undefined) {
      const codes = outcomes.length === this.events ? outcomes : outcomes.subarray(0, this.events)
      rare!.final = new RecordOutcomes(codes)
    }
    return rare!.final
  }

  private finish(): void {
    const flags = this.flags
    this.flags = RESOLVED + (flags & (CODE_BITS | HAS_RARE))
    forget(this)
    this._resolve(batchStatusName(flags & CODE_BITS))
  }
}

/** Whether `slot`'s bit is set in `recorded` (see `BatchState`'s rare part). */
export function isRecordedIn(recorded: Uint32Array | undefined, slot: number): boolean {
  if (recorded === undefined) return false
  const word = slot >>> 5
  return word < recorded.length && (recorded[word]! & (1 << (slot & 31))) !== 0
}
