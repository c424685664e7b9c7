import { setTimeout as sleep } from 'node:timers/promises'
import {
  BatchNotifier,
  type BatchStatusReceiver,
  LeakDetector,
  type LeakReport,
  LogEvent,
} from '@ackline/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const gc = (globalThis as { gc?: () => void }).gc

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

async function collectUntil(done: () => boolean): Promise<void> {
  for (let i = 0; i < 50 && !done(); i++) {
    gc!()
    await sleep(10)
  }
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
    await collectUntil(() => receiver.isResolved)
    subscription.unsubscribe()
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
    for (let i = 0; i < 5; i++) {
      gc!()
      await sleep(10)
    }
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
    for (let i = 0; i < 5; i++) {
      gc!()
      await sleep(10)
    }
    subscription.unsubscribe()
    expect(reports.filter((r) => r.sourceId === 'tidy')).toEqual([])
    expect(receivers.every((r) => r.status === 'delivered')).toBe(true)
  })
})
