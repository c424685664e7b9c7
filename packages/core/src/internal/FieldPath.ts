/**
 * Dotted paths into JSON fields: `"http.status"`, `"tags.0"`. A segment that is a whole number
 * indexes an array; any other segment names an object key. Keys that contain a dot cannot be
 * reached by path (use the fields object directly).
 */
import type { JsonObject, JsonValue } from '../JsonValue.js'

const split = (path: string): string[] => (path.includes('.') ? path.split('.') : [path])

const child = (value: JsonValue | undefined, key: string): JsonValue | undefined => {
  if (typeof value !== 'object' || value === null) return undefined
  if (Array.isArray(value)) return /^\d+$/.test(key) ? value[Number(key)] : undefined
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

/** Stores `value` under the plain key `key` of the object `o`. */
type Store = (o: JsonObject, key: string, value: JsonValue) => void

/**
 * Eight copies of one store, each a function literal of its own, so that each has an inline
 * cache of its own. One store through which a program sets every path it uses sees many keys
 * and goes megamorphic, and adding a property through a megamorphic store took about 20 ns more
 * than a plain `o.key = v` in a micro-benchmark with eight paths; with a copy per path, about 10.
 * Each new plain path is given the next copy (round robin), and keeps it.
 */
const STORES: readonly Store[] = [
  (o, k, v) => {
    o[k] = v
  },
  (o, k, v) => {
    o[k] = v
  },
  (o, k, v) => {
    o[k] = v
  },
  (o, k, v) => {
    o[k] = v
  },
  (o, k, v) => {
    o[k] = v
  },
  (o, k, v) => {
    o[k] = v
  },
  (o, k, v) => {
    o[k] = v
  },
  (o, k, v) => {
    o[k] = v
  },
]
/**
 * The copy each plain path was given. At most this many paths are remembered (a program that
 * builds keys from its data would grow the map for ever); later ones share the first copy.
 */
const MAX_STORED_PATHS = 1024
const storeOf = new Map<string, Store>()
/** The last path set through a store, and its store (a transform sets one path for every event). */
let lastStored = ''
let lastStore: Store = STORES[0]!

/** The store of a plain key, or `undefined` when `path` is not one. */
function storeFor(path: string): Store | undefined {
  if (path === lastStored) return lastStore
  if (!isPlainKey(path)) return undefined
  let store = storeOf.get(path)
  if (store === undefined) {
    store = STORES[storeOf.size % STORES.length]!
    if (storeOf.size < MAX_STORED_PATHS) storeOf.set(path, store)
  }
  lastStored = path
  lastStore = store
  return store
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
  if (!Array.isArray(fields)) {
    const store = storeFor(path)
    if (store !== undefined) {
      store(fields, path, value)
      return true
    }
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
    if (!/^\d+$/.test(last) || Number(last) >= parent.length) return undefined
    return parent.splice(Number(last), 1)[0]
  }
  if (!Object.hasOwn(parent, last)) return undefined
  const removed = parent[last]
  delete parent[last]
  return removed
}

function assign(container: JsonObject | JsonValue[], key: string, value: JsonValue): boolean {
  if (Array.isArray(container)) {
    if (!/^\d+$/.test(key)) return false
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
