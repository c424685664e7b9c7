import { sample } from '@ackline/transforms'
import { describe, expect, it } from 'vitest'
import { FakeTransformContext } from './support/FakeTransformContext.js'
import { testBatch } from './support/TestBatch.js'

const numbered = (n: number, make: (i: number) => Record<string, string | number> = (i) => ({ i })) =>
  Array.from({ length: n }, (_, i) => make(i))

describe('sample', () => {
  it('keeps the 1st, (rate+1)th… event without a key field', () => {
    const t = sample({ rate: 3 })
    const ctx = FakeTransformContext.for(t)
    t.process(testBatch(numbered(7)).events, ctx)
    t.process(testBatch(numbered(3, (i) => ({ i: 7 + i }))).events, ctx)
    expect(ctx.fieldsOn().map((f) => f.i)).toEqual([0, 3, 6, 9])
    expect(ctx.dropped).toHaveLength(6)
  })

  it('gives every event with the same key the same fate, in any instance', () => {
    const records = numbered(200, (i) => ({ trace: `t${i % 20}`, i }))
    const kept = (t: ReturnType<typeof sample>) => {
      const ctx = FakeTransformContext.for(t)
      t.process(testBatch(records).events, ctx)
      return ctx.fieldsOn()
    }
    const first = kept(sample({ rate: 4, keyField: 'trace' }))
    const second = kept(sample({ rate: 4, keyField: 'trace' }))
    expect(second).toEqual(first)
    const keptTraces = new Set(first.map((f) => f.trace))
    // Every event of a kept trace is kept: 10 events per trace.
    expect(first).toHaveLength(keptTraces.size * 10)
    expect(keptTraces.size).toBeGreaterThan(0)
    expect(keptTraces.size).toBeLessThan(20)
  })

  it('gives events whose key field holds equal objects, their keys in any order, the same fate', () => {
    // Not 2: FNV-1a's lowest bit does not depend on the order of the characters.
    const t = sample({ rate: 3, keyField: 'k' })
    const ctx = FakeTransformContext.for(t)
    const records = Array.from({ length: 40 }, (_, i) =>
      i % 2 === 0 ? { k: { a: i >> 1, b: 'x' } } : { k: { b: 'x', a: i >> 1 } },
    )
    const { events } = testBatch(records)
    t.process(events, ctx)
    const kept = new Set(ctx.on())
    for (let i = 0; i < records.length; i += 2) {
      expect(kept.has(events.events[i]!)).toBe(kept.has(events.events[i + 1]!))
    }
    expect(kept.size).toBeGreaterThan(0)
    expect(kept.size).toBeLessThan(records.length)
  })

  it('gives an event whose key field holds a boxed string or a Date the fate of one holding the string JSON writes for it', () => {
    // The string was hashed as itself, the others by their JSON text (quoted): other fates. Not
    // rate 2: two quotes leave FNV-1a's lowest bit as it was.
    const t = sample({ rate: 3, keyField: 'k' })
    const ctx = FakeTransformContext.for(t)
    const records = Array.from({ length: 40 }, (_, i) => {
      const iso = new Date(Date.UTC(2026, 0, 1 + (i >> 2))).toISOString()
      return [{ k: `s${i >> 2}` }, { k: Object(`s${i >> 2}`) }, { k: iso }, { k: new Date(iso) }][i % 4]!
    })
    const { events } = testBatch(records as never)
    t.process(events, ctx)
    const kept = new Set(ctx.on())
    for (let i = 0; i < records.length; i += 2) {
      expect(kept.has(events.events[i]!)).toBe(kept.has(events.events[i + 1]!))
    }
    expect(kept.size).toBeGreaterThan(0)
    expect(kept.size).toBeLessThan(records.length)
  })

  it('samples an event whose key field has no JSON text (a BigInt, a cycle, a function) by the count, as one without the field', () => {
    const cycle: Record<string, unknown> = {}
    cycle.self = cycle
    const t = sample({ rate: 2, keyField: 'k' })
    const ctx = FakeTransformContext.for(t)
    const { events } = testBatch([{ k: 5n }, { k: cycle }, { k: () => 1 }, { k: Symbol('s') }, {}] as never)
    // Before, JSON.stringify threw (a BigInt, a cycle) or gave no text to hash (a function, a
    // symbol): the call failed, and each such event was settled errored at every redelivery.
    t.process(events, ctx)
    expect(ctx.on()).toEqual([events.events[0], events.events[2], events.events[4]])
    expect(ctx.dropped).toEqual([events.events[1], events.events[3]])
  })

  it('keeps everything at rate 1', () => {
    const t = sample({ rate: 1, keyField: 'k' })
    const ctx = FakeTransformContext.for(t)
    t.process(testBatch(numbered(5, (i) => ({ k: `x${i}` }))).events, ctx)
    expect(ctx.on()).toHaveLength(5)
  })

  it('settles what it discards with its dropStatus', async () => {
    const t = sample({ rate: 2, dropStatus: 'rejected' })
    const { events, receiver } = testBatch(numbered(2))
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    ctx.settle()
    expect(await receiver).toBe('rejected')
  })

  it('reports bad options by field', () => {
    expect(
      sample({ rate: 0.5, keyField: '', dropStatus: 'no' as never })
        .validate()
        .map((i) => i.field),
    ).toEqual(['rate', 'keyField', 'dropStatus'])
    expect(
      sample({} as never)
        .validate()
        .map((i) => i.field),
    ).toEqual(['rate'])
    expect(sample({} as never).validate()[0]!.message).toBe('must be a positive integer, got undefined')
    expect(sample({ rate: 10 }).validate()).toEqual([])
  })

  it.each(['a..b', 'a.', '.a'])('refuses the keyField %j, which names a key named ""', (path) => {
    expect(sample({ rate: 10, keyField: path }).validate()).toMatchObject([
      { field: 'keyField', message: expect.stringMatching(/empty key/) },
    ])
  })
})
