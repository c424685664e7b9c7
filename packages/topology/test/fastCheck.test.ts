// Unit test of an internal module (`src/internal/fastCheck.ts`), so it imports it by path: the
// predicate must never call valid what zod rejects, which no public call can show directly.
import {
  codeOption,
  defineOptions,
  MemoryBufferOptions,
  RetryPolicy,
  SinkOptions,
  TopologyOptions,
  TransformOptions,
} from '@ackline/topology'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { fastCheck } from '../src/internal/fastCheck.js'
import { near as shapedAfter, withEachOption } from './support/optionValues.js'

/** Values near the options' rules: valid ones, wrong types, bounds, unknown names. */
const scalar = fc.oneof(
  fc.constantFrom(0, 1, 2, -1, 0.5, 500, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, -(2 ** 53)),
  fc.constantFrom('', 'block', 'drop_newest', 'rejected', 'delivered', 'errored', 'memory', 'disk', 'x'),
  fc.constantFrom(true, false, null, undefined, () => {}),
  fc.anything(),
)
const near = (depth: number): fc.Arbitrary<unknown> =>
  depth === 0
    ? scalar
    : fc.oneof(
        scalar,
        fc.dictionary(
          fc.constantFrom(
            'acknowledgements',
            'authoritative',
            'buffer',
            'retry',
            'type',
            'maxEvents',
            'whenFull',
            'droppedStatus',
            'attempts',
            'initialBackoffMs',
            'maxBackoffMs',
            'multiplier',
            'dropStatus',
            'ackTimeoutMs',
            'dataDir',
            'onWarning',
            'fields',
            'unknown',
          ),
          near(depth - 1),
          { maxKeys: 5 },
        ),
        fc.array(near(depth - 1), { maxLength: 3 }),
      )

const schemas = {
  SinkOptions: SinkOptions.schema,
  TransformOptions: TransformOptions.schema,
  TopologyOptions: TopologyOptions.schema,
  MemoryBufferOptions: MemoryBufferOptions.schema,
  RetryPolicy: RetryPolicy.schema,
  arrays: defineOptions({
    fields: z.array(z.string().min(1)).min(1).readonly(),
    merge: z.record(z.string(), z.enum(['sum', 'max'])).optional(),
    fn: codeOption<() => void>('a function').optional(),
    either: z.union([z.literal('a'), z.int().max(3)]).optional(),
  }).schema,
}

enum Level {
  Low = 0,
  High = 1,
}

/** Every kind of schema the compiled check knows, nested, beside the ones it must leave to zod. */
const kinds = defineOptions({
  servers: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]).optional(),
  records: z.record(z.string(), z.record(z.string(), z.array(z.int().min(0)).max(3))).optional(),
  union: z.union([z.literal('a'), z.int().max(3), z.strictObject({ k: z.string().min(1) })]).default('a'),
  level: z.enum(Level).optional(),
  maybe: z.union([z.literal('x'), z.literal(undefined)]),
  code: codeOption<unknown>('anything', () => true),
  list: z
    .array(z.union([z.string().max(2), z.boolean()]).optional())
    .min(1)
    .readonly()
    .optional(),
  loose: z.looseObject({ n: z.number().positive().max(10) }).optional(),
  stripped: z.object({ b: z.boolean() }).optional(),
})

const zodAccepts = (schema: z.ZodType, value: unknown): boolean => schema.safeParse(value).success

