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
   * A value nested deeper than the stack allows (`JSON.parse` takes any depth) is copied too; a
   * cyclic value, which is not JSON, throws a `TypeError`.
   */
  copy<T extends JsonValue>(value: T): T {
    try {
      return copyValue(value) as T
    } catch (error) {
      // The stack ran out (a value some thousands of levels deep, or a cycle): copy again without
      // recursion. Only then, so the usual shallow value pays nothing for it.
      if (error instanceof RangeError) return copyDeep(value) as T
      throw error
    }
  },
} as const

function copyValue(value: JsonValue): JsonValue {
  if (typeof value !== 'object' || value === null) return value
  if (Array.isArray(value)) return value.map(copyValue)
  const out: JsonObject = {}
  for (const key in value) {
    if (key === '__proto__') defineProto(out, copyValue(value[key]!))
    else out[key] = copyValue(value[key]!)
  }
  return out
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
}

const frameOf = (source: JsonObject | JsonValue[]): Frame => {
  if (Array.isArray(source)) return { source, target: [], keys: undefined, next: 0 }
  const keys: string[] = []
  for (const key in source) keys.push(key)
  return { source, target: {}, keys, next: 0 }
}

/** What {@link copyValue} makes, with a stack of its own instead of the call stack's. */
function copyDeep(value: JsonValue): JsonValue {
  if (typeof value !== 'object' || value === null) return value
  const root = frameOf(value)
  const stack = [root]
  // The containers being copied, from the root down: meeting one again is a cycle.
  const open = new Set<object>([value])
  while (stack.length > 0) {
    const frame = stack[stack.length - 1]!
    const { source, target, keys } = frame
    const length = keys === undefined ? (source as JsonValue[]).length : keys.length
    if (frame.next >= length) {
      open.delete(source)
      stack.pop()
      continue
    }
    const key = keys === undefined ? frame.next : keys[frame.next]!
    frame.next++
    const child = (source as Record<string | number, JsonValue>)[key]!
    let copy = child
    let childFrame: Frame | undefined
    if (typeof child === 'object' && child !== null) {
      if (open.has(child))
        throw new TypeError(`JsonValue.copy: the value is cyclic (at key '${key}'), not JSON`)
      childFrame = frameOf(child)
      copy = childFrame.target
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
