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
  /** A deep copy of a JSON value; an own `__proto__` key is copied as data, as JSON.parse made it. */
  copy<T extends JsonValue>(value: T): T {
    return copyValue(value) as T
  },
} as const

function copyValue(value: JsonValue): JsonValue {
  if (typeof value !== 'object' || value === null) return value
  if (Array.isArray(value)) return value.map(copyValue)
  const out: JsonObject = {}
  for (const key in value) {
    // Parsed JSON has `__proto__` as an own key; assigned, it would become the copy's prototype
    // (the field lost, its members showing through). Defined, it stays the data it is.
    if (key === '__proto__') {
      Object.defineProperty(out, key, {
        value: copyValue(value[key]!),
        writable: true,
        enumerable: true,
        configurable: true,
      })
    } else out[key] = copyValue(value[key]!)
  }
  return out
}
