// The shapes of RFC 0002's edge cases (linear, fan-in, fan-out, route, merge, drop, authoritative
// and acks-off sinks), run through real topologies: each asserts what the source is told.

import type { BatchStatus, LogEvent } from '@ackline/core'
import { type LifecycleEvent, TopologyBuilder, type Transform } from '@ackline/topology'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { linear, n, on, records, run, through } from './support/Harness.js'
import {
  Gate,
  keepIf,
  mergeAll,
  passThrough,
  routeBy,
  testSink,
  testSource,
} from './support/TestComponents.js'

afterEach(() => {
  vi.useRealTimers()
})

describe('linear', () => {
  it('resolves each batch with the worst status of its events', async () => {
    const source = testSource([records(1, 2), records(3, 4), records(5)])
    const sink = testSink({
      outcome: (e) => (n(e) === 3 ? 'errored' : n(e) === 5 ? 'rejected' : 'delivered'),
    })
    await run(through(source, passThrough(), sink))
    expect(await source.statuses()).toEqual(['delivered', 'errored', 'rejected'])
    expect(sink.received).toEqual(records(1, 2, 3, 4, 5))
  })

  it('reports each batch once on the lifecycle, with its latency', async () => {
    const source = testSource([records(1), records(2)])
    const facts = await run(linear(source, testSink()))
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
