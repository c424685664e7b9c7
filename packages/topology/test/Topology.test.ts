// The scenarios of RFC 6517, run through real topologies: each asserts what the source is told.

import { type BatchStatus, EventArray, type JsonObject, type LogEvent } from '@ackline/core'
import {
  type LifecycleEvent,
  RejectError,
  RetryableError,
  type Topology,
  TopologyBuilder,
  type Transform,
} from '@ackline/topology'
import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  Gate,
  keepIf,
  mergeAll,
  passThrough,
  queueBuffer,
  routeBy,
  testSink,
  testSource,
} from './support/TestComponents.js'

const quiet = { onWarning: () => {} }
const on = { ...quiet, acknowledgements: true }
const n = (event: LogEvent): number => event.get('n') as number
const records = (...ns: number[]): JsonObject[] => ns.map((value) => ({ n: value }))

const run = async (topology: Topology): Promise<LifecycleEvent[]> => {
  const facts: LifecycleEvent[] = []
  topology.lifecycle.subscribe((fact) => facts.push(fact))
  await topology.start()
  await topology.done
  return facts
}

afterEach(() => {
  vi.useRealTimers()
})

describe('linear', () => {
  it('resolves each batch with the worst status of its events', async () => {
    const source = testSource([records(1, 2), records(3, 4), records(5)])
    const sink = testSink({
      outcome: (e) => (n(e) === 3 ? 'errored' : n(e) === 5 ? 'rejected' : 'delivered'),
    })
    await run(
      new TopologyBuilder(on)
        .source('in', source)
        .transform('t', ['in'], passThrough())
        .sink('out', ['t'], sink)
        .build(),
    )
    expect(await source.statuses()).toEqual(['delivered', 'errored', 'rejected'])
    expect(sink.received).toEqual(records(1, 2, 3, 4, 5))
  })

  it('reports each batch once on the lifecycle, with its latency', async () => {
    const source = testSource([records(1), records(2)])
    const facts = await run(
      new TopologyBuilder(on).source('in', source).sink('out', ['in'], testSink()).build(),
    )
    const resolved = facts.filter((f) => f.type === 'batch_resolved')
    expect(resolved.map((f) => [f.source, f.batchId, f.status, f.timedOut])).toEqual(
      source.receipts.map((r) => ['in', r.batchId, 'delivered', false]),
    )
    expect(facts.filter((f) => f.type === 'component_started').map((f) => f.component)).toEqual(['out', 'in'])
    expect(facts.filter((f) => f.type === 'component_stopped').map((f) => f.component)).toEqual(['in', 'out'])
    expect(facts.at(-1)).toEqual({ type: 'topology_stopped', forced: false })
  })
})

describe('fan-in', () => {
  it("keeps each source's batches apart", async () => {
    const a = testSource([records(1, 2)])
    const b = testSource([records(10, 20)])
    const sink = testSink({ outcome: (e) => (n(e) === 20 ? 'errored' : 'delivered') })
    await run(
      new TopologyBuilder(on)
        .source('a', a)
        .source('b', b)
        .transform('join', ['a', 'b'], passThrough())
        .sink('out', ['join'], sink)
        .build(),
    )
    expect(await a.statuses()).toEqual(['delivered'])
    expect(await b.statuses()).toEqual(['errored'])
  })
})

describe('fan-out', () => {
  it('waits for every consumer and takes the worst status', async () => {
    const gate = new Gate()
    const source = testSource([records(1, 2)])
    const slow = testSink({ gate })
    const failing = testSink({ outcome: (e) => (n(e) === 2 ? 'rejected' : 'delivered') })
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .sink('slow', ['in'], slow)
      .sink('failing', ['in'], failing)
      .build()
    await topology.start()
    await vi.waitUntil(
      () => failing.received.length === 2 && gate.waiting === 1 && source.receipts.length === 1,
    )
    expect(source.receipts[0]!.batchId).toBeDefined()
    let status: BatchStatus | undefined
    void source.receipts[0]!.status.then((s) => {
      status = s
    })
    await Promise.resolve()
    expect(status).toBeUndefined()
    gate.open()
    await topology.done
    expect(await source.statuses()).toEqual(['rejected'])
    expect(slow.received).toEqual(records(1, 2))
    expect(topology.metrics().in!.sentEvents).toBe(4)
  })

  it('gives each consumer its own copy of the fields', async () => {
    const source = testSource([records(1)])
    const tagger: Transform = {
      kind: 'tag',
      process(events, context) {
        for (const event of events) context.emit(event.set('tagged', true))
      },
    }
    const plain = testSink()
    const tagged = testSink()
    await run(
      new TopologyBuilder(on)
        .source('in', source)
        .transform('tag', ['in'], tagger)
        .sink('plain', ['in'], plain)
        .sink('tagged', ['tag'], tagged)
        .build(),
    )
    expect(plain.received).toEqual([{ n: 1 }])
    expect(tagged.received).toEqual([{ n: 1, tagged: true }])
  })
})

