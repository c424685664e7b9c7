/**
 * `locateJsonError` must agree with `JSON.parse` on what is valid, at any depth, without
 * recursion. Internal module: imported by path, as no package export names it.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { depthExceededAt, locateJsonError, scanRecords } from '../src/internal/locateJsonError.js'

const parses = (text: string): boolean => {
  try {
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

describe('locateJsonError', () => {
  it('finds no error exactly where JSON.parse succeeds', () => {
    const texts = fc.oneof(
      fc.json(),
      fc.string({ unit: fc.constantFrom('[', ']', '{', '}', '"', ':', ',', '1', 'a', ' ', '\\', 'e', '-') }),
      fc.json().chain((j) => fc.nat(j.length).map((cut) => j.slice(0, cut))),
    )
    fc.assert(
      fc.property(texts, (text) => {
        expect(locateJsonError(text) === undefined).toBe(parses(text))
      }),
      { numRuns: 500 },
    )
  })

  it('locates an error a million levels deep without overflowing the stack', () => {
    const text = `${'['.repeat(1_000_000)}x`
    expect(locateJsonError(text)).toMatchObject({ kind: 'syntax', offset: 1_000_000, line: 1 })
  })

  it('reports the first container past maxDepth, or the syntax error if it comes first', () => {
    expect(locateJsonError('[[[[', 3)).toMatchObject({ kind: 'depth', offset: 3, column: 4 })
    expect(locateJsonError('[{"a":[', 3)).toMatchObject({ kind: 'syntax', offset: 7 })
    expect(locateJsonError('[x[[[', 3)).toMatchObject({ kind: 'syntax', offset: 1 })
  })

  it('names line and column across newlines', () => {
    expect(locateJsonError('[1,\n 2,\n  }')).toMatchObject({ offset: 10, line: 3, column: 3 })
  })
})

describe('depthExceededAt', () => {
  it('counts brackets outside strings only', () => {
    expect(depthExceededAt('[{"a":"[[[[\\"[["}]', 2)).toBe(-1)
    expect(depthExceededAt('[{"a":[1]}]', 2)).toBe(6)
    expect(depthExceededAt('{"a":{"b":{}}}', 3)).toBe(-1)
  })

  it('finds the container just past the limit, with as many brackets opening as the limit allows or one more', () => {
    // At most maxDepth brackets that open clear the text without the walk; one more needs the walk.
    expect(depthExceededAt('[{"a":[{}]}]', 4)).toBe(-1)
    expect(depthExceededAt('[{"a":[{}]}]', 3)).toBe(7)
    expect(depthExceededAt('[[[[{}]]]]', 4)).toBe(4)
    expect(depthExceededAt('[{},{},{},{"a":{}}]', 3)).toBe(-1)
    expect(depthExceededAt('[{},{},{},{"a":{"b":[]}}]', 3)).toBe(20)
  })

  it('agrees with the walk on valid JSON', () => {
    fc.assert(
      fc.property(fc.json({ depthSize: 'large' }), fc.integer({ min: 1, max: 6 }), (text, limit) => {
        const at = locateJsonError(text, limit)
        expect(depthExceededAt(text, limit)).toBe(at === undefined ? -1 : at.offset)
      }),
      { numRuns: 300 },
    )
  })
})

describe('scanRecords', () => {
  // Objects whose strings hold braces, brackets, quotes and backslashes, nested objects and arrays.
  const record = fc.dictionary(
    fc.string({ unit: fc.constantFrom('{', '}', '[', ']', '"', '\\', 'a', ' ') }),
    fc.jsonValue({ maxDepth: 4 }),
  )
  const records = (text: string, level: number): number => scanRecords(text, level, 64).records

  it('counts the elements of a JSON array of objects, and the lines of NDJSON', () => {
    fc.assert(
      fc.property(fc.array(record, { maxLength: 20 }), (list) => {
        expect(records(JSON.stringify(list), 1)).toBe(list.length)
        expect(records(JSON.stringify(list, null, 2), 1)).toBe(list.length)
        expect(records(list.map((r) => JSON.stringify(r)).join('\n'), 0)).toBe(list.length)
      }),
    )
  })

  it('counts one object spread over several lines as one', () => {
    fc.assert(
      fc.property(record, (r) => {
        expect(records(JSON.stringify(r, null, 2), 0)).toBe(1)
      }),
    )
  })

  it('finds where nesting passes maxDepth exactly where depthExceededAt does, on any text', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.json({ depthSize: 'large' }),
          fc.string({ unit: fc.constantFrom('{', '}', '[', ']', '"', '\\', 'a', ',', ':') }),
        ),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 0, max: 2 }),
        (text, limit, level) => {
          expect(scanRecords(text, level, limit).deepAt).toBe(depthExceededAt(text, limit))
        },
      ),
    )
  })
})
