/**
 * Runs one source: gives it a context whose `send` makes events and batch notifiers, waits for
 * room downstream, and hands back a receipt.
 *
 * Invariant: with acknowledgements off for this source, no notifier is created and the receipt
 * says `delivered` once the batch is accepted; with them on, the receipt is decided by the
 * {@link BatchTracker}, exactly once. A source that keeps the event loop from turning (sends
 * accepted at once, no I/O of its own) is held after a slice until it turns (see `loopTurns.ts`).
 */
import {
  BatchNotifier,
  type BatchStatus,
  EventArray,
  type JsonObject,
  LogEvent,
  RecordOutcomes,
  SlotBatches,
} from '@ackline/core'
import { ComponentError } from '../ComponentError.js'
import {
  type BatchReceipt,
  NO_RECEIPT,
  type SendOptions,
  type Source,
  type SourceContext,
} from '../Source.js'
import { type BatchTracker, SlotReceipt } from './BatchTracker.js'
import type { Counters } from './Counters.js'
import { awaitLoopTurn } from './loopTurns.js'
import { RESOLVED } from './MemoryChannel.js'
import type { Output } from './Output.js'
import { sendClockNow } from './sendClock.js'

/** The receipt of every batch sent with acknowledgements off: delivered once accepted. */
const ACCEPTED: BatchReceipt = Object.freeze({
  batchId: undefined,
  status: Promise.resolve<BatchStatus>('delivered'),
  failure: undefined,
})
const ACCEPTED_NOW: Promise<BatchReceipt> = Promise.resolve(ACCEPTED)
/** What a send with `{ receipt: false }` resolves to when it did not wait. */
const UNREAD_NOW: Promise<BatchReceipt> = Promise.resolve(NO_RECEIPT)
const unread = (): BatchReceipt => NO_RECEIPT
/** Settles once the batch was accepted (`pushed`) and the loop turned when it had to (`turn`). */
const afterTurn = (pushed: Promise<void>, turn: Promise<void> | undefined): Promise<void> =>
  turn === undefined ? pushed : pushed === RESOLVED ? turn : pushed.then(() => turn)
/** What a send with `{ receipt: false }` returns: `NO_RECEIPT` once accepted (as `afterTurn`). */
const unreadAfter = (pushed: Promise<void>, turn: Promise<void> | undefined): Promise<BatchReceipt> =>
  pushed === RESOLVED && turn === undefined ? UNREAD_NOW : afterTurn(pushed, turn).then(unread)

export class SourceRunner {
  readonly context: SourceContext

  constructor(
    readonly id: string,
    readonly source: Source,
    readonly acknowledgements: boolean,
    readonly output: Output,
    readonly counters: Counters,
    readonly tracker: BatchTracker,
    readonly signal: AbortSignal,
  ) {
    this.context = {
      id,
      acknowledgements,
      signal,
      send: (records, options) => this.#send(records, options),
      sendEvents: (events) => {
        // Untyped code may pass a plain array of events: taken in, it failed the consumer that read it.
        if (!(events instanceof EventArray)) return Promise.reject(notAnEventArray(id, events))
        // Marked sent and passed on (not the consumer's own) in the pass that checks them: a handle
        // sent again sat in two places, and whichever ended it first resolved its batches for both.
        const refused = events.markSent()
        if (refused >= 0) return Promise.reject(notSendable(id, refused, events.events[refused]))
        this.counters.received += events.length
        const turn = awaitLoopTurn(sendClockNow(events.length))
        return afterTurn(this.output.send(events), turn)
      },
    }
  }

