import { cutToBytes } from '@ackline/topology'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'

const bytes = (text: string): number => Buffer.byteLength(text, 'utf8')

describe('cutToBytes', () => {
  it('keeps text that fits, and cuts the rest to the limit with an ellipsis', () => {
    expect(cutToBytes('short', 8)).toBe('short')
    expect(cutToBytes('exactly8', 8)).toBe('exactly8')
    expect(cutToBytes('nine char', 8)).toBe('nine …')
  })

  it('never splits a character: a cut inside one steps back to its start', () => {
    // 'é' is 2 bytes, '😀' 4: a limit of 8 leaves 5 bytes before the '…'.
    expect(cutToBytes('éé😀😀', 8)).toBe('éé…')
    expect(cutToBytes('😀😀😀', 8)).toBe('😀…')
  })

  it('gives at most maxBytes bytes, a beginning of the text, and the text itself when it fits', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary', maxLength: 60 }),
        fc.integer({ min: 4, max: 80 }),
        (text, max) => {
          const cut = cutToBytes(text, max)
          expect(bytes(cut)).toBeLessThanOrEqual(max)
          if (bytes(text) <= max) expect(cut).toBe(text)
          else {
            expect(cut.endsWith('…')).toBe(true)
            expect(text.startsWith(cut.slice(0, -1))).toBe(true)
          }
        },
      ),
    )
  })
})