describe('fastCheck', () => {
  it.each(Object.entries(schemas))('agrees with zod on every value for %s', (_name, schema) => {
    const fast = fastCheck(schema)
    expect(fast).toBeDefined()
    fc.assert(
      fc.property(near(3), (value) => {
        expect(fast!(value)).toBe(schema.safeParse(value).success)
      }),
      { numRuns: 2000 },
    )
  })

  it.each(withEachOption('kinds', kinds.schema))(
    'never says valid where zod refuses, for odd values shaped after every kind of schema it compiles: %s',
    (_name, schema) => {
      const fast = fastCheck(schema)
      expect(fast).toBeDefined()
      fc.assert(
        fc.property(shapedAfter(schema, 4), (value) => {
          if (fast!(value)) expect(zodAccepts(schema, value)).toBe(true)
        }),
        { numRuns: 1000 },
      )
    },
  )

  it('accepts the options a topology usually has, so zod is not run for them', () => {
    const fast = fastCheck(SinkOptions.schema)!
    expect(
      fast({
        acknowledgements: true,
        buffer: { maxEvents: 50, whenFull: 'drop_newest', droppedStatus: 'rejected' },
        retry: { attempts: 5, initialBackoffMs: 10, maxBackoffMs: 100, multiplier: 2 },
      }),
    ).toBe(true)
  })

  it('calls invalid what zod refuses though it is an object: a Map or class instance as a record, a symbol key, an inherited unknown option', () => {
    const Options = defineOptions({ headers: z.record(z.string(), z.string()).optional() })
    const fast = fastCheck(Options.schema)!
    class Headers {
      accept = 'text/plain'
    }
    const values: unknown[] = [
      { headers: new Map([['accept', 'text/plain']]) },
      { headers: new Headers() },
      { headers: new Date(0) },
      { headers: { [Symbol('accept')]: 'text/plain' } },
      // A misspelt option on the prototype (options made with Object.create(defaults)).
      Object.create({ header: { accept: 'text/plain' } }),
    ]
    for (const value of values) {
      expect(zodAccepts(Options.schema, value)).toBe(false)
      expect(fast(value)).toBe(false)
      // What a component's validate() (and so build()) says: an issue, not a silent pass.
      expect(Options.validate(value)).not.toEqual([])
    }
    // A plain object (of any realm, or without a prototype) is still a record.
    const bare = Object.assign(Object.create(null) as object, { accept: 'text/plain' })
    expect(fast({ headers: bare })).toBe(true)
    expect(fast({ headers: { accept: 'text/plain' } })).toBe(true)
  })

  it('calls invalid an array with holes, as zod reads each hole as undefined', () => {
    const Options = defineOptions({ servers: z.array(z.string().min(1)).min(1) })
    const fast = fastCheck(Options.schema)!
    // A stray comma in a list of servers, or an array made by length: every() skips holes.
    // biome-ignore lint/suspicious/noSparseArray: the hole is the point
    for (const servers of [['a', , 'b'], new Array(2)]) {
      expect(zodAccepts(Options.schema, { servers })).toBe(false)
      expect(fast({ servers })).toBe(false)
      expect(Options.validate({ servers })).not.toEqual([])
    }
    expect(fast({ servers: ['a', 'b'] })).toBe(true)
  })

  it("calls invalid a numeric enum's member name, which zod refuses (the reverse mapping of a TypeScript enum)", () => {
    // What `enum Level { Low = 0, High = 1 }` compiles to: zod takes 0 and 1, not 'Low' or 'High'.
    const Level = { Low: 0, High: 1, 0: 'Low', 1: 'High' } as const
    const Options = defineOptions({ level: z.enum(Level) })
    const fast = fastCheck(Options.schema)!
    expect(zodAccepts(Options.schema, { level: 'Low' })).toBe(false)
    expect(fast({ level: 'Low' })).toBe(false)
    expect(Options.validate({ level: 'Low' })).not.toEqual([])
    expect(fast({ level: 1 })).toBe(true)
  })

  it('calls invalid an absent option whose schema takes undefined but is not optional, as zod does', () => {
    // zod refuses an absent key unless its schema is optional (or has a default), whatever the
    // schema says of `undefined`: a code option whose check takes it, a literal undefined.
    const Options = defineOptions({
      sink: codeOption<unknown>('anything', () => true),
      mode: z.union([z.literal('x'), z.literal(undefined)]),
    })
    const fast = fastCheck(Options.schema)!
    for (const value of [{ mode: 'x' }, { sink: 1 }, {}]) {
      expect(zodAccepts(Options.schema, value)).toBe(false)
      expect(fast(value)).toBe(false)
      expect(Options.validate(value)).not.toEqual([])
    }
    // Given as undefined, the key is there: zod runs the schema, which takes it.
    expect(fast({ sink: undefined, mode: undefined })).toBe(
      zodAccepts(Options.schema, { sink: undefined, mode: undefined }),
    )
    expect(fast({ sink: 1, mode: 'x' })).toBe(true)
  })

  it('calls invalid what an exclusive union refuses: a value two options of z.xor take, a discriminator two options leave out', () => {
    const Exclusive = defineOptions({ name: z.xor([z.string(), z.string().min(1)]) })
    const Tagged = defineOptions({
      target: z.discriminatedUnion('kind', [
        z.strictObject({ kind: z.literal('file').optional(), path: z.string().optional() }),
        z.strictObject({ kind: z.literal('url').optional(), path: z.string().optional() }),
      ]),
    })
    for (const [Options, value] of [
      [Exclusive, { name: 'x' }],
      [Tagged, { target: { path: 'p' } }],
    ] as const) {
      expect(zodAccepts(Options.schema, value)).toBe(false)
      expect(fastCheck(Options.schema)?.(value) ?? false).toBe(false)
      expect(Options.validate(value)).not.toEqual([])
    }
  })

  it('calls invalid what a refinement of a literal or a function schema refuses', () => {
    const Options = defineOptions({
      mode: z.literal(['a', 'b']).refine((mode) => mode !== 'b', 'not b yet'),
      // zod hands a refinement its own wrapper of the function, so only a plain rule can be shown.
      onWarning: z.function().refine(() => false, 'not supported yet'),
    })
    const fast = fastCheck(Options.schema)
    for (const value of [
      { mode: 'b', onWarning: () => {} },
      { mode: 'a', onWarning: () => {} },
    ]) {
      expect(zodAccepts(Options.schema, value)).toBe(false)
      expect(fast?.(value) ?? false).toBe(false)
      expect(Options.validate(value)).not.toEqual([])
    }
  })

  it('calls invalid an option given as undefined where it is z.exactOptional(): it may be absent, not undefined', () => {
    const Options = defineOptions({
      region: z.string().exactOptional(),
      zones: z.array(z.string().exactOptional()),
    })
    const fast = fastCheck(Options.schema)
    for (const value of [{ region: undefined, zones: [] }, { zones: [undefined] }, { zones: new Array(1) }]) {
      expect(zodAccepts(Options.schema, value)).toBe(false)
      expect(fast?.(value) ?? false).toBe(false)
      expect(Options.validate(value)).not.toEqual([])
    }
  })

  it('calls invalid an object missing an option declared under a symbol key', () => {
    const secret = Symbol('secret')
    const schema = z.strictObject({ name: z.string(), [secret]: z.string() })
    const fast = fastCheck(schema)
    expect(zodAccepts(schema, { name: 'a' })).toBe(false)
    expect(fast?.({ name: 'a' }) ?? false).toBe(false)
  })

  it('leaves to zod what it does not know: refinements, string formats', () => {
    expect(fastCheck(z.string().refine((s) => s !== 'x', 'not x'))).toBeUndefined()
    expect(fastCheck(z.strictObject({ url: z.url() }))).toBeUndefined()
    expect(fastCheck(z.strictObject({ n: z.number().multipleOf(2) }))).toBeUndefined()
  })
})
