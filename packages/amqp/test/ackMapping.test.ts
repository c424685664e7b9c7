import type { RecordOutcome } from '@ackline/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  type BrokerAction,
  brokerAction,
  type RedeliveryPolicy,
  redeliveryDelay,
} from '../src/internal/ackMapping.js'

/** Every record outcome; the `satisfies` check fails to compile when one is added to the type. */
const OUTCOMES = ['delivered', 'dropped', 'errored', 'rejected'] as const satisfies readonly RecordOutcome[]
type Missing = Exclude<RecordOutcome, (typeof OUTCOMES)[number]>
const complete: Missing extends never ? true : false = true

const policy: RedeliveryPolicy = { maxAttempts: 3, initialDelayMs: 100, maxDelayMs: 250 }

describe('ackMapping', () => {
  // Every outcome x liveness x (first attempt, middle attempt, last attempt): the whole table.
  const table: [RecordOutcome, boolean, number, BrokerAction][] = [
    ['delivered', true, 1, { kind: 'ack' }],
    ['delivered', true, 3, { kind: 'ack' }],
    ['dropped', true, 1, { kind: 'ack' }],
    ['dropped', false, 1, { kind: 'abandon' }],
    ['errored', true, 1, { kind: 'requeue', delayMs: 100 }],
    ['errored', true, 2, { kind: 'requeue', delayMs: 200 }],
    ['errored', true, 3, { kind: 'deadLetter', why: 'attempts-exhausted' }],
    ['errored', true, 9, { kind: 'deadLetter', why: 'attempts-exhausted' }],
    ['rejected', true, 1, { kind: 'deadLetter', why: 'rejected' }],
    ['rejected', true, 3, { kind: 'deadLetter', why: 'rejected' }],
    ['delivered', false, 1, { kind: 'abandon' }],
    ['errored', false, 1, { kind: 'abandon' }],
    ['errored', false, 3, { kind: 'abandon' }],
    ['rejected', false, 1, { kind: 'abandon' }],
  ]
  it.each(table)('%s on a live=%s channel, attempt %d → %o', (status, live, attempt, action) => {
    expect(brokerAction(status, attempt, live, policy)).toEqual(action)
  })

  it('covers every record outcome', () => {
    expect(complete).toBe(true)
    expect(new Set(table.map(([status]) => status))).toEqual(new Set(OUTCOMES))
  })

  it('never acks on a dead channel and never acks what was not delivered (property)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...OUTCOMES),
        fc.integer({ min: 1, max: 100 }),
        fc.boolean(),
        fc.integer({ min: 1, max: 10 }),
        (status, attempt, live, maxAttempts) => {
          const action = brokerAction(status, attempt, live, { ...policy, maxAttempts })
          if (action.kind === 'ack')
            expect(live && (status === 'delivered' || status === 'dropped')).toBe(true)
          if (!live) expect(action.kind).toBe('abandon')
          if (action.kind === 'requeue') expect(attempt).toBeLessThan(maxAttempts)
        },
      ),
      { verbose: true },
    )
  })

  it('doubles the redelivery delay per attempt up to the cap', () => {
    const p = { maxAttempts: 10, initialDelayMs: 10, maxDelayMs: 75 }
    expect([1, 2, 3, 4, 5].map((a) => redeliveryDelay(p, a))).toEqual([10, 20, 40, 75, 75])
  })

  it('never holds a message longer than a timer waits (a longer delay would fire after 1 ms: a requeue loop)', () => {
    const p = { maxAttempts: 10, initialDelayMs: 3e9, maxDelayMs: 1e12 }
    expect(redeliveryDelay(p, 1)).toBe(2_147_483_647)
  })
})