describe('route', () => {
  const topology = (
    outcomes: Record<'a' | 'b' | 'rest', 'delivered' | 'errored' | 'rejected'>,
    source: ReturnType<typeof testSource>,
  ) =>
    new TopologyBuilder(on)
      .source('in', source)
      .transform('split', ['in'], routeBy({ a: (e) => n(e) % 2 === 0, b: (e) => n(e) % 3 === 0 }))
      .sink('a', ['split.a'], testSink({ outcome: () => outcomes.a }))
      .sink('b', ['split.b'], testSink({ outcome: () => outcomes.b }))
      .build()

  it('one output: only that route decides', async () => {
    const source = testSource([records(2), records(3)])
    await run(topology({ a: 'errored', b: 'delivered', rest: 'delivered' }, source))
    expect(await source.statuses()).toEqual(['errored', 'delivered'])
  })

  it('several outputs: every route decides, the worst wins', async () => {
    const source = testSource([records(6)])
    await run(topology({ a: 'errored', b: 'rejected', rest: 'delivered' }, source))
    expect(await source.statuses()).toEqual(['rejected'])
  })

  it('zero outputs: an event on a port nothing reads counts as delivered and as discarded', async () => {
    const source = testSource([records(1, 5)])
    const t = topology({ a: 'errored', b: 'errored', rest: 'delivered' }, source)
    await run(t)
    expect(await source.statuses()).toEqual(['delivered'])
    expect(t.metrics().split!.discardedEvents).toBe(2)
  })
})

describe('merge', () => {
  it("a merged event carries every merged event's batches, across sources", async () => {
    const a = testSource([records(1, 2)])
    const b = testSource([records(3)])
    const other = testSource([records(4)])
    const sink = testSink({ outcome: (e) => (e.get('merged') === 3 ? 'errored' : 'delivered') })
    // One array per merge call: feed both sources into one merge transform, batch by batch.
    const batcher: Transform = {
      kind: 'hold',
      held: [] as LogEvent[],
      process(events, context) {
        const held = (this as unknown as { held: LogEvent[] }).held
        for (const event of events) {
          if (n(event) === 4) context.emit(event)
          else held.push(event)
        }
        if (held.length === 3) {
          const [first, ...rest] = held.splice(0)
          for (const e of rest) first!.merge(e)
          context.emit(first!.set('merged', 3))
        }
      },
      // A transform that keeps events across calls declares flush; the runtime then tracks what it holds.
      flush() {},
    } as Transform
    await run(
      new TopologyBuilder(on)
        .source('a', a)
        .source('b', b)
        .source('other', other)
        .transform('m', ['a', 'b', 'other'], batcher)
        .sink('out', ['m'], sink)
        .build(),
    )
    expect(await a.statuses()).toEqual(['errored'])
    expect(await b.statuses()).toEqual(['errored'])
    expect(await other.statuses()).toEqual(['delivered'])
    // Which source's event absorbs the others depends on arrival order; exactly one merged event arrives.
    expect(sink.received.filter((r) => r.merged === 3)).toHaveLength(1)
  })

  it('a merge transform inside one array settles the whole batch with the merged status', async () => {
    const source = testSource([records(1, 2, 3)])
    const sink = testSink({ outcome: () => 'rejected' })
    await run(
      new TopologyBuilder(on)
        .source('in', source)
        .transform('m', ['in'], mergeAll())
        .sink('out', ['m'], sink)
        .build(),
    )
    expect(sink.received).toEqual([{ n: 1, merged: 3 }])
    expect(await source.statuses()).toEqual(['rejected'])
  })
})

