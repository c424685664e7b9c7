/**
 * Decoding a request body into records: a JSON array of objects (or one object), or NDJSON (one
 * object per line). The content type decides; without a known one the first character does.
 *
 * Invariant: either every record decodes, or none is returned and the error names where the body
 * broke (line and column), so a malformed body never half-enters the pipeline.
 */
import type { JsonObject, JsonValue } from '@ackline/core'
import { locateJsonError } from './locateJsonError.js'

/** How the body is laid out. */
export type BodyFormat = 'json' | 'ndjson'

export type ParsedRecords =
  | { readonly ok: true; readonly records: JsonObject[] }
  | { readonly ok: false; readonly message: string }

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
  const mime = contentType.split(';', 1)[0]!.trim().toLowerCase()
  if (NDJSON_TYPES.has(mime)) return 'ndjson'
  if (mime === 'application/json' || mime.endsWith('+json')) return 'json'
  return undefined
}

const isObject = (value: JsonValue): value is JsonObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

/** Decodes `body` as `format`, or sniffs the format when it is `undefined`. */
export function parseRecords(body: string, format: BodyFormat | undefined): ParsedRecords {
  const start = body.search(/\S/)
  if (start < 0) return { ok: true, records: [] }
  if (format === 'json') return parseJson(body)
  if (format === 'ndjson') return parseNdjson(body)
  if (body[start] === '[') return parseJson(body)
  // One object spread over several lines is JSON; one object per line is NDJSON.
  const whole = parseJson(body)
  return whole.ok ? whole : parseNdjson(body)
}

function parseJson(body: string): ParsedRecords {
  let value: JsonValue
  try {
    value = JSON.parse(body) as JsonValue
  } catch {
    const at = locateJsonError(body)
    return {
      ok: false,
      message:
        at === undefined
          ? 'malformed JSON'
          : `malformed JSON at line ${at.line}, column ${at.column} (position ${at.offset}): ${at.reason}`,
    }
  }
  if (isObject(value)) return { ok: true, records: [value] }
  if (!Array.isArray(value))
    return { ok: false, message: 'the body must be a JSON array of objects, or one object' }
  for (let i = 0; i < value.length; i++) {
    if (!isObject(value[i]!)) return { ok: false, message: `element ${i} of the JSON array is not an object` }
  }
  return { ok: true, records: value as JsonObject[] }
}

function parseNdjson(body: string): ParsedRecords {
  const records: JsonObject[] = []
  const lines = body.split('\n')
  for (let n = 0; n < lines.length; n++) {
    const line = lines[n]!.endsWith('\r') ? lines[n]!.slice(0, -1) : lines[n]!
    if (line.trim() === '') continue
    let value: JsonValue
    try {
      value = JSON.parse(line) as JsonValue
    } catch {
      const at = locateJsonError(line)
      const where = at === undefined ? '' : `, column ${at.column}: ${at.reason}`
      return { ok: false, message: `malformed JSON on line ${n + 1}${where}` }
    }
    if (!isObject(value)) return { ok: false, message: `line ${n + 1} is not a JSON object` }
    records.push(value)
  }
  return { ok: true, records }
}
