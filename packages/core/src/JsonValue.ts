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
  /**
   * A deep copy of a JSON value; an own `__proto__` key is copied as data, as JSON.parse made it.
   * An object with a `toJSON` method (a `Date`, which user code may put in a field) is copied as
   * what that returns, the JSON it writes (a `Date`: its ISO string), where a copy of its own keys
   * would be `{}`; a boxed number, string or boolean (`new Number(1)`) as the primitive JSON
   * writes; an object as its own members, which JSON writes (not what its prototype holds). A
   * value nested deeper than the stack allows (`JSON.parse` takes any depth) is copied too; a
   * cyclic value, which is not JSON, throws a `TypeError`, as does one whose `toJSON` results nest
   * without end (a new object each call, holding the object again or another of its kind), which
   * `JSON.stringify` cannot write either.
   */
  copy<T extends JsonValue>(value: T): T {
    try {
      return copyValue(value, '') as T
    } catch (error) {
      // The stack ran out (a value some thousands of levels deep, or a cycle): copy again without
      // recursion. Only then, so the usual shallow value pays nothing for it.
      if (error instanceof RangeError) return copyDeep(value) as T
      throw error
    }
  },

  /**
   * Whether the value `JSON.parse` made of the JSON text `text` (`parsed`, which must be that
   * value) holds a number a double cannot hold: `undefined` when it holds none, else the first
   * such number in `text`. `JSON.parse` reads such a number (`1e400`, or an integer of 400 digits)
   * as `Infinity`, which is not JSON: serialized again, by a sink or a disk buffer, it becomes
   * `null`, so an event holding it would change without a word. A source that parses JSON refuses
   * it as it refuses malformed JSON. (A number too small, `1e-400`, reads as 0, and one too precise
   * is rounded, as in every JSON reader built on doubles: neither is refused.)
   *
   * The answer is about `parsed`: a number out of range under a key that a later duplicate key
   * replaced is not in it, and alone does not count. Where it is found is about `text`: the first
   * number out of range outside strings, which with duplicate keys may be such a replaced one
   * (still a number the text holds out of range).
   *
   * `parsed` is searched first, without recursion (it may nest as deep as `JSON.parse` allows): in
   * time linear in its values, about a tenth of what the parse cost for log-like records, up to
   * about the parse's own cost for a value made of many tiny objects. Only when it holds an
   * infinite number is `text` walked, to find where.
   */
  numberOutOfRange(text: string, parsed: JsonValue): NumberOutOfRange | undefined {
    return holdsInfinity(parsed) ? numberOutOfRangeIn(text) : undefined
  },
} as const

/** A number in a JSON text that a double cannot hold, as {@link JsonValue.numberOutOfRange} finds it. */
export interface NumberOutOfRange {
  /** Where it starts in the text, in UTF-16 code units. */
  readonly offset: number
  /** The number as written. */
  readonly number: string
  /**
   * The number as a message shows it: as written, or (past 24 characters) its first 20, '…' and
   * its length.
   */
  readonly shown: string
}

/** Whether `root` holds a number that is not finite (JSON.parse makes ±Infinity, never NaN). */
function holdsInfinity(root: JsonValue): boolean {
  if (typeof root !== 'object' || root === null) return typeof root === 'number' && !Number.isFinite(root)
  const stack: (JsonObject | JsonValue[])[] = [root]
  for (let container = stack.pop(); container !== undefined; container = stack.pop()) {
    if (Array.isArray(container)) {
      for (let i = 0; i < container.length; i++) {
        const v = container[i]
        if (typeof v === 'number') {
          if (!Number.isFinite(v)) return true
        } else if (typeof v === 'object' && v !== null && !(Array.isArray(v) && v.length === 0)) stack.push(v)
      }
    } else {
      for (const key in container) {
        const v = container[key]
        if (typeof v === 'number') {
          if (!Number.isFinite(v)) return true
        } else if (typeof v === 'object' && v !== null && !(Array.isArray(v) && v.length === 0)) stack.push(v)
      }
    }
  }
  return false
}

/** A JSON number at the sticky position. */
const NUMBER = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y

/**
 * {@link JsonValue.numberOutOfRange}'s walk of the text: every number outside strings, in order,
 * to the first one that is not finite as a double.
 */
function numberOutOfRangeIn(text: string): NumberOutOfRange | undefined {
  for (let i = 0; i < text.length; ) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      // A string: to the quote that is not escaped.
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i)
        if (d === 0x5c) i++
        else if (d === 0x22) break
      }
      i++
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      NUMBER.lastIndex = i
      const match = NUMBER.exec(text)
      if (match === null) {
        i++
        continue
      }
      const number = match[0]
      if (!Number.isFinite(Number(number)))
        return {
          offset: i,
          number,
          shown: number.length > 24 ? `${number.slice(0, 20)}… (${number.length} characters)` : number,
        }
      i += match[0].length
    } else i++
  }
  return undefined
}