describe('drop', () => {
  it('a discarded event counts as delivered by default, and as discarded in metrics', async () => {
    const source = testSource([records(1, 2), records(3)])
    const t = new TopologyBuilder(on)
      .source('in', source)
      .transform(
        'f',
        ['in'],
        keepIf((e) => n(e) !== 2),
      )
      .sink('out', ['f'], testSink({ outcome: (e) => (n(e) === 3 ? 'errored' : 'delivered') }))
      .build()
    await run(t)
    expect(await source.statuses()).toEqual(['delivered', 'errored'])
    expect(t.metrics().f).toMatchObject({
      receivedEvents: 3,
      sentEvents: 2,
      discardedEvents: 1,
      rejectedEvents: 0,
    })
  })

  it("dropStatus 'rejected' makes a discard reject its batch", async () => {
    const source = testSource([records(1, 2)])
    const t = new TopologyBuilder(on)
      .source('in', source)
      .transform(
        'f',
        ['in'],
        keepIf((e) => n(e) !== 2, 'rejected'),
      )
      .sink('out', ['f'], testSink())
      .build()
    await run(t)
    expect(await source.statuses()).toEqual(['rejected'])
    expect(t.metrics().f).toMatchObject({ discardedEvents: 1, rejectedEvents: 1 })
  })

  it("the builder's dropStatus wins over the transform's own", async () => {
    const source = testSource([records(1, 2)])
    await run(
      new TopologyBuilder(on)
        .source('in', source)
        .transform(
          'f',
          ['in'],
          keepIf((e) => n(e) !== 2, 'rejected'),
          { dropStatus: 'delivered' },
        )
        .sink('out', ['f'], testSink())
        .build(),
    )
    expect(await source.statuses()).toEqual(['delivered'])
  })
})

