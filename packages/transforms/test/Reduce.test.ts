import { runInNewContext } from 'node:vm'
import { EventArray } from '@ackline/core'
import { TopologyBuilder, TopologyError } from '@ackline/topology'
import { reduce } from '@ackline/transforms'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { FakeTransformContext } from './support/FakeTransformContext.js'
import { everyHandleLeft, testBatch } from './support/TestBatch.js'

describe('reduce', () => {
  beforeEach(() => {
    vi.useFakeTimers()
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it('merges events by key until a group holds maxEvents, keeping the first fields', () => {
    const t = reduce({ groupBy: ['id'], maxEvents: 3 })
    const { events } = testBatch([
      { id: 'a', n: 1 },
      { id: 'b', n: 2 },
      { id: 'a', n: 3 },
      { id: 'a', n: 4 },
    ])
    const ctx = new FakeTransformContext()
    t.process(events, ctx)
    expect(ctx.fieldsOn()).toEqual([{ id: 'a', n: 1 }])
    expect(t.openGroups).toBe(1)
    // Merged-away events are consumed: only the group's first event is still a live handle.
    expect(events.events.map((e) => e.isEnded)).toEqual([false, false, true, true])
  })

  it('gives the merged event the finalizers of every merged event, across batches', async () => {
    const t = reduce({ groupBy: ['id'], maxEvents: 2 })
    const one = testBatch([{ id: 'a' }], 'one')
    const two = testBatch([{ id: 'a' }], 'two')
    const ctx = new FakeTransformContext()
    t.process(one.events, ctx)
    expect(ctx.emitted).toEqual([])
    t.process(two.events, ctx)
    expect(ctx.on()).toHaveLength(1)
    expect(ctx.on()[0]!.metadata.finalizers.size).toBe(2)
    expect(one.receiver.status).toBeUndefined()
    ctx.settle(() => 'errored')
    expect(await one.receiver).toBe('errored')
    expect(await two.receiver).toBe('errored')
  })

  it('closes every open group when flush is called, which the runtime does every windowMs', () => {
    const t = reduce({ groupBy: ['id'], windowMs: 1000 })
    expect(t.flushIntervalMs).toBe(1000)
    const ctx = new FakeTransformContext()
    const batch = testBatch([{ id: 'a' }, { id: 'b' }, { id: 'a' }])
    t.process(batch.events, ctx)
    const timer = setInterval(() => t.flush(ctx), t.flushIntervalMs)
    vi.advanceTimersByTime(999)
    expect(ctx.emitted).toEqual([])
    vi.advanceTimersByTime(1)
    clearInterval(timer)
    expect(ctx.fieldsOn()).toEqual([{ id: 'a' }, { id: 'b' }])
    expect(t.openGroups).toBe(0)
    expect(everyHandleLeft(batch.events, ctx.emitted)).toBe(true)
  })

  it('combines fields with the listed strategies', () => {
    const t = reduce({
      maxEvents: 3,
      merge: {
        bytes: 'sum',
        low: 'min',
        high: 'max',
        msg: 'array',
        text: 'concat',
        at: 'last',
        host: 'first',
      },
    })
    const ctx = new FakeTransformContext()
    t.process(
      testBatch([
        { bytes: 1, low: 5, high: 5, msg: 'a', text: 'x', at: 1 },
        { bytes: 2, low: 3, high: 9, msg: { m: 'b' }, at: 2, host: 'h1' },
        { bytes: 'n/a', low: 4, high: 1, msg: 'c', text: 'y', at: 3, host: 'h2' },
      ]).events,
      ctx,
    )
    expect(ctx.fieldsOn()).toEqual([
      { bytes: 3, low: 3, high: 9, msg: ['a', { m: 'b' }, 'c'], text: 'x y', at: 3, host: 'h1' },
    ])
  })

  it('gives min and max a NaN (untyped code may set one) whatever the order the group holds it in, as sum does', () => {
    // min kept NaN only when it came last: 5, 3, NaN gave NaN, but 5, NaN, 3 gave 3 (NaN <= 3 and
    // 3 <= NaN are both false), so what a group wrote depended on its events' order.
    const merged = (values: readonly number[]) => {
      const t = reduce({ maxEvents: values.length, merge: { low: 'min', high: 'max', total: 'sum' } })
      const ctx = new FakeTransformContext()
      t.process(testBatch(values.map((v) => ({ low: v, high: v, total: v }))).events, ctx)
      return ctx.fieldsOn()
    }
    for (const values of [
      [5, 3, Number.NaN],
      [5, Number.NaN, 3],
      [Number.NaN, 5, 3],
    ]) {
      expect(merged(values)).toEqual([{ low: Number.NaN, high: Number.NaN, total: Number.NaN }])
    }
    expect(merged([5, 3, 9])).toEqual([{ low: 3, high: 9, total: 17 }])
  })

  it('merges a boxed number or string (untyped code may set one) as the primitive JSON writes for it', () => {
    // typeof 'object': sum, min, max and concat skipped it, so a group whose events were written
    // n: 1, 2, 3 summed to 4, and one written text: 'a', 'b' concatenated to 'a'.
    const t = reduce({ maxEvents: 3, merge: { n: 'sum', low: 'min', high: 'max', text: 'concat' } })
    const ctx = new FakeTransformContext()
    const record = (n: number, text: string) => ({
      n: Object(n),
      low: Object(n),
      high: Object(n),
      text: Object(text),
    })
    t.process(
      testBatch([
        { n: 1, low: 1, high: 1, text: 'a' },
        record(2, 'b'),
        { n: 3, low: 3, high: 3, text: runInNewContext('new String("c")') },
      ] as never).events,
      ctx,
    )
    expect(ctx.fieldsOn()).toEqual([{ n: 6, low: 1, high: 3, text: 'a b c' }])
  })

  it('merges a boxed NaN or Infinity in sum, min and max as the number it holds, as the unboxed one', () => {
    // Read through JSON, a box holding NaN or Infinity was null, which the strategies skip: 5, then
    // new Number(NaN), then 3 summed to 8 where 5, NaN, 3 summed to NaN (and min 3, max 5, not NaN).
    const merged = (values: readonly unknown[]) => {
      const t = reduce({ maxEvents: values.length, merge: { low: 'min', high: 'max', total: 'sum' } })
      const ctx = new FakeTransformContext()
      t.process(testBatch(values.map((v) => ({ low: v, high: v, total: v })) as never).events, ctx)
      return ctx.fieldsOn()
    }
    for (const special of [Number.NaN, Number.POSITIVE_INFINITY]) {
      const plain = merged([5, special, 3])
      expect(merged([5, Object(special), 3])).toEqual(plain)
      expect(merged([5, runInNewContext(`new Number(${special})`), 3])).toEqual(plain)
    }
    expect(merged([5, Object(Number.NaN), 3])).toEqual([
      { low: Number.NaN, high: Number.NaN, total: Number.NaN },
    ])
  })

  describe('a sum JSON cannot carry', () => {
    it.each([
      ['overflows to Infinity', 1e308, 1e308, 'Infinity'],
      ['overflows to -Infinity', -1e308, -1e308, '-Infinity'],
      ['passes 2^53 - 1, where whole numbers lose precision', Number.MAX_SAFE_INTEGER, 1, '9007199254740992'],
    ])(
      'fails the event whose value %s, naming the component and the field, and merges the others',
      async (_, first, second, total) => {
        const t = reduce({ groupBy: ['k'], merge: { n: 'sum' } })
        const failing = testBatch([{ k: 1, n: second }], 'failing')
        // The third event brings the sum back: only the event that took it out fails.
        const other = testBatch(
          [
            { k: 1, n: first },
            { k: 1, n: -first },
          ],
          'other',
        )
        const call = [other.events.events[0]!, failing.events.events[0]!, other.events.events[1]!]
        const ctx = new FakeTransformContext()
        expect(() => t.process(EventArray.from(call), ctx)).toThrow(
          expect.objectContaining({
            code: 'SUM_OVERFLOW',
            component: 'under_test',
            field: 'merge.n',
            message: expect.stringContaining(total),
          }),
        )
        // Left for the runtime, which settles it errored; the group its failing call opened is
        // emitted with the sum of what was merged, a number JSON writes as it is.
        expect(failing.events.events[0]!.isEnded).toBe(false)
        expect(ctx.fieldsOn()).toEqual([{ k: 1, n: 0 }])
        ctx.settle()
        expect(await other.receiver).toBe('delivered')
      },
    )

    it('sums fractions as numbers do, and whole numbers up to 2^53 - 1', () => {
      const t = reduce({ merge: { f: 'sum', n: 'sum' } })
      const ctx = new FakeTransformContext()
      t.process(
        testBatch([
          { f: 0.1, n: Number.MAX_SAFE_INTEGER - 1 },
          { f: 0.2, n: 1 },
        ]).events,
        ctx,
      )
      t.flush(ctx)
      expect(ctx.fieldsOn()).toEqual([{ f: 0.1 + 0.2, n: Number.MAX_SAFE_INTEGER }])
    })

    it('leaves the other fields of a group untouched by the event it refuses', () => {
      const t = reduce({ merge: { a: 'array', n: 'sum', z: 'last' } })
      const ctx = new FakeTransformContext()
      expect(() =>
        t.process(
          testBatch([
            { a: 1, n: 1e308, z: 1 },
            { a: 2, n: 1e308, z: 2 },
          ]).events,
          ctx,
        ),
      ).toThrow(expect.objectContaining({ code: 'SUM_OVERFLOW' }))
      expect(ctx.fieldsOn()).toEqual([{ a: [1], n: 1e308, z: 1 }])
    })
  })

  it('leaves a group untouched by an event one of whose merged values cannot be read (a getter that throws), which it does not merge', async () => {
    // Before: the values before the unreadable one were folded in (n summed to 6) though the event
    // was not merged and was settled errored: a retry of it counted its n twice.
    const t = reduce({ merge: { n: 'sum', z: 'last' } })
    const good = testBatch([{ n: 1, z: 1 }], 'good')
    const broken = {
      n: 5,
      get z(): number {
        throw new Error('z is not ready')
      },
    }
    const bad = testBatch([broken as never], 'bad')
    const ctx = new FakeTransformContext()
    expect(() => t.process(EventArray.from([good.events.events[0]!, bad.events.events[0]!]), ctx)).toThrow(
      'z is not ready',
    )
    expect(bad.events.events[0]!.isEnded).toBe(false) // left for the runtime, which settles it errored
    expect(ctx.fieldsOn()).toEqual([{ n: 1, z: 1 }])
    ctx.settle()
    expect(await good.receiver).toBe('delivered')
  })

  it('closes the oldest group when opening one more than maxGroups', () => {
    const t = reduce({ groupBy: ['id'], maxGroups: 2 })
    const ctx = new FakeTransformContext()
    t.process(testBatch([{ id: 1 }, { id: 2 }, { id: 1 }, { id: 3 }]).events, ctx)
    expect(ctx.fieldsOn()).toEqual([{ id: 1 }])
    expect(t.openGroups).toBe(2)
  })

  it('emits each event at once with maxEvents 1', () => {
    const t = reduce({ maxEvents: 1, merge: { tags: 'array' } })
    const ctx = new FakeTransformContext()
    t.process(testBatch([{ tags: 'a' }, {}]).events, ctx)
    expect(ctx.fieldsOn()).toEqual([{ tags: ['a'] }, { tags: [] }])
  })

  it('does not resolve a batch while its events sit in an open group', async () => {
    const t = reduce({ groupBy: ['id'] })
    const ctx = new FakeTransformContext()
    const { events, receiver } = testBatch([{ id: 1 }, { id: 1 }])
    t.process(events, ctx)
    await Promise.resolve()
    expect(receiver.status).toBeUndefined()
    t.flush(ctx)
    ctx.settle()
    expect(await receiver).toBe('delivered')
  })

  it('reports bad options by field', () => {
    expect(
      reduce({
        groupBy: ['', 'ok'],
        maxEvents: 0,
        windowMs: -1,
        maxGroups: 1.5,
        merge: { x: 'avg' as never },
      })
        .validate()
        .map((i) => i.field),
    ).toEqual(['groupBy[0]', 'maxEvents', 'windowMs', 'maxGroups', 'merge.x'])
    expect(reduce({ merge: { x: 'avg' as never } }).validate()[0]!.message).toBe(
      'must be one of "first", "last", "sum", "min", "max", "array", "concat", got "avg"',
    )
    expect(reduce({ groupBy: ['id'], merge: { n: 'sum' } }).validate()).toEqual([])
  })

  it.each(['', 'a..b', 'a.', '.a'])(
    'refuses the merge and groupBy path %j at build, naming the transform and the option: it would write a key named ""',
    (path) => {
      // Accepted, `merge: { 'a..b': 'sum' }` wrote the sum under a[""].b, a key no one means.
      expect(reduce({ merge: { [path]: 'sum' } }).validate()).toMatchObject([
        // The key quoted in brackets: joined by a dot, '' read `merge.` and 'a.' read `merge.a.`.
        { field: `merge[${JSON.stringify(path)}]`, message: expect.stringMatching(/empty key/) },
      ])
      expect(reduce({ groupBy: ['id', path] }).validate()).toMatchObject([
        { field: 'groupBy[1]', message: expect.stringMatching(/empty key/) },
      ])
      let thrown: unknown
      try {
        new TopologyBuilder({ onWarning: () => {} })
          .source('in', { kind: 'test', canAcknowledge: true, run: async () => {} })
          .transform('merge_requests', ['in'], reduce({ merge: { [path]: 'sum' } }))
          .sink('out', ['merge_requests'], { kind: 'test', write: async () => undefined })
          .build()
      } catch (error) {
        thrown = error
      }
      expect(thrown).toBeInstanceOf(TopologyError)
      expect((thrown as TopologyError).problems).toMatchObject([
        { code: 'INVALID_CONFIG', component: 'merge_requests', field: expect.stringMatching(/^merge/) },
      ])
      expect((thrown as TopologyError).message).toMatch(/merge_requests.*merge.*reduce: .*empty key/)
    },
  )

  it('reports a window longer than a timer can wait, which would close every millisecond', () => {
    expect(reduce({ windowMs: 3_000_000_000 }).validate()).toMatchObject([
      { field: 'windowMs', got: '3000000000', message: expect.stringContaining('2147483647') },
    ])
    expect(reduce({ windowMs: 2_147_483_647 }).validate()).toEqual([])
  })

  it('refuses a maxGroups above what a Map keeps while groups open and close (2^23), where every event opening a group would throw', () => {
    for (const maxGroups of [8_388_609, 16_777_216]) {
      expect(reduce({ maxGroups }).validate()).toMatchObject([
        { field: 'maxGroups', message: expect.stringContaining('8388608') },
      ])
    }
    expect(reduce({ maxGroups: 8_388_608 }).validate()).toEqual([])
  })

  describe('a merged value whose path runs through a value that is not an object (a.b where a is 5)', () => {
    // Writing it threw from process or flush: the call failed with the group half closed, so
    // unrelated events were settled errored and a flush that failed emitted its groups again later.
    const merge = { 'a.b': 'sum' } as const

    it('is left out when a full group closes: the first event keeps its value, and the call goes on', async () => {
      const t = reduce({ groupBy: ['k'], maxEvents: 2, merge })
      const batch = testBatch([
        { k: 1, a: 5 },
        { k: 1, a: { b: 3 } },
        { k: 2, a: { b: 1 } },
        { k: 2, a: { b: 2 } },
      ])
      const ctx = new FakeTransformContext()
      t.process(batch.events, ctx)
      expect(ctx.fieldsOn()).toEqual([
        { k: 1, a: 5 },
        { k: 2, a: { b: 3 } },
      ])
      expect(everyHandleLeft(batch.events, ctx.emitted)).toBe(true)
      ctx.settle()
      expect(await batch.receiver).toBe('delivered')
    })

    it('is left out when a flush closes the group, and every group leaves once', () => {
      const t = reduce({ groupBy: ['k'], merge })
      const batch = testBatch([
        { k: 1, a: { b: 1 } },
        { k: 2, a: 5 },
        { k: 2, a: { b: 1 } },
        { k: 3, a: { b: 2 } },
      ])
      const ctx = new FakeTransformContext()
      t.process(batch.events, ctx)
      t.flush(ctx)
      t.flush(ctx) // throws 'emitted the same handle twice' if a group is still open
      expect(ctx.fieldsOn()).toEqual([
        { k: 1, a: { b: 1 } },
        { k: 2, a: 5 },
        { k: 3, a: { b: 2 } },
      ])
      expect(t.openGroups).toBe(0)
      expect(everyHandleLeft(batch.events, ctx.emitted)).toBe(true)
    })

    it('leaves out only that: a merged value that cannot be written for another reason (a frozen record) fails the call', () => {
      const t = reduce({ groupBy: ['k'], maxEvents: 2, merge: { n: 'sum' } })
      const batch = testBatch([Object.freeze({ k: 1, n: 1 }), Object.freeze({ k: 1, n: 2 })])
      expect(() => t.process(batch.events, new FakeTransformContext())).toThrow(TypeError)
    })

    it('emits each group once even when a flush fails on a later one', () => {
      const t = reduce({ groupBy: ['k'], merge: { n: 'sum' } })
      const batch = testBatch([{ k: 1, n: 1 }, Object.freeze({ k: 2, n: 1 }), { k: 2, n: 2 }, { k: 3, n: 1 }])
      const ctx = new FakeTransformContext()
      t.process(batch.events, ctx)
      expect(() => t.flush(ctx)).toThrow(TypeError) // group 2's first event is frozen
      t.flush(ctx) // throws 'emitted the same handle twice' if group 1 were still open
      expect(ctx.fieldsOn().map((f) => f.k)).toEqual([1, 3])
      expect(t.openGroups).toBe(0)
    })
  })

  it('goes on past an event whose group fails to close: the other events of the call are merged, and none is left for the runtime to settle', async () => {
    const cycle: Record<string, unknown> = {}
    cycle.self = cycle
    const t = reduce({ groupBy: ['k'], maxEvents: 2, merge: { a: 'last', n: 'array' } })
    // One call may hold several batches (coalesced): group 2 fails to close (a cycle in its
    // merged value), groups 1 and 3 have nothing to do with it.
    const failing = testBatch([
      { k: 1, n: 1 },
      { k: 2, a: cycle },
      { k: 2, n: 2 },
    ] as never)
    const other = testBatch(
      [
        { k: 1, n: 3 },
        { k: 3, n: 4 },
      ],
      'other',
    )
    const ctx = new FakeTransformContext()
    const call = [...failing.events.events, ...other.events.events]
    expect(() => t.process(EventArray.from(call), ctx)).toThrow(/cyclic/)
    // Before, the call stopped at the failing event: group 1 stayed open on an event the runtime
    // then settled errored, and the events after it were left, settled errored with it.
    expect(everyHandleLeft(EventArray.from(call), ctx.emitted)).toBe(true)
    expect(ctx.fieldsOn()).toEqual([
      { k: 1, n: [1, 3] },
      { k: 3, n: [4] },
    ])
    expect(t.openGroups).toBe(0)
    ctx.settle()
    expect(await other.receiver).toBe('delivered')
    expect(await failing.receiver).toBe('errored')
  })

  it('emits the group a failing call opened for an event whose key has no JSON form (a BigInt) too', () => {
    const cycle: Record<string, unknown> = {}
    cycle.self = cycle
    const t = reduce({ groupBy: ['k'], maxEvents: 2, merge: { a: 'last' } })
    // Such a key is one no other event gets, so it cannot be computed again to find the group.
    const batch = testBatch([{ k: 5n }, { k: 2, a: cycle }, { k: 2 }] as never)
    const ctx = new FakeTransformContext()
    expect(() => t.process(batch.events, ctx)).toThrow(/cyclic/)
    expect(ctx.on()).toEqual([batch.events.events[0]])
    expect(t.openGroups).toBe(0)
    expect(everyHandleLeft(batch.events, ctx.emitted)).toBe(true)
  })

  it('emits every other group when a flush fails on one, so none waits for the stop', () => {
    const cycle: Record<string, unknown> = {}
    cycle.self = cycle
    const t = reduce({ groupBy: ['k'], merge: { a: 'last' } })
    const batch = testBatch([{ k: 1 }, { k: 2, a: cycle }, { k: 3 }] as never)
    const ctx = new FakeTransformContext()
    t.process(batch.events, ctx)
    expect(() => t.flush(ctx)).toThrow(/cyclic/)
    expect(ctx.fieldsOn()).toEqual([{ k: 1 }, { k: 3 }])
    expect(t.openGroups).toBe(0)
    expect(everyHandleLeft(batch.events, ctx.emitted)).toBe(true)
  })

  it('groups events whose groupBy field holds equal objects, their keys in any order', () => {
    const t = reduce({ groupBy: ['peer'], merge: { n: 'array' } })
    const batch = testBatch([
      { peer: { ip: '10.0.0.1', port: 80 }, n: 1 },
      { peer: { port: 80, ip: '10.0.0.1' }, n: 2 },
      { peer: { ip: '10.0.0.1', port: 81 }, n: 3 },
    ])
    const ctx = new FakeTransformContext()
    t.process(batch.events, ctx)
    expect(t.openGroups).toBe(2)
    t.flush(ctx)
    expect(ctx.fieldsOn().map((f) => f.n)).toEqual([[1, 2], [3]])
  })

  it('keeps a Date a merged field holds as the ISO string JSON writes for it, not {}', () => {
    // A Date is JSON by design (RFC 0010: its toJSON); user code may put one in a field.
    const t = reduce({ merge: { at: 'last', seen: 'array' } })
    const at = new Date(Date.UTC(2026, 0, 2, 3, 4, 5))
    const batch = testBatch([{ at, seen: at, n: 1 } as never, { at, seen: at, n: 2 } as never])
    const ctx = new FakeTransformContext()
    t.process(batch.events, ctx)
    t.flush(ctx)
    expect(JSON.parse(JSON.stringify(ctx.on()[0]))).toEqual({
      at: '2026-01-02T03:04:05.000Z',
      seen: ['2026-01-02T03:04:05.000Z', '2026-01-02T03:04:05.000Z'],
      n: 1,
    })
  })

  it('keeps an event whose key has no JSON form (a BigInt, from a source) in a group of its own, and the others merging', () => {
    // Its key threw: the call failed with the first event of an open group settled errored by the
    // runtime, and every later event of that group failed on merging into it.
    const t = reduce({ groupBy: ['id'] })
    const batch = testBatch([{ id: 'a', n: 1 }, { id: 5n, n: 2 } as never, { id: 'a', n: 3 }])
    const ctx = new FakeTransformContext()
    t.process(batch.events, ctx)
    expect(t.openGroups).toBe(2)
    t.flush(ctx)
    expect(ctx.fieldsOn().map((f) => f.n)).toEqual([1, 2])
    expect(everyHandleLeft(batch.events, ctx.emitted)).toBe(true)
  })
})
