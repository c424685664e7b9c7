// What a sink's outcomes do to its sources' batches: results, retries, the buffer in front of it
// (back pressure, drops, another kind of buffer), and a sink that cannot start.

import { type LifecycleEvent, RejectError, RetryableError, TopologyBuilder } from '@ackline/topology'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { linear, n, on, records, run } from './support/Harness.js'
import { Gate, passThrough, queueBuffer, testSink, testSource } from './support/TestComponents.js'

afterEach(() => {
  vi.useRealTimers()
})

describe('a buffer of another kind in front of a sink', () => {
  it('is opened by its factory, fed and drained like the in-memory channel', async () => {
    const source = testSource([records(1, 2), records(3)])
    const sink = testSink({ outcome: (e) => (n(e) === 3 ? 'rejected' : 'delivered') })
    const opened: { componentId: string; dataDir: string | undefined }[] = []
    await run(
      new TopologyBuilder({ ...on, dataDir: '/nowhere' })
        .source('in', source)
        .sink('out', ['in'], sink, {
          buffer: {
            kind: 'queue',
            async open(context) {
              opened.push(context)
              return queueBuffer()
            },
          },
        })
        .build(),
    )
    expect(opened).toEqual([{ componentId: 'out', dataDir: '/nowhere' }])
    expect(await source.statuses()).toEqual(['delivered', 'rejected'])
    expect(sink.received).toEqual(records(1, 2, 3))
  })
  it('a forced stop resolves only once the buffers it gave up on have let go of their files', async () => {
    // A disk buffer's dispose releases its lock: stop() must not resolve before it, or a restart
    // in the same process finds the buffer still locked.
    const gate = new Gate()
    const release = new Gate()
    const buffer = queueBuffer()
    const dispose = buffer.dispose!.bind(buffer)
    let released = false
    buffer.dispose = async () => {
      await dispose()
      await release.wait()
      released = true
    }
    const topology = new TopologyBuilder(on)
      .source('in', testSource([records(1)], { untilStopped: true }))
      .sink('out', ['in'], testSink({ gate }), { buffer: { kind: 'queue', open: async () => buffer } })
      .build()
    await topology.start()
    await vi.waitUntil(() => gate.waiting === 1)
    let stopped = false
    const stopping = topology.stop({ drainTimeoutMs: 10 }).then(() => {
      stopped = true
    })
    await vi.waitUntil(() => buffer.disposed)
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve))
    expect(stopped).toBe(false)
    release.open()
    await stopping
    expect(released).toBe(true)
    gate.open()
  })
})

describe('back pressure', () => {
  it('a slow sink slows its source, and the channel stays bounded', async () => {
    const gate = new Gate()
    const batches = Array.from({ length: 50 }, (_, i) => records(i * 10, i * 10 + 1))
    const source = testSource(batches)
    const sink = testSink({ gate })
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .transform('t', ['in'], passThrough(), { buffer: { maxEvents: 4 } })
      .sink('out', ['t'], sink, { buffer: { maxEvents: 4 } })
      .build()
    await topology.start()
    await vi.waitUntil(() => gate.waiting === 1)
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve))
    // In the sink's write (1 batch), its channel (2), the transform's hand (1), the transform's channel (2),
    // one send blocked: far fewer than the 50 batches the source has.
    expect(source.receipts.length).toBeLessThanOrEqual(8)
    expect(topology.metrics().in!.receivedEvents).toBeLessThanOrEqual(18)
    gate.open()
    await topology.done
    expect(source.receipts.length).toBe(50)
    expect(new Set(await source.statuses())).toEqual(new Set(['delivered']))
  })

  it("whenFull 'drop_newest' settles what it drops rejected (or as configured)", async () => {
    for (const [droppedStatus, expected] of [
      [undefined, 'rejected'],
      ['errored', 'errored'],
    ] as const) {
      const gate = new Gate()
      const source = testSource([records(1), records(2), records(3), records(4)])
      const topology = new TopologyBuilder(on)
        .source('in', source)
        .sink('out', ['in'], testSink({ gate }), {
          buffer: {
            maxEvents: 1,
            whenFull: 'drop_newest',
            ...(droppedStatus === undefined ? {} : { droppedStatus }),
          },
        })
        .build()
      await topology.start()
      await vi.waitUntil(() => source.receipts.length === 4)
      gate.open()
      await topology.done
      // 1 is being written, 2 waits in the channel, 3 and 4 are dropped.
      expect(await source.statuses()).toEqual(['delivered', 'delivered', expected, expected])
      expect(topology.metrics().out!.discardedEvents).toBe(2)
    }
  })
})

