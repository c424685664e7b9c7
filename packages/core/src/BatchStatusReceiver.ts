/**
 * The source's side of a batch notifier: it learns the batch's final status, exactly once.
 *
 * Invariant: `status` is `undefined` until the batch resolves and never changes after; every
 * awaiter and every subscriber sees the same single value.
 *
 * @module
 */
import { Observable } from 'rxjs'
import type { BatchStatus } from './BatchStatus.js'
import type { BatchState, Listeners } from './internal/BatchState.js'
import { endClockNow } from './internal/endClock.js'
import { timeOf } from './internal/epoch.js'
import { shown } from './internal/shown.js'
import { batchStatusName } from './internal/statusCodes.js'
import type { RecordOutcomes } from './RecordOutcomes.js'

/**
 * An object told when a batch resolves, for runtimes that track many batches: registering the
 * object that tracks the batch (see {@link BatchStatusReceiver.onResolved}) costs no closure per
 * batch. It is called as a function listener is, with the receiver that resolved.
 */
export interface BatchResolvedListener {
  /**
   * `now` is a clock reading (`Date.now()`) for the batch's resolution, never earlier than the
   * batch was opened (`receiver.openedAt`), unless the clock stepped back: inside an
   * `EventArray.end` call that ends handles by runs (not `authoritative`), every batch it resolves
   * shares the reading taken at the first one, including batches resolved by code a listener
   * runs meanwhile (one opened after that reading gets a reading of its own); elsewhere the
   * clock is read for the batch alone. A listener registered on a receiver that had resolved
   * already is told at once, with the time of registration.
   */
  batchResolved(status: BatchStatus, receiver: BatchStatusReceiver, now: number): void
}

/** @internal What a receiver tells: a function, or a {@link BatchResolvedListener}. */
export type Listener = ((status: BatchStatus) => void) | BatchResolvedListener

/**
 * Awaitable and observable final status of one batch.
 *
 * @example
 * ```ts
 * const { notifier, receiver } = BatchNotifier.create({ sourceId: 'in' })
 * // … attach, release, let sinks end the events …
 * const status = await receiver // 'delivered' | 'errored' | 'rejected'
 * ```
 */
export class BatchStatusReceiver implements PromiseLike<BatchStatus> {
  // The receiver and the state of its batch are one object (a `BatchState`, which extends this
  // class), so a batch costs one object less. The receiver keeps no field of its own: its
  // listeners share a field with the state's rarely used part (the promise's resolver is one
  // more listener, the promise kept with the rare part: a runtime listens rather than awaits),
  // as every field is paid per batch.

  /** @internal Use `BatchNotifier.create()`: only a batch's state is a receiver. */
  protected constructor() {}

  /**
   * Whether `listener` will be told when the batch resolves: it registered with
   * {@link BatchStatusReceiver.onResolved} and the batch has not resolved yet (a receiver forgets
   * its listeners once it has told them). How a runtime that listens to many batches tells its
   * own from others' without keeping a set of them.
   */
  hasListener(listener: BatchResolvedListener): boolean {
    const listeners = stateOf(this).listeners
    return listeners === listener || (Array.isArray(listeners) && listeners.includes(listener))
  }

  /**
   * When the batch was opened, in ms since the epoch: the clock reading its notifier was opened
   * with (see `BatchNotifier.open`). What a batch's latency is measured from.
   */
  get openedAt(): number {
    return timeOf(stateOf(this).opened)
  }

  /**
   * One value kept with the batch for the runtime that tracks it (what it decided, a failure, a
   * source waiting for the decision), so that runtime keeps no object of its own per batch. Core
   * never reads it; `undefined` until set. Only the code that tracks the batch (the runtime that
   * gave its source a receipt) may set it. It is kept with the batch's rarely used fields: a batch
   * whose runtime never sets it pays nothing for it.
   */
  get tracking(): unknown {
    return stateOf(this).rare?.tracking
  }

  set tracking(value: unknown) {
    stateOf(this)._rare().tracking = value
  }

  /** The id of the batch this receiver reports on (a UUID v7; see `BatchNotifier.id`). */
  get batchId(): string {
    return stateOf(this).id
  }

  /** The final status, or `undefined` while the batch is still in flight. */
  get status(): BatchStatus | undefined {
    const state = stateOf(this)
    return state.resolved ? batchStatusName(state.code) : undefined
  }

  /**
   * Why the batch is not `delivered`: the `reason` given by the first end that explained the
   * status the batch has (see `EndOptions.reason`); `undefined` while it is delivered, or when no
   * end with that status gave a reason. Read it once the batch resolved: it is final then.
   */
  get reason(): unknown {
    return stateOf(this)._explanation
  }

  /**
   * Each record's outcome, in attach order, once the batch resolved; `undefined` before, and
   * always for a batch created without `outcomes: true`.
   */
  get outcomes(): RecordOutcomes | undefined {
    return stateOf(this)._finalOutcomes()
  }