/** A copy of `value`, found under the key or index `at` (`''` for the root): see {@link JsonValue.copy}. */
function copyValue(value: JsonValue, at: string | number): JsonValue {
  if (typeof value !== 'object' || value === null) return value
  const form = jsonForm(value, at)
  const copy = copyMembers(form)
  if (form !== value) dropToJSON(copy)
  return copy
}

/**
 * Leaves out of the copy of what a `toJSON` returned its own `toJSON` method (`{ ...this }` keeps
 * it): JSON calls `toJSON` once, and writes no function, but the copy's, a member, was called when
 * the copy was written. Only a `toJSON` result pays this lookup.
 */
function dropToJSON(copy: JsonValue): void {
  if (
    typeof copy === 'object' &&
    copy !== null &&
    typeof (copy as { toJSON?: unknown }).toJSON === 'function'
  )
    delete (copy as { toJSON?: unknown }).toJSON
}

/** A copy of `value`, whose own `toJSON` (if any) was called already: JSON calls it once. */
function copyMembers(value: JsonValue): JsonValue {
  if (typeof value !== 'object' || value === null) return value
  if (Array.isArray(value)) {
    const out: JsonValue[] = []
    for (let i = 0; i < value.length; i++) out.push(copyValue(value[i]!, i))
    return out
  }
  const out: JsonObject = {}
  const inherits = inheritsMembers(value)
  for (const key in value) {
    if (inherits && !Object.hasOwn(value, key)) continue
    if (key === '__proto__') defineProto(out, copyValue(value[key]!, key))
    else out[key] = copyValue(value[key]!, key)
  }
  return out
}

/**
 * Whether `for…in` over `value` may meet keys of its prototype (`Object.create(defaults)`, a
 * prototype's data), which JSON does not write: not for a plain object or one without a
 * prototype, whose copy then pays no test per key.
 */
function inheritsMembers(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value)
  return proto !== Object.prototype && proto !== null
}

/**
 * What `JSON.stringify` writes `value` (found under the key `at`) as: what its `toJSON` method
 * returns (a `Date`: its ISO string), or, without one, the value itself; a boxed number, string,
 * boolean or BigInt (either) as the primitive it holds, which JSON writes (or, a BigInt, refuses).
 */
function jsonForm(value: JsonValue, at: string | number): JsonValue {
  const toJSON: unknown = (value as { toJSON?: unknown }).toJSON
  const form = typeof toJSON === 'function' ? (toJSON.call(value, String(at)) as JsonValue) : value
  // One prototype read for a plain object: only other objects can be boxes.
  return typeof form === 'object' &&
    form !== null &&
    !Array.isArray(form) &&
    Object.getPrototypeOf(form) !== Object.prototype
    ? unboxed(form)
    : form
}

/**
 * A boxed primitive as JSON unboxes it (after `toJSON`): a number or string by converting it, as
 * `JSON.stringify` does, a boolean or BigInt by the value it holds; any other object as it is.
 * Copied by its own keys, a box was `{}` (a string `{"0":"a",…}`): a clone written on one path
 * of a fan-out sent other data than its original. A box is told as JSON tells it, by the value it
 * holds, not by its prototype: one made in another realm is one, and an object that only inherits
 * from `Number.prototype` (a Proxy of a box) is not (its `valueOf` would throw); nor by its tag
 * alone: a box of a class that names itself (`class Cents extends Number` with a
 * `Symbol.toStringTag`) is one.
 */
function unboxed(value: JsonObject): JsonValue {
  // The tag names the box of any realm (a Proxy's is its own: Object); the rare object that only
  // claims it (its own Symbol.toStringTag) is found out by the valueOf that refuses it.
  switch (objectTag.call(value)) {
    case '[object Object]':
      // A class instance, an object without a prototype, a Proxy: no box, and no valueOf tried.
      return value
    case '[object Number]':
      return holds(Number.prototype.valueOf, value) ? Number(value) : value
    case '[object String]':
      return holds(String.prototype.valueOf, value) ? String(value) : value
    case '[object Boolean]':
      return holds(Boolean.prototype.valueOf, value) ? Boolean.prototype.valueOf.call(value) : value
    case '[object BigInt]':
      return holds(BigInt.prototype.valueOf, value)
        ? (BigInt.prototype.valueOf.call(value) as unknown as JsonValue)
        : value
    default:
      // A tag of its own, which a box's class may declare (taken for an object, a number was
      // copied as `{}`): each valueOf tells whether it holds that primitive.
      if (holds(Number.prototype.valueOf, value)) return Number(value)
      if (holds(String.prototype.valueOf, value)) return String(value)
      if (holds(Boolean.prototype.valueOf, value)) return Boolean.prototype.valueOf.call(value)
      if (holds(BigInt.prototype.valueOf, value))
        return BigInt.prototype.valueOf.call(value) as unknown as JsonValue
      return value
  }
}

