/**
 * `dedupe`: discards events whose fields were seen recently.
 *
 * Invariant: memory is bounded: at most `cacheSize` keys are remembered, the least recently seen
 * forgotten first. An event whose key is remembered is handed to `context.drop` (settled with the
 * transform's `dropStatus`); any other is emitted and its key remembered. Seeing a key again makes
 * it the most recent, as Vector's `dedupe` does.
 *
 * @module
 */
import type { EventArray } from '@ackline/core'
import { type ConfigIssue, defineOptions, type OptionsOf, type TransformContext } from '@ackline/topology'
import { z } from 'zod'
import type { DroppingTransform } from './DroppingTransform.js'
import { DropStatus } from './DropStatus.js'
import { KeyedEvents } from './internal/KeyedEvents.js'

/** Options of {@link dedupe}: its schema (`validate`, `jsonSchema`, …). */
export const DedupeOptions = defineOptions({
  fields: z
    .array(z.string().min(1))
    .min(1)
    .readonly()
    .describe(
      'Field paths that identify an event: two events with equal values in all of them are duplicates.',
    ),
  cacheSize: z.int().min(1).default(5000).describe('How many keys to remember.'),
  dropStatus: DropStatus.option,
})
/** Options of {@link dedupe}. */
export type DedupeOptions = OptionsOf<typeof DedupeOptions>

/** The transform {@link dedupe} returns. */
export interface DedupeTransform extends DroppingTransform {
  readonly kind: 'dedupe'
  /** How many keys are remembered now (never more than `cacheSize`). */
  readonly cachedKeys: number
}

class Dedupe implements DedupeTransform {
  readonly kind = 'dedupe'
  // Event by event, in order: what queued behind an array may come in the same call.
  readonly coalesce = true
  readonly synchronous = true
  readonly dropStatus: DropStatus
  readonly #options: DedupeOptions
  readonly #seen: KeyedEvents<true>

  constructor(options: DedupeOptions) {
    this.#options = options
    this.#seen = new KeyedEvents(
      // Read through `?.`: options that are no object (untyped code) are for `validate()` to report.
      Array.isArray(options?.fields) ? options.fields : [],
      options?.cacheSize ?? 5000,
    )
    this.dropStatus = options?.dropStatus ?? DropStatus.default
  }

  get cachedKeys(): number {
    return this.#seen.size
  }

  validate(): readonly ConfigIssue[] {
    return DedupeOptions.validate(this.#options)
  }

  process(events: EventArray, context: TransformContext): void {
    const list = events.events
    const seen = this.#seen
    for (let i = 0; i < list.length; i++) {
      const event = list[i]!
      const key = seen.keyOf(event)
      // Seen again: the key becomes the most recent, the event goes.
      if (seen.touch(key)) {
        context.drop(event)
      } else {
        seen.add(key, true)
        context.emit(event)
      }
    }
  }
}

/**
 * Discards events whose `fields` equal those of an event seen among the last `cacheSize` distinct
 * keys. Discards are settled with `dropStatus` (`'delivered'` unless set).
 *
 * @example
 * ```ts
 * dedupe({ fields: ['id'], cacheSize: 10_000 })
 * dedupe({ fields: ['host', 'message'], dropStatus: 'rejected' })
 * ```
 */
export function dedupe(options: DedupeOptions): DedupeTransform {
  return new Dedupe(options)
}
