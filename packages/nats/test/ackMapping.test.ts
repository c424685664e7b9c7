import type { RecordOutcome } from '@ackline/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { actionFor, nakDelayMs } from '../src/internal/ackMapping.js'

const backoff = { initialMs: 1000, maxMs: 60_000, multiplier: 2 }

describe('ackMapping', () => {
  // Every status, below and at the delivery bound, and without a bound: the whole table.
  const table: [RecordOutcome, number, number, string][] = [
    ['delivered', 1, 0, 'ack'],
    ['delivered', 5, 5, 'ack'],
    ['dropped', 1, 0, 'ack'],
    ['dropped', 5, 5, 'ack'],
    ['errored', 1, 0, 'nak'],
    ['errored', 4, 5, 'nak'],
    ['errored', 5, 5, 'term'],
    ['errored', 9, 5, 'term'],
    ['rejected', 1, 0, 'term'],
    ['rejected', 1, 5, 'term'],
  ]
  it.each(table)('%s at delivery %i (bound %i) becomes %s', (status, count, bound, kind) => {
    expect(actionFor(status, count, bound, backoff, 'sink X: no').kind).toBe(kind)
  })

  it('acks only delivered (or deliberately dropped) records', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<RecordOutcome>('delivered', 'dropped', 'errored', 'rejected'),
        fc.integer({ min: 1, max: 100 }),
        fc.integer({ min: 0, max: 100 }),
        (status, count, bound) =>
          (actionFor(status, count, bound, backoff, undefined).kind === 'ack') ===
          (status === 'delivered' || status === 'dropped'),
      ),
    )
  })

  it('terms with the reason the pipeline gave', () => {
    const action = actionFor('rejected', 1, 0, backoff, 'out REJECTED: too large')
    expect(action).toEqual({ kind: 'term', reason: 'rejected: out REJECTED: too large' })
    const gaveUp = actionFor('errored', 3, 3, backoff, 'out WRITE_FAILED: down')
    expect(gaveUp.kind === 'term' && gaveUp.reason).toMatch(/errored on each of 3 deliveries.*down/)
  })

  it('naks with a delay that grows with the delivery count, up to the cap', () => {
    expect(nakDelayMs(backoff, 1)).toBe(1000)
    expect(nakDelayMs(backoff, 2)).toBe(2000)
    expect(nakDelayMs(backoff, 3)).toBe(4000)
    expect(nakDelayMs(backoff, 30)).toBe(60_000)
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 60 }),
        (n) => nakDelayMs(backoff, n + 1) >= nakDelayMs(backoff, n),
      ),
    )
  })
})
