/**
 * The unit that travels between components: an array of event handles.
 *
 * Invariant: an `EventArray` owns the handles it holds; whoever receives it takes over the duty
 * to end (or pass on) each of them exactly once.
 *
 * @module
 */
import type { BatchNotifier } from './BatchNotifier.js'
import type { DeliveryStatus } from './EventStatus.js'
import { FinalizationError } from './FinalizationError.js'
import { sinceEpoch } from './internal/epoch.js'
import { endRuns } from './internal/refs.js'
import { shown } from './internal/shown.js'
import { deliveryStatusCode, ERRORED } from './internal/statusCodes.js'
import type { JsonObject } from './JsonValue.js'
import { type EndOptions, LogEvent, type LogEventOptions } from './LogEvent.js'

/** What `fromRecords` reads when given no options. */
const NO_OPTIONS: FromRecordsOptions = {}

/** What a list that is no array is shown as in an error: `null`, or the length it had. */
const lengthOf = (list: unknown, n: unknown): string =>
  list == null ? shown(list) : `a length of ${shown(n)}`

/** Options of {@link EventArray.fromRecords}. */
export interface FromRecordsOptions extends LogEventOptions {
  /**
   * The batch every new event joins, as if attached with {@link EventArray.attach}; none when
   * unset (acknowledgements off).
   */
  readonly batch?: BatchNotifier | undefined
  /**
   * Whether to release the source's reference to `batch` afterwards (default true: the records
   * are the whole batch). Pass false to add more events to the same batch later.
   */
  readonly release?: boolean
}

/**
 * An ordered array of events that moves through a topology as one unit.
 *
 * @example
 * ```ts
 * const array = EventArray.of(new LogEvent({ n: 1 }), new LogEvent({ n: 2 }))
 * const { notifier, receiver } = BatchNotifier.create()
 * array.attach(notifier) // attaches and releases the source's reference
 * array.end('delivered')
 * await receiver // 'delivered'
 * ```
 */
export class EventArray implements Iterable<LogEvent> {
  /** The handles, in order. */
  declare readonly events: readonly LogEvent[]

  /**
   * An array of `events` (not copied). Events that are no array (no whole `length`: a `Set` or
   * `null` from untyped code) throw a `TypeError`.
   */
  constructor(events: readonly LogEvent[]) {
    // `?.`: `null` from untyped code is refused below, not met as a raw null read.
    const n = events?.length
    // One comparison per array: from untyped code, a `Set` (no length) attached nothing and added
    // NaN to its batch's counts (it never resolved), and ending it ended nothing, silently.
    if ((n | 0) !== n || n < 0) {
      throw new TypeError(`EventArray: events must be an array, got ${lengthOf(events, n)}`)
    }
    this.events = events
  }

  /** An array of the given events. */
  static of(...events: LogEvent[]): EventArray {
    return new EventArray(events)
  }

  /** An array of the events an iterable yields; `null` or `undefined` throws a `TypeError`. */
  static from(events: Iterable<LogEvent>): EventArray {
    if (events == null) {
      throw new TypeError(`EventArray.from: events must be an iterable of LogEvent, got ${shown(events)}`)
    }
    return new EventArray(Array.from(events))
  }

  /**
   * One new event per record (the record becomes its fields, not copied), all with the same
   * source id and ingest timestamp (default: now), each already in `options.batch` when given.
   * This is what a source does with a batch it read; it does in one pass what `new LogEvent` per
   * record and then {@link EventArray.attach} do in three. `records` that are no array (no whole
   * `length`: a `Set` from untyped code) throw a `TypeError` before the batch is touched; `null`
   * options are none.
   *
   * @example
   * ```ts
   * const { notifier, receiver } = BatchNotifier.create({ sourceId: 'in' })
   * const array = EventArray.fromRecords(records, { sourceId: 'in', batch: notifier })
   * ```
   */
  static fromRecords(records: readonly JsonObject[], options?: FromRecordsOptions): EventArray {
    // `null` (untyped code) is no options, as `undefined` is.
    const given = options ?? NO_OPTIONS
    const n = records?.length
    // One comparison per batch: from untyped code, a `Set` (no length) made an array holding one
    // `undefined` and a batch counting NaN events, which never resolved.
    if ((n | 0) !== n || n < 0) {
      throw new TypeError(`EventArray.fromRecords: records must be an array, got ${lengthOf(records, n)}`)
    }
    const events = new Array<LogEvent>(n)
    const sourceId = given.sourceId
    const ingest = sinceEpoch(given.ingestTimestamp ?? Date.now())
    const batch = given.batch
    // Fresh events cannot have ended, so nothing needs checking before the slots are taken.
    const first = batch === undefined ? 0 : batch._state.addSlots(n)
    for (let i = 0; i < n; i++) {
      events[i] = new LogEvent(
        records[i]!,
        undefined,
        sourceId,
        ingest,
        batch,
        batch === undefined ? 0 : first + i,
      )
    }
    if (batch !== undefined && given.release !== false) batch.release()
    return new EventArray(events)
  }

