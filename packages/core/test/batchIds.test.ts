// Tests an internal module (core/src/internal/batchIds.ts): ids are written by hand from a byte
// table, so their layout is checked here against the uuid library's own UUID v7 writer.
import fc from 'fast-check'
import { v7 as uuidv7, validate, version } from 'uuid'
import { describe, expect, it } from 'vitest'
import { _forTests, idOf } from '../src/internal/batchIds.js'

describe('batch ids (internal)', () => {
  it('are the UUID v7 the uuid library writes for the same millisecond, counter and random bytes', () => {
    const epoch = _forTests.epochMs // stamps keep their millisecond relative to it
    fc.assert(
      fc.property(
        fc.integer({ min: -epoch, max: 2 ** 48 - 1 - epoch }),
        fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
        (ms, seq) => {
          const id = idOf(ms, seq)
          expect(validate(id)).toBe(true)
          expect(version(id)).toBe(7)
          expect(id).toBe(uuidv7({ msecs: ms + epoch, seq, random: _forTests.random }))
        },
      ),
      { numRuns: 2000 },
    )
  })
})
