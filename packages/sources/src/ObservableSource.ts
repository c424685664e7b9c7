/**
 * `fromObservable`: a source fed by an rxjs Observable of records, whose acknowledgements come
 * back per record (a callback, or the source's `acks` Observable).
 *
 * Invariant: every record the Observable emitted is acknowledged exactly once: with its batch's
 * status once the batch resolved, or `errored` when the topology stopped before the record could
 * be sent or the pipeline did not accept its batch (so its producer may send it again). An `onAck`
 * that throws (or returns a promise that rejects) is reported to `onWarning` and changes nothing
 * else: the other records are still acknowledged, and `acks` still completes.
 *
 * @module
 */
import type { BatchStatus, JsonObject } from '@ackline/core'
import {
  type BatchReceipt,
  ComponentError,
  type ConfigIssue,
  codeOption,
  defineOptions,
  type OptionsOf,
  type Source,
  type SourceContext,
  textOf,
  warningsTo,
} from '@ackline/topology'
import { type Observable, Subject } from 'rxjs'
import { z } from 'zod'

/**
 * What became of one record: its batch's status, or `errored` if it never entered the pipeline.
 *
 * @example
 * ```ts
 * source.acks.subscribe(({ record, status }) => (status === 'delivered' ? commit(record) : retry(record)))
 * ```
 */
export interface RecordAck<R extends JsonObject = JsonObject> {
  /** The record as it was emitted. */
  readonly record: R
  /** Its batch's status once resolved: `delivered` when every copy was delivered (or dropped), else `errored` (retry) or `rejected` (do not). */
  readonly status: BatchStatus
  /** The batch the record travelled in; `undefined` when acknowledgements are off or it was never sent. */
  readonly batchId: string | undefined
}

/**
 * Options of {@link fromObservable}: its schema (`validate`, `jsonSchema`, …).
 *
 * @example
 * ```ts
 * fromObservable(records$, { batchSize: 10, onAck: ({ record, status }) => console.log(record, status) })
 * ```
 */
export const ObservableSourceOptions = defineOptions({
  batchSize: z
    .int()
    .min(1)
    .default(100)
    .describe('At most this many records per batch; records that arrive together share a batch.'),
  onAck: codeOption<(ack: RecordAck) => void>('a function')
    .optional()
    .describe('Told what became of each record.'),
  onWarning: codeOption<(message: string) => void>('a function')
    .optional()
    .describe(
      'Where warnings go (an onAck that threw). Default: process.emitWarning with code ACKLINE_OBSERVABLE.',
    ),
})
/** Options of {@link fromObservable}; `onAck` sees records of the Observable's type `R`. */
export type ObservableSourceOptions<R extends JsonObject = JsonObject> = Omit<
  OptionsOf<typeof ObservableSourceOptions>,
  'onAck'
> & {
  /** Told what became of each record. */
  readonly onAck?: ((ack: RecordAck<R>) => void) | undefined
}

/**
 * The source {@link fromObservable} returns; `acks` reports every record once. It runs once: a
 * second `run` (the object declared in a second topology) rejects with a `ComponentError` of code
 * `RUNS_ONCE`, sending nothing.
 *
 * @example
 * ```ts
 * const source = fromObservable(records$)
 * source.acks.pipe(filter((a) => a.status !== 'delivered')).subscribe(resend)
 * ```
 */
export interface ObservableSource<R extends JsonObject = JsonObject> extends Source {
  readonly kind: 'observable'
  /** Problems in the options, each naming its field; empty when they are fine. */
  validate(): readonly ConfigIssue[]
  /** What became of each record, as records resolve. Completes once the source finished and every ack was given. */
  readonly acks: Observable<RecordAck<R>>
}

class FromObservable<R extends JsonObject> implements ObservableSource<R> {
  readonly kind = 'observable'
  readonly canAcknowledge = true
  readonly acks: Observable<RecordAck<R>>
  readonly #subject = new Subject<RecordAck<R>>()
  readonly #records: Observable<R>
  readonly #options: ObservableSourceOptions<R>
  /** Set by the first `run`: `acks` completes once it finished, so a second run is refused. */
  #ran = false

