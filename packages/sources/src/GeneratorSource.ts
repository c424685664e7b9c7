/**
 * `generator`: a source that makes up events, for tests, examples and benchmarks.
 *
 * Invariant: it sends exactly `count` events (or runs until stopped when `count` is unset), in
 * batches of `batchSize`, never faster than `ratePerSecond` when set, and returns only once every
 * batch it sent was accepted downstream. A `record` function that throws or returns something
 * other than a JSON object stops it with a `ComponentError` naming the field, before that batch
 * is sent; so does an `onBatch` that throws or returns a promise that rejects.
 *
 * @module
 */
import type { JsonObject } from '@ackline/core'
import {
  type BatchReceipt,
  ComponentError,
  type ConfigIssue,
  codeOption,
  defineOptions,
  MAX_TIMER_MS,
  type OptionsOf,
  type Source,
  type SourceContext,
  textOf,
} from '@ackline/topology'
import { z } from 'zod'

/**
 * Options of {@link generator}: its schema (`validate`, `jsonSchema`, …); every option has a default.
 *
 * @example
 * ```ts
 * generator({ count: 1000, batchSize: 50, ratePerSecond: 200, record: (i) => ({ id: i }) })
 * ```
 */
export const GeneratorOptions = defineOptions({
  count: z
    .int()
    .min(0)
    .optional()
    .describe('How many events to send in all; runs until the topology stops when unset.'),
  batchSize: z
    .int()
    .min(1)
    // A batch is made whole before it is sent: a billion events would exhaust memory first.
    .max(1_000_000)
    .default(100)
    .describe(
      'Events per batch (1 to 1,000,000, all made before the batch is sent). Each batch gets one batch notifier.',
    ),
  ratePerSecond: z
    .number()
    .positive()
    .optional()
    .describe('At most this many events per second; as fast as back pressure allows when unset.'),
  record: codeOption<(index: number) => JsonObject>('a function')
    .optional()
    .describe(
      "The record of event number `index` (default `{ message: 'event <index>', index }`); it must return a JSON object, synchronously (a promise is refused).",
    ),
  onBatch: codeOption<(receipt: BatchReceipt, firstIndex: number, size: number) => void>('a function')
    .optional()
    .describe(
      'Told about every batch once it was accepted: its receipt and the index of its first event. Without it, no receipt is made (the batches are tracked all the same). ' +
        'One that throws, or returns a promise that rejects (not awaited), stops the generator with a ComponentError ON_BATCH_FAILED naming this field ' +
        '(a rejection that comes after the run returned goes to process.emitWarning).',
    ),
})
/** Options of {@link generator}. */
export type GeneratorOptions = OptionsOf<typeof GeneratorOptions>

/**
 * The source {@link generator} returns: it can acknowledge, and checks its options in `validate()`.
 *
 * @example
 * ```ts
 * const source: GeneratorSource = generator({ count: 10 })
 * ```
 */
export interface GeneratorSource extends Source {
  readonly kind: 'generator'
  /** Problems in the options, each naming its field; empty when they are fine. */
  validate(): readonly ConfigIssue[]
}

/** The options of a send whose receipt nobody reads. */
const NO_RECEIPT_WANTED = { receipt: false } as const

const defaultRecord = (index: number): JsonObject => ({ message: `event ${index}`, index })

/** Sends the events, as the module header says. */
async function run(options: GeneratorOptions, context: SourceContext): Promise<void> {
  const { count = Number.POSITIVE_INFINITY, batchSize = 100, ratePerSecond, onBatch } = options
  const record = options.record === undefined ? defaultRecord : checked(options.record, context.id)
  const { signal } = context
  const start = Date.now()
  let index = 0
  /** What an `onBatch` promise rejected with, the first time; the run rejects with it. */
  let failed: ComponentError | undefined
  let returned = false
  const onBatchFailed = (error: ComponentError): void => {
    // Too late to fail the run: still reported, never an unhandled rejection.
    if (returned) process.emitWarning(error.message, { code: 'ACKLINE_GENERATOR' })
    else failed ??= error
  }
  const told = onBatch === undefined ? undefined : checkedOnBatch(onBatch, context.id, onBatchFailed)
  try {
    while (index < count && !signal.aborted && failed === undefined) {
      if (ratePerSecond !== undefined) {
        await sleepUntil(start + (index / ratePerSecond) * 1000, signal)
        if (signal.aborted) break
      }
      const size = Math.min(batchSize, count - index)
      const records: JsonObject[] = new Array(size)
      for (let i = 0; i < size; i++) records[i] = record(index + i)
      // Without `onBatch` nothing reads the receipt: none is made (the batch is tracked all the same).
      if (told === undefined) await context.send(records, NO_RECEIPT_WANTED)
      else told(await context.send(records), index, size)
      index += size
    }
  } finally {
    returned = true
  }
  if (failed !== undefined) throw failed
}

