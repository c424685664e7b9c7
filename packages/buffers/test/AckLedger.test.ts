// A unit test of an internal module (src/internal/AckLedger.ts), so it imports it by path: the
// acknowledgement bookkeeping is not part of the package's API.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { AckLedger } from '../src/internal/AckLedger.js'

describe('AckLedger', () => {
  it('advances the prefix over every acknowledgement that closes a gap, in any order', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 1000 }),
        fc.shuffledSubarray(
          Array.from({ length: 40 }, (_, i) => i),
          { minLength: 0, maxLength: 40 },
        ),
        (start, order) => {
          const acks = new AckLedger(start)
          const marked = new Set<number>()
          for (const i of order) {
            const advanced = acks.mark(start + i)
            marked.add(i)
            let below = 0
            while (marked.has(below)) below++
            // The model: the prefix is the first number not marked.
            expect(acks.below).toBe(start + below)
            expect(advanced).toBe(i === 0 || acks.below > start + i)
            expect(acks.aboveCount).toBe([...marked].filter((m) => m > below).length)
            for (let k = 0; k < 40; k++) expect(acks.has(start + k)).toBe(marked.has(k))
          }
        },
      ),
    )
  })

  it('marks a range as the model marks each of its numbers, and says how many were new', () => {
    const op = fc.oneof(
      fc.record({ seq: fc.integer({ min: 0, max: 60 }) }),
      fc.record({ from: fc.integer({ min: 0, max: 60 }), length: fc.integer({ min: 0, max: 20 }) }),
    )
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10 }), fc.array(op, { maxLength: 30 }), (start, ops) => {
        const acks = new AckLedger(start)
        // The model: every number marked (below `start` counts as marked).
        const marked = new Set<number>()
        const isMarked = (seq: number): boolean => seq < start || marked.has(seq)
        for (const o of ops) {
          if ('seq' in o) {
            if (!isMarked(o.seq)) acks.mark(o.seq) // callers mark only what is not acknowledged
            marked.add(o.seq)
          } else {
            const to = o.from + o.length
            let fresh = 0
            for (let seq = o.from; seq < to; seq++) {
              if (!isMarked(seq)) fresh++
              marked.add(seq)
            }
            expect(acks.markRange(o.from, to)).toBe(fresh)
          }
          let below = start
          while (marked.has(below)) below++
          expect(acks.below).toBe(below)
          expect(acks.aboveCount).toBe([...marked].filter((m) => m > below).length)
          for (let k = 0; k < 90; k++) expect(acks.has(k)).toBe(isMarked(k))
        }
      }),
    )
  })

  it('marks a range of twenty million numbers above records in flight at once', () => {
    const acks = new AckLedger(0)
    expect(acks.markRange(2, 20_000_000)).toBe(19_999_998)
    acks.mark(20_000_000)
    expect(acks.aboveCount).toBe(19_999_999)
    expect(acks.has(1)).toBe(false)
    expect(acks.has(19_999_999)).toBe(true)
    acks.mark(1)
    expect(acks.below).toBe(0)
    expect(acks.mark(0)).toBe(true)
    expect(acks.below).toBe(20_000_001)
    expect(acks.aboveCount).toBe(0)
  })

  it('counts the acknowledgements not yet saved', () => {
    const acks = new AckLedger(10)
    for (const seq of [10, 11, 13]) acks.mark(seq)
    expect(acks.unsaved).toBe(2)
    acks.saved(acks.below)
    expect(acks.unsaved).toBe(0)
  })
})
