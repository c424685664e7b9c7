/**
 * AMQP header tables as JSON: what the source puts under its metadata field.
 *
 * Invariant: total and lossless where JSON can say it: strings, finite numbers, booleans and null
 * are kept, tables and arrays recursed, a Buffer becomes its UTF-8 text, a Date its ISO string, a
 * bigint or anything else its `String(...)`; nothing throws. A header named `__proto__` holding a
 * table, an array or void, which amqplib's decoding (by assignment) made the prototype of its
 * table, is an own field again, first (one holding anything else amqplib drops).
 */
import type { JsonObject, JsonValue } from '@ackline/core'

/** The headers of a message as a JSON object. */
export function headersToJson(headers: Record<string, unknown>): JsonObject {
  return tableToJson(headers, 0)
}

/**
 * The value of header `name` as amqplib decoded it: its own, never one read through the table's
 * prototype, which a header named `__proto__` holding a table replaced (so its keys read as
 * headers of the message: `x-delivery-count`, say).
 */
export function ownHeader(headers: Record<string, unknown> | undefined, name: string): unknown {
  return headers !== undefined && Object.hasOwn(headers, name) ? headers[name] : undefined
}

function tableToJson(table: object, depth: number): JsonObject {
  const out: JsonObject = {}
  const prototype: unknown = Object.getPrototypeOf(table)
  if (prototype !== Object.prototype) {
    // Defined, not assigned: the assignment would set the prototype of `out` in turn.
    Object.defineProperty(out, '__proto__', {
      value: toJson(prototype, depth),
      writable: true,
      enumerable: true,
      configurable: true,
    })
  }
  for (const [key, value] of Object.entries(table)) out[key] = toJson(value, depth)
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
      // A Buffer, not a table whose '__proto__' header held bytes (its prototype a Buffer, so
      // Buffer.isBuffer holds): only a real one has the bytes toString reads.
      if (ArrayBuffer.isView(value) && Buffer.isBuffer(value)) return value.toString('utf8')
      if (value instanceof Date) return value.toISOString()
      if (Array.isArray(value)) return value.map((item) => toJson(item, depth + 1))
      return tableToJson(value, depth + 1)
    }
    default:
      return String(value)
  }
}
