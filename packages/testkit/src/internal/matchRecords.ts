// One-for-one matching of records, as the suites compare what was sent with what was stored,
// handed out or acknowledged: a multiset, so two equal records need two matches, and records are
// equal when deeply equal as JSON values: the order of their keys does not count, nor what JSON
// cannot tell apart (an object's prototype, -0 and 0, a key whose value is undefined, a hole or
// undefined in an array and null).
import type { JsonObject } from '@ackline/core'

/**
 * Whether `a` and `b` are the same JSON value. Not `isDeepStrictEqual`, which also compares
 * prototypes and tells -0 from 0: a store whose driver reads rows back as null-prototype objects,
 * or that keeps JSON text (-0 written as 0), holds the same records, and a correct component
 * failed on them.
 */
export function sameJsonValue(a: unknown, b: unknown): boolean {
  // NaN is not a JSON value, but a record holding it is the same record as itself (NaN !== NaN).
  if (a === b || (Number.isNaN(a) && Number.isNaN(b))) return true
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false
    // Index by index, not every(), which skips holes: [, 'b'] is [null, "b"] in JSON, not ['a', 'b'].
    for (let i = 0; i < a.length; i++) if (!sameJsonValue(a[i] ?? null, b[i] ?? null)) return false
    return true
  }
  const x = a as Record<string, unknown>
  const y = b as Record<string, unknown>
  const keys = Object.keys(x).filter((key) => x[key] !== undefined)
  if (keys.length !== Object.keys(y).filter((key) => y[key] !== undefined).length) return false
  return keys.every((key) => Object.hasOwn(y, key) && sameJsonValue(x[key], y[key]))
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