  /** How many events the array holds. */
  get length(): number {
    return this.events.length
  }

  /** The events, in order (the same as iterating `events`). */
  [Symbol.iterator](): Iterator<LogEvent> {
    return this.events[Symbol.iterator]()
  }

  /**
   * Attaches `notifier` to every event, then releases the source's reference to it (the array is
   * the whole batch). Pass `{ release: false }` to attach more events to the same batch later.
   */
  attach(notifier: BatchNotifier, options: { readonly release?: boolean } = {}): this {
    // Read first: options that cannot be read (null, from untyped code) must throw before the
    // events join the batch, not leave them in it with the source's reference never released.
    const release = options.release !== false
    const events = this.events
    // Check every handle first: a throw half-way would leave live references that no handle holds.
    for (let i = 0; i < events.length; i++) events[i]!._live('attach a batch to')
    const first = notifier._state.addSlots(events.length)
    for (let i = 0; i < events.length; i++) {
      const event = events[i]!
      if (event._ref === undefined) {
        event._ref = notifier
        event._slot = first + i
      } else {
        event._put(notifier, first + i)
      }
    }
    if (release) notifier.release()
    return this
  }

  /**
   * For runtimes (what a source sends with `sendEvents`): marks every event sent
   * (`LogEvent.isSent`) and passed on (`LogEvent.markPassedOn`), and returns -1. If an event has
   * ended or was sent already (by an earlier send, or earlier in this array), nothing is marked
   * and its index is returned: sent again while a sink holds it, one handle would be in two
   * places, and whichever ended it first would resolve its batches for both. So is the index of
   * an element that is no `LogEvent` (untyped code), rather than a throw that left the events
   * before it marked.
   */
  markSent(): number {
    const events = this.events
    for (let i = 0; i < events.length; i++) {
      const event: unknown = events[i]
      if (event instanceof LogEvent && event._markSent()) continue
      for (let j = 0; j < i; j++) events[j]!._unmarkSent()
      return i
    }
    for (let i = 0; i < events.length; i++) events[i]!.markPassedOn()
    return -1
  }

  /**
   * Clones every event: a second array of handles on the same finalizers. An ended handle throws
   * as `LogEvent.clone` does, and the clones made before it are ended (without a status) first,
   * so no batch waits for a handle nobody holds.
   */
  clone(): EventArray {
    const events = this.events
    const copies = new Array<LogEvent>(events.length)
    let i = 0
    try {
      for (; i < events.length; i++) copies[i] = events[i]!.clone()
    } catch (error) {
      // Undone here rather than checked before: a pass over every handle would cost each fan-out.
      for (let j = 0; j < i; j++) copies[j]!._end(-1, false)
      throw error
    }
    return new EventArray(copies)
  }

  /**
   * Ends every event with the same status (or none). See {@link LogEvent.end}. With a `reason`,
   * every handle is checked first: one already ended throws `ALREADY_ENDED` before any event is
   * ended or any batch is given the reason. `null` options are none.
   */
  end(status?: DeliveryStatus, options?: EndOptions): void {
    const code = status === undefined ? -1 : deliveryStatusCode(status)
    // `null` (untyped code) is no options, as `undefined` is.
    if (options == null) {
      endRuns(this.events, code)
      return
    }
    const reason = options.reason
    if (code >= ERRORED && reason !== undefined) {
      // A batch given the reason must be ended by this call: one whose event the call would not
      // reach (it throws at an ended handle first) would show the reason for a later end of its own.
      for (const event of this.events) {
        if (event.isEnded)
          throw new FinalizationError('ALREADY_ENDED', 'an event handle was ended twice', event._sourceId)
      }
      // Before any end: a batch that resolves inside this call must already know why.
      for (const event of this.events) event._explain(code, reason)
    }
    if (options.authoritative === true) {
      for (const event of this.events) event._end(code, true)
    } else {
      endRuns(this.events, code)
    }
  }
}
