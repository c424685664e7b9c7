/**
 * The built-in transforms inside a real topology (runtime, channels, fan-out, flush on stop):
 * each source batch must resolve with the status its events' paths give it.
 */
import type { BatchStatus, JsonObject } from '@ackline/core'
import { type MemorySink, memory } from '@ackline/sinks'
import { generator } from '@ackline/sources'
import {
  type LifecycleEvent,
  type Source,
  type Topology,
  TopologyBuilder,
  type Transform,
} from '@ackline/topology'
import { dedupe, filter, reduce, remap, route, sample } from '@ackline/transforms'
import { describe, expect, it } from 'vitest'

/** A generator over `records` in batches of `batchSize`, and the statuses of its batches, in order. */
function source(records: readonly JsonObject[], batchSize: number) {
  const statuses: Promise<BatchStatus>[] = []
  const gen = generator({
    count: records.length,
    batchSize,
    record: (i) => ({ ...records[i]! }),
    onBatch: (receipt, first) => {
      statuses[first / batchSize] = receipt.status
    },
  })
  return { gen, statuses: async () => Promise.all(statuses) }
}

async function runToEnd(topology: Topology): Promise<void> {
  await topology.start()
  await topology.done
}

const fields = (sink: MemorySink) => sink.events.map((e) => ({ ...e }))

