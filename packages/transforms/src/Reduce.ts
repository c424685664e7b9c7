/**
 * `reduce`: merges events that share a key into one event, until the group holds `maxEvents`
 * events or its window closes.
 *
 * Invariant: the event a group emits carries the finalizers of every event merged into it
 * (`LogEvent.merge`), so each of their sources waits for the merged event's sinks; an event is
 * held by at most one group and leaves exactly once (merged into the group's first event, or as
 * that first event). Windows are tumbling: every `windowMs` the runtime calls `flush`, which
 * closes every open group, so no event waits longer than `windowMs` (nor holds up its batch).
 * A group that fails to close (a merged value with a cycle, a frozen record) fails alone: its
 * merged event is ended `errored`, the other events of the call are merged as usual, and the
 * groups the failing call opened are emitted before it throws (the runtime settles `errored`
 * whatever a failed call left). An event whose value would take a `sum` past what JSON carries
 * exactly (beyond the largest finite number, or whole numbers past 2^53 - 1) fails alone too: it
 * is merged into nothing, and the call throws a `ComponentError` (`SUM_OVERFLOW`) naming the
 * component and the field once the others are merged. So does an event one of whose merged values
 * cannot be read (a getter that throws): it changes nothing in its group, and the call throws
 * that error once the others are merged.
 *
 * @module
 */
import { type EventArray, JsonValue, type LogEvent } from '@ackline/core'
import {
  ComponentError,
  type ConfigIssue,
  defineOptions,
  MAX_TIMER_MS,
  type OptionsOf,
  type Transform,
  type TransformContext,
} from '@ackline/topology'
import { z } from 'zod'
import { unboxed } from './internal/boxes.js'
import { fieldPath } from './internal/fieldPath.js'
import { KeyedEvents, MAX_KEYS } from './internal/KeyedEvents.js'

/**
 * How a field of the merged event combines the values of the group's events (events that lack the
 * field are skipped). A merged value whose path runs through a value that is not an object in the
 * group's first event (`a.b` where its `a` is `5`) is left out: that event's fields stay as they are.
 * - `first`: the first value (what every field not listed does);
 * - `last`: the last value;
 * - `sum`, `min`, `max`: over the numeric values (a boxed number, as the number it holds, `NaN`
 *   and `Infinity` too; a `NaN` among them, which untyped code may set, gives `NaN`, written
 *   `null`, in whatever order it came). A sum stays what JSON carries exactly: an event whose value would overflow it
 *   (to `Infinity`, which JSON writes as `null`) or take a sum of whole numbers past 2^53 - 1
 *   (where they lose precision) is not merged; the call fails with a `ComponentError`
 *   (`SUM_OVERFLOW`, field `merge.<path>`) and the runtime settles that event `errored`.
 *   Fractions add as numbers do (`0.1 + 0.2`);
 * - `array`: every value, in order;
 * - `concat`: the string values (a boxed string, as its string) joined with a space.
 */
export type MergeStrategy = z.infer<typeof strategy>

const strategy = z.enum(['first', 'last', 'sum', 'min', 'max', 'array', 'concat'])

/** Options of {@link reduce}: its schema (`validate`, `jsonSchema`, …). */
export const ReduceOptions = defineOptions({
  groupBy: z
    .array(fieldPath)
    .readonly()
    .optional()
    .describe(
      'Field paths whose values make the group key (objects are equal when their members are, in any key order); no paths means one group for everything.',
    ),
  maxEvents: z.int().min(1).default(100).describe('A group closes once it holds this many events.'),
  windowMs: z
    .int()
    .min(1)
    // The longest a timer waits (2^31 - 1 ms): a longer window would close every millisecond.
    .max(MAX_TIMER_MS)
    .default(5000)
    .describe(
      'Every this many milliseconds, every open group closes; at most 2147483647 (about 24.8 days, the longest a timer waits).',
    ),
  maxGroups: z
    .int()
    .min(1)
    // What one `Map` keeps while groups come and go: past it, every new group would throw.
    .max(MAX_KEYS)
    .default(10_000)
    .describe(
      'At most this many groups are open; opening one more closes the oldest. At most 8388608 (2^23: a Map holds 2^24 entries, and needs room for the deleted ones).',
    ),
  merge: z
    .record(fieldPath, strategy)
    .readonly()
    .optional()
    .describe("Strategies per field path; other fields keep the first event's value."),
})
/** Options of {@link reduce}. */
export type ReduceOptions = OptionsOf<typeof ReduceOptions>

