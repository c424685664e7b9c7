// A topology's life: start, graceful and forced stop, the ack timeout, metrics, and sources that
// build their own events or run with acknowledgements off.

import { type LifecycleEvent, TopologyBuilder } from '@ackline/topology'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { linear, on, quiet, records, run } from './support/Harness.js'
import { Gate, passThrough, testSink, testSource } from './support/TestComponents.js'

afterEach(() => {
  vi.useRealTimers()
})

describe('graceful stop', () => {
  it('drains in-flight events when they make the deadline', async () => {
    vi.useFakeTimers()
    const source = testSource([records(1), records(2)], { untilStopped: true })
    const sink = testSink({
      write: () => new Promise((resolve) => setTimeout(() => resolve(undefined), 500)),
    })
    const topology = linear(source, sink)
    await topology.start()
    const stopped = topology.stop({ drainTimeoutMs: 5000 })
    await vi.advanceTimersByTimeAsync(1000)
    await stopped
    expect(await source.statuses()).toEqual(['delivered', 'delivered'])
  })

  it('settles what is unsettled at the deadline errored; a second stop stops at once', async () => {
    vi.useFakeTimers()
    const gate = new Gate()
    const source = testSource([records(1), records(2), records(3)], { untilStopped: true })
    const topology = linear(source, testSink({ gate }))
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await topology.start()
    await vi.advanceTimersByTimeAsync(0)
    let done = false
    const stopped = topology.stop({ drainTimeoutMs: 5000 }).then(() => {
      done = true
    })
    await vi.advanceTimersByTimeAsync(4999)
    expect(done).toBe(false)
    await vi.advanceTimersByTimeAsync(1)
    await stopped
    expect(await source.statuses()).toEqual(['errored', 'errored', 'errored'])
    expect(facts.at(-1)).toEqual({ type: 'topology_stopped', forced: true })
    // The write that was in progress returns late: its events were settled already, nothing throws.
    gate.open()
    await vi.advanceTimersByTimeAsync(0)
    expect(topology.metrics().out!.erroredEvents).toBe(3)

    const second = testSource([records(1)], { untilStopped: true })
    const stuck = linear(second, testSink({ gate: new Gate() }))
    await stuck.start()
    await vi.advanceTimersByTimeAsync(0)
    void stuck.stop({ drainTimeoutMs: 60_000 })
    await stuck.stop()
    expect(await second.statuses()).toEqual(['errored'])
  })
})

describe('ack timeout', () => {
  it('tells the source errored after the timeout without ending any handle twice', async () => {
    // The sends of one burst share a clock reading (sendClock.ts), forgotten in a tick once the
    // microtask queue drains. Run right after a test on the real clock, within the same burst, the
    // source's send took that test's real reading, older than the fake clock installed here: the
    // latency read 1009-1016. A turn of the loop first ends that burst.
    await new Promise<void>((resolve) => setImmediate(resolve))
    vi.useFakeTimers()
    const gate = new Gate()
    const source = testSource([records(1)])
    const topology = new TopologyBuilder({ ...on, ackTimeoutMs: 1000 })
      .source('in', source)
      .sink('out', ['in'], testSink({ gate }))
      .build()
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await topology.start()
    await vi.advanceTimersByTimeAsync(1000)
    expect(await source.statuses()).toEqual(['errored'])
    gate.open()
    await topology.done
    const resolved = facts.filter((f) => f.type === 'batch_resolved')
    expect(resolved).toMatchObject([{ status: 'errored', timedOut: true, latencyMs: 1000 }])
    expect(topology.metrics().out!.erroredEvents).toBe(0)
  })
})

