/**
 * Decoding a request body into records: a JSON array of objects (or one object), or NDJSON (one
 * object per line). The content type decides; without a known one the first character does.
 *
 * Invariant: either every record decodes, or none is returned and the failure names where the
 * body broke (position, line and column), so a malformed body never half-enters the pipeline. No
 * body, however deep or large, makes decoding throw: `JSON.parse` is iterative in V8, locating an
 * error is iterative, and nesting past `maxDepth` is refused (`TOO_DEEP`) before anything
 * downstream, which may recurse, sees it. A body with more records than allowed is refused before
 * any is parsed: none of its records is made. (Values nested inside records are not counted: a
 * body of one record holding a million empty objects is parsed, as JSON allows.)
 */
import { type JsonObject, JsonValue } from '@ackline/core'
import { countUpTo, depthExceededAt, locateJsonError, position, scanRecords } from './locateJsonError.js'

/** How the body is laid out. */
export type BodyFormat = 'json' | 'ndjson'

/** Why a body did not decode, with where (offsets in UTF-16 code units of the decoded body). */
export interface ParseFailure {
  readonly ok: false
  readonly code: 'MALFORMED_BODY' | 'TOO_DEEP'
  readonly message: string
  readonly position?: number
  readonly line?: number
  readonly column?: number
  /** The nesting limit, for `TOO_DEEP`. */
  readonly limit?: number
}

/** A body that holds more records than allowed; none of them was parsed. */
export interface TooManyRecords {
  readonly ok: false
  readonly code: 'TOO_MANY_RECORDS'
  /** How many records the body holds (for a malformed body, an estimate). */
  readonly records: number
}

export type ParsedRecords =
  | { readonly ok: true; readonly records: JsonObject[] }
  | ParseFailure
  | TooManyRecords

const NDJSON_TYPES = new Set([
  'application/x-ndjson',
  'application/ndjson',
  'application/jsonl',
  'application/x-jsonlines',
  'application/jsonlines',
])

/** The format a content type names, or `undefined` when it names neither. */
export function formatOf(contentType: string | undefined): BodyFormat | undefined {
  if (contentType === undefined) return undefined
  if (contentType === 'application/json') return 'json' // most requests: no split, trim or lower-casing
  const mime = contentType.split(';', 1)[0]!.trim().toLowerCase()
  if (NDJSON_TYPES.has(mime)) return 'ndjson'
  if (mime === 'application/json' || mime.endsWith('+json')) return 'json'
  return undefined
}

/**
 * The first character that is not JSON whitespace (RFC 8259 2: space, tab, LF, CR). Not `\S`, nor
 * `trim()`: JavaScript's whitespace also takes U+00A0, U+FEFF, U+2028 and more, which JSON does
 * not, so a body (or an NDJSON line) of only those would be taken as blank, not malformed.
 */
const NOT_JSON_WHITESPACE = /[^ \t\n\r]/

/** Whether `body` holds only JSON whitespace from `from` to `to` (a line, or part of one). */
function isBlank(body: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = body.charCodeAt(i)
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return false
  }
  return true
}

const isObject = (value: JsonValue): value is JsonObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * Decodes `body` as `format`, or sniffs the format when it is `undefined`. `maxDepth` bounds the
 * nesting of arrays and objects, the outermost counting as 1 (so a JSON array of flat objects is 2).
 * A body of more than `maxRecords` records is `TOO_MANY_RECORDS`, found before anything is parsed
 * (`JSON.parse` of a 10 MiB body of `{}` lines would make 3.5 million objects first).
 */
export function parseRecords(
  body: string,
  format: BodyFormat | undefined,
  maxDepth: number,
  maxRecords = Number.POSITIVE_INFINITY,
): ParsedRecords {
  const start = body.search(NOT_JSON_WHITESPACE)
  if (start < 0) return { ok: true, records: [] }
  // NDJSON is parsed line by line and stops at the line past `maxRecords` (then only counts the
  // lines left), so it is not searched first, and a malformed line within the limit is found as
  // such. Otherwise every record is an object, so it opens a brace: a body with no more braces than
  // `maxRecords` (any request of ordinary size) is cleared by the native search alone, without
  // the walk; one shorter than `maxRecords` cannot hold that many braces, and is not searched
  // at all. A JSON body that is not an array holds one record at most: it is left to the parse,
  // which refuses a body of several values as malformed. The walk also finds where the body nests
  // too deep, so the body is not walked again after the parse.
  const array = body[start] === '[' && format !== 'ndjson'
  let deepAt: number | undefined
  if (
    (array || format === undefined) &&
    body.length > maxRecords &&
    countUpTo(body, '{', maxRecords) > maxRecords
  ) {
    const scan = scanRecords(body, array ? 1 : 0, maxDepth)
    if (scan.records > maxRecords) return { ok: false, code: 'TOO_MANY_RECORDS', records: scan.records }
    deepAt = scan.deepAt
  }
  if (format === 'json') return parseJson(body, maxDepth, deepAt)
  if (format === 'ndjson') return parseNdjson(body, maxDepth, undefined, maxRecords)
  if (body[start] === '[') return parseJson(body, maxDepth, deepAt)
  // One object spread over several lines is JSON; one object per line is NDJSON. A body too deep
  // as a whole is refused as such: reading it line by line would not make it shallower. So is a
  // body that is JSON, refused for what it holds (a number too large, say): line by line, it would
  // only fail as malformed at its first line.
  const whole = parseJson(body, maxDepth, deepAt)
  if (whole.ok || whole.code === 'TOO_DEEP' || isJson(body)) return whole
  return parseNdjson(body, maxDepth, deepAt, maxRecords)
}

