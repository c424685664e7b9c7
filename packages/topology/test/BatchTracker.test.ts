// The batch tracker on its own: what a source is told, and when.
import { BatchNotifier, EventArray } from '@ackline/core'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { BatchTracker } from '../src/internal/BatchTracker.js'
import { Counters } from '../src/internal/Counters.js'
import type { LifecycleEvent } from '../src/LifecycleEvent.js'

function tracker(options: { watching?: boolean; ackTimeoutMs?: number } = {}) {
  const facts: LifecycleEvent[] = []
  const counters = new Counters('source', 'test')
  const t = new BatchTracker('src', counters, options.ackTimeoutMs, {
    emit: (fact) => facts.push(fact),
    watching: () => options.watching ?? true,
  })
  return { t, facts, counters }
}

function batch(n: number) {
  const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
  const array = EventArray.fromRecords(
    Array.from({ length: n }, (_, i) => ({ i })),
    { sourceId: 'src', batch: notifier },
  )
  return { array, receiver }
}

describe('BatchTracker', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('reports a resolved batch once, in a microtask after the end that resolved it', async () => {
    const { t, facts, counters } = tracker()
    const { array, receiver } = batch(2)
    const receipt = t.track(receiver)
    expect(t.pending).toBe(1)
    array.end('rejected')
    expect(facts).toEqual([])
    expect(await receipt.status).toBe('rejected')
    expect(t.pending).toBe(0)
    expect(counters.inFlight).toBe(0)
    expect(facts).toMatchObject([
      { type: 'batch_resolved', batchId: receipt.batchId, status: 'rejected', timedOut: false },
    ])
  })

  it('a forced stop reports what a batch resolved to if only its report was still queued', async () => {
    const { t, facts } = tracker()
    const resolved = batch(1)
    const open = batch(1)
    const first = t.track(resolved.receiver)
    const second = t.track(open.receiver)
    resolved.array.end('delivered')
    t.forceAll() // before the queued report runs
    expect(await first.status).toBe('delivered')
    expect(await second.status).toBe('errored')
    await Promise.resolve()
    expect(facts.map((f) => f.type === 'batch_resolved' && [f.status, f.timedOut])).toEqual([
      ['delivered', false],
      ['errored', true],
    ])
    open.array.end('delivered') // the late real resolution is ignored
    await Promise.resolve()
    expect(facts).toHaveLength(2)
  })

  it('tells the source as soon as an authoritative sink recorded every event, and once only', async () => {
    const { t, facts } = tracker()
    const { array, receiver } = batch(2)
    const receipt = t.track(receiver)
    const failure = { componentId: 'sink', code: 'WRITE_FAILED', message: 'down' }
    t.recorded(receiver, 'delivered', undefined)
    t.recorded(receiver, 'errored', failure)
    expect(await receipt.status).toBe('errored')
    expect(receipt.failure).toBe(failure)
    array.end('delivered')
    await Promise.resolve()
    expect(facts.filter((f) => f.type === 'batch_resolved')).toHaveLength(1)
  })

  it('builds no batch_resolved fact while nobody watches, and decides the receipt in the end that resolved it', async () => {
    const { t, facts } = tracker({ watching: false })
    const { array, receiver } = batch(1)
    const receipt = t.track(receiver)
    array.end('delivered')
    // Decided inside the end: nothing of anyone else's runs there, so nothing is deferred.
    expect(t.pending).toBe(0)
    expect(await receipt.status).toBe('delivered')
    expect(facts).toEqual([])
  })

  it('an empty batch, resolved before it is tracked, is decided once and leaves no ack timer behind', async () => {
    vi.useFakeTimers()
    const { t, counters } = tracker({ watching: false, ackTimeoutMs: 1000 })
    const { receiver } = batch(0) // released with no event: resolved already
    const receipt = t.track(receiver)
    expect(t.pending).toBe(0)
    expect(vi.getTimerCount()).toBe(0)
    expect(await receipt.status).toBe('delivered')
    expect(counters.inFlight).toBe(0)
    expect(counters.latencyCount).toBe(1)
  })

  it('a batch decided inside its end is not decided again by its timeout or a forced stop', async () => {
    vi.useFakeTimers()
    const { t, counters } = tracker({ watching: false, ackTimeoutMs: 1000 })
    const { array, receiver } = batch(2)
    const receipt = t.track(receiver)
    const waiting = receipt.status // read before the decision: the receipt waits for it
    array.end('rejected')
    expect(t.pending).toBe(0)
    expect(vi.getTimerCount()).toBe(0) // the decision cleared the timer
    t.forceAll()
    await vi.advanceTimersByTimeAsync(1000)
    expect(await waiting).toBe('rejected')
    expect(receipt.failure?.code).toBe('UNEXPLAINED')
    expect(counters.latencyCount).toBe(1)
  })

  it('while nobody watches, an authoritative record of every event still decides the batch at once', async () => {
    const { t } = tracker({ watching: false })
    const { array, receiver } = batch(3)
    const receipt = t.track(receiver)
    t.recorded(receiver, 'delivered', undefined)
    t.recorded(receiver, 'delivered', undefined)
    expect(t.pending).toBe(1)
    t.recorded(receiver, 'delivered', undefined)
    expect(await receipt.status).toBe('delivered')
    array.end('errored') // the handles end later; the source was told already
    expect(t.pending).toBe(0)
    expect(await receipt.status).toBe('delivered')
  })

  it('a forced stop gives up on its own pending batches only, found without a list of them', async () => {
    const mine = tracker({ watching: false })
    const theirs = tracker({ watching: false })
    const pending = Array.from({ length: 100 }, () => batch(1)) // spans more than one leak group
    const done = batch(1)
    const receipts = pending.map((b) => mine.t.track(b.receiver))
    const doneReceipt = mine.t.track(done.receiver)
    const other = batch(1)
    const otherReceipt = theirs.t.track(other.receiver)
    done.array.end('delivered')
    mine.t.forceAll()
    expect(mine.t.pending).toBe(0)
    expect(mine.counters.inFlight).toBe(0)
    expect(await Promise.all(receipts.map((r) => r.status))).toEqual(pending.map(() => 'errored'))
    expect(receipts.every((r) => r.failure?.code === 'STOPPED')).toBe(true)
    expect(await doneReceipt.status).toBe('delivered')
    expect(theirs.t.pending).toBe(1) // another tracker's batch is untouched
    other.array.end('delivered')
    expect(await otherReceipt.status).toBe('delivered')
    for (const b of pending) b.array.end('delivered') // late ends change nothing
    expect(await receipts[0]!.status).toBe('errored')
    expect(mine.counters.latencyCount).toBe(101)
  })
})
