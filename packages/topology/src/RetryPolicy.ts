/**
 * How a sink's failed writes are retried.
 *
 * Invariant: the delay only grows (exponential backoff capped at `maxBackoffMs`) and a write is
 * attempted at most `attempts` times; then its events are settled `errored`, never delivered.
 *
 * @module
 */

/** A sink's retry policy; every field has a default. */
export interface RetryPolicy {
  /** How many times a write is attempted in all, the first one included (default 3; 1 = no retry). */
  readonly attempts?: number
  /** The delay before the second attempt, in milliseconds (default 100). */
  readonly initialBackoffMs?: number
  /** The longest delay between two attempts (default 5000). */
  readonly maxBackoffMs?: number
  /** What each delay is multiplied by for the next one (default 2). */
  readonly multiplier?: number
}

/**
 * Companion of {@link RetryPolicy}.
 *
 * @example
 * ```ts
 * RetryPolicy.backoffMs({ initialBackoffMs: 100 }, 1) // 100: before the second attempt
 * RetryPolicy.backoffMs({ initialBackoffMs: 100 }, 3) // 400: before the fourth
 * ```
 */
export const RetryPolicy = {
  /** The policy used when a sink gives none. */
  defaults: {
    attempts: 3,
    initialBackoffMs: 100,
    maxBackoffMs: 5000,
    multiplier: 2,
  } as Required<RetryPolicy>,

  /** The policy with every default filled in. */
  resolve(policy: RetryPolicy | undefined): Required<RetryPolicy> {
    return { ...RetryPolicy.defaults, ...policy }
  },

  /** The delay after failed attempt number `attempt` (1-based) and before the next one. */
  backoffMs(policy: RetryPolicy | undefined, attempt: number): number {
    const p = RetryPolicy.resolve(policy)
    return Math.min(p.maxBackoffMs, p.initialBackoffMs * p.multiplier ** (attempt - 1))
  },
} as const
