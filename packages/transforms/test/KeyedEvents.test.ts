// KeyedEvents keeps at most `capacity` values and evicts the oldest (by insertion or last touch).
// Its eviction keeps one Map iterator for as long as it lasts (a new one per eviction stepped
// over every deleted place at the table's front again): a model in plain arrays checks every
// sequence of operations against it, eviction order included.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { KeyedEvents } from '../src/internal/KeyedEvents.js'

type Op =
  | { op: 'add'; key: string; value: number }
  | { op: 'touch'; key: string }
  | { op: 'delete'; key: string }
  | { op: 'replace'; key: string; value: number }
  | { op: 'shift' }
  | { op: 'removeOdd' }
  | { op: 'clear' }

const key = fc.integer({ min: 0, max: 12 }).map((n) => `k${n}`)
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ op: fc.constant('add' as const), key, value: fc.integer() }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('touch' as const), key }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('delete' as const), key }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('replace' as const), key, value: fc.integer() }) },
  { weight: 2, arbitrary: fc.constant({ op: 'shift' as const }) },
  { weight: 1, arbitrary: fc.constant({ op: 'removeOdd' as const }) },
  { weight: 1, arbitrary: fc.constant({ op: 'clear' as const }) },
)

describe('KeyedEvents', () => {
  it('evicts and shifts the oldest value, in the order a model of insertions and touches gives', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.array(op, { maxLength: 300 }), (capacity, ops) => {
        const kept = new KeyedEvents<number>([], capacity)
        // The model: [key, value] pairs, oldest first.
        let model: [string, number][] = []
        const at = (k: string): number => model.findIndex(([m]) => m === k)
        for (const o of ops) {
          switch (o.op) {
            case 'add': {
              // `add` is for a new key, as dedupe and reduce use it.
              if (at(o.key) >= 0) break
              model.push([o.key, o.value])
              const evicted = model.length > capacity ? model.shift()![1] : undefined
              expect(kept.add(o.key, o.value)).toBe(evicted)
              break
            }
            case 'touch': {
              const i = at(o.key)
              const entry = i >= 0 ? model.splice(i, 1)[0]! : undefined
              if (entry !== undefined) model.push(entry)
              expect(kept.touch(o.key)).toBe(entry?.[1])
              break
            }
            case 'delete':
              model = model.filter(([m]) => m !== o.key)
              kept.delete(o.key)
              break
            case 'replace': {
              const i = at(o.key)
              if (i >= 0) model[i] = [o.key, o.value]
              kept.replace(o.key, o.value)
              break
            }
            case 'shift':
              expect(kept.shift()).toBe(model.shift()?.[1])
              break
            case 'removeOdd': {
              const odd = model.filter(([, v]) => v % 2 !== 0).map(([, v]) => v)
              model = model.filter(([, v]) => v % 2 === 0)
              expect(kept.removeIf((v) => v % 2 !== 0)).toEqual(odd)
              break
            }
            case 'clear':
              model = []
              kept.clear()
              break
          }
          expect(kept.size).toBe(model.length)
          expect([...kept.values()]).toEqual(model.map(([, v]) => v))
        }
      }),
      { numRuns: 400 },
    )
  })

  it('evicts in order across many more keys than it keeps (the iterator outlives table rebuilds)', () => {
    const kept = new KeyedEvents<number>([], 100)
    for (let i = 0; i < 100_000; i++) {
      // Every third key touched back: it becomes the most recent and is evicted later.
      if (i % 3 === 0 && i >= 50) kept.touch(`k${i - 50}`)
      const evicted = kept.add(`k${i}`, i)
      if (i >= 100) expect(evicted).toBeDefined()
    }
    expect(kept.size).toBe(100)
    const left = [...kept.values()]
    expect(new Set(left).size).toBe(100)
    // What is left is what a model keeps: the 100 most recently added or touched.
    const model = new Map<string, number>()
    for (let i = 0; i < 100_000; i++) {
      if (i % 3 === 0 && i >= 50 && model.has(`k${i - 50}`)) {
        const v = model.get(`k${i - 50}`)!
        model.delete(`k${i - 50}`)
        model.set(`k${i - 50}`, v)
      }
      model.set(`k${i}`, i)
      if (model.size > 100) model.delete(model.keys().next().value!)
    }
    expect(left).toEqual([...model.values()])
  })
})