describe('user transforms', () => {
  const withTransform = async (transform: Transform, batches = [records(1, 2, 3)]) => {
    const source = testSource(batches)
    const sink = testSink()
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .transform('t', ['in'], transform)
      .sink('out', ['t'], sink)
      .build()
    const facts = await run(topology)
    return { source, sink, facts, topology, statuses: await source.statuses() }
  }

  it('settles a forgotten event errored and reports the leak', async () => {
    const { statuses, facts, sink, topology } = await withTransform({
      kind: 'forgetful',
      process(events, context) {
        for (const event of events) if (n(event) !== 2) context.emit(event)
      },
    })
    expect(statuses).toEqual(['errored'])
    expect(sink.received).toEqual(records(1, 3))
    expect(facts.filter((f) => f.type === 'component_error')).toMatchObject([
      { component: 't', code: 'LEAKED_EVENTS', events: 1 },
    ])
    expect(topology.metrics().t!.erroredEvents).toBe(1)
  })

  it('settles the unhandled events of a throwing transform errored and passes on what it emitted', async () => {
    const { statuses, facts, sink } = await withTransform({
      kind: 'thrower',
      process(events, context) {
        for (const event of events) {
          if (n(event) === 2) throw new Error('boom')
          context.emit(event)
        }
      },
    })
    expect(statuses).toEqual(['errored'])
    expect(sink.received).toEqual(records(1))
    expect(facts.find((f) => f.type === 'component_error')).toMatchObject({
      code: 'PROCESS_FAILED',
      events: 2,
    })
  })

  it('does not pass on an event ended after it was emitted', async () => {
    const { statuses, facts, sink } = await withTransform({
      kind: 'confused',
      process(events, context) {
        for (const event of events) context.emit(event)
        context.drop(events.events[0]!)
      },
    })
    expect(statuses).toEqual(['delivered'])
    expect(sink.received).toEqual(records(2, 3))
    expect(facts.find((f) => f.type === 'component_error')).toMatchObject({
      code: 'ENDED_AFTER_EMIT',
      events: 1,
    })
  })

  it('emitAll passes a whole array on, in order', async () => {
    const { statuses, sink } = await withTransform(
      {
        kind: 'in_place',
        process(events, context) {
          for (const event of events) event.set('seen', true)
          context.emitAll(events)
        },
      },
      [records(1, 2), records(3)],
    )
    expect(statuses).toEqual(['delivered', 'delivered'])
    expect(sink.received).toEqual([1, 2, 3].map((value) => ({ n: value, seen: true })))
  })

  it('emitAll after ending one of the events passes on only the live ones, and says so', async () => {
    const { statuses, facts, sink } = await withTransform({
      kind: 'confused_in_place',
      process(events, context) {
        context.drop(events.events[1]!)
        context.emitAll(events)
      },
    })
    expect(statuses).toEqual(['delivered'])
    expect(sink.received).toEqual(records(1, 3))
    expect(facts.find((f) => f.type === 'component_error')).toMatchObject({
      code: 'ENDED_AFTER_EMIT',
      events: 1,
    })
  })

  it('emit after emitAll appends behind the whole array, and emitAll after emit behind the event', async () => {
    const { statuses, sink } = await withTransform({
      kind: 'mixed',
      process(events, context) {
        const [first, ...rest] = events.events
        const extra = first!.clone().replaceFields({ n: 99 })
        context.emitAll(events)
        context.emit(extra)
        const again = context.create({ n: 100 }, [first!])
        context.emit(again)
        context.emitAll(new EventArray(rest.map((e) => e.clone())))
      },
    })
    expect(statuses).toEqual(['delivered'])
    expect(sink.received).toEqual([...records(1, 2, 3), { n: 99 }, { n: 100 }, ...records(2, 3)])
  })

  it('an event ended after its whole array was passed on is taken out, and the rest still goes', async () => {
    const { statuses, facts, sink } = await withTransform({
      kind: 'ends_after_pass',
      process(events, context) {
        context.emitAll(events)
        events.events[2]!.end('rejected')
      },
    })
    expect(statuses).toEqual(['rejected'])
    expect(sink.received).toEqual(records(1, 2))
    expect(facts.find((f) => f.type === 'component_error')).toMatchObject({
      code: 'ENDED_AFTER_EMIT',
      events: 1,
    })
  })

  it('emitting one handle on two ports sends a clone the second time', async () => {
    const source = testSource([records(1)])
    const x = testSink({ outcome: () => 'delivered' })
    const y = testSink({ outcome: () => 'errored' })
    const both: Transform<'x' | 'y'> = {
      kind: 'both',
      outputs: ['x', 'y'],
      process(events, context) {
        for (const event of events) {
          context.emit(event, 'x')
          context.emit(event, 'y')
        }
      },
    }
    await run(
      new TopologyBuilder(on)
        .source('in', source)
        .transform('t', ['in'], both)
        .sink('x', ['t.x'], x)
        .sink('y', ['t.y'], y)
        .build(),
    )
    expect(x.received).toEqual(records(1))
    expect(y.received).toEqual(records(1))
    expect(await source.statuses()).toEqual(['errored'])
  })

  it('a created event inherits the finalizers it is told to', async () => {
    const a = testSource([records(1)])
    const b = testSource([records(2)])
    const summary: Transform = {
      kind: 'summary',
      held: [] as LogEvent[],
      process(events, context) {
        const held = (this as unknown as { held: LogEvent[] }).held
        held.push(...events)
        if (held.length < 2) return
        const total = context.create({ total: held.reduce((sum, e) => sum + n(e), 0) }, held)
        for (const event of held.splice(0)) context.drop(event)
        context.emit(total)
      },
      flush() {},
    } as Transform
    const sink = testSink({ outcome: () => 'errored' })
    await run(
      new TopologyBuilder(on)
        .source('a', a)
        .source('b', b)
        .transform('t', ['a', 'b'], summary)
        .sink('out', ['t'], sink)
        .build(),
    )
    expect(sink.received).toEqual([{ total: 3 }])
    expect(await a.statuses()).toEqual(['errored'])
    expect(await b.statuses()).toEqual(['errored'])
  })

  it('flushes on its timer and at stop', async () => {
    vi.useFakeTimers()
    const held: LogEvent[] = []
    const flushes: number[] = []
    const window: Transform = {
      kind: 'window',
      flushIntervalMs: 1000,
      process(events) {
        held.push(...events)
      },
      flush(context) {
        flushes.push(held.length)
        for (const event of held.splice(0)) context.emit(event)
      },
    }
    const source = testSource([records(1, 2)], { untilStopped: true })
    const sink = testSink()
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .transform('w', ['in'], window)
      .sink('out', ['w'], sink)
      .build()
    await topology.start()
    await vi.advanceTimersByTimeAsync(999)
    expect(sink.received).toEqual([])
    await vi.advanceTimersByTimeAsync(1)
    expect(sink.received).toEqual(records(1, 2))
    expect(await source.statuses()).toEqual(['delivered'])
    await topology.stop()
    expect(flushes.at(-1)).toBe(0)
    expect(flushes.length).toBeGreaterThanOrEqual(2)
  })
})

