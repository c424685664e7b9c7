// One-for-one matching of records, as the suites compare what was sent with what was stored,
// handed out or acknowledged: a multiset, so two equal records need two matches, and records are
// equal when deeply equal (as JSON values: the order of their keys does not count).
import { isDeepStrictEqual } from 'node:util'
import type { JsonObject } from '@ackline/core'

/** What pairing each record of `wanted` with one deeply equal record of `pool` at most leaves. */
export interface RecordMatch {
  /** The records of `wanted` that found a match, in order. */
  readonly matched: JsonObject[]
  /** The records of `wanted` that found none, in order. */
  readonly unmatched: JsonObject[]
  /** The records of `pool` that no record of `wanted` took, in order. */
  readonly left: JsonObject[]
}

/** Pairs each record of `wanted` with one deeply equal record of `pool`, each used once at most. */
export function matchRecords(wanted: readonly JsonObject[], pool: readonly JsonObject[]): RecordMatch {
  const left = [...pool]
  const matched: JsonObject[] = []
  const unmatched: JsonObject[] = []
  for (const record of wanted) {
    const at = left.findIndex((candidate) => isDeepStrictEqual(candidate, record))
    if (at < 0) unmatched.push(record)
    else {
      left.splice(at, 1)
      matched.push(record)
    }
  }
  return { matched, unmatched, left }
}
