/**
 * Options read once: a copy of what a caller gave, made along the schema, so what is checked is
 * what runs. An option given by a getter (or a proxy) may say something else on each read: read
 * once to be checked and again to be resolved, a value never checked reached the runtime. A read
 * that throws is an issue of that field, in the one style (`must be <expected>, got a getter that
 * threw: …`), not a raw error out of `validate()` or `build()`.
 */
import type { z } from 'zod'
import type { ConfigIssue } from '../ConfigIssue.js'
import { textOf } from '../textOf.js'
import { defOf, issueAt, unwrap } from './issuesOf.js'

/** Deeper than any options a schema declares: past it, values are kept as given. */
const MAX_DEPTH = 32

/** What {@link snapshotOptions} read: the copy, and an issue for each field that could not be read. */
export interface OptionsSnapshot {
  readonly value: unknown
  readonly issues: readonly ConfigIssue[]
}

/**
 * `value` read once along `schema`: each object the schema declares as an object becomes a plain
 * one holding every key a check reads (each declared one that is there or reads as defined, and
 * the enumerable ones, inherited too, where the object has a catchall: a strict one refuses them,
 * a typed one checks them, a loose one hands them to its refinements; not a stripping object's),
 * each array a plain array; anything else is kept as given (a function, a stream, a record's
 * values), as is each value `keep` says to keep (a buffer factory). With `loose: 'declared'`, a
 * loose object's undeclared keys are not read either (a component's members: its own getters are
 * none of the member check's business).
 */
export function snapshotOptions(
  schema: z.ZodType,
  value: unknown,
  keep: (value: object, path: readonly PropertyKey[]) => boolean = () => false,
  loose: 'all' | 'declared' = 'all',
): OptionsSnapshot {
  const issues: ConfigIssue[] = []
  const unreadable = (path: readonly PropertyKey[], error: unknown): undefined => {
    issues.push(issueAt(schema, path, `a getter that threw: ${textOf(messageOf(error))}`))
    return undefined
  }
  const copy = (at: z.ZodType | undefined, v: unknown, path: readonly PropertyKey[]): unknown => {
    if (at === undefined || typeof v !== 'object' || v === null || path.length > MAX_DEPTH) return v
    try {
      if (keep(v, path)) return v
      const def = defOf(unwrap(at))
      if (def.type === 'object' && !Array.isArray(v)) {
        const shape = def.shape ?? {}
        const keys = new Set<PropertyKey>()
        // Keys the shape does not declare are read only where a check may look at them (a strict
        // object refuses them, a typed catchall checks them, a loose object's refinements see
        // them): a component's members are none of the member check's business, and reading them
        // ran a component's own getters (one that throws until start() failed the build).
        const catchall = def.catchall === undefined ? undefined : defOf(def.catchall).type
        if (catchall !== undefined && (loose === 'all' || (catchall !== 'unknown' && catchall !== 'any')))
          for (const key in v) keys.add(key)
        // Each declared key is read whether `in` says it is there or not, as a check reads it: a
        // proxy with a get trap alone answers it though it has no key.
        for (const key of Reflect.ownKeys(shape)) keys.add(key)
        const out: object = Object.create(Object.getPrototypeOf(v) === null ? null : Object.prototype)
        for (const key of keys) {
          let item: unknown
          try {
            item = (v as Record<PropertyKey, unknown>)[key]
            // Absent stays absent (an optional option is not set to undefined).
            if (item === undefined && !(key in v)) continue
          } catch (error) {
            unreadable([...path, key], error)
            continue
          }
          // Defined, not assigned: a key `__proto__` must not set the copy's prototype.
          Object.defineProperty(out, key, {
            value: copy((shape as Record<PropertyKey, z.ZodType>)[key], item, [...path, key]),
            enumerable: true,
            writable: true,
            configurable: true,
          })
        }
        return out
      }
      if (def.type === 'array' && Array.isArray(v)) {
        const length = v.length
        const out = new Array<unknown>(length)
        for (let i = 0; i < length; i++) {
          if (!(i in v)) continue // a hole stays a hole
          let item: unknown
          try {
            item = v[i]
          } catch (error) {
            unreadable([...path, i], error)
            continue
          }
          out[i] = copy(def.element, item, [...path, i])
        }
        return out
      }
      return v
    } catch (error) {
      // The object itself could not be read (a proxy whose traps throw).
      return unreadable(path, error)
    }
  }
  return { value: copy(schema, value, []), issues }
}

function messageOf(error: unknown): unknown {
  try {
    return error instanceof Error ? error.message : error
  } catch {
    return error // a `message` getter that throws
  }
}