  /** Whether the batch keeps per-record outcomes (it was created with `outcomes: true`). */
  get keepsOutcomes(): boolean {
    return stateOf(this).outcomeCodes !== undefined
  }

  /**
   * The outcomes a source must act on when its batch is decided before it resolves (an ack
   * timeout, or every record already recorded by an authoritative sink): records recorded or
   * rejected as they stand, every other one `errored`. Once resolved, the final
   * {@link outcomes}. `undefined` for a batch that keeps none.
   */
  outcomesNow(): RecordOutcomes | undefined {
    return stateOf(this)._outcomesNow()
  }

  /** How many events were attached to the batch so far. */
  get eventCount(): number {
    return stateOf(this).events
  }

  /** Whether the batch has resolved. */
  get isResolved(): boolean {
    return stateOf(this).resolved
  }

  /** A promise of the final status; it never rejects. Created on first use only. */
  get promise(): Promise<BatchStatus> {
    const rare = stateOf(this)._rare()
    if (rare.promise === undefined) {
      const status = this.status
      rare.promise =
        status !== undefined
          ? Promise.resolve(status)
          : new Promise<BatchStatus>((resolve) => {
              const state = stateOf(this)
              state.listeners = added(state.listeners, resolve)
            })
    }
    return rare.promise
  }

  // biome-ignore lint/suspicious/noThenProperty: a receiver is awaitable by design.
  then<R1 = BatchStatus, R2 = never>(
    onfulfilled?: ((status: BatchStatus) => R1 | PromiseLike<R1>) | null,
    onrejected?: ((reason: unknown) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
    return this.promise.then(onfulfilled, onrejected)
  }

  /** An Observable that emits the final status once, then completes. */
  asObservable(): Observable<BatchStatus> {
    return new Observable<BatchStatus>((subscriber) => {
      let open = true
      this.promise.then((status) => {
        if (!open) return
        subscriber.next(status)
        subscriber.complete()
      })
      return () => {
        open = false
      }
    })
  }

  /**
   * Calls `listener` once with the final status: synchronously, inside whichever `end` (or
   * `release`) resolved the batch, or at once if it has resolved already. For runtimes that track
   * many batches and want no promise per batch. The listener runs in the middle of someone
   * else's call, so it must be quick and must not end handles or call user code (defer such work);
   * if it throws, the error is rethrown in a microtask, as an uncaught exception, and the batch
   * stays resolved as it was. Prefer `await receiver` elsewhere. `listener` may be an object
   * (a {@link BatchResolvedListener}): its `batchResolved` is called instead, with this receiver.
   * Anything else (from untyped code) throws a `TypeError` here, not when the batch resolves,
   * where calling it would be an uncaught exception inside someone else's `end`.
   */
  onResolved(listener: ((status: BatchStatus) => void) | BatchResolvedListener): void {
    if (
      typeof listener !== 'function' &&
      typeof (listener as BatchResolvedListener | null | undefined)?.batchResolved !== 'function'
    ) {
      throw new TypeError(
        `onResolved: the listener must be a function or have a batchResolved method, got ${shown(listener)}`,
      )
    }
    const status = this.status
    if (status !== undefined) {
      call(listener, status, this)
      return
    }
    const state = stateOf(this)
    state.listeners = added(state.listeners, listener)
  }

  /** @internal Called once by the batch state when the batch has resolved (`status` reads it already). */
  _resolve(status: BatchStatus): void {
    const state = stateOf(this)
    const listeners = state.listeners
    if (listeners === undefined) return
    state.listeners = undefined
    if (!Array.isArray(listeners)) call(listeners, status, this)
    else for (let i = 0; i < listeners.length; i++) call(listeners[i]!, status, this)
  }
}

/**
 * The receiver as the batch state it is. A function, not a private accessor: a class with private
 * methods or accessors gives each instance one more field (its brand), and this one is per batch.
 */
const stateOf = (receiver: BatchStatusReceiver): BatchState => receiver as unknown as BatchState

/** `listeners` with `listener` added: the listener alone while it is the only one, else an array. */
function added(listeners: Listeners, listener: Listener): Listeners {
  if (listeners === undefined) return listener
  if (Array.isArray(listeners)) {
    listeners.push(listener)
    return listeners
  }
  return [listeners, listener]
}

function call(listener: Listener, status: BatchStatus, receiver: BatchStatusReceiver): void {
  try {
    if (typeof listener === 'function') listener(status)
    else {
      let now = endClockNow()
      // A batch opened after the shared reading (by code a listener ran inside the same end).
      if (now < receiver.openedAt) now = Date.now()
      listener.batchResolved(status, receiver, now)
    }
  } catch (error) {
    queueMicrotask(() => {
      throw error
    })
  }
}
