/**
 * Values kept by the key of an event's fields, at most `capacity` of them, oldest first: what
 * `dedupe` remembers (seen keys) and what `reduce` holds (open groups).
 *
 * Invariant: never more than `capacity` entries once `set` returns; the entry evicted to keep
 * that bound is always the oldest (by insertion, or by the last `touch`), and `set` hands it back
 * so its owner can settle it (a `reduce` group must still be emitted).
 */
import type { LogEvent } from '@ackline/core'
import { fieldKey } from './fieldKey.js'

/**
 * The largest capacity kept without a `RangeError` ('Map maximum size exceeded'), which would
 * fail every event with a new key from then on: a capacity above it is refused as an option
 * rather than met at run time. A `Map` holds 2^24 entries, but a deleted entry keeps its place
 * until the table is rebuilt, which V8 does at the same size only once at least half of it is
 * deleted entries, and else at twice the size, past 2^24. Keys here come and go (every eviction,
 * every `touch`), so more than 2^23 live keys fill the table with too few deleted ones to rebuild
 * it in place: measured (Node 20), 2^23 + 1 keys threw after 2^23 evictions, 2^23 kept going
 * past 2^24.
 */
export const MAX_KEYS = 8_388_608

/** `V` must not include `undefined`: an absent key reads as `undefined`. */
export class KeyedEvents<V> {
  // A Map iterates in insertion order, so its first entry is the oldest, and deleting then
  // re-inserting a key makes it the most recent.
  readonly #entries = new Map<string, V>()
  /**
   * Where the oldest kept key is: one iterator of `#entries` kept for as long as it lasts, so
   * each eviction steps past the deleted places in front of the oldest once, not again at every
   * eviction. (A new iterator per eviction started at the table's first place and went over every
   * deleted one there until V8 rebuilt the table: with keys coming and going, thousands per
   * eviction at a capacity of 5,000.) Every key in front of it was taken by it or deleted, so the
   * oldest key kept is always the next it gives; a `touch` moves a key behind it, in order. So it
   * never runs out while a key is kept (`shift` asks only then); it is made anew after `clear`,
   * and, as a guard, should it ever have run out.
   */
  #oldest: Iterator<[string, V]> | undefined = undefined
  readonly #paths: readonly string[]
  readonly #capacity: number

  constructor(paths: readonly string[], capacity: number) {
    this.#paths = paths
    this.#capacity = capacity
  }

  /** The key of `event` by the paths (see `fieldKey`). */
  keyOf(event: LogEvent): string {
    return fieldKey(event, this.#paths)
  }

  get size(): number {
    return this.#entries.size
  }

  get(key: string): V | undefined {
    return this.#entries.get(key)
  }

  /** Makes `key` the most recent if it is kept; returns its value, `undefined` when it is not kept. */
  touch(key: string): V | undefined {
    const entries = this.#entries
    const value = entries.get(key)
    // No value is `undefined` (see the class), so this lookup also says whether the key is kept.
    if (value === undefined) return undefined
    entries.delete(key)
    entries.set(key, value)
    return value
  }

  /** Keeps `value` under a new `key` as the most recent; returns the oldest value if it had to go. */
  add(key: string, value: V): V | undefined {
    const entries = this.#entries
    entries.set(key, value)
    if (entries.size <= this.#capacity) return undefined
    return this.shift()
  }

  /** Gives a kept `key` another value, where it stands in the order; does nothing to a key not kept. */
  replace(key: string, value: V): void {
    const entries = this.#entries
    if (entries.has(key)) entries.set(key, value)
  }

  delete(key: string): void {
    this.#entries.delete(key)
  }

  /** Removes every value `test` accepts, and returns them, oldest first. */
  removeIf(test: (value: V) => boolean): V[] {
    const removed: V[] = []
    // Deleting the entry just visited does not disturb a Map's iteration.
    for (const [key, value] of this.#entries) {
      if (!test(value)) continue
      this.#entries.delete(key)
      removed.push(value)
    }
    return removed
  }

  /** Every value, oldest first. */
  values(): IterableIterator<V> {
    return this.#entries.values()
  }

  clear(): void {
    this.#entries.clear()
    this.#oldest = undefined
  }

  /** Removes and returns the oldest value, if any. */
  shift(): V | undefined {
    const entries = this.#entries
    if (entries.size === 0) return undefined
    let next = this.#oldest?.next()
    if (next === undefined || next.done === true) {
      // None yet, after a clear, or (a guard: see #oldest) one that ran out: start at the front.
      this.#oldest = entries.entries()
      next = this.#oldest.next()
    }
    const [key, value] = next.value as [string, V]
    entries.delete(key)
    return value
  }
}