/** The transform {@link reduce} returns. */
export interface ReduceTransform extends Transform<never> {
  readonly kind: 'reduce'
  /** Equal to the window: each call of `flush` closes every open group. */
  readonly flushIntervalMs: number
  flush(context: TransformContext): void
  /** How many groups are open now. */
  readonly openGroups: number
  /** Problems in the options, each naming its field; empty when they are fine. */
  validate(): readonly ConfigIssue[]
}

/** One open group: its first event (which absorbs the others) and the running merged values. */
interface Group {
  readonly event: LogEvent
  count: number
  readonly values: (JsonValue | undefined)[]
}

class Reduce implements ReduceTransform {
  readonly kind = 'reduce'
  // Event by event, in order: what queued behind an array may come in the same call.
  readonly coalesce = true
  readonly synchronous = true
  readonly flushIntervalMs: number
  readonly #options: ReduceOptions
  readonly #maxEvents: number
  readonly #fields: readonly string[]
  readonly #strategies: readonly MergeStrategy[]
  /** The indexes in `#fields` of the `sum` fields, checked before an event changes anything. */
  readonly #sums: readonly number[]
  /** The merged fields' values of the event being added, read once each before any is folded in. */
  readonly #read: (JsonValue | undefined)[]
  // Opening order: the oldest group is the one closed to open one more than `maxGroups`.
  readonly #groups: KeyedEvents<Group>

  constructor(options: ReduceOptions) {
    this.#options = options
    // Read through `?.`: options that are no object (untyped code) are for `validate()` to report.
    this.#groups = new KeyedEvents(options?.groupBy ?? [], options?.maxGroups ?? 10_000)
    this.#maxEvents = options?.maxEvents ?? 100
    this.flushIntervalMs = options?.windowMs ?? 5000
    const merge = options?.merge ?? {}
    this.#fields = Object.keys(merge)
    this.#strategies = this.#fields.map((field) => merge[field]!)
    this.#sums = this.#strategies.flatMap((strategy, f) => (strategy === 'sum' ? [f] : []))
    this.#read = new Array<JsonValue | undefined>(this.#fields.length).fill(undefined)
  }

  get openGroups(): number {
    return this.#groups.size
  }

