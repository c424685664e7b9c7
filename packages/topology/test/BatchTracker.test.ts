// The batch tracker on its own: what a source is told, and when.
import { BatchNotifier, EventArray, SlotBatches } from '@ackline/core'
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

  it("measures the latency of the batches one array's end resolves from one clock reading", () => {
    const { t, counters } = tracker({ watching: false })
    const batches = [batch(1), batch(2), batch(1)]
    for (const { receiver } of batches) t.track(receiver)
    const opened = batches.map(({ receiver }) => receiver.openedAt)
    let clock = Math.max(...opened) + 100
    const reads = vi.spyOn(Date, 'now').mockImplementation(() => (clock += 7))
    try {
      new EventArray(batches.flatMap(({ array }) => array.events)).end('delivered')
    } finally {
      reads.mockRestore()
    }
    expect(counters.latencyCount).toBe(3)
    // One reading (clock, after its one step) for all three: a reading per batch would add 7 and 14.
    expect(counters.latencySum).toBe(opened.reduce((sum, at) => sum + (clock - at), 0))
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

  it('with an ack timeout, one timer serves every batch: each times out once, oldest first, at its own deadline', async () => {
    vi.useFakeTimers()
    const { t, facts, counters } = tracker({ ackTimeoutMs: 1000 })
    const batches: ReturnType<typeof batch>[] = []
    const receipts: ReturnType<typeof t.track>[] = []
    for (let i = 0; i < 300; i++) {
      const b = batch(1)
      batches.push(b)
      receipts.push(t.track(b.receiver))
      if (i % 100 === 99) await vi.advanceTimersByTimeAsync(100) // three waves, 100 ms apart
    }
    expect(vi.getTimerCount()).toBe(1)
    // Most batches resolve in time (enough to compact the queue more than once); some never do.
    const late = new Set([0, 5, 150, 151, 299])
    batches.forEach((b, i) => {
      if (!late.has(i)) b.array.end(i % 7 === 0 ? 'rejected' : 'delivered')
    })
    expect(t.pending).toBe(late.size)
    await vi.advanceTimersByTimeAsync(699) // the first wave's deadline is 1000 ms after it opened
    expect(facts.filter((f) => f.type === 'batch_resolved' && f.timedOut)).toEqual([])
    await vi.advanceTimersByTimeAsync(1)
    expect(await receipts[0]!.status).toBe('errored')
    expect(receipts[150]!.decided).toBeUndefined()
    await vi.advanceTimersByTimeAsync(200)
    expect(t.pending).toBe(0)
    expect(vi.getTimerCount()).toBe(0) // nothing pending: no timer left
    const timedOut = facts.filter((f) => f.type === 'batch_resolved' && f.timedOut)
    expect(timedOut.map((f) => f.type === 'batch_resolved' && [f.batchId, f.latencyMs])).toEqual(
      [0, 5, 150, 151, 299].map((i) => [receipts[i]!.batchId, 1000]),
    )
    for (const i of late) {
      expect(await receipts[i]!.status).toBe('errored')
      expect(receipts[i]!.failure?.code).toBe('ACK_TIMEOUT')
    }
    expect(await receipts[7]!.status).toBe('rejected')
    expect(await receipts[1]!.status).toBe('delivered')
    expect(counters.inFlight).toBe(0)
    expect(counters.latencyCount).toBe(300)
    for (const i of late) batches[i]!.array.end('delivered') // the late ends change nothing
    expect(await receipts[0]!.status).toBe('errored')
  })

  it('with an ack timeout, a batch decided otherwise keeps no object of its own', () => {
    vi.useFakeTimers()
    const { t } = tracker({ watching: false, ackTimeoutMs: 1000 })
    const kept = batch(1)
    t.track(kept.receiver) // keeps one batch pending, so the queue stays
    const { array, receiver } = batch(1)
    t.track(receiver)
    array.end('delivered')
    expect(receiver.tracking).toBeUndefined()
    expect(receiver.status).toBe('delivered')
    kept.array.end('delivered')
  })

  it('drops facts queued for watchers who left before the flush', async () => {
    let watching = true
    const facts: LifecycleEvent[] = []
    const t = new BatchTracker('src', new Counters('source', 'test'), undefined, {
      emit: (fact) => facts.push(fact),
      watching: () => watching,
    })
    const { array, receiver } = batch(1)
    const receipt = t.track(receiver)
    array.end('delivered')
    expect(receipt.decided).toBe('delivered') // decided in the end, watched or not
    watching = false
    await Promise.resolve()
    expect(facts).toEqual([])
  })

  it('a decision made outside an end first emits the facts still queued: facts keep the order of decisions', () => {
    const { t, facts } = tracker()
    const first = batch(1)
    const second = batch(1)
    const a = t.track(first.receiver)
    const b = t.track(second.receiver)
    first.array.end('delivered') // queued for the flush
    t.recorded(second.receiver, 'rejected', undefined) // decides now, not inside an end
    expect(facts.map((f) => f.type === 'batch_resolved' && f.batchId)).toEqual([a.batchId, b.batchId])
    second.array.end('delivered')
  })

  it("ignores records of batches it does not track (another tracker's, or decided ones)", async () => {
    const mine = tracker()
    const theirs = tracker()
    const { array, receiver } = batch(1)
    const receipt = theirs.t.track(receiver)
    mine.t.recorded(receiver, 'rejected', undefined)
    expect(receipt.decided).toBeUndefined()
    expect(mine.t.pending).toBe(0)
    array.end('delivered')
    expect(await receipt.status).toBe('delivered')
    theirs.t.recorded(receiver, 'rejected', undefined) // decided already: ignored
    expect(await receipt.status).toBe('delivered')
  })

  it('with an ack timeout, a watcher that tracks a batch inside the expiry leaves one timer, and none once done', () => {
    vi.useFakeTimers()
    const retries: ReturnType<typeof batch>[] = []
    const t: BatchTracker = new BatchTracker('src', new Counters('source', 'test'), 1000, {
      emit: (fact) => {
        // A watcher that sends a retry for the first batch that timed out, inside the expiry.
        if (fact.type === 'batch_resolved' && fact.timedOut && retries.length === 0) {
          const retry = batch(1)
          retries.push(retry)
          t.track(retry.receiver)
        }
      },
      watching: () => true,
    })
    const first = batch(1)
    t.track(first.receiver)
    vi.advanceTimersByTime(500)
    const second = batch(1)
    t.track(second.receiver)
    vi.advanceTimersByTime(500) // the first times out; the watcher tracks a retry
    expect(retries).toHaveLength(1)
    expect(t.pending).toBe(2)
    expect(vi.getTimerCount()).toBe(1)
    second.array.end('delivered')
    retries[0]!.array.end('delivered')
    expect(t.pending).toBe(0)
    expect(vi.getTimerCount()).toBe(0)
    first.array.end('delivered')
  })

  it('with an ack timeout, deadlines are on the monotonic clock: a wall clock stepped back delays none', () => {
    vi.useFakeTimers({ now: 10_000_000 })
    const { t } = tracker({ watching: false, ackTimeoutMs: 100 })
    const a = batch(1)
    t.track(a.receiver)
    vi.setSystemTime(10_000_000 - 60_000) // the wall clock steps back a minute
    const b = batch(1)
    t.track(b.receiver)
    vi.advanceTimersByTime(200)
    expect(t.pending).toBe(0)
    a.array.end('delivered')
    b.array.end('delivered')
  })

  it('with an ack timeout, the queue stays bounded while every batch times out in a steady stream', () => {
    vi.useFakeTimers()
    const { t } = tracker({ watching: false, ackTimeoutMs: 100 })
    const open: ReturnType<typeof batch>[] = []
    let longest = 0
    for (let i = 0; i < 5000; i++) {
      const b = batch(1)
      open.push(b)
      t.track(b.receiver)
      vi.advanceTimersByTime(1)
      longest = Math.max(longest, t.timeoutQueueLength)
    }
    // About 100 batches wait at any time (a deadline every ms, 100 ms long): the queue holds at
    // most about twice that, never one slot per batch ever tracked.
    expect(t.pending).toBeLessThanOrEqual(101)
    expect(longest).toBeLessThan(400)
    for (const b of open) b.array.end('delivered')
  })

  it("a stop gives up on every tracker's pending batches in one pass, each with its own failure", async () => {
    const a = tracker()
    const b = tracker()
    const pending = [batch(1), batch(1), batch(1)]
    const receipts = [
      a.t.track(pending[0]!.receiver),
      b.t.track(pending[1]!.receiver),
      a.t.track(pending[2]!.receiver),
    ]
    BatchTracker.forceAll([a.t, b.t])
    expect([a.t.pending, b.t.pending]).toEqual([0, 0])
    expect(await Promise.all(receipts.map((r) => r.status))).toEqual(['errored', 'errored', 'errored'])
    expect(receipts.map((r) => r.failure?.code)).toEqual(['STOPPED', 'STOPPED', 'STOPPED'])
    expect(a.facts.map((f) => f.type === 'batch_resolved' && f.batchId)).toEqual([
      receipts[0]!.batchId,
      receipts[2]!.batchId,
    ])
    expect(b.facts.map((f) => f.type === 'batch_resolved' && f.source)).toEqual(['src'])
    for (const p of pending) p.array.end('delivered')
  })

  it('an empty batch tracked while watched, with an ack timeout, is decided at once and starts no timer', async () => {
    vi.useFakeTimers()
    const { t, facts } = tracker({ ackTimeoutMs: 1000 })
    const { receiver } = batch(0)
    const receipt = t.track(receiver)
    expect(receipt.decided).toBe('delivered')
    expect(vi.getTimerCount()).toBe(0)
    await vi.advanceTimersByTimeAsync(0)
    expect(facts).toMatchObject([{ type: 'batch_resolved', status: 'delivered', timedOut: false }])
  })

  describe('batches kept as slots (RFC 0009)', () => {
    it('reports each once, in a microtask, with its id and latency, and counts failures without a reason', async () => {
      const { t, facts, counters } = tracker()
      const slots = new SlotBatches('src', t)
      const arrays = [0, 1, 2].map((i) => slots.fromRecords([{ i }, { i }], Date.now()))
      for (let i = 0; i < 3; i++) t.followSlot()
      expect(t.pending).toBe(3)
      arrays[0]!.end('delivered')
      arrays[1]!.end('errored')
      arrays[2]!.events[0]!.end('rejected', { reason: { componentId: 'out', code: 'BAD', message: 'no' } })
      expect(facts).toEqual([]) // facts wait for a microtask, never inside the end
      arrays[2]!.events[1]!.end('delivered')
      await Promise.resolve()
      expect(t.pending).toBe(0)
      expect(counters.inFlight).toBe(0)
      expect(counters.latencyCount).toBe(3)
      const resolved = facts.filter((f) => f.type === 'batch_resolved')
      expect(resolved.map((f) => [f.status, f.failure?.code])).toEqual([
        ['delivered', undefined],
        ['errored', 'UNEXPLAINED'],
        ['rejected', 'BAD'],
      ])
      expect(new Set(resolved.map((f) => f.batchId)).size).toBe(3)
      expect(Object.fromEntries(counters.failures ?? [])).toEqual({ UNEXPLAINED: 1 })
    })

    it('gives up on the pending ones at a forced stop, once, and ignores their later ends', async () => {
      const { t, facts, counters } = tracker()
      const slots = new SlotBatches('src', t)
      const done = slots.fromRecords([{ i: 0 }], Date.now())
      const pending = [1, 2].map((i) => slots.fromRecords([{ i }], Date.now()))
      for (let i = 0; i < 3; i++) t.followSlot()
      done.end('delivered')
      t.forceAll()
      expect(t.pending).toBe(0)
      expect(counters.inFlight).toBe(0)
      for (const array of pending) array.end('delivered') // late: nothing changes
      await Promise.resolve()
      const resolved = facts.filter((f) => f.type === 'batch_resolved')
      expect(resolved.map((f) => [f.status, f.failure?.code, f.timedOut])).toEqual([
        ['delivered', undefined, false],
        ['errored', 'STOPPED', true],
        ['errored', 'STOPPED', true],
      ])
      expect(Object.fromEntries(counters.failures ?? [])).toEqual({ STOPPED: 2 })
    })
  })
})
