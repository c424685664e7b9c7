import {
  BatchNotifier,
  type BatchStatusReceiver,
  LeakDetector,
  type LeakReport,
  LogEvent,
} from '@ackline/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { BatchState } from '../src/internal/BatchState.js'
import { GROUP_SIZE, groups } from '../src/internal/watchGroups.js'
import { collectProvably, collectUntil, gc } from './support/collect.js'

// Builds a batch of three events in a function of its own so that nothing on the test's stack
// keeps the leaked handle (or the notifier) reachable.
function leakOneOfThree(sourceId: string): BatchStatusReceiver {
  const { notifier, receiver } = BatchNotifier.create({ sourceId })
  const events = [new LogEvent({ n: 1 }), new LogEvent({ n: 2 }), new LogEvent({ n: 3 })]
  for (const event of events) notifier.attach(event)
  notifier.release()
  events[0]!.end('delivered')
  events[1]!.end('delivered')
  // events[2] is forgotten: never ended.
  return receiver
}

function forgetToRelease(sourceId: string): BatchStatusReceiver {
  const { notifier, receiver } = BatchNotifier.create({ sourceId })
  const event = new LogEvent({})
  notifier.attach(event)
  event.end('delivered')
  return receiver
}

describe('LeakDetector (run with --expose-gc)', () => {
  beforeAll(() => LeakDetector.setWarnings(false))
  afterAll(() => LeakDetector.setWarnings(true))

  it('is run with --expose-gc', () => {
    expect(typeof gc).toBe('function')
  })

  it('settles a batch whose handle was collected without ending as errored, and reports it', async () => {
    const reports: LeakReport[] = []
    const subscription = LeakDetector.leaks.subscribe((r) => reports.push(r))
    const before = LeakDetector.count
    const receiver = leakOneOfThree('leaky-source')
    expect(receiver.isResolved).toBe(false)
    const collections = await collectUntil(() => receiver.isResolved)
    subscription.unsubscribe()
    expect(collections).toBeGreaterThan(0)
    expect(receiver.status).toBe('errored')
    expect(reports).toContainEqual({ sourceId: 'leaky-source', batchId: receiver.batchId, handles: 1 })
    expect(LeakDetector.count - before).toBe(1)
  })

  it('counts a source that never released its notifier', async () => {
    const reports: LeakReport[] = []
    const subscription = LeakDetector.leaks.subscribe((r) => reports.push(r))
    const receiver = forgetToRelease('forgetful')
    await collectUntil(() => receiver.isResolved)
    subscription.unsubscribe()
    expect(receiver.status).toBe('errored')
    expect(reports).toContainEqual({ sourceId: 'forgetful', batchId: receiver.batchId, handles: 1 })
  })

  it('finds a leak once the batches created around it are gone too, not before', async () => {
    // Batches are watched in groups of up to 64 made one after another: with 64 live batches on
    // either side, the leaked one surely shares its group with a live one.
    const around = () =>
      Array.from({ length: 64 }, () => BatchNotifier.create({ sourceId: 'neighbour' }).notifier)
    let before: BatchNotifier[] | undefined = around()
    const receiver = leakOneOfThree('among-neighbours')
    let after: BatchNotifier[] | undefined = around()
    await collectProvably()
    expect(receiver.isResolved).toBe(false)
    for (const notifier of [...before, ...after]) notifier.release()
    before = undefined
    after = undefined
    await collectUntil(() => receiver.isResolved)
    expect(receiver.status).toBe('errored')
  })

  it('never reports a batch whose handles all ended', async () => {
    const reports: LeakReport[] = []
    const subscription = LeakDetector.leaks.subscribe((r) => reports.push(r))
    const receivers = Array.from({ length: 20 }, () => {
      const { notifier, receiver } = BatchNotifier.create({ sourceId: 'tidy' })
      const event = new LogEvent({})
      notifier.attach(event)
      notifier.release()
      event.end('delivered')
      return receiver
    })
    await collectProvably()
    subscription.unsubscribe()
    expect(reports.filter((r) => r.sourceId === 'tidy')).toEqual([])
    expect(receivers.every((r) => r.status === 'delivered')).toBe(true)
  })
})

describe('LeakDetector groups', () => {
  beforeAll(() => LeakDetector.setWarnings(false))
  afterAll(() => LeakDetector.setWarnings(true))

  it('forEachUnresolved visits every batch not resolved yet and none that resolved, oldest first', () => {
    // 150 batches span three groups; every other one resolves.
    const batches = Array.from({ length: 150 }, (_, i) => {
      const { notifier, receiver } = BatchNotifier.create({ sourceId: 'visited' })
      if (i % 2 === 0) notifier.release() // no event: resolves delivered here
      return { notifier, receiver }
    })
    const visited: BatchStatusReceiver[] = []
    LeakDetector.forEachUnresolved((receiver) => {
      if (batches.some((b) => b.receiver === receiver)) visited.push(receiver)
    })
    expect(visited).toEqual(batches.filter((_, i) => i % 2 === 1).map((b) => b.receiver))
    for (const { notifier } of batches) notifier.release()
    let left = 0
    LeakDetector.forEachUnresolved((receiver) => {
      if (batches.some((b) => b.receiver === receiver)) left++
    })
    expect(left).toBe(0)
  })

  it('a batch that resolves leaves its group at once', () => {
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'leaving' })
    const state = receiver as unknown as BatchState
    const group = groups[Math.floor(state.watch / GROUP_SIZE)]!
    const index = state.watch % GROUP_SIZE
    expect(group[index]).toBe(state)
    notifier.release()
    expect(group[index]).toBeUndefined()
    expect(state.watch).toBe(-1)
  })

  it('gives the numbers of collected groups back, and still finds leaks in groups that reuse them', async () => {
    const sizes: number[] = []
    for (let round = 0; round < 5; round++) {
      // Five groups of tidy batches and one leaked batch per round, each group closed at once.
      for (let g = 0; g < 5; g++) {
        const { notifier } = BatchNotifier.create({ sourceId: 'tidy-round' })
        notifier.release()
        LeakDetector.closeGroup()
      }
      const receiver = leakOneOfThree(`reused-${round}`)
      const collections = await collectUntil(() => receiver.isResolved)
      expect(receiver.status, `round ${round} after ${collections} collections`).toBe('errored')
      sizes.push(groups.length)
    }
    // The table stops growing once numbers come back: the last rounds reuse what the first freed.
    expect(sizes[4]).toBeLessThanOrEqual(sizes[1]! + 6)
  })
})
