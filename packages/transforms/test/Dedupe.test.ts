import { runInNewContext } from 'node:vm'
import { BatchNotifier, type BatchStatusReceiver, type JsonObject, type LogEvent } from '@ackline/core'
import { DedupeOptions, dedupe, reduce, sample } from '@ackline/transforms'
import fc from 'fast-check'
import { describe, expect, it, vi } from 'vitest'
import { FakeTransformContext } from './support/FakeTransformContext.js'
import { testBatch } from './support/TestBatch.js'

describe('dedupe', () => {
  it('drops an event whose fields were seen, and keeps distinct ones', () => {
    const t = dedupe({ fields: ['id'] })
    const { events } = testBatch([
      { id: 1 },
      { id: 2 },
      { id: 1, other: 'x' },
      { id: '1' },
      {},
      { id: null },
      {},
    ])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    expect(ctx.fieldsOn()).toEqual([{ id: 1 }, { id: 2 }, { id: '1' }, {}, { id: null }])
    expect(ctx.dropped.map((e) => e.isEnded)).toEqual([true, true])
  })

  it('compares all the fields it is given, including nested paths', () => {
    const t = dedupe({ fields: ['host', 'req.path'] })
    const { events } = testBatch([
      { host: 'a', req: { path: '/x' } },
      { host: 'a', req: { path: '/y' } },
      { host: 'a', req: { path: '/x' }, n: 2 },
    ])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    expect(ctx.on()).toHaveLength(2)
    expect(ctx.dropped).toHaveLength(1)
  })

  it('drops an event whose field holds an object equal to one seen, its keys in another order', () => {
    const t = dedupe({ fields: ['labels'] })
    const { events } = testBatch([
      { labels: { host: 'a', env: 'prod', 1: 'x' } },
      { labels: { env: 'prod', 1: 'x', host: 'a' } },
      { labels: [{ b: 2, a: 1 }] },
      { labels: [{ a: 1, b: 2 }] },
      { labels: { host: 'a', env: 'dev' } },
      // A member named __proto__ (parsed JSON has one) is a member like any other.
      { labels: JSON.parse('{"__proto__":1,"a":2}') },
      { labels: JSON.parse('{"a":2,"__proto__":1}') },
      { labels: { a: 2 } },
    ])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    const [e0, e1, e2, e3, e4, e5, e6, e7] = events.events
    expect(ctx.on()).toEqual([e0, e2, e4, e5, e7])
    expect(ctx.dropped).toEqual([e1, e3, e6])
  })

  it('keeps events whose fields hold boxed numbers, strings or booleans JSON writes differently', () => {
    // User code may set a boxed primitive (untyped): JSON writes it as the primitive, and the
    // sorted copy of the key's objects wrote each as an object of its indices ({} for a number).
    const t = dedupe({ fields: ['k'] })
    const boxed = (value: unknown) => ({ k: { v: Object(value) } }) as unknown as JsonObject
    const { events } = testBatch([
      boxed(1),
      boxed(2),
      boxed('ab'),
      { k: { v: { 0: 'a', 1: 'b' } } },
      boxed(true),
      boxed(false),
      { k: { v: {} } },
    ])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    expect(ctx.on()).toEqual(events.events)
    expect(ctx.dropped).toEqual([])
  })

  it('keeps events whose fields hold boxed values made in another realm (vm), which JSON writes as their primitives', () => {
    // Not instances of this realm's Number: the sorted copy of the key wrote each as `{}`, so 1
    // and 2 made one key and the second event was dropped as a duplicate (settled, never sent).
    const t = dedupe({ fields: ['k'] })
    const foreign = (source: string) => ({ k: { v: runInNewContext(source) } }) as unknown as JsonObject
    const { events } = testBatch([
      foreign('new Number(1)'),
      foreign('new Number(2)'),
      foreign('new String("ab")'),
      foreign('new Boolean(false)'),
      { k: { v: {} } },
    ])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    expect(ctx.on()).toEqual(events.events)
    expect(ctx.dropped).toEqual([])
  })

  it('keeps events whose fields hold boxes of a class that names itself (Symbol.toStringTag), which JSON writes as their primitives', () => {
    // Told by its tag alone, `class Cents extends Number` (a tag of its own) was taken for an
    // object of no keys: 1 and 2 made one key and the second event was dropped as a duplicate.
    class Cents extends Number {
      get [Symbol.toStringTag]() {
        return 'Cents'
      }
    }
    const t = dedupe({ fields: ['k'] })
    const boxed = (v: unknown) => ({ k: { v } }) as unknown as JsonObject
    const { events } = testBatch([
      boxed(new Cents(1)),
      boxed(new Cents(2)),
      boxed(
        runInNewContext('class C extends String { get [Symbol.toStringTag]() { return "C" } }; new C("ab")'),
      ),
      { k: { v: {} } },
    ])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    expect(ctx.on()).toEqual(events.events)
    expect(ctx.dropped).toEqual([])
  })

  it('drops an event whose field holds a boxed string or a Date, a duplicate of one holding the string JSON writes for it', () => {
    // JSON writes `new String('a')` as "a" and a Date as its ISO string, as it writes them inside
    // an object (where they were already one key with the string). At the top of a path the string
    // was keyed as itself and the others by their JSON text: two keys, the duplicate went on.
    const iso = '2026-01-02T03:04:05.000Z'
    for (const fields of [['id'], ['id', 'other']]) {
      const t = dedupe({ fields })
      const { events } = testBatch([
        { id: 'a' },
        { id: Object('a') },
        { id: new Date(iso) },
        { id: iso },
        { id: { v: Object('a') } },
        { id: { v: 'a' } },
      ] as never)
      const ctx = FakeTransformContext.for(t)
      t.process(events, ctx)
      const [e0, e1, e2, e3, e4, e5] = events.events
      expect(ctx.on()).toEqual([e0, e2, e4])
      expect(ctx.dropped).toEqual([e1, e3, e5])
    }
    const r = reduce({ groupBy: ['id'] })
    r.process(testBatch([{ id: iso }, { id: new Date(iso) }] as never).events, FakeTransformContext.for(r))
    expect(r.openGroups).toBe(1)
  })

  it('keeps an event whose fields differ only where a NUL in a string could pass for the separator', () => {
    // Crafted input: without a bound on each string, both keys would read 's' 'x' NUL 's' 'y' NUL 'u'.
    const t = dedupe({ fields: ['a', 'b'] })
    const { events } = testBatch([{ a: 'x\u0000sy' }, { a: 'x', b: 'y\u0000u' }])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    expect(ctx.dropped).toEqual([])
    expect(ctx.on()).toHaveLength(2)
  })

  it('keeps an event whose fields have no JSON form (a BigInt, a cycle), and goes on with the rest', () => {
    const cycle: Record<string, unknown> = {}
    cycle.self = cycle
    const t = dedupe({ fields: ['id'] })
    const { events } = testBatch([{ id: 5n }, { id: cycle }, { id: 'a' }, { id: 'a' }] as never)
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    expect(ctx.on()).toEqual(events.events.slice(0, 3))
    expect(ctx.dropped).toEqual([events.events[3]])
  })

  it('keeps events whose field holds a function, a symbol or an object whose toJSON gives nothing: values with no JSON text equal nothing', () => {
    // JSON writes no text for them: the key read 'j' + undefined, the same for all of them, so the
    // second event (another function, a symbol) was dropped as a duplicate of the first.
    const t = dedupe({ fields: ['id'] })
    const nothing = { toJSON: () => undefined }
    const { events } = testBatch([
      { id: () => 1 },
      { id: () => 2 },
      { id: Symbol('a') },
      { id: nothing },
      { id: 'jundefined' },
    ] as never)
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    expect(ctx.on()).toEqual(events.events)
    expect(ctx.dropped).toEqual([])
    // Among several paths too, and in reduce's groups.
    const two = dedupe({ fields: ['id', 'other'] })
    const again = testBatch([{ id: () => 1 }, { id: Symbol('b') }] as never)
    const ctx2 = FakeTransformContext.for(two)
    two.process(again.events, ctx2)
    expect(ctx2.dropped).toEqual([])
    const r = reduce({ groupBy: ['id'] })
    r.process(testBatch([{ id: () => 1 }, { id: () => 2 }] as never).events, FakeTransformContext.for(r))
    expect(r.openGroups).toBe(2)
  })

  it('remembers no key for fields with no JSON text, which no event can match, so they evict no key that can', () => {
    // Each such event took a place in the cache for a key no other event gets: a run of them
    // (cacheSize of them) forgot every key seen before, and the duplicates after them went on.
    const t = dedupe({ fields: ['id'], cacheSize: 2 })
    const ctx = FakeTransformContext.for(t)
    const { events } = testBatch([
      { id: 'a' },
      { id: () => 1 },
      { id: Symbol('b') },
      { id: 5n },
      { id: 'a' },
    ] as never)
    t.process(events, ctx)
    expect(ctx.on()).toEqual(events.events.slice(0, 4))
    expect(ctx.dropped).toEqual([events.events[4]])
    expect(t.cachedKeys).toBe(1)
    // Among several paths too: one part with no text is enough for the key to equal nothing.
    const two = dedupe({ fields: ['id', 'other'], cacheSize: 1 })
    const ctx2 = FakeTransformContext.for(two)
    const again = testBatch([{ id: 'a' }, { id: 'a', other: () => 1 }, { id: 'a' }] as never)
    two.process(again.events, ctx2)
    expect(ctx2.dropped).toEqual([again.events.events[2]])
  })

  it('goes on past an event whose key cannot be read (a getter that throws), leaving that one to the runtime', () => {
    // The loop stopped at the throw: the events after it (in a coalesced call, other batches')
    // were neither emitted nor dropped, and the runtime settled them errored for another's failure.
    const t = dedupe({ fields: ['id.a'] })
    const broken = {
      get a(): number {
        throw new Error('no a')
      },
    }
    const { events } = testBatch([
      { id: { a: 1 } },
      { id: broken },
      { id: { a: 2 } },
      { id: { a: 1 } },
    ] as never)
    const ctx = FakeTransformContext.for(t)
    expect(() => t.process(events, ctx)).toThrow('no a')
    const [e0, e1, e2, e3] = events.events
    expect(ctx.on()).toEqual([e0, e2])
    expect(ctx.dropped).toEqual([e3])
    expect(e1!.isEnded).toBe(false)
  })

  it('remembers at most cacheSize keys, forgetting the least recently seen', () => {
    const t = dedupe({ fields: ['id'], cacheSize: 2 })
    const ctx = FakeTransformContext.for(t)
    // 1, 2, then 1 again (a hit that makes 1 the most recent), then 3 evicts 2.
    t.process(testBatch([{ id: 1 }, { id: 2 }, { id: 1 }, { id: 3 }]).events, ctx)
    expect(t.cachedKeys).toBe(2)
    t.process(testBatch([{ id: 1 }, { id: 2 }]).events, ctx)
    expect(ctx.fieldsOn().map((f) => f.id)).toEqual([1, 2, 3, 2])
    expect(ctx.dropped).toHaveLength(2)
  })

  it('settles a duplicate with its dropStatus', async () => {
    const delivered = dedupe({ fields: ['id'] })
    const a = testBatch([{ id: 1 }, { id: 1 }])
    const ctxA = FakeTransformContext.for(delivered)
    delivered.process(a.events, ctxA)
    ctxA.settle()
    expect(await a.receiver).toBe('delivered')

    const rejected = dedupe({ fields: ['id'], dropStatus: 'rejected' })
    const b = testBatch([{ id: 1 }, { id: 1 }])
    const ctxB = FakeTransformContext.for(rejected)
    rejected.process(b.events, ctxB)
    ctxB.settle()
    expect(await b.receiver).toBe('rejected')
  })

  it.each(['errored', 'rejected'] as const)(
    'forgets the key of an event %s downstream, so its redelivery goes on (not dropped as delivered)',
    async (failure) => {
      const t = dedupe({ fields: ['id'] })
      const first = testBatch([{ id: 1 }, { id: 2 }])
      const ctx1 = FakeTransformContext.for(t)
      t.process(first.events, ctx1)
      // The sink failed id 1 and delivered id 2: the source will send id 1 again.
      ctx1.settle((e) => (e.get('id') === 1 ? failure : 'delivered'))
      expect(await first.receiver).toBe(failure)
      expect(t.cachedKeys).toBe(1)

      const again = testBatch([{ id: 1 }, { id: 2 }])
      const ctx2 = FakeTransformContext.for(t)
      t.process(again.events, ctx2)
      // id 1 goes on (its first copy reached no one); id 2 is a duplicate of a delivered event.
      expect(ctx2.fieldsOn()).toEqual([{ id: 1 }])
      expect(ctx2.dropped).toEqual([again.events.events[1]])
      ctx2.settle()
      expect(await again.receiver).toBe('delivered')

      // Delivered now: a third copy is a duplicate.
      const third = testBatch([{ id: 1 }])
      const ctx3 = FakeTransformContext.for(t)
      t.process(third.events, ctx3)
      expect(ctx3.dropped).toHaveLength(1)
    },
  )

  it.each(['delivered', 'errored', 'rejected'] as const)(
    'settles a duplicate dropped while the first copy is in flight as that copy ends: %s',
    async (fate) => {
      const t = dedupe({ fields: ['id'] })
      const ctx = FakeTransformContext.for(t)
      const first = testBatch([{ id: 1 }], 'a')
      const second = testBatch([{ id: 1 }, { id: 1 }, { id: 2 }], 'b')
      t.process(first.events, ctx)
      t.process(second.events, ctx)
      expect(ctx.dropped).toEqual(second.events.events.slice(0, 2))
      ctx.emitted[1]!.event.end('delivered') // id 2, the second batch's own
      // Before, the duplicates counted delivered at once: the second batch resolved delivered
      // while the only copy of id 1 was still on its way, and stayed so if that copy failed.
      expect(second.receiver.status).toBeUndefined()
      ctx.emitted[0]!.event.end(fate, { reason: { componentId: 'out', code: 'WRITE_FAILED', message: 'no' } })
      expect(await first.receiver).toBe(fate)
      expect(await second.receiver).toBe(fate)
      if (fate !== 'delivered') expect(second.receiver.reason).toMatchObject({ componentId: 'out' })
    },
  )

  it('watches nothing where no sink status can matter (context.acknowledgements false): a duplicate is settled at once', async () => {
    const open = vi.spyOn(BatchNotifier, 'open')
    try {
      const t = dedupe({ fields: ['id'] })
      const ctx = new FakeTransformContext({ acknowledgements: false })
      t.process(testBatch([{ id: 1 }], 'a').events, ctx)
      const second = testBatch([{ id: 1 }], 'b')
      t.process(second.events, ctx)
      expect(ctx.dropped).toEqual(second.events.events)
      // No batch of dedupe's own watches the first copy, so the duplicate does not wait for it.
      expect(open.mock.calls.filter(([id]) => id === 'under_test')).toEqual([])
      expect(second.receiver.status).toBe('delivered')
      // Where statuses matter, each event emitted under a new key is watched.
      const watched = dedupe({ fields: ['id'] })
      watched.process(
        testBatch([{ id: 1 }, { id: 2 }, { id: 1 }]).events,
        new FakeTransformContext({ id: 'w' }),
      )
      expect(open.mock.calls.filter(([id]) => id === 'w')).toHaveLength(2)
    } finally {
      open.mockRestore()
    }
  })

  it("rejects a duplicate under dropStatus 'rejected', whatever the first copy becomes", async () => {
    const t = dedupe({ fields: ['id'], dropStatus: 'rejected' })
    const ctx = FakeTransformContext.for(t)
    t.process(testBatch([{ id: 1 }]).events, ctx)
    const second = testBatch([{ id: 1 }])
    t.process(second.events, ctx)
    // It waits for the first copy too: the runtime may drop it as delivered (a declaration's
    // dropStatus wins over the transform's own), and then it must take that copy's status.
    ctx.settle()
    expect(await second.receiver).toBe('rejected')
  })

  it('keeps the key of an event seen again after it was evicted, whatever the first copy becomes', () => {
    const t = dedupe({ fields: ['id'], cacheSize: 1 })
    const ctx = FakeTransformContext.for(t)
    // id 1 is emitted, evicted by id 2, emitted again: then the first copy fails.
    t.process(testBatch([{ id: 1 }, { id: 2 }, { id: 1 }]).events, ctx)
    expect(ctx.on()).toHaveLength(3)
    ctx.emitted[0]!.event.end('errored')
    // The key now belongs to the second copy, still in flight: a duplicate is dropped.
    t.process(testBatch([{ id: 1 }]).events, ctx)
    expect(ctx.dropped).toHaveLength(1)
  })

  it('reports bad options by field', () => {
    expect(
      dedupe({ fields: [] })
        .validate()
        .map((i) => i.field),
    ).toEqual(['fields'])
    expect(
      dedupe({ fields: ['ok', ''], cacheSize: 0, dropStatus: 'gone' as never })
        .validate()
        .map((i) => i.field),
    ).toEqual(['fields[1]', 'cacheSize', 'dropStatus'])
    expect(dedupe({ fields: ['id'] }).validate()).toEqual([])
  })

  it.each(['user id', 'naïve.ключ', '$meta.id', '0', 'tags.0', ' ', '__proto__'])(
    'accepts the field path %j (spaces, unicode, a leading $, numbers: any key but an empty one)',
    (path) => {
      expect(dedupe({ fields: [path] }).validate()).toEqual([])
      expect(reduce({ groupBy: [path], merge: { [`${path}.n`]: 'sum' } }).validate()).toEqual([])
      expect(sample({ rate: 2, keyField: path }).validate()).toEqual([])
    },
  )

  it.each(['a..b', 'a.', '.a'])('refuses the field path %j, which names a key named ""', (path) => {
    expect(dedupe({ fields: ['id', path] }).validate()).toMatchObject([
      { field: 'fields[1]', message: expect.stringMatching(/empty key/) },
    ])
  })

  it('refuses a cacheSize above what a Map keeps while keys come and go (2^23), where every new key would throw', () => {
    // Checked by hand: a cache of more than 2^24 keys threw RangeError 'Map maximum size
    // exceeded' at its 16,777,217th key, and a Map of 2^23 + 1 live keys, one evicted for each
    // new one, after 2^23 evictions (its deleted entries left too little room to rebuild it at
    // 2^24): every event with a key not yet seen was settled errored from then on. 2^23 kept going.
    for (const cacheSize of [8_388_609, 16_777_216]) {
      expect(dedupe({ fields: ['id'], cacheSize }).validate()).toMatchObject([
        { field: 'cacheSize', message: expect.stringContaining('8388608') },
      ])
    }
    expect(dedupe({ fields: ['id'], cacheSize: 8_388_608 }).validate()).toEqual([])
  })

  it('describes its options as JSON Schema for config files', () => {
    expect(DedupeOptions.jsonSchema()).toMatchObject({
      required: ['fields'],
      additionalProperties: false,
      properties: {
        fields: { type: 'array', minItems: 1, items: { type: 'string', minLength: 1 } },
        cacheSize: { type: 'integer', minimum: 1, maximum: 8_388_608, default: 5000 },
        dropStatus: { enum: ['delivered', 'rejected'] },
      },
    })
  })

  it('resolves a batch delivered only when every key it holds had a copy delivered (property)', async () => {
    // Batches of keys go through one dedupe; between them, some emitted copies are settled (or put
    // off), the rest delivered at the end. A batch whose duplicate was dropped must not be told
    // delivered unless some copy of that key was. Before the watcher, a redelivery after a failed
    // copy, or a duplicate of a copy that failed later, was.
    const settle = fc.constantFrom('delivered', 'errored', 'rejected', 'later')
    const step = fc.record({
      keys: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 4 }),
      settle: fc.array(settle, { maxLength: 5 }),
    })
    await fc.assert(
      fc.asyncProperty(
        fc.array(step, { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 1, max: 3 }),
        async (steps, cacheSize) => {
          const t = dedupe({ fields: ['id'], cacheSize })
          const inFlight: LogEvent[] = []
          const delivered = new Set<unknown>()
          const batches: { receiver: BatchStatusReceiver; keys: number[] }[] = []
          for (const { keys, settle } of steps) {
            const batch = testBatch(keys.map((id) => ({ id })))
            const ctx = FakeTransformContext.for(t)
            t.process(batch.events, ctx)
            batches.push({ receiver: batch.receiver, keys })
            for (const { event } of ctx.emitted) inFlight.push(event)
            for (const status of settle) {
              const event = inFlight.shift()
              if (event === undefined) break
              if (status === 'later') inFlight.push(event)
              else {
                if (status === 'delivered') delivered.add(event.get('id'))
                event.end(status)
              }
            }
          }
          for (const event of inFlight) {
            delivered.add(event.get('id'))
            event.end('delivered')
          }
          for (const { receiver, keys } of batches) {
            if ((await receiver) === 'delivered')
              for (const key of keys) expect(delivered.has(key)).toBe(true)
          }
        },
      ),
      { numRuns: 500 },
    )
  })
})
