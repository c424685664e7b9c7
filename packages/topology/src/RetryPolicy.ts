/**
 * How a sink's failed writes are retried.
 *
 * Invariant: the delay only grows (exponential backoff, `multiplier` at least 1, capped at
 * `maxBackoffMs`) and a write is attempted at most `attempts` times; then its events are settled
 * `errored`, never delivered. The options are declared once, in {@link RetryPolicy.schema}.
 *
 * @module
 */
import { z } from 'zod'
import { MAX_TIMER_MS } from './internal/maxTimerMs.js'
import { defineOptions, type OptionsOf, type ResolvedOptionsOf } from './OptionsSchema.js'

const RetryPolicyOptions = defineOptions({
  attempts: z
    .int()
    .min(1)
    .default(3)
    .describe('How many times a write is attempted in all, the first one included (1 = no retry).'),
  initialBackoffMs: z
    .number()
    .min(0)
    .default(100)
    .describe('The delay before the second attempt, in milliseconds.'),
  maxBackoffMs: z
    .number()
    .min(0)
    .default(5000)
    .describe(
      'The longest delay between two attempts, in milliseconds; whatever it says, a delay is never longer than 2147483647 ms (about 24.8 days, the longest a timer waits).',
    ),
  multiplier: z.number().min(1).default(2).describe('What each delay is multiplied by for the next one.'),
})

/**
 * A sink's retry policy; every field has a default (see {@link RetryPolicy.defaults}).
 * `ResolvedOptionsOf<typeof RetryPolicy>` is a policy with every field filled in.
 */
export type RetryPolicy = OptionsOf<typeof RetryPolicyOptions>

/**
 * Companion of {@link RetryPolicy}: its options schema (`validate`, `resolve`, `defaults`,
 * `jsonSchema`, `schema`) and the backoff it implies.
 *
 * @example
 * ```ts
 * RetryPolicy.backoffMs({ initialBackoffMs: 100 }, 1) // 100: before the second attempt
 * RetryPolicy.backoffMs({ initialBackoffMs: 100 }, 3) // 400: before the fourth
 * RetryPolicy.validate({ attempts: 0 })               // [{ field: 'attempts', message: 'must be a positive integer, got 0', … }]
 * ```
 */
export const RetryPolicy = {
  ...RetryPolicyOptions,

  /**
   * The delay after failed attempt number `attempt` (1-based) and before the next one; at most
   * 2^31 - 1 ms, the longest a timer waits (a longer delay would fire after 1 ms).
   */
  backoffMs(policy: RetryPolicy | undefined, attempt: number): number {
    const p: ResolvedOptionsOf<typeof RetryPolicyOptions> = RetryPolicyOptions.resolve(policy)
    // Past about 1024 attempts the growth is Infinity, and 0 · Infinity is NaN: a timer fires that after 1 ms.
    if (p.initialBackoffMs === 0) return 0
    return Math.min(MAX_TIMER_MS, p.maxBackoffMs, p.initialBackoffMs * p.multiplier ** (attempt - 1))
  },
} as const
