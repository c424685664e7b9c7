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
import type { BatchState } from './internal/BatchState.js'
import { batchStatusName } from './internal/statusCodes.js'
import type { RecordOutcomes } from './RecordOutcomes.js'

/**
 * An object told when a batch resolves, for runtimes that track many batches: registering the
 * object that tracks the batch (see {@link BatchStatusReceiver.onResolved}) costs no closure per
 * batch. It is called as a function listener is, with the receiver that resolved.
 */
export interface BatchResolvedListener {
  batchResolved(status: BatchStatus, receiver: BatchStatusReceiver): void
}

type Listener = ((status: BatchStatus) => void) | BatchResolvedListener

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
  // class), so a batch costs one object less; this field is the receiver's own (the status is
  // the state's, the promise's resolver one more listener, the promise kept with the state's
  // rarely used fields: a runtime listens rather than awaits), as every field is paid per batch.
  /** The listeners: one (the common case), or an array of several. */
  #listeners: Listener | Listener[] | undefined = undefined

  /** @internal Use `BatchNotifier.create()`: only a batch's state is a receiver. */
  protected constructor() {}

  get #state(): BatchState {
    return this as unknown as BatchState
  }

  /** The id of the batch this receiver reports on (a UUID v7; see `BatchNotifier.id`). */
  get batchId(): string {
    return this.#state.id
  }

  /** The final status, or `undefined` while the batch is still in flight. */
  get status(): BatchStatus | undefined {
    const state = this.#state
    return state.resolved ? batchStatusName(state.code) : undefined
  }

  /**
   * Why the batch is not `delivered`: the `reason` given by the first end that explained the
   * status the batch has (see `EndOptions.reason`); `undefined` while it is delivered, or when no
   * end with that status gave a reason. Read it once the batch resolved: it is final then.
   */
  get reason(): unknown {
    return this.#state._explanation
  }

  /**
   * Each record's outcome, in attach order, once the batch resolved; `undefined` before, and
   * always for a batch created without `outcomes: true`.
   */
  get outcomes(): RecordOutcomes | undefined {
    return this.#state._finalOutcomes()
  }

  /** Whether the batch keeps per-record outcomes (it was created with `outcomes: true`). */
  get keepsOutcomes(): boolean {
    return this.#state.outcomeCodes !== undefined
  }

  /**
   * The outcomes a source must act on when its batch is decided before it resolves (an ack
   * timeout, or every record already recorded by an authoritative sink): records recorded or
   * rejected as they stand, every other one `errored`. Once resolved, the final
   * {@link outcomes}. `undefined` for a batch that keeps none.
   */
  outcomesNow(): RecordOutcomes | undefined {
    return this.#state._outcomesNow()
  }

  /** How many events were attached to the batch so far. */
  get eventCount(): number {
    return this.#state.events
  }

  /** Whether the batch has resolved. */
  get isResolved(): boolean {
    return this.#state.resolved
  }

  /** A promise of the final status; it never rejects. Created on first use only. */
  get promise(): Promise<BatchStatus> {
    const rare = this.#state._rare()
    if (rare.promise === undefined) {
      const status = this.status
      rare.promise =
        status !== undefined
          ? Promise.resolve(status)
          : new Promise<BatchStatus>((resolve) => {
              this.#add(resolve)
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
   */
  onResolved(listener: ((status: BatchStatus) => void) | BatchResolvedListener): void {
    const status = this.status
    if (status !== undefined) {
      call(listener, status, this)
      return
    }
    this.#add(listener)
  }

  #add(listener: Listener): void {
    const listeners = this.#listeners
    if (listeners === undefined) this.#listeners = listener
    else if (Array.isArray(listeners)) listeners.push(listener)
    else this.#listeners = [listeners, listener]
  }

  /** @internal Called once by the batch state when the batch has resolved (`status` reads it already). */
  _resolve(status: BatchStatus): void {
    const listeners = this.#listeners
    if (listeners === undefined) return
    this.#listeners = undefined
    if (!Array.isArray(listeners)) call(listeners, status, this)
    else for (let i = 0; i < listeners.length; i++) call(listeners[i]!, status, this)
  }
}

function call(listener: Listener, status: BatchStatus, receiver: BatchStatusReceiver): void {
  try {
    if (typeof listener === 'function') listener(status)
    else listener.batchResolved(status, receiver)
  } catch (error) {
    queueMicrotask(() => {
      throw error
    })
  }
}
