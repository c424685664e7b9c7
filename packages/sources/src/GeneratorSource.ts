/**
 * `generator`: a source that makes up events, for tests, examples and benchmarks.
 *
 * Invariant: it sends exactly `count` events (or runs until stopped when `count` is unset), in
 * batches of `batchSize`, never faster than `ratePerSecond` when set, and returns only once every
 * batch it sent was accepted downstream.
 *
 * @module
 */
import type { JsonObject } from '@ackline/core'
import type { BatchReceipt, ConfigIssue, Source, SourceContext } from '@ackline/topology'

/**
 * Options of {@link generator}; every field has a default.
 *
 * @example
 * ```ts
 * generator({ count: 1000, batchSize: 50, ratePerSecond: 200, record: (i) => ({ id: i }) })
 * ```
 */
export interface GeneratorOptions {
  /** How many events to send in all; runs until the topology stops when unset. */
  readonly count?: number
  /** Events per batch (default 100). Each batch gets one batch notifier. */
  readonly batchSize?: number
  /** At most this many events per second; as fast as back pressure allows when unset. */
  readonly ratePerSecond?: number
  /** The record of event number `index` (default `{ message: 'event <index>', index }`). */
  readonly record?: (index: number) => JsonObject
  /** Told about every batch once it was accepted: its receipt and the index of its first event. */
  readonly onBatch?: (receipt: BatchReceipt, firstIndex: number, size: number) => void
}

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
}

const defaultRecord = (index: number): JsonObject => ({ message: `event ${index}`, index })

/** Problems in the options, each naming its field. */
function validate(options: GeneratorOptions): readonly ConfigIssue[] {
  const { count, batchSize, ratePerSecond } = options
  const issues: ConfigIssue[] = []
  if (count !== undefined && !(Number.isInteger(count) && count >= 0)) {
    issues.push({ field: 'count', message: 'count must be a non-negative integer' })
  }
  if (batchSize !== undefined && !(Number.isInteger(batchSize) && batchSize > 0)) {
    issues.push({ field: 'batchSize', message: 'batchSize must be a positive integer' })
  }
  if (ratePerSecond !== undefined && !(Number.isFinite(ratePerSecond) && ratePerSecond > 0)) {
    issues.push({ field: 'ratePerSecond', message: 'ratePerSecond must be a positive number' })
  }
  return issues
}

/** Sends the events, as the module header says. */
async function run(options: GeneratorOptions, context: SourceContext): Promise<void> {
  const { count = Number.POSITIVE_INFINITY, batchSize = 100, ratePerSecond, onBatch } = options
  const record = options.record ?? defaultRecord
  const { signal } = context
  const start = Date.now()
  let index = 0
  while (index < count && !signal.aborted) {
    if (ratePerSecond !== undefined) {
      await sleepUntil(start + (index / ratePerSecond) * 1000, signal)
      if (signal.aborted) break
    }
    const size = Math.min(batchSize, count - index)
    const records: JsonObject[] = new Array(size)
    for (let i = 0; i < size; i++) records[i] = record(index + i)
    const receipt = await context.send(records)
    onBatch?.(receipt, index, size)
    index += size
  }
}

function sleepUntil(time: number, signal: AbortSignal): Promise<void> {
  const ms = time - Date.now()
  if (ms <= 0) return Promise.resolve()
  return new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(timer)
      signal.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal.addEventListener('abort', done, { once: true })
  })
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
    validate: () => validate(options),
    run: (context) => run(options, context),
  }
}
