import { BatchStatus, type DeliveryStatus } from '@ackline/core'
import { type CopyReport, DeliveryModel } from '@ackline/testkit'
import { describe, expect, it } from 'vitest'

const r = (status: DeliveryStatus | undefined, acknowledges = true, authoritative = false): CopyReport => ({
  status,
  acknowledges,
  authoritative,
})

describe('DeliveryModel', () => {
  it('folds every pair of copy statuses to the worse one', () => {
    const statuses: DeliveryStatus[] = ['delivered', 'errored', 'rejected']
    const rank = { delivered: 0, errored: 1, rejected: 2 }
    for (const a of statuses) {
      for (const b of statuses) {
        expect(DeliveryModel.record([r(a), r(b)])).toBe(rank[a] >= rank[b] ? a : b)
      }
    }
  })

  it('ignores copies at sinks with acknowledgements off and drops without a status', () => {
    expect(DeliveryModel.record([r('errored', false), r(undefined)])).toBe('dropped')
    expect(DeliveryModel.record([r('rejected', false), r('delivered')])).toBe('delivered')
  })

  it('freezes the status an authoritative sink sent, ignoring later copies but not earlier ones', () => {
    expect(DeliveryModel.record([r('delivered', true, true), r('rejected')])).toBe('delivered')
    expect(DeliveryModel.record([r('errored'), r('delivered', true, true), r('rejected')])).toBe('errored')
  })

  it('resolves a batch to the worst record, a dropped record counting as delivered', () => {
    expect(DeliveryModel.batch([])).toBe('delivered')
    expect(DeliveryModel.batch(['dropped', 'delivered'])).toBe('delivered')
    expect(DeliveryModel.batch(['errored', 'dropped', 'rejected'])).toBe('rejected')
    for (const v of BatchStatus.values) expect(DeliveryModel.batch([v])).toBe(v)
  })

  it('tells a source without acknowledgements delivered whatever happened', () => {
    expect(DeliveryModel.told(false, ['rejected'])).toBe('delivered')
    expect(DeliveryModel.told(true, ['rejected'])).toBe('rejected')
  })
})
