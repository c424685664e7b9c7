/**
 * The copy of a record `RecordRetry` keeps before the first send, and sends again on a retry.
 *
 * Invariant: the copy holds the same values as the record, of the same kinds, in the same shape.
 * Only its plain objects and arrays are new, each made once: one the record holds at two places
 * (or inside itself, a cycle) is one copy held at the same places. Any other value is the record's
 * own: a `Date`, a `Map`, a box, a class instance (values JSON cannot carry, RFC 0010) are not
 * turned into what JSON writes, as `JsonValue.copy` turns them, so a retry's transforms see what
 * the first attempt's saw. A container's own enumerable string keys are copied, as JSON writes
 * them: a symbol key or a non-enumerable one is not in the copy, and a getter's value is copied
 * as data. An array's holes stay holes.
 *
 * @module
 */
import type { JsonObject } from '@ackline/core'

/**
 * A copy of `record` (see the module's invariant), of any depth and shape: one nested deeper than
 * the stack allows (`JSON.parse` makes such records, and code may build one level by level) is
 * copied without recursion. One that cannot be copied at all (a getter that throws) is `record`
 * itself, as retries sent it before copies were kept.
 */
export function recordCopy(record: JsonObject): JsonObject {
  try {
    return copyOf(record, new Map()) as JsonObject
  } catch (error) {
    // Only a RangeError says the stack ran out: any other is a getter that threw.
    if (!(error instanceof RangeError)) return record
  }
  try {
    return copyDeep(record) as JsonObject
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

/** Whether `value` is copied (a plain object or an array), not shared with the record. */
const isContainer = (value: unknown): value is object =>
  typeof value === 'object' && value !== null && (Array.isArray(value) || isPlain(value))

/** An empty container of `value`'s kind: an array, an object with or without a prototype. */
const emptyOf = (value: object): Record<string | number, unknown> =>
  Array.isArray(value)
    ? (new Array<unknown>(value.length) as unknown as Record<number, unknown>)
    : Object.getPrototypeOf(value) === null
      ? Object.create(null)
      : {}

/** Sets `out[key]`; parsed JSON has `__proto__` as an own key, which assigned would become the copy's prototype. */
function put(out: Record<string | number, unknown>, key: string | number, value: unknown): void {
  if (key === '__proto__')
    Object.defineProperty(out, key, { value, writable: true, enumerable: true, configurable: true })
  else out[key] = value
}

/** The copy of `value`, `copies` mapping each container copied so far to its copy. */
function copyOf(value: unknown, copies: Map<object, unknown>): unknown {
  if (!isContainer(value)) return value
  const known = copies.get(value)
  if (known !== undefined) return known
  const out = emptyOf(value)
  // Known before its members are copied, so a member that holds it again (a cycle) finds it.
  copies.set(value, out)
  if (Array.isArray(value)) {
    // A hole stays a hole (`new Array` made them all), not an own `undefined`: `forEach`, `in` and
    // `Object.keys` tell them apart, so a retry's transforms would see another array.
    for (let i = 0; i < value.length; i++) if (Object.hasOwn(value, i)) out[i] = copyOf(value[i], copies)
    return out
  }
  // `for…in` without a key array per object; its own members only, as JSON writes.
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue
    put(out, key, copyOf((value as Record<string, unknown>)[key], copies))
  }
  return out
}

/** What {@link copyOf} makes, with a list of its own instead of the call stack. */
function copyDeep(record: object): unknown {
  const copies = new Map<object, Record<string | number, unknown>>()
  const root = emptyOf(record)
  copies.set(record, root)
  // Containers whose copy is made but not yet filled: each is filled once, from here.
  const unfilled: object[] = [record]
  /** What a member `value` is in its container's copy: a container's copy is made here, filled later. */
  const memberOf = (value: unknown): unknown => {
    if (!isContainer(value)) return value
    let copy = copies.get(value)
    if (copy === undefined) {
      copy = emptyOf(value)
      copies.set(value, copy)
      unfilled.push(value)
    }
    return copy
  }
  while (unfilled.length > 0) {
    const source = unfilled.pop()!
    const out = copies.get(source)!
    // An array by its indices, as `copyOf` reads it: its `keys()` may be an own key or a subclass's.
    if (Array.isArray(source)) {
      for (let i = 0; i < source.length; i++) if (Object.hasOwn(source, i)) out[i] = memberOf(source[i])
    } else
      for (const key of Object.keys(source)) put(out, key, memberOf((source as Record<string, unknown>)[key]))
  }
  return root
}
