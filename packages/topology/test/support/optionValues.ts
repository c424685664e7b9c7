// Odd option values shaped after a zod schema, for the property that the compiled options check
// (src/internal/fastCheck.ts) never says valid where zod refuses: near each rule, with holes,
// sparse and very long arrays, proxies, getters, null-prototype and class objects, symbol keys,
// inherited and non-enumerable keys, NaN, Infinity and -0. Shared with the root test that draws
// them for the schemas of every package.
import fc from 'fast-check'
import type { z } from 'zod'

interface Def {
  readonly type: string
  readonly innerType?: z.ZodType
  readonly shape?: Record<string, z.ZodType>
  readonly element?: z.ZodType
  readonly valueType?: z.ZodType
  readonly options?: readonly z.ZodType[]
  readonly values?: readonly unknown[]
  readonly checks?: readonly { readonly _zod: { readonly def: Record<string, unknown> } }[]
}
const defOf = (schema: z.ZodType): Def => schema._zod.def as unknown as Def

const odd = fc.oneof(
  fc.constantFrom(
    undefined,
    null,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    Number.NEGATIVE_INFINITY,
    -0,
    2 ** 53,
    -(2 ** 53),
    0.5,
    '',
    '0',
    'Low',
    '__proto__',
    true,
    0n,
    Symbol('s'),
    () => {},
    new Map(),
    new Date(0),
    [],
    {},
    Object.create(null),
  ),
  fc.anything({ maxDepth: 1 }),
)

/** Numbers at and beside every bound the schema's checks name. */
function numbers(def: Def): fc.Arbitrary<number> {
  const near: number[] = [0, -0, 1, -1, 0.5, 2 ** 53, 2 ** 31, Number.MAX_VALUE, Number.EPSILON]
  for (const { _zod } of def.checks ?? []) {
    const bound = _zod.def.value
    if (typeof bound === 'number') near.push(bound, bound - 1, bound + 1, bound - 0.5, bound + 0.5, -bound)
  }
  return fc.oneof(fc.constantFrom(...near), fc.double(), fc.integer())
}

function lengths(def: Def): number[] {
  const near = [0, 1, 2, 3]
  for (const { _zod } of def.checks ?? []) {
    for (const bound of [_zod.def.minimum, _zod.def.maximum])
      if (typeof bound === 'number' && bound < 2000) near.push(bound, bound + 1, Math.max(0, bound - 1))
  }
  return near
}

/** `target` given `entries` as own data properties (an own `__proto__` too, as JSON.parse makes one). */
function own(target: object, entries: [string, unknown][]): object {
  for (const [key, value] of entries)
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
  return target
}

/** An object dressed oddly: no prototype, inherited keys, getters, a proxy, a class, a symbol key. */
function dressed(entries: [string, unknown][], extra: string | undefined): fc.Arbitrary<unknown> {
  return fc
    .constantFrom('plain', 'nullProto', 'inherited', 'getters', 'proxy', 'class', 'symbol', 'hidden', 'extra')
    .map((how) => {
      const plain = Object.fromEntries(entries)
      switch (how) {
        case 'plain':
          return plain
        case 'nullProto':
          return own(Object.create(null) as object, entries)
        case 'inherited':
          return Object.create(plain) as object
        case 'getters': {
          const o = {}
          for (const [k, v] of entries)
            Object.defineProperty(o, k, { get: () => v, enumerable: true, configurable: true })
          return o
        }
        case 'proxy':
          return new Proxy(plain, {})
        case 'class': {
          class Options {}
          return own(new Options(), entries)
        }
        case 'symbol':
          return { ...plain, [Symbol('k')]: 1 }
        case 'hidden': {
          const o = { ...plain }
          if (extra !== undefined) Object.defineProperty(o, extra, { value: 1, enumerable: false })
          return o
        }
        default:
          return extra === undefined ? plain : { ...plain, [extra]: 1 }
      }
    })
}

