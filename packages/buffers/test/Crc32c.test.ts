// A unit test of an internal module (src/internal/Crc32c.ts), so it imports it by path: the
// checksum is not part of the package's API.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { Crc32c } from '../src/internal/Crc32c.js'

// Bit-at-a-time CRC-32C: the textbook definition the table-driven one must agree with.
const reference = (bytes: Uint8Array): number => {
  let c = 0xffffffff
  for (const b of bytes) {
    c ^= b
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1
  }
  return ~c >>> 0
}

describe('Crc32c', () => {
  it('matches the published check value for "123456789"', () => {
    expect(Crc32c.of(new TextEncoder().encode('123456789'))).toBe(0xe3069283)
  })

  it('matches the RFC 3720 (iSCSI) test vectors', () => {
    expect(Crc32c.of(new Uint8Array(32))).toBe(0x8a9136aa)
    expect(Crc32c.of(new Uint8Array(32).fill(0xff))).toBe(0x62a8ab43)
    expect(Crc32c.of(Uint8Array.from({ length: 32 }, (_, i) => i))).toBe(0x46dd794e)
    expect(Crc32c.of(Uint8Array.from({ length: 32 }, (_, i) => 31 - i))).toBe(0x113fdb5c)
  })

  it('is 0 for no bytes', () => {
    expect(Crc32c.of(new Uint8Array(0))).toBe(0)
  })

  it('agrees with the bit-at-a-time definition on any bytes and range', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.nat(), fc.nat(), (bytes, a, b) => {
        const start = bytes.length === 0 ? 0 : a % bytes.length
        const end = start + (bytes.length === 0 ? 0 : b % (bytes.length - start + 1))
        expect(Crc32c.of(bytes, start, end)).toBe(reference(bytes.subarray(start, end)))
      }),
    )
  })

  it('agrees on views that start anywhere inside a larger buffer (word-aligned or not)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 300 }), fc.nat(7), (bytes, shift) => {
        const backing = new Uint8Array(bytes.length + shift)
        backing.set(bytes, shift)
        const view = backing.subarray(shift)
        expect(Crc32c.of(view)).toBe(reference(bytes))
      }),
    )
  })

  it('continues over a split: update(update(0, a), b) equals the checksum of a and b together', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 100 }), fc.uint8Array({ maxLength: 100 }), (a, b) => {
        const joined = new Uint8Array([...a, ...b])
        expect(Crc32c.update(Crc32c.of(a), b)).toBe(Crc32c.of(joined))
      }),
    )
  })
})
