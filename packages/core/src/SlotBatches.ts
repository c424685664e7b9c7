/**
 * A source's batches kept as slots of a shared block of numbers instead of a notifier and a
 * state each (RFC 0009): for a runtime whose batches keep no per-record outcomes. What the
 * runtime keeps for a batch (a receipt) it passes as the batch's `tracking`.
 *
 * A batch made here behaves as one made with a `BatchNotifier`, released at once: the same
 * statuses, the same fold, the same leak detection (its events hold a token shared by the
 * block's 64 batches, which the leak detector watches as it watches notifiers' tokens). What
 * differs is only what the runtime is told: {@link SlotBatchOwner.slotResolved} with the status,
 * where a notifier's listener would get a receiver. A batch that needs more than counting (a
 * reason, an authoritative record, a merge, a detach, `LeakDetector.forEachUnresolved`)
 * gets a state made from its slot, and from then on is an ordinary batch whose listener is the
 * owner (`batchResolved`).
 *
 * @module
 */
import { EventArray } from './EventArray.js'
import { FinalizationError } from './FinalizationError.js'
import { idOf, stampTime } from './internal/batchIds.js'
import { msSinceEpoch, sinceEpoch } from './internal/epoch.js'
import { shown } from './internal/shown.js'
import { CHUNK, MAX_SLOT_EVENTS, type SlotBlock, SlotOpener, type SlotOwner } from './internal/slots.js'
import type { JsonObject } from './JsonValue.js'
import { LeakDetector } from './LeakDetector.js'
import { LogEvent } from './LogEvent.js'

/**
 * What a runtime that opens slot batches is told. As a `BatchResolvedListener` it hears the
 * batches that got a state (`batchResolved`, with their receiver); `slotResolved` the others.
 * Each batch is told exactly once, through one of the two.
 */
export type SlotBatchOwner = SlotOwner

/**
 * The block a slot batch lives in, as {@link SlotBatchOwner.slotResolved} names it: `batchId(index)`
 * reads the batch's id during that call (the slot is reused later). Opaque otherwise.
 */
export type { SlotBlock }

/** The batches of one source, as slots. */
export class SlotBatches {
  /** The most records one batch may have; a runtime sends larger ones with a notifier. */
  static readonly MAX_EVENTS = MAX_SLOT_EVENTS - 1

  readonly #opener: SlotOpener

  /**
   * `owner` is told what became of every batch opened here; `sourceId` names the source in ids and
   * leak reports. An owner without both methods (from untyped code) throws a `TypeError` here, not
   * when a batch resolves.
   */
  constructor(
    readonly sourceId: string | undefined,
    owner: SlotBatchOwner,
  ) {
    // Told inside someone else's end, a missing method was an uncaught exception per batch (and
    // with no owner at all, a leak was never reported: a block without owner reads as free).
    const o = owner as Partial<SlotBatchOwner> | null | undefined
    if (typeof o?.slotResolved !== 'function' || typeof o.batchResolved !== 'function') {
      throw new TypeError(
        `slot batches of source ${sourceId ?? 'unknown'}: the owner must have slotResolved and batchResolved methods, got ${shown(owner)}`,
      )
    }
    this.#opener = new SlotOpener(sourceId, owner, LeakDetector._arm)
  }

  /** The id a batch stamped with `ms` (after the epoch) and `seq` has: see {@link SlotBatches.lastIdMs}. */
  static idOf(ms: number, seq: number): string {
    return idOf(ms, seq)
  }

  /**
   * The id's millisecond (after the epoch) of the batch made last; with `lastIdSeq`, its id. Read
   * it right after {@link SlotBatches.fromRecords} or {@link SlotBatches.adopt}: once that batch
   * has resolved, its slot may be reused, and reading it throws a `FinalizationError`
   * (`USE_AFTER_END`); before any batch was made, a `TypeError`.
   */
  get lastIdMs(): number {
    const index = this.#lastIndex()
    return this.#opener.block!.idMs(index)
  }

