/**
 * `parseRecords` with a limit on records must answer what it answers without one, but for a body
 * over the limit: the walk that counts records before the parse, and finds the depth for it, may
 * change when a body is refused, never what a body within the limit gets. Internal module:
 * imported by path.
 */
import fc from 'fast-check'
import { expect, it } from 'vitest'
import { parseRecords } from '../src/internal/parseRecords.js'

const text = fc.string({
  unit: fc.constantFrom('{', '}', '[', ']', '"', '\\', 'a', ' ', '\n', '\r', '\u2028', 'é', '😀'),
})
const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  v: fc.oneof(
    { depthSize: 'small' },
    fc.constant(null),
    fc.integer(),
    text,
    fc.array(tie('v'), { maxLength: 3 }),
    fc.dictionary(text, tie('v'), { maxKeys: 3 }),
  ),
})).v
const record = fc.dictionary(text, value, { maxKeys: 4 })
const space = fc.constantFrom('', ' ', '\t', '\n', '\r\n', '\n\n', ' \r\n ')
const body = fc.oneof(
  // A JSON array, compact or pretty, with space around it.
  fc
    .tuple(fc.array(record, { maxLength: 12 }), fc.boolean(), space, space)
    .map(
      ([records, pretty, before, after]) =>
        before + JSON.stringify(records, null, pretty ? 2 : undefined) + after,
    ),
  // NDJSON, with \n or \r\n and blank lines.
  fc
    .tuple(fc.array(fc.tuple(record, space), { maxLength: 12 }), fc.constantFrom('\n', '\r\n'))
    .map(([lines, eol]) => lines.map(([r, w]) => JSON.stringify(r) + w).join(eol)),
  // One object over several lines.
  record.map((r) => JSON.stringify(r, null, 2)),
  // Any JSON value.
  value.map((v) => JSON.stringify(v)),
  // Bracket soup.
  fc.string({
    unit: fc.constantFrom('{', '}', '[', ']', '"', '\\', ',', ':', '1', ' ', '\n'),
    maxLength: 60,
  }),
)

it('answers a body within the limit what it answers without a limit, and counts one over it exactly', () => {
  fc.assert(
    fc.property(
      body,
      fc.constantFrom<'json' | 'ndjson' | undefined>('json', 'ndjson', undefined),
      fc.integer({ min: 1, max: 8 }),
      fc.integer({ min: 1, max: 6 }),
      (text, format, max, maxDepth) => {
        const unlimited = parseRecords(text, format, maxDepth)
        const limited = parseRecords(text, format, maxDepth, max)
        if (unlimited.ok && unlimited.records.length > max)
          expect(limited).toEqual({ ok: false, code: 'TOO_MANY_RECORDS', records: unlimited.records.length })
        else if (limited.ok || limited.code !== 'TOO_MANY_RECORDS') expect(limited).toEqual(unlimited)
        // Else a body that does not decode, refused for its count (an estimate) before its syntax.
        else expect(unlimited.ok).toBe(false)
      },
    ),
    { numRuns: 5000 },
  )
})

it('refuses a body of unknown type that is JSON for what it holds, as JSON, not as a malformed first line', () => {
  // Pretty-printed, so line by line it would fail at line 1; JSON as a whole, it holds 1e400.
  expect(parseRecords('{\n  "a": 1,\n  "b": 1e400\n}', undefined, 64)).toEqual({
    ok: false,
    code: 'MALFORMED_BODY',
    message: 'a number too large for a double at line 3, column 8 (position 19): 1e400',
    position: 19,
    line: 3,
    column: 8,
  })
  expect(parseRecords('"hi"', undefined, 64)).toMatchObject({
    message: 'the body must be a JSON array of objects, or one object',
  })
  // NDJSON of unknown type is still read line by line.
  expect(parseRecords('{"a":1}\n{"b":1e400}', undefined, 64)).toMatchObject({ line: 2, column: 6 })
})

it('takes only JSON whitespace (space, tab, LF, CR) for blank: a body or NDJSON line of other blanks is malformed', () => {
  // JavaScript's \S and trim() also take U+00A0, U+FEFF, U+2028, U+3000...: a body of only those
  // was answered 200 with no events, and such a line between NDJSON records was skipped.
  for (const blank of ['\u00a0', ' \ufeff ', '\u2028', '\u3000\t', '\r\n\u00a0\r\n'])
    for (const format of ['json', 'ndjson', undefined] as const)
      expect(parseRecords(blank, format, 64)).toMatchObject({ ok: false, code: 'MALFORMED_BODY' })
  expect(parseRecords('{"a":1}\n\u00a0\n{"b":2}', 'ndjson', 64)).toMatchObject({
    ok: false,
    code: 'MALFORMED_BODY',
    line: 2,
    column: 1,
  })
  expect(parseRecords('{"a":1}\n\u00a0\n{"b":2}', undefined, 64)).toMatchObject({ ok: false, line: 2 })
  // Past the limit, such a line counts as a record, as the parse would refuse it rather than skip it.
  expect(parseRecords('{"a":1}\n\ufeff\n{"b":2}', 'ndjson', 64, 1)).toEqual({
    ok: false,
    code: 'TOO_MANY_RECORDS',
    records: 3,
  })
  // JSON whitespace is still nothing: no records, and blank lines between records are skipped.
  expect(parseRecords(' \t\r\n ', undefined, 64)).toEqual({ ok: true, records: [] })
  expect(parseRecords('{"a":1}\n \t\r\n\n{"b":2}\n', 'ndjson', 64)).toEqual({
    ok: true,
    records: [{ a: 1 }, { b: 2 }],
  })
})
