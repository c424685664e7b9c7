import { RecordRetry, RetryPolicy } from '@ackline/topology'
import { describe, expect, it } from 'vitest'

describe('RetryPolicy.backoffMs', () => {
  it('grows by the multiplier from the initial delay, up to the cap', () => {
    const policy = { initialBackoffMs: 100, maxBackoffMs: 1000, multiplier: 3 }
    expect([1, 2, 3, 4].map((attempt) => RetryPolicy.backoffMs(policy, attempt))).toEqual([
      100, 300, 900, 1000,
    ])
  })

  it('is 0 for every attempt when the initial delay is 0, however many attempts (0 · 2^1100 was NaN)', () => {
    // A timer armed with NaN fires after 1 ms, and newer Node versions warn each time.
    const policy = { attempts: 5000, initialBackoffMs: 0 }
    for (const attempt of [1, 2, 1024, 1100, 4999]) expect(RetryPolicy.backoffMs(policy, attempt)).toBe(0)
  })
})

describe('RecordRetry.delayMs', () => {
  it('is 0 when the initial delay is 0, however many attempts and whatever the multiplier', () => {
    // A source retrying until done (`attempts: Infinity`, as the file source does) reaches these.
    expect(RecordRetry.delayMs({ initialBackoffMs: 0 }, 1100, 0.5)).toBe(0)
    expect(RecordRetry.delayMs({ initialBackoffMs: 0, multiplier: Number.POSITIVE_INFINITY }, 2, 1)).toBe(0)
  })

  it('is 0 when the jitter takes the whole back-off, also when the back-off grew to Infinity (Infinity · 0 was NaN)', () => {
    // No cap (maxBackoffMs: Infinity, which send() accepts) and a full jitter with random() at 0.
    const options = {
      maxBackoffMs: Number.POSITIVE_INFINITY,
      multiplier: Number.POSITIVE_INFINITY,
      jitter: 1,
    }
    expect(RecordRetry.delayMs(options, 2, 0)).toBe(0)
    expect(RecordRetry.delayMs(options, 2, 0.5)).toBe(2_147_483_647)
  })
})