  /** The id's counter of the batch made last; read it as {@link SlotBatches.lastIdMs}. */
  get lastIdSeq(): number {
    const index = this.#lastIndex()
    return this.#opener.block!.idSeq(index)
  }

  /** The index of the batch made last in its block; throws when it is not known any more. */
  #lastIndex(): number {
    const index = this.#opener.lastIndex()
    if (index >= 0) return index
    if (this.#opener.block === undefined) {
      throw new TypeError(`slot batches of source ${this.sourceId ?? 'unknown'}: no batch was made yet`)
    }
    // Its block was reused: the slot now reads NaN, or the id of a batch another source made.
    throw new FinalizationError(
      'USE_AFTER_END',
      'cannot read the id of the last slot batch: it resolved and its slot was reused; read it right after the batch was made',
      this.sourceId,
    )
  }

  /**
   * Makes `event`, a live handle without finalizers (a new one, say, read back from storage with
   * its own source id and ingest time), the one event of a new batch opened at `now` (a clock
   * reading the caller has just taken; otherwise the clock is read). The event is attached and
   * the source's reference released, as `BatchNotifier.open` + `attach` + `release` would do;
   * `tracking` as in {@link SlotBatches.fromRecords}. Throws a `FinalizationError` for an event
   * that ended, a `TypeError` for one that already has finalizers.
   */
  adopt(event: LogEvent, now: number, tracking?: unknown): void {
    if (event._ref === null) {
      throw new FinalizationError(
        'USE_AFTER_END',
        'cannot make a batch of an event whose handle has ended',
        event._sourceId,
      )
    }
    if (event._ref !== undefined) {
      throw new TypeError(
        `cannot make a slot batch of an event from source ${event._sourceId ?? 'unknown'} that already has finalizers`,
      )
    }
    const at = stampTime(now)
    const opener = this.#opener
    const index = opener.open(1, at, msSinceEpoch(at), tracking)
    event._ref = opener.chunk!
    event._slot = index
  }

  /**
   * Makes one batch of `records` (1 to {@link SlotBatches.MAX_EVENTS} of them; a `RangeError`
   * otherwise): an array of new events, each of the batch, ingested at `ingestTimestamp` (a
   * clock reading the caller has just taken, ms since 1970; it also stamps the batch's id, so
   * never a time taken from the data; a value that is not an integer from 0 to 2^48 - 1 reads
   * the clock instead). The source holds no reference:
   * the batch resolves when every handle of its events has ended. `tracking` is what the owner
   * keeps for the batch (`block.trackingOf(index)` in `slotResolved`), and becomes the batch's
   * receiver's `tracking` if it gets a receiver; it must not refer to the events (whose token it would keep).
   */
  fromRecords(records: readonly JsonObject[], ingestTimestamp: number, tracking?: unknown): EventArray {
    const n = records.length
    // Written so that a length that is no integer (a Set's `undefined`, an array-like's 1.5, from
    // untyped code) fails it too, before a slot is opened.
    if (!((n | 0) === n && n >= 1 && n <= SlotBatches.MAX_EVENTS)) {
      throw new RangeError(`a slot batch has 1 to ${SlotBatches.MAX_EVENTS} records, not ${n}`)
    }
    // As `BatchNotifier.open`: a value that is not a clock reading in a UUID v7's range reads the clock.
    const now = stampTime(ingestTimestamp)
    const opener = this.#opener
    const ingest = sinceEpoch(now)
    // A time the epoch's small integers cannot hold exactly is kept as an object (see `epoch.ts`).
    const index = opener.open(n, now, typeof ingest === 'number' ? ingest : msSinceEpoch(now), tracking)
    const chunk = opener.chunk!
    const sourceId = this.sourceId
    const events = new Array<LogEvent>(n)
    // An event's slot keeps its batch's index in the low bits and its own slot above them.
    for (let i = 0; i < n; i++)
      events[i] = new LogEvent(records[i]!, undefined, sourceId, ingest, chunk, index + i * CHUNK)
    return new EventArray(events)
  }
}
