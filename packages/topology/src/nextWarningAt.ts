/**
 * The one rule by which a warning said again and again (a pull failing in a row, connections that
 * cannot be accepted) thins out: bounded, so a fault that lasts cannot flood the log, and never
 * silent for good, so the log still shows it lasting.
 *
 * Invariant: of a run of occurrences counted from 1, the 1st, 2nd, 4th, … 512th and then every
 * 1024th are warned, and each of those names the next one; no other is.
 *
 * @module
 */

/** Past the 512th occurrence of a run, every this many is warned (a power of two, so the two rules meet). */
const EVERY = 1024

/**
 * Whether the `count`th occurrence of a run (counted from 1) is to be warned: when it is, the
 * count at which the next warning of the run is due (to be said, as "said again at N"); when it is
 * not, `undefined`. Warned are the powers of two below 1024 (1, 2, 4, … 512) and every multiple
 * of 1024; so the next after a power of two below 1024 is its double, and after a multiple of 1024
 * the next multiple. A pure function of `count`: the caller keeps the count and resets it when the
 * run ends. Throws a `RangeError` for a `count` that is not a whole number from 1 to
 * `Number.MAX_SAFE_INTEGER` (a caller's mistake).
 *
 * @example
 * ```ts
 * const next = nextWarningAt(++this.#failures)
 * if (next !== undefined) warn(`pulls failed ${this.#failures} times in a row (said again at ${next})`)
 * ```
 */
export function nextWarningAt(count: number): number | undefined {
  if (!Number.isSafeInteger(count) || count < 1) {
    throw new RangeError(`nextWarningAt: count must be a whole number from 1, got ${String(count)}`)
  }
  if (count < EVERY) return (count & (count - 1)) === 0 ? count * 2 : undefined
  return count % EVERY === 0 ? count + EVERY : undefined
}
