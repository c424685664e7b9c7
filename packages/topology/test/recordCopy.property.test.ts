// The deep copy (a list of its own, for a record deeper than the stack) must make what the
// recursive copy makes, for every shape: the module's invariant is one, whichever path is taken.
// The deep path is forced by holding the generated record under a chain deeper than the stack.

import type { JsonObject } from '@ackline/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { recordCopy } from '../src/internal/recordCopy.js'

type Kind = 'object' | 'bare' | 'array' | 'sparse'
class Box {
  constructor(readonly n: number) {}
}

/** Deeper than the stack lets the recursive copy go (asserted below). */
const DEPTH = 20_000
/** The values shared with the record, one each for every record built. */
const leaves = [1, 'a', null, undefined, true, new Date(0), new Map([[1, 2]]), new Box(3)]

/** A record built from `nodes`: containers whose members are leaves or other nodes (sharing, cycles). */
function build(nodes: { kind: Kind; members: { key: string; ref: number | null; leaf: number }[] }[]) {
  const made = nodes.map(
    ({ kind }): Record<string, unknown> =>
      kind === 'array' || kind === 'sparse'
        ? ([] as unknown as Record<string, unknown>)
        : kind === 'bare'
          ? Object.create(null)
          : {},
  )
  nodes.forEach(({ kind, members }, i) => {
    const out = made[i]!
    members.forEach(({ key, ref, leaf }, j) => {
      const value = ref === null ? leaves[leaf % leaves.length] : made[ref % made.length]
      if (kind === 'array') (out as unknown as unknown[]).push(value)
      else if (kind === 'sparse') (out as unknown as unknown[])[j * 2 + 1] = value
      else Object.defineProperty(out, key, { value, writable: true, enumerable: true, configurable: true })
    })
  })
  return made[0]!
}

/** Whether `a` and `b` have one shape: containers matched one to one, every other value the same. */
function sameShape(a: unknown, b: unknown, pairs: Map<unknown, unknown>): boolean {
  if (
    typeof a !== 'object' ||
    a === null ||
    !(Array.isArray(a) || [null, Object.prototype].includes(Object.getPrototypeOf(a)))
  )
    return a === b
  if (pairs.has(a)) return pairs.get(a) === b
  if (typeof b !== 'object' || b === null) return false
  pairs.set(a, b)
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false
  const keysA = Reflect.ownKeys(a)
  const keysB = Reflect.ownKeys(b)
  if (keysA.length !== keysB.length || keysA.some((k, i) => k !== keysB[i])) return false
  return keysA.every((k) => {
    const da = Object.getOwnPropertyDescriptor(a, k)!
    const db = Object.getOwnPropertyDescriptor(b, k)!
    return (
      da.enumerable === db.enumerable && da.writable === db.writable && sameShape(da.value, db.value, pairs)
    )
  })
}

describe('recordCopy', () => {
  it('copies a record DEPTH levels deep without recursion', () => {
    // A getter at the bottom throws a RangeError at its first read only: had the recursive copy
    // reached it, the copy without recursion would read it again and copy the record; read first
    // by the copy without recursion, it makes the copy the record itself.
    let thrown = false
    const bottom = {
      get x() {
        if (thrown) return 1
        thrown = true
        throw new RangeError('once')
      },
    }
    let chain: Record<string, unknown> = { next: bottom }
    for (let i = 0; i < DEPTH; i++) chain = { next: chain }
    expect(recordCopy(chain as JsonObject) === chain).toBe(true)
  })

  it('copies a record deeper than the stack as it copies a shallow one, for every shape', () => {
    const member = fc.record({
      key: fc.constantFrom('a', 'b', '__proto__', '0', '1', 'keys', 'constructor'),
      ref: fc.option(fc.nat(), { nil: null }),
      leaf: fc.nat(),
    })
    const node = fc.record({
      kind: fc.constantFrom<Kind>('object', 'bare', 'array', 'sparse'),
      members: fc.array(member, { maxLength: 4 }),
    })
    const nodes = fc
      .array(node, { minLength: 1, maxLength: 8 })
      .filter((n) => n[0]!.kind === 'object' || n[0]!.kind === 'bare')
    fc.assert(
      fc.property(nodes, (description) => {
        const record = build(description)
        const shallow = recordCopy(record as JsonObject)
        let chain: Record<string, unknown> = { next: build(description) }
        const bottomOf = (top: unknown): unknown => {
          let at = top as Record<string, unknown>
          for (let i = 0; i < DEPTH; i++) at = at.next as Record<string, unknown>
          return at.next
        }
        const deepRecord = chain
        for (let i = 0; i < DEPTH; i++) chain = { next: chain }
        const deep = bottomOf(recordCopy(chain as JsonObject))
        // The deep record was copied, not re-sent as itself.
        expect(deep === deepRecord.next).toBe(false)
        // The two copies compared, and each to its record: a copy holds the same shape as its record.
        expect(sameShape(shallow, deep, new Map())).toBe(true)
        expect(sameShape(record, shallow, new Map())).toBe(true)
      }),
      { numRuns: 100 },
    )
  })
})
