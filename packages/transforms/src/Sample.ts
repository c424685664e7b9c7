/**
 * `sample`: keeps one event in `rate` and discards the others.
 *
 * Invariant: the choice is deterministic. With `keyField`, an event is kept exactly when the
 * FNV-1a hash of that field's value is a multiple of `rate`, so every event with the same value
 * gets the same fate, in every process and every run; without it (or when the event lacks the
 * field, or its value has no JSON text: a `BigInt`, a cycle, a function), the 1st, (rate+1)th,
 * (2·rate+1)th… such event is kept. Discards go to `context.drop`. FNV-1a is 32-bit: with
 * `keyField`, a `rate` above 2^32 keeps only the values whose hash is 0, about 1 in 2^32 whatever
 * the rate (more than 1 in `rate`), and any `rate` keeps the ⌈2^32 / rate⌉ hashes that are its
 * multiples, so one near 2^32 keeps more than 1 in `rate` too (2^31 + 1: 1 in 2^31); without it,
 * any `rate` is exact.
 *
 * @module
 */
import type { EventArray } from '@ackline/core'
import {
  type ConfigIssue,
  defineOptions,
  keepIf,
  type OptionsOf,
  type TransformContext,
} from '@ackline/topology'
import { z } from 'zod'
import type { DroppingTransform } from './DroppingTransform.js'
import { DropStatus } from './DropStatus.js'
import { canonicalJson } from './internal/canonicalJson.js'
import { fieldPath } from './internal/fieldPath.js'
import { fnv1a } from './internal/fnv1a.js'

/** Options of {@link sample}: its schema (`validate`, `jsonSchema`, …). */
export const SampleOptions = defineOptions({
  rate: z
    .int()
    .min(1)
    .describe(
      'Keep one event in this many. With keyField, by a 32-bit hash: a rate above 2^32 keeps about 1 in 2^32 (the values whose hash is 0), more than 1 in rate.',
    ),
  keyField: fieldPath
    .optional()
    .describe('A field path whose value decides, so related events are kept or discarded together.'),
  dropStatus: DropStatus.option,
})
/** Options of {@link sample}. */
export type SampleOptions = OptionsOf<typeof SampleOptions>

/** The transform {@link sample} returns. */
export interface SampleTransform extends DroppingTransform {
  readonly kind: 'sample'
}

class Sample implements SampleTransform {
  readonly kind = 'sample'
  // Event by event, in order: what queued behind an array may come in the same call.
  readonly coalesce = true
  readonly synchronous = true
  readonly dropStatus: DropStatus
  readonly #options: SampleOptions
  readonly #rate: number
  readonly #keyField: string | undefined
  #count = 0

  constructor(options: SampleOptions) {
    this.#options = options
    // Read through `?.`: options that are no object (untyped code) are for `validate()` to report.
    this.#rate = options?.rate
    this.#keyField = options?.keyField
    this.dropStatus = options?.dropStatus ?? DropStatus.default
  }

  validate(): readonly ConfigIssue[] {
    return SampleOptions.validate(this.#options)
  }

  /** Keeps the sampled events; the array goes on whole while every event is kept (rate 1). */
  readonly process: (events: EventArray, context: TransformContext) => void = keepIf((event) =>
    this.#keep(event),
  )

  #keep(event: { get(path: string): unknown }): boolean {
    if (this.#keyField !== undefined) {
      const text = keyText(event.get(this.#keyField))
      if (text !== undefined) return fnv1a(text) % this.#rate === 0
    }
    return this.#count++ % this.#rate === 0
  }
}

/**
 * The text a key value is hashed by: a string itself, anything else its JSON text, with each
 * object's members in one order (`canonicalJson`: equal objects share a fate whatever the order
 * their keys came in), or the string it holds when JSON writes a string (a boxed string, a `Date`:
 * hashed by its JSON text, quoted, it had another fate than that string). `undefined` for a value
 * with none (the field is missing, or holds what user code may put there: a `BigInt` or a cycle,
 * on which `JSON.stringify` throws, a function or a symbol, of which it writes nothing): such an
 * event is sampled by the count, as one without the field, rather than fail.
 */
function keyText(value: unknown): string | undefined {
  if (value === undefined || typeof value === 'string') return value
  let text: string | undefined
  try {
    text = canonicalJson(value)
  } catch {
    return undefined
  }
  return text !== undefined && text.charCodeAt(0) === QUOTE ? (JSON.parse(text) as string) : text
}

/** `"`, the first character of the JSON text of a string, and of no other. */
const QUOTE = 0x22

/**
 * Keeps one event in `rate`: by the hash of `keyField` when set (all events with the same value
 * share a fate), else every `rate`-th event starting with the first.
 *
 * @example
 * ```ts
 * sample({ rate: 10 })                         // the 1st, 11th, 21st… event
 * sample({ rate: 100, keyField: 'trace_id' })  // whole traces, about 1 in 100
 * ```
 */
export function sample(options: SampleOptions): SampleTransform {
  return new Sample(options)
}
