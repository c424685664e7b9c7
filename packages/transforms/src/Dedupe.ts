/**
 * `dedupe`: discards events whose fields were seen recently.
 *
 * Invariant: memory is bounded: at most `cacheSize` keys are remembered, the least recently seen
 * forgotten first. An event whose key is remembered is handed to `context.drop` (settled with the
 * transform's `dropStatus`); any other is emitted and its key remembered, but for a key no other
 * event gets (a field holding a value with no JSON text), which is not. Seeing a key again makes
 * it the most recent, as Vector's `dedupe` does. A key is remembered only while the event emitted
 * under it may still be delivered: once its sinks settled it otherwise (`errored`, `rejected`, a
 * stop), the key is forgotten, so what comes again (a source's redelivery of it) goes on, rather
 * than be dropped as a duplicate of an event that reached no one and counted delivered. A
 * duplicate of an event still in flight is dropped at once, but its batches wait for that event
 * and take its status: a clone of the duplicate waits in a handle of dedupe's own (one per key
 * with duplicates in flight), ended as that event ends. Whatever `dropStatus` says: the one the
 * runtime drops with may be the declaration's, which dedupe cannot see (under `rejected` the
 * batches are rejected all the same, once that event is settled).
 *
 * @module
 */
import {
  BatchNotifier,
  type BatchResolvedListener,
  type BatchStatus,
  type BatchStatusReceiver,
  type EventArray,
  LogEvent,
} from '@ackline/core'
import { type ConfigIssue, defineOptions, type OptionsOf, type TransformContext } from '@ackline/topology'
import { z } from 'zod'
import type { DroppingTransform } from './DroppingTransform.js'
import { DropStatus } from './DropStatus.js'
import { equalsNothing } from './internal/fieldKey.js'
import { fieldPath } from './internal/fieldPath.js'
import { KeyedEvents, MAX_KEYS } from './internal/KeyedEvents.js'

/** Options of {@link dedupe}: its schema (`validate`, `jsonSchema`, …). */
export const DedupeOptions = defineOptions({
  fields: z
    .array(fieldPath)
    .min(1)
    .readonly()
    .describe(
      'Field paths that identify an event: two events with equal values in all of them are duplicates (objects are equal when their members are, in any key order).',
    ),
  cacheSize: z
    .int()
    .min(1)
    // What one `Map` keeps while keys come and go: past it, every new key would throw.
    .max(MAX_KEYS)
    .default(5000)
    .describe(
      'How many keys to remember; at most 8388608 (2^23: a Map holds 2^24 entries, and needs room for the deleted ones).',
    ),
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

/**
 * What a remembered key holds: the receiver of the batch that watches the event emitted under it
 * (its `tracking` is the key), or `true` once that event was delivered.
 */
type Seen = BatchStatusReceiver | true

class Dedupe implements DedupeTransform, BatchResolvedListener {
  readonly kind = 'dedupe'
  // Event by event, in order: what queued behind an array may come in the same call.
  readonly coalesce = true
  readonly synchronous = true
  readonly dropStatus: DropStatus
  readonly #options: DedupeOptions
  readonly #seen: KeyedEvents<Seen>
  /**
   * For a watched event with duplicates dropped while it was in flight: a handle of dedupe's own
   * holding a clone of each, ended with the event's status when its batch resolves.
   */
  readonly #waiting = new Map<BatchStatusReceiver, LogEvent>()

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
    // An event whose key cannot be read (a getter that throws, from untyped code) is left for the
    // runtime to settle, and the call throws the first error once every other event is decided:
    // one call may hold several batches (coalesced), which one event's failure must not touch.
    let failed: { readonly error: unknown } | undefined
    for (let i = 0; i < list.length; i++) {
      try {
        this.#decide(list[i]!, context)
      } catch (error) {
        failed ??= { error }
      }
    }
    if (failed !== undefined) throw failed.error
  }

  /** Drops `event` as a duplicate, or emits it and remembers its key. */
  #decide(event: LogEvent, context: TransformContext): void {
    const seen = this.#seen
    const key = seen.keyOf(event)
    // A key no other event gets (a field with no JSON text): the event is no duplicate, and will
    // have none, so nothing is remembered, nor evicted for it.
    if (equalsNothing(key)) {
      context.emit(event)
      return
    }
    // Seen again: the key becomes the most recent, the event goes.
    const first = seen.touch(key)
    if (first !== undefined) {
      // Its first copy is still in flight: the duplicate's batches wait for its fate. Whatever
      // this.dropStatus says: a declaration's dropStatus wins over it, and dedupe cannot see that.
      if (first !== true) this.#waitFor(first, event)
      context.drop(event)
    } else {
      // Where no status for it can matter (context.acknowledgements), it counts as delivered once passed on.
      seen.add(key, context.acknowledgements ? this.#watch(event, key, context.id) : true)
      context.emit(event)
    }
  }

  /**
   * A batch of dedupe's own holding `event` alone, so it learns what became of it: the batch
   * resolves when every copy of the event has ended, with the worst status.
   */
  #watch(event: LogEvent, key: string, id: string): BatchStatusReceiver {
    const watcher = BatchNotifier.open(id)
    watcher.attach(event)
    watcher.release()
    const receiver = watcher.receiver
    receiver.tracking = key
    receiver.onResolved(this)
    return receiver
  }

  /** Makes the batches of `duplicate` wait for the event `receiver` watches (see `#waiting`). */
  #waitFor(receiver: BatchStatusReceiver, duplicate: LogEvent): void {
    let waiting = this.#waiting.get(receiver)
    if (waiting === undefined) {
      waiting = new LogEvent({})
      this.#waiting.set(receiver, waiting)
    }
    waiting.merge(duplicate.clone())
  }

  /**
   * @internal The event emitted under a key was settled: the duplicates dropped meanwhile take its
   * status (and its reason), and the key is forgotten unless it was delivered.
   */
  batchResolved(status: BatchStatus, receiver: BatchStatusReceiver): void {
    const waiting = this.#waiting.get(receiver)
    if (waiting !== undefined) {
      this.#waiting.delete(receiver)
      if (status === 'delivered') waiting.end()
      else waiting.end(status, { reason: receiver.reason })
    }
    const key = receiver.tracking as string
    // The key may have been forgotten (evicted) and seen again since: then it is another event's.
    if (this.#seen.get(key) !== receiver) return
    if (status === 'delivered') this.#seen.replace(key, true)
    else this.#seen.delete(key)
  }
}

/**
 * Discards events whose `fields` equal those of an event seen among the last `cacheSize` distinct
 * keys. Discards are settled with `dropStatus` (`'delivered'` unless set). A key whose emitted
 * event was not delivered (its sinks settled it `errored` or `rejected`) is forgotten, so the event
 * sent again goes on; a duplicate that comes while the first is still in flight is discarded,
 * and its batches take the first one's status when it ends (under `dropStatus: 'rejected'`, they
 * are rejected once it ends).
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