describe('sources that fail', () => {
  const fails = (): Promise<void> => {
    throw new Error('no such file')
  }
  it.each([
    ['throws before returning a promise', fails, ['RUN_FAILED']],
    ['rejects', async () => fails(), ['RUN_FAILED']],
    ['returns no promise (untyped code)', () => undefined, []],
  ])('reports a source whose run() %s, and stops what it fed', async (_, runSource, codes) => {
    const other = testSource([records(1)])
    const sink = testSink()
    const topology = new TopologyBuilder(on)
      .source('broken', { kind: 'broken', canAcknowledge: true, run: runSource as never })
      .source('fine', other)
      .sink('out', ['broken', 'fine'], sink)
      .build()
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await topology.start()
    await topology.done
    expect(await other.statuses()).toEqual(['delivered'])
    expect(sink.received).toEqual(records(1))
    const failed = facts.filter((f) => f.type === 'component_error')
    expect(failed.map((f) => [f.component, f.code])).toEqual(codes.map((code) => ['broken', code]))
    expect(facts.at(-1)).toEqual({ type: 'topology_stopped', forced: false })
  })
})

describe('metrics', () => {
  it('counts per component and tracks acks in flight', async () => {
    const gate = new Gate()
    const source = testSource([records(1, 2), records(3)])
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .transform('t', ['in'], passThrough())
      .sink('a', ['t'], testSink({ gate }))
      .sink('b', ['t'], testSink({ outcome: () => 'errored' }))
      .build()
    await topology.start()
    await vi.waitUntil(() => topology.metrics().b!.erroredEvents === 3)
    expect(topology.metrics().in!.acksInFlight).toBe(2)
    gate.open()
    await topology.done
    const m = topology.metrics()
    expect(m.in).toMatchObject({
      role: 'source',
      kind: 'test_source',
      receivedEvents: 3,
      sentEvents: 3,
      acksInFlight: 0,
    })
    expect(m.in!.ackLatencyMs.count).toBe(2)
    expect(m.t).toMatchObject({ receivedEvents: 3, sentEvents: 6 })
    expect(m.a).toMatchObject({ receivedEvents: 3, erroredEvents: 0, acksInFlight: 0 })
    expect(m.b).toMatchObject({ receivedEvents: 3, erroredEvents: 3 })
  })
})

describe('lifecycle of a topology', () => {
  it('runs once', async () => {
    const topology = linear(testSource([]), testSink())
    await topology.start()
    await expect(topology.start()).rejects.toThrow(/runs once/)
    await topology.stop()
  })

  it('rejects start() with a clear error naming the sink when its buffer cannot open', async () => {
    const topology = new TopologyBuilder(on)
      .source('in', testSource([]))
      .sink('out', ['in'], testSink(), {
        buffer: { kind: 'queue', open: () => Promise.reject(new Error('EACCES: permission denied')) },
      })
      .build()
    await expect(topology.start()).rejects.toMatchObject({
      name: 'TopologyError',
      problems: [
        {
          code: 'BUFFER_OPEN_FAILED',
          component: 'out',
          field: 'buffer',
          message: expect.stringContaining('EACCES'),
        },
      ],
    })
  })
})

describe('edge cases of the runtime', () => {
  it('passes on events a source built itself with sendEvents', async () => {
    const { BatchNotifier, EventArray, LogEvent } = await import('@ackline/core')
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'own' })
    const sink = testSink({ outcome: () => 'rejected' })
    await run(
      new TopologyBuilder(on)
        .source('own', {
          kind: 'own',
          canAcknowledge: true,
          async run(context) {
            await context.sendEvents(EventArray.of(new LogEvent({ n: 1 })).attach(notifier))
          },
        })
        .sink('out', ['own'], sink)
        .build(),
    )
    expect(await receiver).toBe('rejected')
    expect(sink.received).toEqual(records(1))
  })

  it('stops a topology that never started, and resolves done', async () => {
    const topology = linear(testSource([]), testSink())
    await topology.stop()
    await topology.done
    await expect(topology.start()).rejects.toThrow(/runs once/)
  })

  it('an acks-off topology resolves receipts delivered as soon as batches are accepted', async () => {
    const gate = new Gate()
    const source = testSource([records(1)])
    const topology = new TopologyBuilder(quiet)
      .source('in', source)
      .sink('out', ['in'], testSink({ gate }))
      .build()
    await topology.start()
    await vi.waitUntil(() => source.receipts.length === 1)
    expect(await source.receipts[0]!.status).toBe('delivered')
    expect(source.acknowledgements).toBe(false)
    gate.open()
    await topology.done
  })
})

