// The in-memory channel on its own: order, reuse of its queue, its bound, blocked producers and a
// forced stop. Counts and orders, never times.
import { EventArray } from '@ackline/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { EMPTY } from '../src/internal/MemoryChannel.js'
import { blockingChannel as channel } from './support/blockingChannel.js'

/** An array of `n` events whose fields number them from `first`. */
const numbered = (first: number, n: number): EventArray =>
  EventArray.fromRecords(Array.from({ length: n }, (_, i) => ({ n: first + i })))

const numbers = (array: EventArray): number[] => array.events.map((e) => e.fields.n as number)

describe('MemoryChannel', () => {
  it('hands out every event once, in order, through pushes, pulls, coalescing and drains (property)', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('push' as const), size: fc.integer({ min: 1, max: 5 }) }),
      fc.record({ kind: fc.constant('pull' as const) }),
      fc.record({ kind: fc.constant('coalesce' as const), upTo: fc.integer({ min: 1, max: 12 }) }),
    )
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
        const c = channel(1_000_000)
        let next = 0
        const out: number[] = []
        const take = (coalesceUpTo?: number): void => {
          const first = c.tryPull()
          if (first === EMPTY || first === undefined) return
          const array = coalesceUpTo === undefined ? first : c.coalesce(first, coalesceUpTo)
          out.push(...numbers(array))
          array.end('delivered')
        }
        for (const o of ops) {
          if (o.kind === 'push') {
            void c.push(numbered(next, o.size))
            next += o.size
          } else take(o.kind === 'coalesce' ? o.upTo : undefined)
        }
        for (;;) {
          const before = out.length
          take()
          if (out.length === before) break
        }
        expect(out).toEqual(Array.from({ length: next }, (_, i) => i))
        expect(c.queuedEvents).toBe(0)
      }),
    )
  })

  it('reuses its queue after each drain, and lets a burst that grew it go', () => {
    const c = channel(1_000_000)
    for (let i = 0; i < 1000; i++) {
      void c.push(numbered(i, 1))
      ;(c.tryPull() as EventArray).end('delivered')
    }
    expect(c.slots).toBe(1) // one slot, used again for every array
    for (let i = 0; i < 2000; i++) void c.push(numbered(i, 1))
    expect(c.slots).toBe(2000)
    for (let i = 0; i < 2000; i++) (c.tryPull() as EventArray).end('delivered')
    expect(c.slots).toBe(0)
  })

  it('keeps its queue bounded under a steady backlog that never drains', () => {
    const c = channel(1_000_000)
    let pushed = 0
    let taken = 0
    for (let i = 0; i < 100; i++) void c.push(numbered(pushed++, 1)) // the backlog
    for (let i = 0; i < 20_000; i++) {
      void c.push(numbered(pushed++, 1))
      const array = c.tryPull() as EventArray
      expect(numbers(array)).toEqual([taken++])
      array.end('delivered')
    }
    expect(c.queuedEvents).toBe(100)
    expect(c.slots).toBeLessThan(2 * 1024 + 200)
  })

  it('admits blocked producers in order as room frees, and a forced stop settles what is left', async () => {
    const c = channel(2)
    const admitted: number[] = []
    void c.push(numbered(0, 2))
    const waits = [2, 3, 4].map((n) => c.push(numbered(n, 1)).then(() => admitted.push(n)))
    ;(c.tryPull() as EventArray).end('delivered') // room for two
    await Promise.resolve()
    expect(admitted).toEqual([2, 3])
    const next = c.tryPull() as EventArray
    expect(numbers(next)).toEqual([2])
    next.end('delivered')
    await Promise.all(waits.slice(0, 2))
    expect(c.queuedEvents).toBe(2) // 3 and 4
    expect(c.force('errored')).toBe(2)
    await waits[2]
    expect(admitted).toEqual([2, 3, 4])
    expect(c.tryPull()).toBeUndefined() // closed and empty
  })
})
