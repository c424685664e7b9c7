/**
 * A batch notifier ties the events a source read together so the source learns, once, what became
 * of all of them.
 *
 * Invariant: the batch resolves when every handle of every event attached to it has ended and the
 * source has released its own reference — never before, never twice. Until the source calls
 * {@link BatchNotifier.release}, more events may be attached; after it, attaching throws.
 *
 * @module
 */
import type { BatchStatusReceiver } from './BatchStatusReceiver.js'
import { BatchState } from './internal/BatchState.js'
import { stampTime } from './internal/batchIds.js'
import { LeakDetector } from './LeakDetector.js'
import type { LogEvent } from './LogEvent.js'

/** Options of {@link BatchNotifier.create}. */
export interface BatchNotifierOptions {
  /** The id of the source that reads the batch; named in errors and leak reports. */
  readonly sourceId?: string
  /**
   * Keep each record's outcome (one byte per event attached, in attach order), for the receiver's
   * `outcomes`. Off by default: a batch that does not ask pays nothing. See `RecordOutcomes`.
   */
  readonly outcomes?: boolean
}

/** A notifier with its receiver, as {@link BatchNotifier.create} returns them. */
export interface BatchNotifierWithReceiver {
  /** The notifier to attach to the batch's events. */
  readonly notifier: BatchNotifier
  /** Resolves with the batch's folded status once every event attached to the notifier has ended. */
  readonly receiver: BatchStatusReceiver
}

/**
 * The events' side of a batch: attach it to every event of the batch, then release it.
 *
 * @example
 * ```ts
 * const { notifier, receiver } = BatchNotifier.create({ sourceId: 'http' })
 * for (const event of events) notifier.attach(event)
 * notifier.release()
 * respond(await receiver)
 * ```
 */
export class BatchNotifier {
  /** @internal */
  readonly _state: BatchState
  /** @internal What the leak detector watches for this batch (shared with neighbouring batches). */
  _watched: object | undefined = undefined

  private constructor(state: BatchState) {
    this._state = state
  }

  /** Creates a notifier and the receiver that will learn its batch's status; `null` options are none. */
  static create(options?: BatchNotifierOptions): BatchNotifierWithReceiver {
    // `null` (untyped code) is no options, as `undefined` is: it threw a raw null read.
    const notifier = BatchNotifier.open(options?.sourceId, options?.outcomes === true)
    return { notifier, receiver: notifier.receiver }
  }

  /**
   * Creates a notifier alone; its receiver is {@link BatchNotifier.receiver}. The same as
   * {@link BatchNotifier.create} without the object pairing the two: what a runtime that makes a
   * batch per message uses. `now` is the clock reading (`Date.now()`) a caller has just taken
   * (the ingest time of the batch's events, say): the batch's id is stamped with it instead of a
   * clock read of its own. Pass only such a reading, never a time taken from the data: a time
   * ahead of the clock moves every later id of the process to that millisecond until the clock
   * catches up (ids never go backwards). A value that is not a time in milliseconds (not an
   * integer from 0 to 2^48 - 1, the range of a UUID v7 time), or none, reads the clock.
   */
  static open(sourceId?: string, outcomes = false, now?: number): BatchNotifier {
    const state = new BatchState(sourceId, outcomes, stampTime(now))
    const notifier = new BatchNotifier(state)
    LeakDetector.watch(notifier, state)
    return notifier
  }

  /**
   * @internal A notifier for `state`, which is watched through `watched` (a block's token, see
   * `slots.ts`): whoever holds the notifier keeps the token.
   */
  static _adopt(state: BatchState, watched: object): BatchNotifier {
    const notifier = new BatchNotifier(state)
    notifier._watched = watched
    return notifier
  }

  /** The receiver of this batch: what its source learns. */
  get receiver(): BatchStatusReceiver {
    return this._state
  }

  /**
   * Creates a notifier only when acknowledgements are on. With `enabled` false it returns
   * `undefined`, and events of that batch carry no finalizer at all: acknowledgements off costs
   * nothing per event.
   */
  static maybeCreate(
    enabled: boolean,
    options: BatchNotifierOptions = {},
  ): BatchNotifierWithReceiver | undefined {
    return enabled ? BatchNotifier.create(options) : undefined
  }

  /**
   * The batch's id: a UUID v7. Ids sort by creation order (the millisecond and a counter within
   * it are taken when the batch is created); the id itself is written from them on each read (the
   * same id every time), so a batch whose id nobody reads costs no UUID. Read it once and keep it
   * where it is used often.
   */
  get id(): string {
    return this._state.id
  }

  /** The source that created the batch, if it said. */
  get sourceId(): string | undefined {
    return this._state.sourceId
  }

  /** Whether the source has released its own reference. */
  get isReleased(): boolean {
    return this._state.released
  }

  /**
   * Makes `event` part of this batch: the batch will not resolve before every handle of the event
   * has ended. An event may belong to several batches. Throws a `FinalizationError` after
   * {@link BatchNotifier.release} or on an ended event.
   */
  attach(event: LogEvent): void {
    event._attach(this)
  }

  /**
   * Ends the source's own reference: no more events will be attached. Releasing twice is harmless.
   * A batch with no events resolves `delivered` here.
   */
  release(): void {
    this._state.releaseSource()
  }
}