  constructor(records: Observable<R>, options: ObservableSourceOptions<R>) {
    this.#records = records
    this.#options = options
    this.acks = this.#subject.asObservable()
  }

  validate(): readonly ConfigIssue[] {
    return ObservableSourceOptions.validate(this.#options)
  }

  async run(context: SourceContext): Promise<void> {
    if (this.#ran) {
      // Run again (one object in two topologies), it would send the records anew and report what
      // became of them nowhere but onAck: `acks` completed with the first run.
      throw new ComponentError(
        'RUNS_ONCE',
        'an observable source runs once: make a new one with fromObservable(records, options) for each topology',
        { component: context.id },
      )
    }
    this.#ran = true
    const batchSize = this.#options.batchSize ?? 100
    const pending: R[] = []
    const acked: Promise<void>[] = []
    let finished = false
    let failure: { error: unknown } | undefined
    let wake: (() => void) | undefined
    const nudge = (): void => {
      const w = wake
      wake = undefined
      w?.()
    }
    const subscription = this.#records.subscribe({
      next: (record) => {
        pending.push(record)
        nudge()
      },
      error: (error: unknown) => {
        failure = { error }
        finished = true
        nudge()
      },
      complete: () => {
        finished = true
        nudge()
      },
    })
    const onAbort = (): void => nudge()
    context.signal.addEventListener('abort', onAbort, { once: true })
    try {
      while (!context.signal.aborted) {
        if (pending.length === 0) {
          if (finished) break
          await new Promise<void>((resolve) => {
            wake = resolve
          })
          continue
        }
        const batch = pending.splice(0, batchSize)
        let receipt: BatchReceipt
        try {
          receipt = await context.send(batch)
        } catch (error) {
          // Not accepted: the records never entered the pipeline, so they are errored like unsent ones.
          for (const record of batch) this.#ack(context.id, { record, status: 'errored', batchId: undefined })
          throw error
        }
        const { batchId } = receipt
        acked.push(
          receipt.status.then(
            (status) => {
              for (const record of batch) this.#ack(context.id, { record, status, batchId })
            },
            () => {
              for (const record of batch) this.#ack(context.id, { record, status: 'errored', batchId })
            },
          ),
        )
      }
    } finally {
      subscription.unsubscribe()
      context.signal.removeEventListener('abort', onAbort)
      // Records received but never sent: their producer must not take them as delivered.
      for (const record of pending.splice(0))
        this.#ack(context.id, { record, status: 'errored', batchId: undefined })
      Promise.all(acked).then(() => this.#subject.complete())
    }
    if (failure !== undefined) throw failure.error
  }

  /**
   * Gives one record its ack. A throwing `onAck` is the caller's bug, reported and contained: the
   * ack still reaches `acks`, and no rejection escapes (the acks of later batches run in a promise).
   */
  #ack(id: string, ack: RecordAck<R>): void {
    const warn = (how: string, error: unknown) =>
      warningsTo(
        this.#options.onWarning,
        id,
        'ACKLINE_OBSERVABLE',
      )(`observable source '${id}' (onAck): ${how} on a record acknowledged ${ack.status}: ${textOf(error)}`)
    try {
      const result: unknown = this.#options.onAck?.(ack)
      // An async `onAck` that rejects: reported too, never an unhandled rejection.
      if (typeof (result as PromiseLike<unknown> | undefined)?.then === 'function')
        (result as PromiseLike<unknown>).then(undefined, (error: unknown) => warn('rejected', error))
    } catch (error) {
      warn('threw', error)
    }
    this.#subject.next(ack)
  }
}

/**
 * A source that sends the records `records` emits, batched, and reports per record what became
 * of it. The Observable cannot be paused: records wait in the source while downstream is full.
 *
 * @example
 * ```ts
 * const source = fromObservable(from([{ n: 1 }, { n: 2 }]), { onAck: ({ record, status }) => console.log(record, status) })
 * new TopologyBuilder({ acknowledgements: true }).source('in', source).sink('out', ['in'], memory())
 * ```
 */
export function fromObservable<R extends JsonObject>(
  records: Observable<R>,
  options: ObservableSourceOptions<R> = {},
): ObservableSource<R> {
  return new FromObservable(records, options)
}
