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
type How = 'data' | 'hidden' | 'symbol' | 'getter'
/** The symbol key of a member held as one (`how: 'symbol'`). */
const SYMBOL = Symbol('member')

/**
 * A record built from `nodes`: containers whose members are leaves or other nodes (sharing,
 * cycles). An object's member may be held by a non-enumerable key, a symbol key or a getter, which
 * the copy leaves out or reads (only the own enumerable string keys are copied, as JSON writes).
 */
function build(
  nodes: { kind: Kind; members: { key: string; ref: number | null; leaf: number; how: How }[] }[],
) {
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
    members.forEach(({ key, ref, leaf, how }, j) => {
      const value = ref === null ? leaves[leaf % leaves.length] : made[ref % made.length]
      if (kind === 'array') (out as unknown as unknown[]).push(value)
      else if (kind === 'sparse') (out as unknown as unknown[])[j * 2 + 1] = value
      else if (how === 'getter')
        Object.defineProperty(out, key, { get: () => value, enumerable: true, configurable: true })
      else
        Object.defineProperty(out, how === 'symbol' ? SYMBOL : key, {
          value,
          writable: true,
          enumerable: how !== 'hidden',
          configurable: true,
        })
    })
  })
  return made[0]!
}

/**
 * Whether `a` and `b` have one shape: containers matched one to one, every other value the same.
 * With `visible`, only `a`'s own enumerable string keys are compared, read as values (a getter's).
 */
function sameShape(a: unknown, b: unknown, pairs: Map<unknown, unknown>, visible = false): boolean {
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
  if (visible) {
    const keys = Object.keys(a)
    // An array's length is its own key too: compared as a length.
    if (Array.isArray(a) && (!Array.isArray(b) || a.length !== b.length)) return false
    const theirs = Reflect.ownKeys(b).filter((k) => k !== 'length' || !Array.isArray(b))
    if (keys.length !== theirs.length || keys.some((k, i) => k !== theirs[i])) return false
    return keys.every((k) => {
      const db = Object.getOwnPropertyDescriptor(b, k)!
      return (
        db.enumerable === true &&
        db.writable === true &&
        sameShape((a as Record<string, unknown>)[k], db.value, pairs, true)
      )
    })
  }
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
      how: fc.constantFrom<How>('data', 'data', 'data', 'hidden', 'symbol', 'getter'),
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
        // The two copies compared, and the shallow one to its record: it holds what JSON would
        // write of it, of the same kinds (a getter's value as data; a hidden or symbol key left out).
        expect(sameShape(shallow, deep, new Map())).toBe(true)
        expect(sameShape(record, shallow, new Map(), true)).toBe(true)
      }),
      { numRuns: 100 },
    )
  })
})