describe('sink results and retries', () => {
  it('retries a RetryableError with backoff, then delivers', async () => {
    vi.useFakeTimers()
    let calls = 0
    const source = testSource([records(1)])
    const sink = testSink({
      write: async () => {
        calls++
        if (calls < 3) throw new RetryableError('flaky', 'try later')
        return undefined
      },
    })
    const topology = linear(source, sink, { retry: { attempts: 3, initialBackoffMs: 100 } })
    await topology.start()
    await vi.advanceTimersByTimeAsync(99)
    expect(calls).toBe(1)
    await vi.advanceTimersByTimeAsync(1)
    expect(calls).toBe(2)
    await vi.advanceTimersByTimeAsync(199)
    expect(calls).toBe(2)
    await vi.advanceTimersByTimeAsync(1)
    expect(calls).toBe(3)
    expect(await source.statuses()).toEqual(['delivered'])
  })

  it('settles errored once the attempts run out, rejected at once for a RejectError', async () => {
    vi.useFakeTimers()
    const errored = testSource([records(1)])
    const rejected = testSource([records(2)])
    let rejectCalls = 0
    const topology = new TopologyBuilder(on)
      .source('a', errored)
      .source('b', rejected)
      .sink('flaky', ['a'], testSink({ write: () => Promise.reject(new Error('network down')) }), {
        retry: { attempts: 2, initialBackoffMs: 10 },
      })
      .sink(
        'strict',
        ['b'],
        testSink({ write: () => Promise.reject(new RejectError('strict', `bad ${++rejectCalls}`)) }),
      )
      .build()
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await topology.start()
    await vi.advanceTimersByTimeAsync(10)
    expect(await errored.statuses()).toEqual(['errored'])
    expect(await rejected.statuses()).toEqual(['rejected'])
    expect(rejectCalls).toBe(1)
    expect(facts.filter((f) => f.type === 'component_error' && f.component === 'flaky')).toHaveLength(2)
    expect(topology.metrics().flaky!.erroredEvents).toBe(1)
    expect(topology.metrics().strict!.rejectedEvents).toBe(1)
  })

  it('applies per-event results, and settles all errored when their count is wrong', async () => {
    const good = testSource([records(1, 2, 3)])
    const bad = testSource([records(4, 5)])
    const facts = await run(
      new TopologyBuilder(on)
        .source('good', good)
        .source('bad', bad)
        .sink('g', ['good'], testSink({ write: async () => ['delivered', 'rejected', 'delivered'] }))
        .sink('b', ['bad'], testSink({ write: async () => ['delivered'] }))
        .build(),
    )
    expect(await good.statuses()).toEqual(['rejected'])
    expect(await bad.statuses()).toEqual(['errored'])
    expect(facts.find((f) => f.type === 'component_error')).toMatchObject({
      component: 'b',
      code: 'BAD_RESULT',
    })
  })
})

describe('starting sinks', () => {
  it('rejects start() when a sink fails to start', async () => {
    const topology = new TopologyBuilder(on)
      .source('in', testSource([]))
      .sink('out', ['in'], {
        kind: 'broken',
        start: () => Promise.reject(new Error('no socket')),
        write: async () => undefined,
      })
      .build()
    await expect(topology.start()).rejects.toThrow('no socket')
  })
})