/** Odd values shaped after `schema`: near its rules, with holes, proxies, getters and odd numbers. */
export function near(schema: z.ZodType, depth: number): fc.Arbitrary<unknown> {
  const def = defOf(schema)
  const inner = (s: z.ZodType | undefined): fc.Arbitrary<unknown> =>
    s === undefined || depth <= 0 ? odd : near(s, depth - 1)
  let shaped: fc.Arbitrary<unknown>
  switch (def.type) {
    case 'optional':
    case 'default':
    case 'readonly':
    case 'nonoptional':
    case 'nullable':
      // A wrapper is no level of nesting: the value it wraps is drawn at the same depth.
      shaped = def.innerType === undefined ? odd : near(def.innerType, depth)
      break
    case 'number':
      shaped = numbers(def)
      break
    case 'string':
      shaped = fc.constantFrom(...lengths(def)).map((n) => 'x'.repeat(n))
      break
    case 'boolean':
      shaped = fc.boolean()
      break
    case 'enum':
    case 'literal': {
      const values = [...(schema._zod.values ?? [])]
      const names = def.type === 'enum' ? Object.keys((def as { entries?: object }).entries ?? {}) : []
      shaped = fc.constantFrom(...values, ...names, undefined)
      break
    }
    case 'array': {
      const counts = lengths(def)
      shaped = fc
        .tuple(
          fc.array(inner(def.element), { maxLength: 4 }),
          fc.constantFrom(...counts),
          fc.nat(5),
          fc.nat(3),
        )
        .map(([items, length, hole, how]) => {
          const array: unknown[] = items.slice()
          if (how === 0) array.length = Math.max(array.length, length)
          if (how === 1 && hole < array.length) delete array[hole]
          if (how === 2) return new Proxy(array, {})
          if (how === 3 && array.length > 0)
            return Array.from({ length: 5000 }, (_, i) => array[i % array.length])
          return array
        })
      break
    }
    case 'object': {
      const shape = def.shape ?? {}
      const keys = Object.keys(shape)
      shaped = fc
        .tuple(
          fc.tuple(
            ...keys.map((key) =>
              fc.oneof(
                { weight: 6, arbitrary: inner(shape[key]).map((v) => [key, v] as [string, unknown]) },
                { weight: 1, arbitrary: fc.constant(undefined) },
                { weight: 1, arbitrary: fc.constant([key, undefined] as [string, unknown]) },
              ),
            ),
          ),
          fc.option(fc.constantFrom('unknown', 'constructor', '__proto__', 'toString'), { nil: undefined }),
        )
        .chain(([entries, extra]) =>
          dressed(
            entries.filter((e): e is [string, unknown] => e !== undefined),
            extra,
          ),
        )
      break
    }
    case 'record':
      shaped = fc
        .tuple(
          fc.array(
            fc.tuple(fc.constantFrom('a', '', '1', 'constructor', '__proto__'), inner(def.valueType)),
            {
              maxLength: 3,
            },
          ),
          fc.option(fc.constantFrom('extra'), { nil: undefined }),
        )
        .chain(([entries, extra]) => dressed(entries, extra))
      break
    case 'union':
      shaped = fc.oneof(...(def.options ?? []).map((option) => inner(option)))
      break
    case 'custom':
    case 'function':
      shaped = fc.constantFrom(
        () => {},
        { write: () => true, on: () => undefined },
        { on: () => undefined, [Symbol.asyncIterator]: () => undefined },
        true,
        undefined,
      )
      break
    default:
      shaped = odd
  }
  return fc.oneof({ weight: 5, arbitrary: shaped }, { weight: 1, arbitrary: odd })
}

/**
 * `schema`, and when it is an object each of its options alone (`pick`): drawn whole, a value
 * with many options rarely has all of them right, so a false pass on one would seldom be seen.
 */
export function withEachOption(name: string, schema: z.ZodType): [string, z.ZodType][] {
  const shape = (schema._zod.def as { shape?: Record<string, z.ZodType> }).shape
  if (shape === undefined) return [[name, schema]]
  const pick = (schema as unknown as { pick(mask: Record<string, true>): z.ZodType }).pick
  return [
    [name, schema],
    ...Object.keys(shape).map((key): [string, z.ZodType] => [
      `${name}.${key}`,
      pick.call(schema, { [key]: true }),
    ]),
  ]
}
