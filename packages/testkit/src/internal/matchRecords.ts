// One-for-one matching of records, as the suites compare what was sent with what was stored,
// handed out or acknowledged: a multiset, so two equal records need two matches, and records are
// equal when deeply equal as the JSON they serialise to: the order of their keys does not count,
// nor what JSON cannot tell apart (an object's prototype, -0 and 0, a key whose value is
// undefined, a hole or undefined in an array and null); a value with a `toJSON` (a Date) is what
// that gives (its ISO string), and a boxed number, string or boolean the primitive it holds.
import type { JsonObject } from '@ackline/core'

/**
 * Whether `a` and `b` serialise to the same JSON value (NaN aside, which matches NaN). Not
 * `isDeepStrictEqual`, which also compares prototypes and tells -0 from 0: a store whose driver
 * reads rows back as null-prototype objects, or that keeps JSON text (-0 written as 0), holds the
 * same records, and a correct component failed on them. Nor own keys alone: a value with a
 * `toJSON` method is compared as what it returns, as `JSON.stringify` writes it, so a `Date`
 * is its ISO string (it matches that string, and no longer matches `{}`, whose own keys it
 * shares: none), and a boxed number, string or boolean is the primitive it holds. A `toJSON`
 * that throws makes its value match only itself, and so does a value holding a cycle
 * (`JSON.stringify` throws on both).
 *
 * @example
 * ```ts
 * sameJsonValue({ a: 1, b: [0] }, { b: [-0], a: 1 }) // true
 * sameJsonValue(new Date(0), '1970-01-01T00:00:00.000Z') // true
 * sameJsonValue(new Date(0), {}) // false
 * ```
 */
export function sameJsonValue(a: unknown, b: unknown): boolean {
  return sameJson(a, b, '', [])
}

/**
 * {@link sameJsonValue} of the values at `key` (the key `toJSON` is given, as `JSON.stringify`
 * does); `within` holds the objects of `a`'s side being compared around it, to find a cycle.
 */
function sameJson(a: unknown, b: unknown, key: string, within: unknown[]): boolean {
  // NaN is not a JSON value, but a record holding it is the same record as itself (NaN !== NaN).
  if (a === b || (Number.isNaN(a) && Number.isNaN(b))) return true
  let x: unknown
  let y: unknown
  try {
    x = toJson(a, key)
    y = toJson(b, key)
  } catch {
    return false // JSON.stringify would throw: no JSON value, so only the same value matches
  }
  return sameSerialised(x, y, within)
}

/**
 * What `JSON.stringify` serialises in place of `value`: what its `toJSON(key)` returns, if it has
 * one, and a boxed number, string or boolean as the primitive it holds (an object with no own
 * keys, `new Number(1)` matched `new Number(2)`).
 */
function toJson(value: unknown, key: string): unknown {
  if (typeof value !== 'object' || value === null) return value
  const toJSON = (value as { toJSON?: unknown }).toJSON
  return unboxed(typeof toJSON === 'function' ? (toJSON as (key: string) => unknown).call(value, key) : value)
}

/**
 * The primitive a `Number`, `String` or `Boolean` object holds, as `JSON.stringify` writes it
 * (by its internal slot, so one of another realm too); any other value as it is.
 */
export function unboxed(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value
  for (const unbox of UNBOXERS) {
    try {
      return unbox.call(value)
    } catch {
      // Not of this type: its valueOf throws a TypeError.
    }
  }
  return value
}

const UNBOXERS: readonly ((this: unknown) => unknown)[] = [
  Number.prototype.valueOf,
  String.prototype.valueOf,
  Boolean.prototype.valueOf,
]

/** Compares two values already past their `toJSON`; their members are compared by {@link sameJson}. */
function sameSerialised(a: unknown, b: unknown, within: unknown[]): boolean {
  if (a === b || (Number.isNaN(a) && Number.isNaN(b))) return true
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false
  // A cycle: no JSON value (JSON.stringify throws), and `a` is not `b`. Walked on, both sides of
  // the same shape never ended (a stack overflow). Only `a`'s side is watched: a cycle in `b`
  // alone ends where `a` does.
  if (within.includes(a)) return false
  within.push(a)
  try {
    return sameMembers(a, b, within)
  } finally {
    within.pop()
  }
}

/** Compares the members of two objects (arrays, or not) by {@link sameJson}. */
function sameMembers(a: object, b: object, within: unknown[]): boolean {
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false
    // Index by index, not every(), which skips holes: [, 'b'] is [null, "b"] in JSON, not ['a', 'b'].
    for (let i = 0; i < a.length; i++)
      if (!sameJson(a[i] ?? null, b[i] ?? null, String(i), within)) return false
    return true
  }
  const x = a as Record<string, unknown>
  const y = b as Record<string, unknown>
  const keys = Object.keys(x).filter((key) => x[key] !== undefined)
  if (keys.length !== Object.keys(y).filter((key) => y[key] !== undefined).length) return false
  return keys.every((key) => Object.hasOwn(y, key) && sameJson(x[key], y[key], key, within))
}

/** What pairing each record of `wanted` with one deeply equal record of `pool` at most leaves. */
export interface RecordMatch {
  /** The records of `wanted` that found a match, in order. */
  readonly matched: JsonObject[]
  /** The records of `wanted` that found none, in order. */
  readonly unmatched: JsonObject[]
  /** The records of `pool` that no record of `wanted` took, in order. */
  readonly left: JsonObject[]
}

/** Pairs each record of `wanted` with one record of `pool` of the same JSON value, each used once at most. */
export function matchRecords(wanted: readonly JsonObject[], pool: readonly JsonObject[]): RecordMatch {
  const left = [...pool]
  const matched: JsonObject[] = []
  const unmatched: JsonObject[] = []
  for (const record of wanted) {
    const at = left.findIndex((candidate) => sameJsonValue(candidate, record))
    if (at < 0) unmatched.push(record)
    else {
      left.splice(at, 1)
      matched.push(record)
    }
  }
  return { matched, unmatched, left }
}