const objectTag = Object.prototype.toString

/** Whether `value` holds the primitive `unbox` (a `valueOf`) reads: it throws for any other object. */
function holds(unbox: (this: unknown) => unknown, value: object): boolean {
  try {
    unbox.call(value)
    return true
  } catch {
    return false
  }
}

/** Parsed JSON has `__proto__` as an own key; assigned, it would become the copy's prototype (the field lost, its members showing through). Defined, it stays the data it is. */
function defineProto(out: JsonObject, value: JsonValue): void {
  Object.defineProperty(out, '__proto__', { value, writable: true, enumerable: true, configurable: true })
}

/** One container being copied by {@link copyDeep}: its keys (indexes for an array) and the next one. */
interface Frame {
  readonly source: JsonObject | JsonValue[]
  readonly target: JsonObject | JsonValue[]
  readonly keys: readonly string[] | undefined
  next: number
  /** The object whose `toJSON` returned `source`, if it was another. */
  from?: object
}

const frameOf = (source: JsonObject | JsonValue[]): Frame => {
  if (Array.isArray(source)) return { source, target: [], keys: undefined, next: 0 }
  const keys: string[] = []
  const inherits = inheritsMembers(source)
  for (const key in source) if (!inherits || Object.hasOwn(source, key)) keys.push(key)
  return { source, target: {}, keys, next: 0 }
}

/**
 * How deep {@link copyDeep} copies objects that `toJSON` methods returned, one inside another:
 * far deeper than `JSON.stringify` writes them (its recursion runs out some thousands down).
 */
const MAX_MADE_DEPTH = 100_000

/** What {@link copyValue} makes, with a stack of its own instead of the call stack's. */
function copyDeep(given: JsonValue): JsonValue {
  if (typeof given !== 'object' || given === null) return given
  const value = jsonForm(given, '')
  if (typeof value !== 'object' || value === null) return value
  const root = frameOf(value)
  const stack = [root]
  // The containers being copied, from the root down (and the objects whose toJSON made them):
  // meeting one again is a cycle.
  const open = new Set<object>([value])
  /** How many of the containers being copied a toJSON made (see `MAX_MADE_DEPTH`). */
  let made = 0
  if (value !== given) {
    root.from = given
    open.add(given)
    made = 1
  }
  while (stack.length > 0) {
    const frame = stack[stack.length - 1]!
    const { source, target, keys } = frame
    const length = keys === undefined ? (source as JsonValue[]).length : keys.length
    if (frame.next >= length) {
      open.delete(source)
      if (frame.from !== undefined) {
        open.delete(frame.from)
        made--
        dropToJSON(target)
      }
      stack.pop()
      continue
    }
    const key = keys === undefined ? frame.next : keys[frame.next]!
    frame.next++
    const found = (source as Record<string | number, JsonValue>)[key]!
    const child = typeof found === 'object' && found !== null ? jsonForm(found, key) : found
    let copy = child
    let childFrame: Frame | undefined
    if (typeof child === 'object' && child !== null) {
      // A toJSON may return a new object each time: the object it was called on tells the cycle.
      if (open.has(child) || open.has(found as object))
        throw new TypeError(`JsonValue.copy: the value is cyclic (at key '${key}'), not JSON`)
      childFrame = frameOf(child)
      copy = childFrame.target
      if (child !== found) {
        // One that makes a new object holding a new one, and so on, has no end: JSON.stringify
        // runs out of stack on it. Copied on, it filled the heap until the process died.
        if (++made > MAX_MADE_DEPTH) {
          throw new TypeError(
            `JsonValue.copy: toJSON results nested over ${MAX_MADE_DEPTH} levels deep (at key '${key}'), deeper than JSON writes`,
          )
        }
        childFrame.from = found as object
        open.add(found as object)
      }
    }
    if (keys === undefined) (target as JsonValue[]).push(copy)
    else if (key === '__proto__') defineProto(target as JsonObject, copy)
    else (target as JsonObject)[key] = copy
    if (childFrame !== undefined) {
      open.add(child as object)
      stack.push(childFrame)
    }
  }
  return root.target
}
