/**
 * JSON-compatible values: what an event's fields may hold, so events serialize losslessly to
 * JSON (and to a disk buffer) and copy without surprises.
 *
 * @module
 */

/** A JSON primitive. */
export type JsonPrimitive = string | number | boolean | null

/** Any JSON value. */
export type JsonValue = JsonPrimitive | JsonValue[] | JsonObject

/** A JSON object. */
export interface JsonObject {
  [key: string]: JsonValue
}

/**
 * Companion of {@link JsonValue}.
 *
 * @example
 * ```ts
 * const copy = JsonValue.copy({ a: [1, { b: 2 }] }) // a deep copy
 * ```
 */
export const JsonValue = {
  /** A deep copy of a JSON value. */
  copy<T extends JsonValue>(value: T): T {
    return copyValue(value) as T
  },
} as const

function copyValue(value: JsonValue): JsonValue {
  if (typeof value !== 'object' || value === null) return value
  if (Array.isArray(value)) return value.map(copyValue)
  const out: JsonObject = {}
  for (const key in value) out[key] = copyValue(value[key]!)
  return out
}
