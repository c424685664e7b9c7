/**
 * The JSON text of a value with each object's members in one order: what `dedupe`, `reduce` and
 * `sample` identify a field's value by.
 *
 * Invariant: two values `JSON.stringify` writes as equal JSON (objects compared as sets of
 * members, in whatever order their keys were written) get one text, and unequal ones different
 * texts; where `JSON.stringify` throws (a `BigInt`, a cycle) or writes nothing (a function, a
 * symbol), so does this.
 */
import { isBox } from './boxes.js'

/**
 * `value` as `JSON.stringify` writes it, but with every object's members sorted by key (integer
 * keys first, as an object keeps them whatever the order they were set in). A value holding no
 * object costs one `JSON.stringify`, as before; one holding objects, a second pass.
 *
 * @example
 * ```ts
 * canonicalJson({ b: 2, a: 1 }) === canonicalJson({ a: 1, b: 2 }) // true: '{"a":1,"b":2}'
 * ```
 */
export function canonicalJson(value: unknown): string | undefined {
  const text: string | undefined = JSON.stringify(value)
  // No object in it (a '{' inside a string only costs the second pass). Past the first pass the
  // value holds no cycle, so the second, which makes a new object for each one it meets, ends.
  if (text === undefined || !text.includes('{')) return text
  return JSON.stringify(value, sortedMembers)
}

/**
 * A `JSON.stringify` replacer: each object (after its `toJSON`) as a copy with its keys sorted. A
 * boxed number, string or boolean (untyped code may set one) stays as it is: JSON writes it as
 * its primitive, where a copy of its members would write `{}` (or its characters by index), the
 * text of other values.
 */
function sortedMembers(_key: string, value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value
  if (isBox(value)) return value
  const members = value as Record<string, unknown>
  const keys = Object.keys(members).sort()
  // No prototype: a member named `__proto__` is set as the member it is, not as a prototype.
  const sorted = Object.create(null) as Record<string, unknown>
  for (const key of keys) sorted[key] = members[key]
  return sorted
}
