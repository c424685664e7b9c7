import { BatchStatus, type EventStatus, FinalizationError } from '@ackline/core'
import { describe, expect, it } from 'vitest'
import {
  BATCH_UPDATE,
  batchStatusCode,
  batchStatusName,
  eventStatusCode,
} from '../src/internal/statusCodes.js'

// Every pair: [batch, event status, result].
const table: readonly [BatchStatus, EventStatus, BatchStatus][] = [
  ['delivered', 'dropped', 'delivered'],
  ['delivered', 'delivered', 'delivered'],
  ['delivered', 'errored', 'errored'],
  ['delivered', 'rejected', 'rejected'],
  ['delivered', 'recorded', 'delivered'],
  ['errored', 'dropped', 'errored'],
  ['errored', 'delivered', 'errored'],
  ['errored', 'errored', 'errored'],
  ['errored', 'rejected', 'rejected'],
  ['errored', 'recorded', 'errored'],
  ['rejected', 'dropped', 'rejected'],
  ['rejected', 'delivered', 'rejected'],
  ['rejected', 'errored', 'rejected'],
  ['rejected', 'rejected', 'rejected'],
  ['rejected', 'recorded', 'rejected'],
]

describe('BatchStatus.update', () => {
  it('the table lists all 15 pairs once', () => {
    expect(new Set(table.map(([b, e]) => `${b}>${e}`)).size).toBe(15)
  })

  it.each(table)('update(%s, %s) is %s', (batch, event, result) => {
    expect(BatchStatus.update(batch, event)).toBe(result)
  })

  it('starts delivered, so an event that ends without a status counts as delivered', () => {
    expect(BatchStatus.initial).toBe('delivered')
    expect(BatchStatus.update(BatchStatus.initial, 'dropped')).toBe('delivered')
  })

  it.each([
    ['bogus', 'delivered'],
    ['bogus', 'errored'],
    ['dropped', 'errored'],
    ['recorded', 'delivered'],
    ['delivered', 'bogus'],
    ['rejected', undefined],
    // String() of these throws: the status error must still be the one thrown.
    ['delivered', Object.create(null)],
    [Symbol('s'), 'delivered'],
  ])('update(%j, %j) from untyped code throws INVALID_STATUS', (batch, event) => {
    expect(() => BatchStatus.update(batch as BatchStatus, event as EventStatus)).toThrow(
      expect.objectContaining({ name: 'FinalizationError', code: 'INVALID_STATUS' }),
    )
    expect(() => BatchStatus.update(batch as BatchStatus, event as EventStatus)).toThrow(FinalizationError)
  })

  it('the hot-path table agrees with the public function on every pair', () => {
    for (const [batch, event, result] of table) {
      expect(batchStatusName(BATCH_UPDATE[batchStatusCode(batch) * 5 + eventStatusCode(event)]!)).toBe(result)
    }
  })
})
