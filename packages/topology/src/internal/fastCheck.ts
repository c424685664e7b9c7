/**
 * A plain predicate compiled once from a zod schema, that says "valid" without zod building a
 * parsed copy of the value: `build()` runs it first and asks zod only when it says no, to word
 * the issues.
 *
 * Invariant: the predicate is never more lenient than zod. It is compiled only from the kinds of
 * schema listed in `compile` (with the checks listed there); a schema with anything else (a
 * refinement, a string format, a transform) gets no predicate, and zod decides alone.
 */
import type { z } from 'zod'

type Check = (value: unknown) => boolean

interface CheckDef {
  readonly check: string
  readonly value?: unknown
  readonly inclusive?: boolean
  readonly minimum?: number
  readonly maximum?: number
}

interface Def {
  readonly type: string
  readonly format?: string
  readonly check?: string
  readonly checks?: readonly { readonly _zod: { readonly def: CheckDef } }[]
  readonly innerType?: z.core.$ZodType
  readonly shape?: Record<string, z.core.$ZodType>
  readonly catchall?: z.core.$ZodType
  readonly element?: z.core.$ZodType
  readonly keyType?: z.core.$ZodType
  readonly valueType?: z.core.$ZodType
  readonly options?: readonly z.core.$ZodType[]
  readonly inclusive?: boolean
  readonly values?: readonly unknown[]
  readonly entries?: Record<string, unknown>
  readonly fn?: (value: unknown) => unknown
}

const compiled = new WeakMap<object, Check | null>()