  /**
   * Runs the source. Never throws: a `run` that throws at once (one that is not `async`) rejects
   * instead, and one that returns no promise (untyped code) has finished, so the runtime reports
   * the failure and closes what the source feeds rather than be left half-launched.
   */
  run(): Promise<void> {
    try {
      return Promise.resolve(this.source.run(this.context))
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** The source's batches sent with `receipt: false`, kept as slots (RFC 0009); made on the first. */
  #slots: SlotBatches | undefined = undefined

  /**
   * Not an async function: when every consumer has room, the batch is made, attached and queued
   * in this call, and the only promise is the one handed back (already resolved), with no async
   * frame. When a consumer is full, the returned promise waits for the room, as before.
   */
  #send(records: Iterable<JsonObject>, options?: SendOptions): Promise<BatchReceipt> {
    try {
      const quiet = options?.receipt === false
      if (quiet && options.outcomes === true) {
        throw new TypeError(
          `source '${this.id}': a send with outcomes: true needs its receipt (it was sent with receipt: false)`,
        )
      }
      const sourceId = this.id
      const list = Array.isArray(records) ? (records as readonly JsonObject[]) : Array.from(records)
      // Before any batch is made: one of these as an event's fields fails far from its cause.
      for (let i = 0; i < list.length; i++) {
        const record: unknown = list[i]
        if (typeof record !== 'object' || record === null || Array.isArray(record)) {
          throw notARecord(this.id, i, record)
        }
      }
      const ingestTimestamp = sendClockNow(list.length)
      this.counters.received += list.length
      const turn = awaitLoopTurn(ingestTimestamp)
      if (!this.acknowledgements) {
        const pushed = this.output.send(EventArray.fromRecords(list, { sourceId, ingestTimestamp }))
        if (quiet) return unreadAfter(pushed, turn)
        if (options?.outcomes !== true)
          return pushed === RESOLVED && turn === undefined
            ? ACCEPTED_NOW
            : afterTurn(pushed, turn).then(() => ACCEPTED)
        const receipt: BatchReceipt = {
          batchId: undefined,
          status: ACCEPTED.status,
          failure: undefined,
          outcomes: Promise.resolve(RecordOutcomes.all('delivered', list.length)),
        }
        return pushed === RESOLVED && turn === undefined
          ? Promise.resolve(receipt)
          : afterTurn(pushed, turn).then(() => receipt)
      }
      if (
        options?.outcomes !== true &&
        this.tracker.ackTimeoutMs === undefined &&
        list.length >= 1 &&
        list.length <= SlotBatches.MAX_EVENTS
      ) {
        // Without outcomes or an ack timeout (whose queue keeps receivers) the batch is a slot of
        // the source (RFC 0009): no notifier, no state; a kept receipt is its one object.
        if (this.#slots === undefined) this.#slots = new SlotBatches(sourceId, this.tracker)
        const slots = this.#slots
        if (quiet) {
          const array = slots.fromRecords(list, ingestTimestamp)
          this.tracker.followSlot()
          return unreadAfter(this.output.send(array), turn)
        }
        const receipt = new SlotReceipt()
        const array = slots.fromRecords(list, ingestTimestamp, receipt)
        receipt.idMs = slots.lastIdMs
        receipt.idSeq = slots.lastIdSeq
        this.tracker.followSlot()
        const pushed = this.output.send(array)
        return pushed === RESOLVED && turn === undefined
          ? Promise.resolve<BatchReceipt>(receipt)
          : afterTurn(pushed, turn).then(() => receipt)
      }
      const notifier = BatchNotifier.open(sourceId, options?.outcomes === true, ingestTimestamp)
      // The events join the batch as they are made, and the source's reference is released (the
      // records are the whole batch).
      const array = EventArray.fromRecords(list, { sourceId, ingestTimestamp, batch: notifier })
      if (quiet) {
        this.tracker.follow(notifier.receiver)
        return unreadAfter(this.output.send(array), turn)
      }
      const receipt = this.tracker.track(notifier.receiver)
      const pushed = this.output.send(array)
      return pushed === RESOLVED && turn === undefined
        ? Promise.resolve(receipt)
        : afterTurn(pushed, turn).then(() => receipt)
    } catch (error) {
      return Promise.reject(error)
    }
  }
}

/** What untyped code passed where a class of ours was due, as a message names it. */
function kindOf(value: unknown): string {
  return value === null || value === undefined
    ? String(value)
    : Array.isArray(value)
      ? 'an array'
      : typeof value === 'object'
        ? 'another object'
        : `a ${typeof value}`
}

/** What `sendEvents` rejects with for anything but an `EventArray`. */
function notAnEventArray(id: string, value: unknown): TypeError {
  return new TypeError(`source '${id}': sendEvents takes an EventArray, got ${kindOf(value)}`)
}

/**
 * What `sendEvents` rejects with for an array holding a handle that has ended or that a send took
 * already, or something that is no `LogEvent` (untyped code): nothing of the array is sent.
 */
function notSendable(
  id: string,
  index: number,
  event: unknown,
): ComponentError<'ALREADY_SENT' | 'USE_AFTER_END'> | TypeError {
  if (!(event instanceof LogEvent)) {
    return new TypeError(
      `source '${id}': sendEvents: event ${index} of the array is ${kindOf(event)}, not a LogEvent; nothing of the array was sent`,
    )
  }
  if (event.isEnded) {
    return new ComponentError(
      'USE_AFTER_END',
      `event ${index} of the array has ended: nothing of the array was sent`,
      { component: id, field: 'sendEvents' },
    )
  }
  return new ComponentError(
    'ALREADY_SENT',
    `event ${index} of the array was sent already (by an earlier sendEvents, or earlier in this array): a handle is sent once, send a clone() for another copy; nothing of the array was sent`,
    { component: id, field: 'sendEvents' },
  )
}

/** What `send` rejects with for a record that is no JSON object. */
function notARecord(id: string, index: number, record: unknown): TypeError {
  const got = record === null ? 'null' : Array.isArray(record) ? 'an array' : `a ${typeof record}`
  return new TypeError(`source '${id}': record ${index} of a send is ${got}; a record must be a JSON object`)
}