describe('authoritative sink', () => {
  it('tells the source at once, and a later copy cannot change the status', async () => {
    const gate = new Gate()
    const source = testSource([records(1, 2)])
    const facts: LifecycleEvent[] = []
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .sink('primary', ['in'], testSink({ outcome: (e) => (n(e) === 2 ? 'rejected' : 'delivered') }), {
        authoritative: true,
      })
      .sink('mirror', ['in'], testSink({ outcome: () => 'errored', gate }))
      .build()
    topology.lifecycle.subscribe((f) => facts.push(f))
    await topology.start()
    await vi.waitUntil(() => source.receipts.length === 1)
    // The mirror still holds its copies, yet the source already knows.
    expect(await source.receipts[0]!.status).toBe('rejected')
    expect(gate.waiting).toBe(1)
    gate.open()
    await topology.done
    expect(facts.filter((f) => f.type === 'batch_resolved')).toMatchObject([
      { status: 'rejected', timedOut: false },
    ])
  })

  it('records the status the event already had from an earlier copy', async () => {
    const source = testSource([records(1)])
    const primaryGate = new Gate()
    const mirror = testSink({ outcome: () => 'errored' })
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .sink('primary', ['in'], testSink({ outcome: () => 'delivered', gate: primaryGate }), {
        authoritative: true,
      })
      .sink('mirror', ['in'], mirror)
      .build()
    await topology.start()
    await vi.waitUntil(() => mirror.received.length === 1 && primaryGate.waiting === 1)
    primaryGate.open()
    await topology.done
    expect(await source.statuses()).toEqual(['errored'])
  })

  it('waits for the other copies when some events never reach the authoritative sink', async () => {
    const gate = new Gate()
    const source = testSource([records(1, 2)])
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .transform(
        'odd',
        ['in'],
        keepIf((e) => n(e) % 2 === 1),
      )
      .sink('primary', ['odd'], testSink({ outcome: () => 'delivered' }), { authoritative: true })
      .sink('mirror', ['in'], testSink({ outcome: (e) => (n(e) === 2 ? 'errored' : 'delivered'), gate }))
      .build()
    await topology.start()
    await vi.waitUntil(() => source.receipts.length === 1 && gate.waiting === 1)
    let status: BatchStatus | undefined
    void source.receipts[0]!.status.then((s) => {
      status = s
    })
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve))
    expect(status).toBeUndefined()
    gate.open()
    await topology.done
    // Event 1 was recorded delivered (the mirror's later delivered is ignored); event 2 errored at the mirror.
    expect(await source.statuses()).toEqual(['errored'])
  })

  it('without authoritative, the same outcomes give errored', async () => {
    const source = testSource([records(1)])
    await run(
      new TopologyBuilder(on)
        .source('in', source)
        .sink('primary', ['in'], testSink({ outcome: () => 'delivered' }))
        .sink('mirror', ['in'], testSink({ outcome: () => 'errored' }))
        .build(),
    )
    expect(await source.statuses()).toEqual(['errored'])
  })
})