/**
 * The user's `onBatch`, made to fail loudly and never leave a rejection unhandled: a throw stops
 * the run with a `ComponentError` naming the field; a returned promise that rejects is handed to
 * `failed` (not awaited: the batches go on meanwhile).
 */
function checkedOnBatch(
  onBatch: (receipt: BatchReceipt, firstIndex: number, size: number) => void,
  id: string,
  failed: (error: ComponentError) => void,
): (receipt: BatchReceipt, firstIndex: number, size: number) => void {
  const error = (how: string, first: number, size: number, cause: unknown) =>
    new ComponentError(
      'ON_BATCH_FAILED',
      `onBatch ${how} on the batch of events ${first} to ${first + size - 1}: ${textOf(cause)}`,
      { component: id, field: 'onBatch', cause },
    )
  return (receipt, first, size) => {
    let result: unknown
    try {
      result = onBatch(receipt, first, size)
    } catch (cause) {
      throw error('threw', first, size, cause)
    }
    if (typeof (result as PromiseLike<unknown> | undefined)?.then === 'function')
      (result as PromiseLike<unknown>).then(undefined, (cause: unknown) =>
        failed(error('rejected', first, size, cause)),
      )
  }
}

/**
 * The user's record function, made to fail loudly: an event's fields must be an object, and a
 * throw or another value (from untyped code) would otherwise surface downstream, far from its cause.
 */
function checked(record: (index: number) => JsonObject, id: string): (index: number) => JsonObject {
  return (index) => {
    let fields: unknown
    try {
      fields = record(index)
    } catch (error) {
      throw new ComponentError('RECORD_FAILED', `record(${index}) threw: ${textOf(error)}`, {
        component: id,
        field: 'record',
        cause: error,
      })
    }
    // A promise (an async record function) is an object too, and would be sent as an event with no fields.
    if (
      typeof fields !== 'object' ||
      fields === null ||
      Array.isArray(fields) ||
      typeof (fields as Partial<PromiseLike<unknown>>).then === 'function'
    ) {
      const promise = typeof (fields as PromiseLike<unknown> | null)?.then === 'function'
      // Refused, it must not reject unhandled as well (an async record that throws).
      if (promise) Promise.resolve(fields).catch(() => undefined)
      const got = promise
        ? 'a promise (record is not awaited)'
        : Array.isArray(fields)
          ? 'an array'
          : fields === null
            ? 'null'
            : typeof fields
      throw new ComponentError('RECORD_FAILED', `record(${index}) must return a JSON object, got ${got}`, {
        component: id,
        field: 'record',
      })
    }
    return fields as JsonObject
  }
}

/** Waits until `time` (ms since the epoch), or until `signal` aborts. */
async function sleepUntil(time: number, signal: AbortSignal): Promise<void> {
  // In steps a timer can wait: a longer delay would fire after 1 ms, and the rate not be kept.
  for (let ms = time - Date.now(); ms > 0 && !signal.aborted; ms = time - Date.now()) {
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer)
        signal.removeEventListener('abort', done)
        resolve()
      }
      const timer = setTimeout(done, Math.min(ms, MAX_TIMER_MS))
      signal.addEventListener('abort', done, { once: true })
    })
  }
}

/**
 * A source of made-up events: `count` of them (or endless), `batchSize` per batch, optionally at
 * `ratePerSecond`. It can acknowledge (`onBatch` sees each batch's receipt).
 *
 * @example
 * ```ts
 * new TopologyBuilder({ acknowledgements: true })
 *   .source('gen', generator({ count: 10_000, batchSize: 500 }))
 *   .sink('out', ['gen'], blackhole())
 * ```
 */
export function generator(options: GeneratorOptions = {}): GeneratorSource {
  return {
    kind: 'generator',
    canAcknowledge: true,
    validate: () => GeneratorOptions.validate(options),
    run: (context) => run(options, context),
  }
}