/**
 * Whether `body` is one JSON text; asked only of a body refused as JSON. NDJSON of several lines
 * is not: its parse throws at the second record, having read only the first.
 */
function isJson(body: string): boolean {
  try {
    JSON.parse(body)
    return true
  } catch {
    return false
  }
}

/**
 * Parses one JSON text that starts at `base` in `body` (the whole body, or one NDJSON line);
 * `deepAt` is `depthExceededAt(text, maxDepth)` when a walk already found it.
 */
function parseValue(
  body: string,
  text: string,
  base: number,
  maxDepth: number,
  deepAt?: number,
): { ok: true; value: JsonValue } | ParseFailure {
  let value: JsonValue
  try {
    value = JSON.parse(text) as JsonValue
  } catch {
    const at = locateJsonError(text, maxDepth)
    if (at === undefined) return { ok: false, code: 'MALFORMED_BODY', message: 'malformed JSON' }
    return failure(body, base + at.offset, at.kind === 'depth' ? maxDepth : undefined, at.reason)
  }
  const deep = deepAt ?? depthExceededAt(text, maxDepth)
  if (deep >= 0) return failure(body, base + deep, maxDepth, `nesting deeper than ${maxDepth}`)
  // A number a double cannot hold parsed as Infinity, which would reach the sinks as null.
  const huge = JsonValue.numberOutOfRange(text, value)
  if (huge !== undefined)
    return failure(body, base + huge.offset, undefined, huge.shown, 'a number too large for a double')
  return { ok: true, value }
}

function failure(
  body: string,
  offset: number,
  limit: number | undefined,
  reason: string,
  what = 'malformed JSON',
): ParseFailure {
  const { line, column } = position(body, offset)
  const where = `line ${line}, column ${column} (position ${offset})`
  return limit === undefined
    ? {
        ok: false,
        code: 'MALFORMED_BODY',
        message: `${what} at ${where}: ${reason}`,
        position: offset,
        line,
        column,
      }
    : {
        ok: false,
        code: 'TOO_DEEP',
        message: `arrays and objects nest deeper than ${limit} at ${where}`,
        position: offset,
        line,
        column,
        limit,
      }
}

function parseJson(body: string, maxDepth: number, deepAt: number | undefined): ParsedRecords {
  const parsed = parseValue(body, body, 0, maxDepth, deepAt)
  if (!parsed.ok) return parsed
  const value = parsed.value
  if (isObject(value)) return { ok: true, records: [value] }
  if (!Array.isArray(value))
    return {
      ok: false,
      code: 'MALFORMED_BODY',
      message: 'the body must be a JSON array of objects, or one object',
    }
  for (let i = 0; i < value.length; i++) {
    if (!isObject(value[i]!))
      return { ok: false, code: 'MALFORMED_BODY', message: `element ${i} of the JSON array is not an object` }
  }
  return { ok: true, records: value as JsonObject[] }
}

/** How many lines of `body` from `from` on are not blank (as `parseNdjson` splits them and skips the blank ones). */
function linesNotBlank(body: string, from: number): number {
  let count = 0
  for (let lineStart = from; lineStart <= body.length; ) {
    const newline = body.indexOf('\n', lineStart)
    const lineEnd = newline < 0 ? body.length : newline
    if (!isBlank(body, lineStart, lineEnd)) count++
    lineStart = lineEnd + 1
  }
  return count
}

/**
 * Parses NDJSON line by line, up to `maxRecords` records: at the next line that is not blank it
 * stops, and counts the lines left. `deepAt`, when a walk over the whole body found it, is where
 * nesting first passes `maxDepth`: the lines before it that parse are balanced, so that is in the
 * first line too deep, and no line is walked again.
 */
function parseNdjson(
  body: string,
  maxDepth: number,
  deepAt: number | undefined,
  maxRecords: number,
): ParsedRecords {
  const records: JsonObject[] = []
  let lineStart = 0
  for (let n = 1; lineStart <= body.length; n++) {
    const newline = body.indexOf('\n', lineStart)
    const lineEnd = newline < 0 ? body.length : newline
    const end = lineEnd > lineStart && body.charCodeAt(lineEnd - 1) === 0x0d ? lineEnd - 1 : lineEnd
    const base = lineStart
    lineStart = lineEnd + 1
    // A record's line starts with its brace: found not blank at its first character.
    if (isBlank(body, base, end)) continue
    const line = body.slice(base, end)
    if (records.length === maxRecords)
      return { ok: false, code: 'TOO_MANY_RECORDS', records: maxRecords + linesNotBlank(body, base) }
    const deep = deepAt === undefined ? undefined : deepAt >= base && deepAt < end ? deepAt - base : -1
    const parsed = parseValue(body, line, base, maxDepth, deep)
    if (!parsed.ok) return parsed
    if (!isObject(parsed.value))
      return { ok: false, code: 'MALFORMED_BODY', message: `line ${n} is not a JSON object` }
    records.push(parsed.value)
  }
  return { ok: true, records }
}
