/**
 * AMQP header tables as JSON: what the source puts under its metadata field.
 *
 * Invariant: total and lossless where JSON can say it: strings, finite numbers, booleans and null
 * are kept, tables and arrays recursed, a Buffer becomes its UTF-8 text, a Date its ISO string, a
 * bigint or anything else its `String(...)`; nothing throws.
 */
import type { JsonObject, JsonValue } from '@ackline/core'

/** The headers of a message as a JSON object. */
export function headersToJson(headers: Record<string, unknown>): JsonObject {
  const out: JsonObject = {}
  for (const [key, value] of Object.entries(headers)) out[key] = toJson(value, 0)
  return out
}

function toJson(value: unknown, depth: number): JsonValue {
  if (value === null || value === undefined) return null
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value
    case 'number':
      return Number.isFinite(value) ? value : String(value)
    case 'object': {
      if (depth > 32) return '[too deep]'
      if (Buffer.isBuffer(value)) return value.toString('utf8')
      if (value instanceof Date) return value.toISOString()
      if (Array.isArray(value)) return value.map((item) => toJson(item, depth + 1))
      const out: JsonObject = {}
      for (const [key, item] of Object.entries(value)) out[key] = toJson(item, depth + 1)
      return out
    }
    default:
      return String(value)
  }
}
