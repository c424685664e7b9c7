/** `normalizePercentEncoding`: RFC 3986 6.2.2.1 and 6.2.2.2, and nothing else. */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { normalizePercentEncoding } from '../src/internal/normalizePercentEncoding.js'

/** Paths as a request line carries them: printable ASCII, with percent-encodings of any byte. */
const paths = fc
  .array(
    fc.oneof(
      fc.constantFrom('/', '.', '~', '-', '_', 'a', 'Z', '0', '%', '?', ';', '+'),
      fc.integer({ min: 0, max: 255 }).map((byte) => `%${byte.toString(16).padStart(2, '0')}`),
      fc.integer({ min: 0, max: 255 }).map((byte) => `%${byte.toString(16).padStart(2, '0').toUpperCase()}`),
    ),
    { maxLength: 12 },
  )
  .map((parts) => `/${parts.join('')}`)

describe('normalizePercentEncoding', () => {
  it.each([
    ['/%c3%a9v', '/%C3%A9v'],
    ['/%C3%A9v', '/%C3%A9v'],
    ['/%7Euser/%7euser', '/~user/~user'],
    ['/%65vents', '/events'],
    ['/%41%5a%30%2d%2E%5f', '/AZ0-._'],
    ['/events%2f', '/events%2F'],
    ['/a%3f%3F', '/a%3F%3F'],
    ['/100%', '/100%'],
    ['/%zz%4', '/%zz%4'],
    // A '%' not followed by two hex digits: not RFC 3986, so nothing is decoded (only upper case),
    // since a decoded hex digit could make a new percent-encoding with it ('/%a%62' as '/%ab').
    ['/%%41', '/%%41'],
    ['/%a%62', '/%a%62'],
    ['/%%61a', '/%%61a'],
    ['/%zz%65vents%c3', '/%zz%65vents%C3'],
    ['/%00', '/%00'],
    ['/%2e%2e/%2E', '/../.'],
    ['/%2525', '/%2525'],
    ['/Events', '/Events'],
    ['/x/../events', '/x/../events'],
  ])('writes %s as %s', (path, normalized) => {
    expect(normalizePercentEncoding(path)).toBe(normalized)
  })

  it('gives one spelling whatever the case of the hex digits, decodes to the same text, and is idempotent', () => {
    fc.assert(
      fc.property(paths, (path) => {
        const normalized = normalizePercentEncoding(path)
        expect(normalizePercentEncoding(normalized)).toBe(normalized)
        const lower = path.replace(/%[0-9A-F]{2}/gi, (e) => e.toLowerCase())
        const upper = path.replace(/%[0-9A-F]{2}/gi, (e) => e.toUpperCase())
        expect(normalizePercentEncoding(lower)).toBe(normalized)
        expect(normalizePercentEncoding(upper)).toBe(normalized)
        // Only encodings change: the bytes the path names stay the same.
        expect(unescape(normalized)).toBe(unescape(path))
      }),
      // Found by this property (one run in several): decoded, they made a new percent-encoding.
      { examples: [['/%a%62'], ['/%%61a'], ['/%%36%35']] },
    )
  })
})