  validate(): readonly ConfigIssue[] {
    return ReduceOptions.validate(this.#options)
  }

  process(events: EventArray, context: TransformContext): void {
    const list = events.events
    // An event whose merge or close throws is left (or ended errored, with its group), the others
    // are merged as usual, and the call then throws the first error: one call may hold several
    // batches (coalesced), which one event's failure must not touch.
    let failed: { readonly error: unknown } | undefined
    for (let i = 0; i < list.length; i++) {
      try {
        this.#add(list[i]!, context)
      } catch (error) {
        failed ??= { error }
      }
    }
    if (failed === undefined) return
    this.#passOnOpenedBy(list, context)
    throw failed.error
  }

  flush(context: TransformContext): void {
    // Each group leaves the map before it is closed: a close that throws (a frozen record) ends
    // that group's event errored, and the flush goes on with the others, then throws the first
    // error: every group leaves once, none is kept to wait for the stop.
    let failed: { readonly error: unknown } | undefined
    for (let group = this.#groups.shift(); group !== undefined; group = this.#groups.shift()) {
      try {
        context.emit(this.#closeOrFail(group, context))
      } catch (error) {
        failed ??= { error }
      }
    }
    if (failed !== undefined) throw failed.error
  }

  /**
   * Closes and emits now every open group whose first event is one of `inputs`, before a failing
   * call throws. The runtime settles `errored` every input a failed call neither emitted nor
   * ended (it cannot tell an event held from the one that failed): a group left open would hold
   * an ended event, its batches (other sources' too) would be told `errored` for another event's
   * failure, and every later event of its key would fail on merging into it.
   */
  #passOnOpenedBy(inputs: readonly LogEvent[], context: TransformContext): void {
    const live = new Set<LogEvent>()
    for (let i = 0; i < inputs.length; i++) if (!inputs[i]!.isEnded) live.add(inputs[i]!)
    if (live.size === 0) return
    // By the groups, not by computing each input's key again: a key with no JSON form (a BigInt)
    // is one no later computation gives. A failing call is rare; this walks every open group once.
    for (const group of this.#groups.removeIf((group) => live.has(group.event))) {
      try {
        context.emit(this.#closeOrFail(group, context))
      } catch {
        // Its event is ended errored with the failure (see #closeOrFail); the call throws already.
      }
    }
  }

  #add(event: LogEvent, context: TransformContext): void {
    const key = this.#groups.keyOf(event)
    const group = this.#groups.get(key)
    if (group === undefined) {
      const values = this.#fields.map((field, f) => start(this.#strategies[f]!, valueAt(event, field)))
      const opened: Group = { event, count: 1, values }
      if (this.#maxEvents === 1) {
        context.emit(this.#closeOrFail(opened, context))
        return
      }
      const oldest = this.#groups.add(key, opened)
      if (oldest !== undefined) context.emit(this.#closeOrFail(oldest, context))
      return
    }
    const fields = this.#fields
    // Before anything changes: an event refused here (a value that cannot be read, a getter that
    // throws; a sum JSON cannot carry) is merged into nothing, its group untouched. Each value is
    // read once, into the transform's own scratch (a synchronous transform: one call at a time).
    const values = this.#read
    try {
      for (let f = 0; f < fields.length; f++) values[f] = valueAt(event, fields[f]!)
      const sums = this.#sums
      for (let s = 0; s < sums.length; s++) {
        const f = sums[s]!
        const value = values[f]
        const merged = group.values[f]
        if (typeof value === 'number' && typeof merged === 'number')
          checkSum(merged, value, context.id, fields[f]!)
      }
      for (let f = 0; f < fields.length; f++) {
        const value = values[f]
        if (value !== undefined) group.values[f] = combine(this.#strategies[f]!, group.values[f], value)
      }
    } finally {
      // Not kept past the call: the values are the event's.
      values.fill(undefined)
    }
    group.event.merge(event)
    if (++group.count >= this.#maxEvents) {
      this.#groups.delete(key)
      context.emit(this.#closeOrFail(group, context))
    }
  }

  /**
   * {@link Reduce.#close}, or, when it throws, the group's event (which every event of the group
   * was merged into, and which the map no longer holds) ended `errored` with the failure, and the
   * error rethrown: nothing would ever emit or end it, and its batches would wait.
   */
  #closeOrFail(group: Group, context: TransformContext): LogEvent {
    try {
      return this.#close(group)
    } catch (error) {
      if (!group.event.isEnded) {
        const message = `reduce '${context.id}' could not close a group: ${error instanceof Error ? error.message : 'a failure'}`
        group.event.end('errored', { reason: { componentId: context.id, code: 'PROCESS_FAILED', message } })
      }
      throw error
    }
  }

  /**
   * Writes the merged values into the group's event and returns it. A merged value whose path is
   * blocked in the first event is left out (see {@link MergeStrategy}); any other failure (a
   * frozen record, a cycle) throws, and fails the call loudly.
   */
  #close(group: Group): LogEvent {
    const fields = this.#fields
    for (let f = 0; f < fields.length; f++) {
      const value = group.values[f]
      if (value === undefined) continue
      // A copy: values may be objects still shared with clones of the merged events (a cycle
      // throws here, loudly, as any failure but the one below).
      const copy = JsonValue.copy(value)
      try {
        group.event.set(fields[f]!, copy)
      } catch (error) {
        // The path runs through a value that is not an object in the first event (`a` is 5 for
        // `a.b`): the merged value has no place there, the first event's value stays. Only that
        // refusal of `set` (its own words) is taken so: a frozen record, say, fails the call.
        if (!(error instanceof TypeError && error.message.startsWith(`cannot set '${fields[f]!}'`)))
          throw error
      }
    }
    return group.event
  }
}

/**
 * The value of `event` at `path` as a strategy reads it: a boxed number, string or boolean (untyped
 * code may set one) as the primitive JSON writes for it, which `sum`, `min`, `max` and `concat`
 * skipped as no number or string (a group written n: 1, 2, 3 summed to 4).
 */
function valueAt(event: LogEvent, path: string): JsonValue | undefined {
  return unboxed(event.get(path)) as JsonValue | undefined
}

/** The merged value of a group of one event whose field holds `value`. */
function start(strategy: MergeStrategy, value: JsonValue | undefined): JsonValue | undefined {
  if (value === undefined) return strategy === 'array' ? [] : undefined
  switch (strategy) {
    case 'array':
      return [value]
    case 'sum':
    case 'min':
    case 'max':
      return typeof value === 'number' ? value : undefined
    case 'concat':
      return typeof value === 'string' ? value : undefined
    case 'first':
    case 'last':
      return value
  }
}

/**
 * Throws `SUM_OVERFLOW` when `merged + value` is not what JSON carries exactly: finite numbers
 * that overflow (JSON writes `Infinity` as `null`), or whole numbers within 2^53 - 1 whose sum is
 * not (it is rounded). A value already outside (an `Infinity` or a whole number past 2^53 - 1
 * some component wrote) is not this sum's doing, and is added as it is.
 */
function checkSum(merged: number, value: number, id: string, field: string): void {
  const total = merged + value
  const overflows = !Number.isFinite(total) && Number.isFinite(merged) && Number.isFinite(value)
  if (
    !overflows &&
    !(Number.isSafeInteger(merged) && Number.isSafeInteger(value) && !Number.isSafeInteger(total))
  )
    return
  throw new ComponentError(
    'SUM_OVERFLOW',
    `adding ${value} to the group's sum ${merged} gives ${total}, ${overflows ? 'which JSON cannot carry (it writes null)' : 'past 2^53 - 1, where whole numbers lose precision'}: the event was not merged`,
    { component: id, field: `merge.${field}` },
  )
}

/** Folds one more event's `value` into the merged value so far. */
function combine(
  strategy: MergeStrategy,
  merged: JsonValue | undefined,
  value: JsonValue,
): JsonValue | undefined {
  switch (strategy) {
    case 'first':
      return merged === undefined ? value : merged
    case 'last':
      return value
    case 'sum':
      if (typeof value !== 'number') return merged
      return typeof merged === 'number' ? merged + value : value
    // A NaN (untyped code may set one) stays, as in a sum: compared, it lost to what came after it.
    case 'min':
      if (typeof value !== 'number') return merged
      return typeof merged === 'number' && (merged <= value || Number.isNaN(merged)) ? merged : value
    case 'max':
      if (typeof value !== 'number') return merged
      return typeof merged === 'number' && (merged >= value || Number.isNaN(merged)) ? merged : value
    case 'concat':
      if (typeof value !== 'string') return merged
      return typeof merged === 'string' ? merged + ' ' + value : value
    case 'array':
      // The array is the group's own (made in `start`), so pushing into it copies nothing.
      ;(merged as JsonValue[]).push(value)
      return merged
  }
}

/**
 * Merges events with equal `groupBy` fields into one event per group. A group closes when it
 * holds `maxEvents` events, or at the next window boundary (every `windowMs`), or when the
 * topology stops; the merged event keeps the first event's fields, combines the fields listed in
 * `merge`, and carries every merged event's finalizers.
 *
 * @example
 * ```ts
 * reduce({
 *   groupBy: ['request_id'],
 *   maxEvents: 50,
 *   windowMs: 2000,
 *   merge: { bytes: 'sum', message: 'array', ended_at: 'last' },
 * })
 * ```
 */
export function reduce(options: ReduceOptions = {}): ReduceTransform {
  return new Reduce(options)
}