describe('transforms in a topology', () => {
  it.each([
    ['filter', 'an async predicate', () => filter((async () => true) as never)],
    ['route', 'an async predicate', () => route({ kept: (async () => true) as never })],
    // Its promise is no fields: delivered, it would reach the sink as {}.
    [
      'remap',
      'an async function',
      () =>
        remap((async (e: { get(path: string): unknown }) => ({ n: e.get('n'), enriched: true })) as never),
    ],
  ])(
    '%s: %s errors the batch instead of discarding or delivering what it did not decide',
    async (_, _what, make) => {
      const { gen, statuses } = source([{ n: 1 }, { n: 2 }], 2)
      const out = memory()
      const transform = make()
      const input = transform.kind === 'route' ? 'pick.kept' : 'pick'
      const topology = new TopologyBuilder({ acknowledgements: true })
        .source('in', gen)
        .transform('pick', ['in'], transform)
        .sink('out', [input], out)
        .build()
      const facts: LifecycleEvent[] = []
      topology.lifecycle.subscribe((f) => facts.push(f))
      await runToEnd(topology)
      expect(await statuses()).toEqual(['errored'])
      expect(out.events).toEqual([])
      expect(facts.filter((f) => f.type === 'component_error')).toMatchObject([
        { component: 'pick', code: 'PROCESS_FAILED', message: expect.stringContaining('a promise') },
      ])
    },
  )

  it.each([
    ['filter', () => filter((async () => Promise.reject(new Error('lookup failed'))) as never)],
    ['route', () => route({ kept: (async () => Promise.reject(new Error('lookup failed'))) as never })],
    ['remap', () => remap((async () => Promise.reject(new Error('lookup failed'))) as never)],
    ['remap', () => remap((() => [Promise.reject(new Error('lookup failed'))]) as never)],
  ])(
    '%s: a promise it refuses that rejects is handled, not left an unhandled rejection (which ends the process)',
    async (_, make) => {
      const unhandled: unknown[] = []
      const onUnhandled = (reason: unknown): void => {
        unhandled.push(reason)
      }
      process.on('unhandledRejection', onUnhandled)
      try {
        const { gen, statuses } = source([{ n: 1 }, { n: 2 }], 2)
        const transform = make()
        const topology = new TopologyBuilder({ acknowledgements: true })
          .source('in', gen)
          .transform('pick', ['in'], transform)
          .sink('out', [transform.kind === 'route' ? 'pick.kept' : 'pick'], memory())
          .build()
        await runToEnd(topology)
        expect(await statuses()).toEqual(['errored'])
        // Node reports an unhandled rejection once the microtask queue has drained: a turn later.
        await new Promise<void>((resolve) => setImmediate(resolve))
        expect(unhandled).toEqual([])
      } finally {
        process.off('unhandledRejection', onUnhandled)
      }
    },
  )

  it("filter: a predicate answering a truthy non-boolean errors that event's batch instead of dropping it as delivered", async () => {
    const { gen, statuses } = source([{ n: 1 }, { n: 2 }], 1)
    const out = memory()
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', gen)
      .transform(
        'pick',
        ['in'],
        filter(((e: { get(path: string): unknown }) => (e.get('n') === 1 ? 1 : true)) as never),
      )
      .sink('out', ['pick'], out)
      .build()
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await runToEnd(topology)
    expect(await statuses()).toEqual(['errored', 'delivered'])
    expect(fields(out)).toEqual([{ n: 2 }])
    expect(facts.filter((f) => f.type === 'component_error')).toMatchObject([
      {
        component: 'pick',
        code: 'PROCESS_FAILED',
        message: expect.stringContaining('returned a number (1)'),
      },
    ])
  })

  it("filter: the runtime settles discards with the transform's own dropStatus", async () => {
    const { gen, statuses } = source([{ ok: true }, { ok: false }, { ok: true }, { ok: true }], 2)
    const out = memory()
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', gen)
      .transform(
        'only_ok',
        ['in'],
        filter((e) => e.get('ok') === true, { dropStatus: 'rejected' }),
      )
      .sink('out', ['only_ok'], out)
      .build()
    await runToEnd(topology)
    expect(await statuses()).toEqual(['rejected', 'delivered'])
    expect(out.events).toHaveLength(3)
    expect(topology.metrics().only_ok).toMatchObject({ discardedEvents: 1, rejectedEvents: 1 })
  })

  it('route: an event on two ports waits for both sinks; _unmatched can be read like any port', async () => {
    const { gen, statuses } = source(
      [{ level: 'error', audit: true }, { level: 'info' }, { level: 'error' }],
      1,
    )
    const errors = memory({ outcome: (e) => (e.get('audit') === true ? 'errored' : 'delivered') })
    const audit = memory()
    const rest = memory({ outcome: () => 'rejected' })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', gen)
      .transform(
        'split',
        ['in'],
        route({ errors: (e) => e.get('level') === 'error', audit: (e) => e.get('audit') === true }),
      )
      .sink('errors', ['split.errors'], errors)
      .sink('audit', ['split.audit'], audit)
      .sink('rest', ['split._unmatched'], rest)
      .build()
    await runToEnd(topology)
    expect(await statuses()).toEqual(['errored', 'rejected', 'delivered'])
    expect([errors.events.length, audit.events.length, rest.events.length]).toEqual([2, 1, 1])
  })

  it('reduce: a merged event carries every merged batch, and the final flush at stop emits open groups', async () => {
    const records = [
      { k: 'a', n: 1 },
      { k: 'b', n: 2 },
      { k: 'a', n: 3 },
      { k: 'b', n: 4 },
      { k: 'a', n: 5 },
    ]
    const { gen, statuses } = source(records, 1)
    const out = memory({ outcome: (e) => (e.get('k') === 'b' ? 'errored' : 'delivered') })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', gen)
      .transform('merge', ['in'], reduce({ groupBy: ['k'], windowMs: 60_000, merge: { n: 'array' } }))
      .sink('out', ['merge'], out)
      .build()
    await runToEnd(topology)
    expect(fields(out).sort((x, y) => String(x.k).localeCompare(String(y.k)))).toEqual([
      { k: 'a', n: [1, 3, 5] },
      { k: 'b', n: [2, 4] },
    ])
    expect(await statuses()).toEqual(['delivered', 'errored', 'delivered', 'errored', 'delivered'])
  })

  it('reduce: a sum past what JSON carries errors the batch of the event that overflowed it, naming the field, instead of writing null', async () => {
    const { gen, statuses } = source([{ n: 1e308 }, { n: 1e308 }, { n: 1 }], 1)
    const out = memory()
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', gen)
      .transform('total', ['in'], reduce({ windowMs: 60_000, merge: { n: 'sum' } }))
      .sink('out', ['total'], out)
      .build()
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await runToEnd(topology)
    expect(await statuses()).toEqual(['delivered', 'errored', 'delivered'])
    expect(JSON.parse(JSON.stringify(fields(out)))).toEqual([{ n: 1e308 }])
    expect(facts.filter((f) => f.type === 'component_error')).toMatchObject([
      { component: 'total', code: 'PROCESS_FAILED', message: expect.stringContaining('total (merge.n)') },
    ])
  })

  it('remap: a function that ends its input is reported as such, not as an event ended after it was emitted', async () => {
    const { gen, statuses } = source([{ n: 1 }, { n: 2 }], 1)
    const out = memory()
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', gen)
      .transform(
        'edit',
        ['in'],
        remap((e) => {
          if (e.get('n') === 1) e.end('rejected')
        }),
      )
      .sink('out', ['edit'], out)
      .build()
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await runToEnd(topology)
    // The status the function ended it with stands: remap cannot change it any more.
    expect(await statuses()).toEqual(['rejected', 'delivered'])
    expect(fields(out)).toEqual([{ n: 2 }])
    expect(facts.filter((f) => f.type === 'component_error')).toMatchObject([
      {
        component: 'edit',
        code: 'PROCESS_FAILED',
        message: expect.stringContaining('edit (fn): the remap function ended its input'),
      },
    ])
  })

  it('dedupe and sample: what they drop counts as delivered by default', async () => {
    const { gen, statuses } = source([{ id: 1 }, { id: 1 }, { id: 2 }, { id: 3 }, { id: 3 }, { id: 4 }], 3)
    const out = memory()
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', gen)
      .transform('unique', ['in'], dedupe({ fields: ['id'] }))
      .transform('half', ['unique'], sample({ rate: 2 }))
      .sink('out', ['half'], out)
      .build()
    await runToEnd(topology)
    expect(fields(out).map((f) => f.id)).toEqual([1, 3])
    expect(await statuses()).toEqual(['delivered', 'delivered'])
  })

  it.each([true, false])(
    'dedupe: a redelivery of an event its sink failed reaches the sink again (acknowledgements %s), not dropped as a delivered duplicate',
    async (acks) => {
      // A source that sends its record again until it is delivered, as a broker redelivers.
      const statuses: BatchStatus[] = []
      const redelivering: Source = {
        kind: 'redelivering',
        canAcknowledge: true,
        async run(context) {
          for (let attempt = 0; attempt < 3; attempt++) {
            const receipt = await context.send([{ id: 'a', attempt }])
            const status = await receipt.status
            statuses.push(status)
            if (status === 'delivered') break
          }
        },
      }
      let writes = 0
      const out = memory({ outcome: () => (++writes === 1 ? 'errored' : 'delivered') })
      const topology = new TopologyBuilder({ acknowledgements: true })
        .source('in', redelivering)
        .transform('dedupe', ['in'], dedupe({ fields: ['id'] }))
        .sink('out', ['dedupe'], out, { acknowledgements: acks })
        .build()
      await runToEnd(topology)
      if (acks) {
        // Before, the second attempt was dropped as a duplicate of the first, and counted delivered.
        expect(statuses).toEqual(['errored', 'delivered'])
        expect(fields(out)).toEqual([
          { id: 'a', attempt: 0 },
          { id: 'a', attempt: 1 },
        ])
      } else {
        // Without acknowledgements the sink's copy counts as delivered once accepted: a duplicate.
        expect(statuses).toEqual(['delivered'])
        expect(fields(out)).toEqual([{ id: 'a', attempt: 0 }])
      }
    },
  )

  it('dedupe: a redelivery of an event a transform after it failed reaches the sink again, though that sink does not acknowledge', async () => {
    // The source acknowledges (it feeds 'audit'); dedupe's output reaches only a sink without
    // acknowledgements, through a transform that throws on the first attempt: that transform's
    // 'errored' reaches the source, which sends the record again.
    const statuses: BatchStatus[] = []
    const redelivering: Source = {
      kind: 'redelivering',
      canAcknowledge: true,
      async run(context) {
        for (let attempt = 0; attempt < 3; attempt++) {
          const receipt = await context.send([{ id: 'a', attempt }])
          const status = await receipt.status
          statuses.push(status)
          if (status === 'delivered') break
        }
      },
    }
    const failsFirst: Transform = {
      kind: 'fails-first',
      process(events, context) {
        for (const event of events.events) if (event.get('attempt') === 0) throw new Error('not yet')
        context.emitAll(events)
      },
    }
    const out = memory()
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', redelivering)
      .transform('dedupe', ['in'], dedupe({ fields: ['id'] }))
      .transform('check', ['dedupe'], failsFirst)
      .sink('out', ['check'], out, { acknowledgements: false })
      .sink('audit', ['in'], memory())
      .build()
    await runToEnd(topology)
    // Before, dedupe was told no status could matter (no acknowledging sink after it), took the
    // first attempt for delivered and dropped the second as its duplicate: 'delivered', never written.
    expect(statuses).toEqual(['errored', 'delivered'])
    expect(fields(out)).toEqual([{ id: 'a', attempt: 1 }])
  })

  it('reduce: a merge path it cannot write in one group leaves the other groups and batches delivered', async () => {
    const { gen, statuses } = source(
      [
        { k: 1, a: { b: 1 } },
        { k: 2, a: 5 },
        { k: 2, a: { b: 1 } },
        { k: 3, a: { b: 2 } },
      ],
      1,
    )
    const out = memory()
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', gen)
      .transform('sum', ['in'], reduce({ groupBy: ['k'], merge: { 'a.b': 'sum' } }))
      .sink('out', ['sum'], out)
      .build()
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await runToEnd(topology)
    expect(await statuses()).toEqual(['delivered', 'delivered', 'delivered', 'delivered'])
    expect(fields(out)).toEqual([
      { k: 1, a: { b: 1 } },
      { k: 2, a: 5 },
      { k: 3, a: { b: 2 } },
    ])
    expect(facts.filter((f) => f.type === 'component_error')).toEqual([])
  })

  it("dedupe: a duplicate dropped while the first copy is in flight takes that copy's status, not delivered", async () => {
    const { gen, statuses } = source([{ id: 'a' }, { id: 'a' }, { id: 'b' }], 1)
    const out = memory({ outcome: (e) => (e.get('id') === 'a' ? 'errored' : 'delivered') })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', gen)
      .transform('dedupe', ['in'], dedupe({ fields: ['id'] }))
      .sink('out', ['dedupe'], out, { retry: { attempts: 1 } })
      .build()
    await runToEnd(topology)
    // Before, the second batch resolved delivered: its event was a duplicate of one no sink took.
    expect(await statuses()).toEqual(['errored', 'errored', 'delivered'])
  })

  it("dedupe: a duplicate of a copy in flight takes that copy's status also when the declaration's dropStatus 'delivered' wins over the transform's 'rejected'", async () => {
    const { gen, statuses } = source([{ id: 'a' }, { id: 'a' }, { id: 'b' }], 1)
    const out = memory({ outcome: (e) => (e.get('id') === 'a' ? 'errored' : 'delivered') })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', gen)
      .transform('dedupe', ['in'], dedupe({ fields: ['id'], dropStatus: 'rejected' }), {
        dropStatus: 'delivered',
      })
      .sink('out', ['dedupe'], out, { retry: { attempts: 1 } })
      .build()
    await runToEnd(topology)
    // Before, dedupe read its own dropStatus and did not make the duplicate wait, while the
    // runtime dropped it as delivered: the second batch resolved delivered, its only copy errored.
    expect(await statuses()).toEqual(['errored', 'errored', 'delivered'])
  })

  it("reduce: a group that fails to close errors its own batch only, not the other batches of the call or later events of another group's key", async () => {
    const cycle: Record<string, unknown> = {}
    cycle.self = cycle
    const statuses: Promise<BatchStatus>[] = []
    const three: Source = {
      kind: 'three',
      canAcknowledge: true,
      async run(context) {
        // Sent in one burst: reduce, which coalesces, may take them in one call.
        const receipts = [
          await context.send([
            { k: 1, n: 1 },
            { k: 2, a: cycle },
            { k: 2, n: 2 },
          ] as never),
          await context.send([{ k: 1, n: 3 }]),
          await context.send([{ k: 3, n: 4 }]),
        ]
        for (const receipt of receipts) statuses.push(receipt.status)
      },
    }
    const out = memory()
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', three)
      .transform('merge', ['in'], reduce({ groupBy: ['k'], maxEvents: 2, merge: { a: 'last', n: 'array' } }))
      .sink('out', ['merge'], out)
      .build()
    await runToEnd(topology)
    // Before, the two later batches were settled errored with the first (the call stopped at the
    // failing group, and group 1 stayed open on an event the runtime had settled errored).
    expect(await Promise.all(statuses)).toEqual(['errored', 'delivered', 'delivered'])
    expect(fields(out).flatMap((f) => f.n)).toEqual([1, 3, 4])
  })

  it('reduce: a group whose close in a timed flush fails (a frozen record) settles its events errored at once, not at the end of the run', async () => {
    // The group left the map before its close: its first event, held from an earlier call,
    // waited for the end of the run (LEAKED_EVENTS at the last flush), or for ever without one.
    const statuses: Promise<BatchStatus>[] = []
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', {
        kind: 'frozen',
        canAcknowledge: true,
        async run(context) {
          statuses.push((await context.send([Object.freeze({ k: 1, n: 1 })])).status)
          statuses.push((await context.send([{ k: 1, n: 2 }])).status)
          // Settled by the timed flush that failed, not by the end of the run.
          await Promise.all(statuses)
        },
      })
      .transform('sum', ['in'], reduce({ groupBy: ['k'], windowMs: 20, merge: { n: 'sum' } }))
      .sink('out', ['sum'], memory())
      .build()
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await runToEnd(topology)
    expect(await Promise.all(statuses)).toEqual(['errored', 'errored'])
    expect(facts.filter((f) => f.type === 'component_error').map((f) => f.code)).toEqual(['PROCESS_FAILED'])
  })
})

describe('transforms given no options object (untyped code)', () => {
  it.each([
    ['reduce', 'null', '(options)', () => reduce(null as never)],
    ['dedupe', 'undefined', '(options)', () => dedupe(undefined as never)],
    ['sample', 'null', '(options)', () => sample(null as never)],
    ['route', 'undefined', 'routes', () => route(undefined as never)],
    ['remap', 'null', '(options)', () => remap(() => undefined, null as never)],
    ['filter', 'null', '(options)', () => filter(() => true, null as never)],
  ])('%s given %s is reported by the builder, naming the component and %s', (_, got, field, make) => {
    // The factory read its options before anything checked them: a bare TypeError, naming nothing.
    const build = () =>
      new TopologyBuilder({ acknowledgements: true })
        .source('in', generator({ count: 1 }))
        .transform('pick', ['in'], make())
        .sink('out', ['pick'], memory())
        .build()
    expect(build).toThrow(
      expect.objectContaining({
        name: 'TopologyError',
        problems: [expect.objectContaining({ code: 'INVALID_CONFIG', component: 'pick', field })],
      }),
    )
    expect(build).toThrow(`got ${got}`)
  })
})