describe('a sink with acknowledgements off beside one with them on', () => {
  it('does not hold its sources up, and its failures do not count', async () => {
    const gate = new Gate()
    const source = testSource([records(1, 2)])
    const off = testSink({ gate, outcome: () => 'rejected' })
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .sink('on', ['in'], testSink({ outcome: (e) => (n(e) === 2 ? 'errored' : 'delivered') }))
      .sink('off', ['in'], off, { acknowledgements: false })
      .build()
    await topology.start()
    await vi.waitUntil(() => source.receipts.length === 1)
    // The off sink has not finished its write, yet the batch resolves.
    expect(await source.receipts[0]!.status).toBe('errored')
    expect(gate.waiting).toBe(1)
    gate.open()
    await topology.done
    expect(off.received).toEqual(records(1, 2))
  })
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
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .sink('out', ['in'], sink, { retry: { attempts: 3, initialBackoffMs: 100 } })
      .build()
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

describe('graceful stop', () => {
  it('drains in-flight events when they make the deadline', async () => {
    vi.useFakeTimers()
    const source = testSource([records(1), records(2)], { untilStopped: true })
    const sink = testSink({
      write: () => new Promise((resolve) => setTimeout(() => resolve(undefined), 500)),
    })
    const topology = new TopologyBuilder(on).source('in', source).sink('out', ['in'], sink).build()
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
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .sink('out', ['in'], testSink({ gate }))
      .build()
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
    const stuck = new TopologyBuilder(on)
      .source('in', second)
      .sink('out', ['in'], testSink({ gate: new Gate() }))
      .build()
    await stuck.start()
    await vi.advanceTimersByTimeAsync(0)
    void stuck.stop({ drainTimeoutMs: 60_000 })
    await stuck.stop()
    expect(await second.statuses()).toEqual(['errored'])
  })
})

describe('ack timeout', () => {
  it('tells the source errored after the timeout without ending any handle twice', async () => {
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
    const topology = new TopologyBuilder(on)
      .source('in', testSource([]))
      .sink('out', ['in'], testSink())
      .build()
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

  it('reports an emit on an undeclared port as a failed call and settles the event errored', async () => {
    const source = testSource([records(1)])
    const facts = await run(
      new TopologyBuilder(on)
        .source('in', source)
        .transform('t', ['in'], {
          kind: 'typo',
          process: (events, context) => context.emit(events.events[0]!, 'nope'),
        })
        .sink('out', ['t'], testSink())
        .build(),
    )
    expect(await source.statuses()).toEqual(['errored'])
    const errors = facts.filter((f) => f.type === 'component_error')
    expect(errors[0]).toMatchObject({ code: 'UNDECLARED_PORT', events: 1 })
    expect(errors[1]).toMatchObject({
      code: 'PROCESS_FAILED',
      message: expect.stringContaining("port 'nope'"),
    })
  })

  it('settles errored what a flushing transform still holds after its last flush', async () => {
    const source = testSource([records(1, 2)])
    const facts = await run(
      new TopologyBuilder(on)
        .source('in', source)
        .transform('t', ['in'], { kind: 'hoarder', process() {}, flush() {} })
        .sink('out', ['t'], testSink())
        .build(),
    )
    expect(await source.statuses()).toEqual(['errored'])
    expect(facts.find((f) => f.type === 'component_error')).toMatchObject({
      code: 'LEAKED_EVENTS',
      events: 2,
    })
  })

  it('settles errored at a forced stop what a transform holds', async () => {
    vi.useFakeTimers()
    const source = testSource([records(1)], { untilStopped: true })
    const sink = testSink()
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .transform('t', ['in'], { kind: 'hoarder', process() {}, flush: () => new Promise(() => {}) })
      .sink('out', ['t'], sink)
      .build()
    await topology.start()
    await vi.advanceTimersByTimeAsync(0)
    const stopped = topology.stop({ drainTimeoutMs: 100 })
    await vi.advanceTimersByTimeAsync(100)
    await stopped
    expect(await source.statuses()).toEqual(['errored'])
    expect(topology.metrics().t!.erroredEvents).toBe(1)
  })

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

  it('stops a topology that never started, and resolves done', async () => {
    const topology = new TopologyBuilder(on)
      .source('in', testSource([]))
      .sink('out', ['in'], testSink())
      .build()
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