/** The predicate of `schema`, or `undefined` when it has a kind of check this module does not know. */
export function fastCheck(schema: z.core.$ZodType): Check | undefined {
  let check = compiled.get(schema)
  if (check === undefined) {
    check = compile(schema) ?? null
    compiled.set(schema, check)
  }
  return check ?? undefined
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * What zod takes for a record: an object with no constructor, or one whose constructor's
 * prototype has its own `isPrototypeOf` (an `Object` of any realm). A `Map`, a `Date` or a class
 * instance is not one: their entries are not keys, and the component would read none.
 */
function isPlainObject(value: unknown): value is Record<PropertyKey, unknown> {
  if (!isObject(value)) return false
  const ctor: unknown = value.constructor
  if (typeof ctor !== 'function') return true
  const proto: unknown = ctor.prototype
  return isObject(proto) && Object.hasOwn(proto, 'isPrototypeOf')
}

const isEnumerable = (value: object, key: PropertyKey): boolean =>
  Object.prototype.propertyIsEnumerable.call(value, key)

function compile(schema: z.core.$ZodType): Check | undefined {
  const def = schema._zod.def as unknown as Def
  switch (def.type) {
    case 'optional':
    case 'default': {
      // z.exactOptional(): the key may be absent, but a value given as `undefined` is checked as any.
      if (schema._zod.traits.has('$ZodExactOptional')) return undefined
      // zod fills a default in for `undefined`; the default itself is the schema author's business.
      const inner = def.innerType === undefined ? undefined : compile(def.innerType)
      return inner === undefined || def.checks?.length ? undefined : (v) => v === undefined || inner(v)
    }
    case 'readonly': {
      const inner = def.innerType === undefined ? undefined : compile(def.innerType)
      return def.checks?.length ? undefined : inner
    }
    case 'boolean':
      return def.checks?.length ? undefined : (v) => typeof v === 'boolean'
    case 'function':
      return def.checks?.length ? undefined : (v) => typeof v === 'function'
    case 'custom': {
      // A custom schema carries its own check as `fn` (a code option's); a refinement added to it is not known here.
      const fn = def.fn
      return fn === undefined || def.checks?.length ? undefined : (v) => fn(v) === true
    }
    case 'literal': {
      const values = def.values ?? []
      return def.checks?.length ? undefined : (v) => values.includes(v)
    }
    case 'enum': {
      // zod's own set of values: a numeric enum's member names (a TypeScript enum's reverse mapping) are no values.
      const values = schema._zod.values
      return values === undefined || def.checks?.length ? undefined : (v) => values.has(v as never)
    }
    case 'number':
      return number(def)
    case 'string':
      return string(def)
    case 'array': {
      const element = def.element === undefined ? undefined : compile(def.element)
      const length = lengthBounds(def.checks)
      if (element === undefined || length === undefined) return undefined
      return (v) => {
        if (!Array.isArray(v) || !length(v.length)) return false
        // By index, as zod: `every` skips holes (`['a', , 'b']`), which zod checks as `undefined`.
        for (let i = 0; i < v.length; i++) if (!element(v[i])) return false
        return true
      }
    }
    case 'object': {
      // A key under a symbol is not in `Object.keys`: left to zod rather than left unchecked.
      if (def.checks?.length || def.shape === undefined || Object.getOwnPropertySymbols(def.shape).length > 0)
        return undefined
      const keys = Object.keys(def.shape)
      const checks: Check[] = []
      for (const key of keys) {
        const check = compile(def.shape[key]!)
        if (check === undefined) return undefined
        checks.push(check)
      }
      // zod refuses an absent key unless its schema is optional or has a default (its "optin"),
      // even when the schema takes `undefined` (a code option whose check does, a literal undefined).
      const required = keys.map((key) => def.shape![key]!._zod.optin === undefined)
      const catchallType = (def.catchall?._zod.def as Def | undefined)?.type
      if (catchallType !== undefined && catchallType !== 'never' && catchallType !== 'unknown')
        return undefined
      const strict = catchallType === 'never'
      const known = new Set(keys)
      return (v) => {
        if (!isObject(v)) return false
        for (let i = 0; i < keys.length; i++) {
          const value = v[keys[i]!]
          if (!checks[i]!(value) || (value === undefined && required[i] && !(keys[i]! in v))) return false
        }
        // `for…in`, as zod: an inherited enumerable key (options made by `Object.create`) counts too.
        if (strict) for (const key in v) if (!known.has(key)) return false
        return true
      }
    }
    case 'record': {
      const keyDef = def.keyType?._zod.def as Def | undefined
      const value = def.valueType === undefined ? undefined : compile(def.valueType)
      if (keyDef?.type !== 'string' || keyDef.checks?.length || keyDef.format !== undefined) return undefined
      if (value === undefined || def.checks?.length) return undefined
      return (v) => {
        if (!isPlainObject(v)) return false
        // Every own enumerable key, as zod reads them: a symbol key fails a string key schema.
        for (const key of Reflect.ownKeys(v)) {
          if (!isEnumerable(v, key)) continue
          if (typeof key === 'symbol' || !value(v[key])) return false
        }
        return true
      }
    }
    case 'union': {
      // An exclusive union (z.xor, z.discriminatedUnion) refuses a value two options take, or whose
      // discriminator picks no single option: "some option takes it" would be more lenient.
      if (def.inclusive === false) return undefined
      const options = (def.options ?? []).map(compile)
      if (options.length === 0 || def.checks?.length || options.some((o) => o === undefined)) return undefined
      const checks = options as Check[]
      return (v) => checks.some((check) => check(v))
    }
    default:
      return undefined
  }
}

function number(def: Def): Check | undefined {
  // z.number() takes finite numbers only; z.int() (format 'safeint') safe integers only.
  if (def.format !== undefined && def.format !== 'safeint') return undefined
  const base: Check =
    def.format === 'safeint'
      ? (v) => Number.isSafeInteger(v)
      : (v) => typeof v === 'number' && Number.isFinite(v)
  const bounds: Check[] = []
  for (const { _zod } of def.checks ?? []) {
    const c = _zod.def
    if (c.check === 'greater_than' && typeof c.value === 'number') {
      const min = c.value
      bounds.push(c.inclusive === true ? (v) => (v as number) >= min : (v) => (v as number) > min)
    } else if (c.check === 'less_than' && typeof c.value === 'number') {
      const max = c.value
      bounds.push(c.inclusive === true ? (v) => (v as number) <= max : (v) => (v as number) < max)
    } else if (c.check === 'number_format' && (c as { format?: string }).format === 'safeint') {
      bounds.push((v) => Number.isSafeInteger(v))
    } else {
      return undefined
    }
  }
  return (v) => base(v) && bounds.every((bound) => bound(v))
}

function string(def: Def): Check | undefined {
  if (def.format !== undefined) return undefined
  const length = lengthBounds(def.checks)
  return length === undefined ? undefined : (v) => typeof v === 'string' && length(v.length)
}

/** The bounds of `min_length` / `max_length` checks, or `undefined` for any other check. */
function lengthBounds(checks: Def['checks']): ((length: number) => boolean) | undefined {
  let min = 0
  let max = Number.POSITIVE_INFINITY
  for (const { _zod } of checks ?? []) {
    const c = _zod.def
    if (c.check === 'min_length' && typeof c.minimum === 'number') min = Math.max(min, c.minimum)
    else if (c.check === 'max_length' && typeof c.maximum === 'number') max = Math.min(max, c.maximum)
    else return undefined
  }
  return (length) => length >= min && length <= max
}
