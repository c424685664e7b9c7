/** `firstInvalidUtf8` must agree with the platform's strict UTF-8 check on any bytes. */
import { isUtf8 } from 'node:buffer'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { decodeUtf8, firstInvalidUtf8 } from '../src/internal/decodeUtf8.js'

describe('decodeUtf8', () => {
  it('finds an invalid sequence exactly when the platform says the bytes are not UTF-8', () => {
    const bytes = fc.oneof(
      fc.uint8Array({ maxLength: 12 }),
      fc.string({ unit: 'grapheme' }).map((s) => new Uint8Array(Buffer.from(s))),
      fc
        .tuple(fc.string({ unit: 'grapheme' }), fc.uint8Array({ minLength: 1, maxLength: 3 }))
        .map(([s, tail]) => new Uint8Array(Buffer.concat([Buffer.from(s), tail]))),
    )
    fc.assert(
      fc.property(bytes, (b) => {
        const at = firstInvalidUtf8(b)
        expect(at === b.length).toBe(isUtf8(b))
        // Everything before the offset is valid on its own.
        expect(isUtf8(b.subarray(0, at))).toBe(true)
      }),
      { numRuns: 1000 },
    )
  })

  it('skips a byte order mark and counts it in the offset', () => {
    expect(decodeUtf8(Buffer.from([0xef, 0xbb, 0xbf, 0x41]), false)).toEqual({ ok: true, text: 'A' })
    expect(decodeUtf8(Buffer.from([0xef, 0xbb, 0xbf, 0x41, 0xff]), false)).toEqual({
      ok: false,
      byteOffset: 4,
    })
    expect(decodeUtf8(Buffer.from([0x41, 0xff]), true)).toEqual({ ok: true, text: 'A\uFFFD' })
  })
})