describe('the drain deadline', () => {
  it.each([Number.POSITIVE_INFINITY, 3_000_000_000])(
    'waits for the drain without a deadline when drainTimeoutMs is %d (longer than a timer can wait)',
    async (drainTimeoutMs) => {
      vi.useFakeTimers()
      const gate = new Gate()
      const source = testSource([records(1)], { untilStopped: true })
      const topology = linear(source, testSink({ gate }))
      const facts: LifecycleEvent[] = []
      topology.lifecycle.subscribe((f) => facts.push(f))
      await topology.start()
      await vi.advanceTimersByTimeAsync(0)
      const stopped = topology.stop({ drainTimeoutMs })
      // A day passes: a timer armed with the delay would have fired after 1 ms.
      await vi.advanceTimersByTimeAsync(86_400_000)
      expect(facts.some((f) => f.type === 'topology_stopped')).toBe(false)
      gate.open()
      await vi.advanceTimersByTimeAsync(0)
      await stopped
      expect(await source.statuses()).toEqual(['delivered'])
      expect(facts.at(-1)).toEqual({ type: 'topology_stopped', forced: false })
    },
  )

  it('stop(null) (untyped code) stops as stop() does, draining with the default deadline', async () => {
    // It rejected with a bare TypeError (reading drainTimeoutMs of null), and the topology ran on.
    const gate = new Gate()
    const source = testSource([records(1)], { untilStopped: true })
    const topology = linear(source, testSink({ gate }))
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await topology.start()
    const stopped = topology.stop(null as never)
    gate.open()
    await stopped
    expect(await source.statuses()).toEqual(['delivered'])
    expect(facts.at(-1)).toEqual({ type: 'topology_stopped', forced: false })
  })

  it.each([
    ['drainTimeoutMs', Number.NaN],
    ['drainTimeoutMs', -1],
    ['drainTimeoutMs', '5000'],
    ['disposeTimeoutMs', -1],
    ['disposeTimeoutMs', '5000'],
  ] as const)('rejects stop() naming %s when it is %s, and keeps running', async (field, value) => {
    const gate = new Gate()
    const source = testSource([records(1)], { untilStopped: true })
    const sink = testSink({ gate })
    const topology = linear(source, sink)
    await topology.start()
    await expect(topology.stop({ [field]: value as number })).rejects.toMatchObject({
      name: 'ComponentError',
      code: 'INVALID_OPTION',
      field,
      message: expect.stringContaining(`${field}: must be a number of milliseconds`),
    })
    gate.open()
    await topology.stop()
    expect(await source.statuses()).toEqual(['delivered'])
  })
})

describe('a second stop()', () => {
  it('says the stop was forced, as the deadline does', async () => {
    // It forced the drain (every component_stopped said forced: true, the source was told
    // errored), yet topology_stopped said forced: false: only the deadline's timer set the flag.
    const source = testSource([records(1)], { untilStopped: true })
    const gate = new Gate()
    const topology = linear(source, testSink({ gate }))
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await topology.start()
    await vi.waitUntil(() => gate.waiting === 1)
    const first = topology.stop({ drainTimeoutMs: 60_000 })
    await topology.stop()
    await first
    expect(await source.statuses()).toEqual(['errored'])
    expect(facts.filter((f) => f.type === 'component_stopped').map((f) => f.forced)).toEqual([true, true])
    expect(facts.at(-1)).toEqual({ type: 'topology_stopped', forced: true })
    gate.open()
  })

  it('after the drain finished says nothing was forced', async () => {
    const source = testSource([records(1)], { untilStopped: true })
    const topology = linear(source, testSink())
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await topology.start()
    await topology.stop()
    await topology.stop()
    expect(await source.statuses()).toEqual(['delivered'])
    expect(facts.filter((f) => f.type === 'topology_stopped')).toEqual([
      { type: 'topology_stopped', forced: false },
    ])
  })
})
