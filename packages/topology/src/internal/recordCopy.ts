/**
 * The copy of a record `RecordRetry` keeps before the first send, and sends again on a retry.
 *
 * Invariant: the copy holds the same values as the record, of the same kinds. Only its plain
 * objects and arrays are new; any other value is the record's own: a `Date`, a `Map`, a box, a
 * class instance (values JSON cannot carry, RFC 0010) are not turned into what JSON writes, as
 * `JsonValue.copy` turns them, so a retry's transforms see what the first attempt's saw.
 *
 * @module
 */
import { type JsonObject, JsonValue } from '@ackline/core'

/**
 * A copy of `record` (see the module's invariant). One nested deeper than the stack allows is
 * copied by `JsonValue.copy`, which takes any depth but writes what JSON would (a `Date` in such a
 * record reaches the retries as its ISO string; `JSON.parse` makes such records, and they are JSON,
 * but code may build one level by level); one that cannot be copied at all (a cycle, a getter that throws: not JSON) is `record`
 * itself, as retries sent it before copies were kept.
 */
export function recordCopy(record: JsonObject): JsonObject {
  try {
    return copyOf(record) as JsonObject
  } catch {
    // The stack ran out (a deep record, or a cycle), or a getter threw: JsonValue.copy tells.
  }
  try {
    return JsonValue.copy(record)
  } catch {
    return record
  }
}

/**
 * Whether `value` is a plain object: its prototype the root of its chain, as `Object.prototype` is
 * in every realm (an object made in a vm context is one), or none.
 */
function isPlain(value: object): boolean {
  const prototype: unknown = Object.getPrototypeOf(value)
  return prototype === null || prototype === Object.prototype || Object.getPrototypeOf(prototype) === null
}

function copyOf(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value
  if (Array.isArray(value)) {
    const out = new Array<unknown>(value.length)
    for (let i = 0; i < value.length; i++) out[i] = copyOf(value[i])
    return out
  }
  if (!isPlain(value)) return value
  const out: Record<string, unknown> = Object.getPrototypeOf(value) === null ? Object.create(null) : {}
  // `for…in` without a key array per object; its own members only, as JSON writes.
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue
    const copy = copyOf((value as Record<string, unknown>)[key])
    // Parsed JSON has `__proto__` as an own key; assigned, it would become the copy's prototype.
    if (key === '__proto__')
      Object.defineProperty(out, key, { value: copy, writable: true, enumerable: true, configurable: true })
    else out[key] = copy
  }
  return out
}
