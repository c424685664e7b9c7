/**
 * A source's batches kept as slots of a shared block of numbers instead of a notifier and a
 * state each (RFC 0009): for a runtime that sends batches whose receipt nobody reads.
 *
 * A batch made here behaves as one made with a `BatchNotifier`, released at once: the same
 * statuses, the same fold, the same leak detection (its events hold a token shared by the
 * block's 64 batches, which the leak detector watches as it watches notifiers' tokens). What
 * differs is only what the runtime is told: {@link SlotBatchOwner.slotResolved} with the status,
 * where a notifier's listener would get a receiver. A batch that needs more than counting (a
 * reason, an authoritative record, a merge, a detach, a receipt, `LeakDetector.forEachUnresolved`)
 * gets a state made from its slot, and from then on is an ordinary batch whose listener is the
 * owner (`batchResolved`).
 *
 * @module
 */
import { EventArray } from './EventArray.js'
import { msSinceEpoch, sinceEpoch } from './internal/epoch.js'
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

  /** `owner` is told what became of every batch opened here; `sourceId` names the source in ids and leak reports. */
  constructor(
    readonly sourceId: string | undefined,
    owner: SlotBatchOwner,
  ) {
    this.#opener = new SlotOpener(sourceId, owner, LeakDetector._arm)
  }

  /**
   * Makes one batch of `records` (1 to {@link SlotBatches.MAX_EVENTS} of them; a `RangeError`
   * otherwise): an array of new events, each of the batch, ingested at `ingestTimestamp` (a
   * clock reading, ms since 1970; it also stamps the batch's id). The source holds no reference:
   * the batch resolves when every handle of its events has ended.
   */
  fromRecords(records: readonly JsonObject[], ingestTimestamp: number): EventArray {
    const n = records.length
    if (n < 1 || n > SlotBatches.MAX_EVENTS) {
      throw new RangeError(`a slot batch has 1 to ${SlotBatches.MAX_EVENTS} records, not ${n}`)
    }
    const opener = this.#opener
    const ingest = sinceEpoch(ingestTimestamp)
    // A time the epoch's small integers cannot hold exactly is kept as an object (see `epoch.ts`).
    const index = opener.open(
      n,
      ingestTimestamp,
      typeof ingest === 'number' ? ingest : msSinceEpoch(ingestTimestamp),
    )
    const chunk = opener.chunk!
    const sourceId = this.sourceId
    const events = new Array<LogEvent>(n)
    // An event's slot keeps its batch's index in the low bits and its own slot above them.
    for (let i = 0; i < n; i++)
      events[i] = new LogEvent(records[i]!, undefined, sourceId, ingest, chunk, index + i * CHUNK)
    return new EventArray(events)
  }
}
