/**
 * Dotted paths into JSON fields: `"http.status"`, `"tags.0"`. On an array, a segment that is a
 * whole number up to 2^32 - 2 (the largest index an array has) indexes it, and no other segment
 * reaches anything; on an object, every segment names a key. Keys that contain a dot cannot be
 * reached by path (use the fields object directly).
 */
import type { JsonObject, JsonValue } from '../JsonValue.js'

const split = (path: string): string[] => (path.includes('.') ? path.split('.') : [path])

/** The largest index of an array: a larger whole number is a key of it that JSON never writes. */
const MAX_INDEX = 2 ** 32 - 2

/**
 * Whether `key` indexes an array. A larger number, set on an array, read back from the event but
 * was left out by every sink (and past 2^53 it named another key).
 */
const isIndex = (key: string): boolean => /^\d+$/.test(key) && Number(key) <= MAX_INDEX

const child = (value: JsonValue | undefined, key: string): JsonValue | undefined => {
  if (typeof value !== 'object' || value === null) return undefined
  if (Array.isArray(value)) return isIndex(key) ? value[Number(key)] : undefined
  return Object.hasOwn(value, key) ? value[key] : undefined
}

/**
 * The last path found to be a plain key (no dot, not `__proto__`). A transform sets or reads the
 * same path for every event of an array, usually one string constant: comparing with the last one
 * is then a comparison of two references, where a search for a dot is a call (about 5 ns a `set`
 * in a micro-benchmark). Calls that alternate between paths search as before.
 */
let lastPlain = ''

/** Whether `path` is one key of an object, set and read as it is. */
function isPlainKey(path: string): boolean {
  if (path === lastPlain) return true
  if (path.includes('.') || path === '__proto__') return false
  lastPlain = path
  return true
}

export function getPath(fields: JsonObject, path: string): JsonValue | undefined {
  if (isPlainKey(path)) return Object.hasOwn(fields, path) ? fields[path] : undefined
  let value: JsonValue | undefined = fields
  for (const key of split(path)) {
    value = child(value, key)
    if (value === undefined) return undefined
  }
  return value
}

/** Sets the value at `path`, creating objects for missing segments; returns false where a segment is not a container. */
export function setPath(fields: JsonObject, path: string, value: JsonValue): boolean {
  // A plain key on an object (the common case) is set without splitting the path.
  if (isPlainKey(path) && !Array.isArray(fields)) {
    fields[path] = value
    return true
  }
  const keys = split(path)
  let container: JsonObject | JsonValue[] = fields
  for (let i = 0; i < keys.length - 1; i++) {
    const key = keys[i]!
    let next = child(container, key)
    if (next === undefined) {
      next = {}
      if (!assign(container, key, next)) return false
    }
    if (typeof next !== 'object' || next === null) return false
    container = next
  }
  return assign(container, keys[keys.length - 1]!, value)
}

export function removePath(fields: JsonObject, path: string): JsonValue | undefined {
  const keys = split(path)
  const parent = keys.length === 1 ? fields : getPath(fields, keys.slice(0, -1).join('.'))
  const last = keys[keys.length - 1]!
  if (typeof parent !== 'object' || parent === null) return undefined
  if (Array.isArray(parent)) {
    if (!isIndex(last) || Number(last) >= parent.length) return undefined
    return parent.splice(Number(last), 1)[0]
  }
  if (!Object.hasOwn(parent, last)) return undefined
  const removed = parent[last]
  delete parent[last]
  return removed
}

function assign(container: JsonObject | JsonValue[], key: string, value: JsonValue): boolean {
  if (Array.isArray(container)) {
    if (!isIndex(key)) return false
    container[Number(key)] = value
    return true
  }
  // An assignment to `__proto__` would replace the object's prototype and lose the value (JSON
  // never shows it): it is stored as the own key it is in parsed JSON.
  if (key === '__proto__') {
    Object.defineProperty(container, key, { value, writable: true, enumerable: true, configurable: true })
    return true
  }
  container[key] = value
  return true
}
