import { nextWarningAt } from '@ackline/topology'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'

/** The counts warned in a run of `length` occurrences, by walking every count. */
const warnedOf = (length: number): number[] => {
  const warned: number[] = []
  for (let count = 1; count <= length; count++) if (nextWarningAt(count) !== undefined) warned.push(count)
  return warned
}

describe('nextWarningAt', () => {
  it('warns the 1st, 2nd, 4th, … 512th and then every 1024th, and no other', () => {
    expect(warnedOf(5000)).toEqual([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 3072, 4096])
  })

  it('names the next count warned: the double of a power of two below 1024, then the next multiple of 1024', () => {
    expect(nextWarningAt(1)).toBe(2)
    expect(nextWarningAt(2)).toBe(4)
    expect(nextWarningAt(512)).toBe(1024)
    expect(nextWarningAt(1024)).toBe(2048)
    expect(nextWarningAt(2048)).toBe(3072)
    expect(nextWarningAt(3)).toBeUndefined()
    expect(nextWarningAt(1023)).toBeUndefined()
    expect(nextWarningAt(1025)).toBeUndefined()
  })

  it('says again exactly at the count it named: none warned between, that one warned (fast-check prints the seed)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1 << 20 }), (count) => {
        const next = nextWarningAt(count)
        fc.pre(next !== undefined)
        expect(next).toBeGreaterThan(count)
        expect(nextWarningAt(next!)).toBeDefined()
        for (let between = count + 1; between < next!; between++)
          expect(nextWarningAt(between)).toBeUndefined()
      }),
    )
  })

  it('is bounded and never silent for good: of any 1024 counts in a row, at least one warned, and past 512 exactly one', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER - 2048 }), (start) => {
        let warned = 0
        for (let count = start; count < start + 1024; count++)
          if (nextWarningAt(count) !== undefined) warned++
        expect(warned).toBeGreaterThanOrEqual(1)
        if (start > 512) expect(warned).toBe(1)
      }),
    )
  })

  it('throws a RangeError for a count that is not a whole number from 1 (a caller counting wrong)', () => {
    for (const count of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
      expect(() => nextWarningAt(count)).toThrow(RangeError)
    }
  })
})
