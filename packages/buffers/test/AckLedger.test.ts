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

  it('counts the acknowledgements not yet saved, and forgets everything on reset', () => {
    const acks = new AckLedger(10)
    for (const seq of [10, 11, 13]) acks.mark(seq)
    expect(acks.unsaved).toBe(2)
    acks.saved(acks.below)
    expect(acks.unsaved).toBe(0)
    acks.reset(20)
    expect(acks.below).toBe(20)
    expect(acks.aboveCount).toBe(0)
    expect(acks.has(13)).toBe(true)
    expect(acks.has(20)).toBe(false)
  })
})
