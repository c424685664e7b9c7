import {
  ConfigIssue,
  codeOption,
  defineOptions,
  type OptionsOf,
  type ResolvedOptionsOf,
  type Sink,
  TopologyBuilder,
  TopologyError,
} from '@ackline/topology'
import fc from 'fast-check'
import { describe, expect, expectTypeOf, it } from 'vitest'
import { z } from 'zod'
import { testSource } from './support/TestComponents.js'

const Example = defineOptions({
  count: z.int().min(0).optional().describe('How many events in all.'),
  batchSize: z.int().min(1).default(100).describe('Events per batch.'),
  ratePerSecond: z.number().positive().optional(),
  whenFull: z.enum(['block', 'drop_newest']).default('block'),
  fields: z.array(z.string().min(1)).min(1),
  predicate: codeOption<(n: number) => boolean>('a function'),
  retry: defineOptions({ attempts: z.int().min(1).optional() }).schema.optional(),
})

const valid = { fields: ['id'], predicate: () => true }

describe('validate', () => {
  it('accepts valid options with nothing to report', () => {
    expect(Example.validate(valid)).toEqual([])
    expect(
      Example.validate({ ...valid, count: 0, batchSize: 5, whenFull: 'drop_newest', retry: {} }),
    ).toEqual([])
  })

  it('reports every problem at once, each with its field path, what was expected and what was given', () => {
    const issues = Example.validate({
      count: -1,
      batchSize: 0.5,
      ratePerSecond: 0,
      whenFull: 'drop_oldest',
      fields: ['id', ''],
      predicate: 'yes',
      retry: { attempts: 0 },
    })
    expect(issues).toEqual([
      {
        field: 'count',
        expected: 'a non-negative integer',
        got: '-1',
        message: 'must be a non-negative integer, got -1',
      },
      {
        field: 'batchSize',
        expected: 'a positive integer',
        got: '0.5',
        message: 'must be a positive integer, got 0.5',
      },
      {
        field: 'ratePerSecond',
        expected: 'a positive number',
        got: '0',
        message: 'must be a positive number, got 0',
      },
      {
        field: 'whenFull',
        expected: '"block" or "drop_newest"',
        got: '"drop_oldest"',
        message: 'must be "block" or "drop_newest", got "drop_oldest"',
      },
      {
        field: 'fields[1]',
        expected: 'a non-empty string',
        got: '""',
        message: 'must be a non-empty string, got ""',
      },
      { field: 'predicate', expected: 'a function', got: '"yes"', message: 'must be a function, got "yes"' },
      {
        field: 'retry.attempts',
        expected: 'a positive integer',
        got: '0',
        message: 'must be a positive integer, got 0',
      },
    ])
  })

  it('reports a missing required option as got undefined', () => {
    expect(Example.validate({ fields: ['id'] })).toEqual([
      {
        field: 'predicate',
        expected: 'a function',
        got: 'undefined',
        message: 'must be a function, got undefined',
      },
    ])
  })

  it('reports an option the schema does not declare, naming the declared ones (a typo is never ignored)', () => {
    const issues = Example.validate({ ...valid, batchsize: 10, retry: { atempts: 2 } })
    expect(issues.map((i) => i.field).sort()).toEqual(['batchsize', 'retry.atempts'])
    const top = issues.find((i) => i.field === 'batchsize')!
    expect(top.got).toBe('10')
    expect(top.message).toMatch(/^must be absent: it is not an option \(the options are count, batchSize,/)
    expect(issues.find((i) => i.field === 'retry.atempts')!.expected).toContain('the options are attempts')
  })

  it('reports options that are not an object as one issue about the whole', () => {
    for (const options of [null, 5, 'x', []]) {
      expect(Example.validate(options)).toMatchObject([{ field: '(options)', expected: 'an object' }])
    }
  })

  it('never throws, whatever it is given, and every issue is in the one message style', () => {
    fc.assert(
      fc.property(
        fc.anything({ withMap: true, withSet: true, withBigInt: true, withTypedArray: true }),
        (options) => {
          for (const issue of Example.validate(options)) {
            expect(issue.message).toBe(`must be ${issue.expected}, got ${issue.got}`)
            expect(issue.got!.length).toBeLessThanOrEqual(60)
          }
        },
      ),
    )
    expect(Example.validate({ ...valid, fields: [Symbol('s'), 10n, new Map()] })).toMatchObject([
      { field: 'fields[0]', got: 'Symbol(s)' },
      { field: 'fields[1]', got: '10n' },
      { field: 'fields[2]', got: 'an instance of Map' },
    ])
  })

  it('never throws for an option whose getter throws: the field is an issue in the one style', () => {
    const throwing = (message: unknown) => ({
      get() {
        throw message
      },
      enumerable: true,
    })
    const options = Object.defineProperty({ ...valid }, 'batchSize', throwing(new Error('vault sealed')))
    const retry = Object.defineProperty({}, 'attempts', throwing(Object.create(null)))
    const fields = Object.defineProperty(['id', 'name'], 1, throwing('gone'))
    const unreadable = new Proxy(
      {},
      {
        ownKeys() {
          throw new Error('revoked')
        },
      },
    )
    expect(Example.validate(options)).toEqual([
      {
        field: 'batchSize',
        expected: 'a positive integer',
        got: 'a getter that threw: vault sealed',
        message: 'must be a positive integer, got a getter that threw: vault sealed',
      },
    ])
    expect(Example.validate({ ...valid, retry, fields }).map((i) => [i.field, i.got])).toEqual([
      ['fields[1]', 'a getter that threw: gone'],
      ['retry.attempts', 'a getter that threw: a value that cannot be converted to a …'],
    ])
    expect(Example.validate(unreadable).map((i) => [i.field, i.message])).toEqual([
      ['(options)', 'must be an object, got a getter that threw: revoked'],
    ])
  })

  it('checks a loose object with every key it was given: a refinement of it sees the keys the shape does not declare', () => {
    // 4608a8b read only the declared keys of a loose object (z.looseObject, a catchall of
    // z.unknown()), so a refinement that looks at the others saw an empty object: headers
    // { h: 'v' } were refused as 'must be non-empty, got {}'.
    const WithHeaders = defineOptions({
      headers: z
        .looseObject({ id: z.string().optional() })
        .refine((o) => Object.keys(o).length > 0, 'at least one header')
        .optional(),
      tags: z
        .object({})
        .catchall(z.unknown())
        .refine((o) => 'env' in o, 'an env tag')
        .optional(),
    })
    class Tags {
      get env() {
        return 'prod'
      }
    }
    Object.defineProperty(Tags.prototype, 'env', { enumerable: true })
    expect(WithHeaders.validate({ headers: { h: 'v' }, tags: { env: 'prod' } })).toEqual([])
    expect(WithHeaders.validate({ tags: new Tags() })).toEqual([])
    expect(WithHeaders.validate({ headers: {}, tags: {} }).map((i) => i.field)).toEqual(['headers', 'tags'])
  })

  it('shows a long or cyclic value briefly instead of printing it whole', () => {
    const cyclic: Record<string, unknown> = {}
    cyclic.self = cyclic
    const [long, loop] = Example.validate({ ...valid, count: 'x'.repeat(10_000), fields: [cyclic] }).map(
      (i) => i.got,
    )
    expect(long).toHaveLength(60)
    expect(loop).toBe('an object')
  })
})

describe('secrets in issues', () => {
  const Connection = defineOptions({
    url: z.string().min(1),
    user: z.string().optional(),
    pass: z.string().optional(),
    token: z.string().optional(),
  })

  it('an object or array given for an option shows the value of a credential-named key as "***"', () => {
    const [object] = Connection.validate({ url: { hostname: 'h', password: 's3cret' } })
    expect(object?.got).toBe('{"hostname":"h","password":"***"}')
    const [keys] = Connection.validate({
      url: { apiKey: 'k1', api_key: 'k2', Authorization: 'k3', accessToken: 'k4', passwd: 'k5' },
    })
    expect(keys?.got).not.toMatch(/k\d/)
    // Keys that only hold a credential word inside another word are shown.
    const [plain] = Connection.validate({ url: { author: 'ann', passive: true } })
    expect(plain?.got).toBe('{"author":"ann","passive":true}')
    const [nested] = Connection.validate({ url: [{ credentials: { user: 'u', secret: 'x9' } }] })
    expect(nested?.got).toBe('[{"credentials":"***"}]')
  })

  it('a long run of scheme characters before a :// is looked at once, and a scheme beginning with a digit is hidden too', () => {
    // A wrongly typed value of 300,000 letters and a '://' (a file read into a field): the search
    // for a URL's password began at each letter, which took time in the square of the length (11 s
    // for 100,000 letters, minutes for these; seen hung until killed); now milliseconds.
    const [long] = Connection.validate({ url: [`${'a'.repeat(300_000)}://x`] })
    expect(long?.got).toMatch(/^\["a{50,}/)
    const [mixed] = Connection.validate({ url: [`${'a1'.repeat(150_000)}://u:s3cret@h`] })
    expect(mixed?.got).not.toContain('s3cret')
    expect(ConfigIssue.of('url', 'an AMQP URL', '1amqp://u:s3cret@h').got).toBe('"1amqp://u:***@h"')
  })

  it("a URL's password is hidden wherever a value shows it, before the value is cut short", () => {
    const [array] = Connection.validate({ url: ['amqp://u:s3cret@h:5672/v'] })
    expect(array?.got).toBe('["amqp://u:***@h:5672/v"]')
    const [unknown] = Connection.validate({ url: 'amqp://h', uri: 'amqp://u:p@ss/w@h' })
    expect(unknown?.got).toBe('"amqp://u:***@h"')
    const long = `amqp://user:${'p'.repeat(80)}@h`
    const [cut] = Connection.validate({ url: [long] })
    expect(cut?.got).toBe('["amqp://user:***@h"]')
    // A passphrase holding white space is a password all the same: new URL reads it whole.
    const [spaced] = Connection.validate({ url: ['amqp://u:correct horse battery@h'] })
    expect(spaced?.got).toBe('["amqp://u:***@h"]')
    expect(ConfigIssue.of('url', 'an AMQP URL', 'amqp://u:two words@h').got).toBe('"amqp://u:***@h"')
    const [encoded] = Connection.validate({ url: ['amqp://guest%3As3cret@h'] })
    expect(encoded?.got).toBe('["amqp://***@h"]')
    expect(ConfigIssue.of('url', 'an AMQP URL', 'ftp://u:s3cret@h').got).toBe('"ftp://u:***@h"')
  })

  it('a credential-named field shows only what kind of value it holds, never the value', () => {
    const issues = Connection.validate({ url: 'amqp://h', pass: 12345, token: { v: 'x' } })
    expect(issues).toEqual([
      { field: 'pass', expected: 'a string', got: 'a number', message: 'must be a string, got a number' },
      { field: 'token', expected: 'a string', got: 'an object', message: 'must be a string, got an object' },
    ])
    const [misspelt] = Connection.validate({ url: 'amqp://h', password: 'hunter22' })
    expect(misspelt?.got).toBe('a string')
    expect(ConfigIssue.of('auth.password', 'a string of 8 characters', 'abc').got).toBe('a string')
  })

  it('never shows a secret, whichever form carries it (property)', () => {
    const name = fc.constantFrom('password', 'pass', 'clientSecret', 'api_key', 'Authorization', 'authToken')
    // A passphrase may hold white space (`correct horse battery staple`), which new URL takes.
    const secret = fc.stringMatching(/^[A-Za-z0-9!$&*+,;=~ ]{6,90}$/).map((s) => `Zq${s}`)
    const carrier: fc.Arbitrary<{ given: unknown; value: string; as?: string }> = fc.oneof(
      fc.tuple(name, secret).map(([key, value]) => ({ given: { host: 'h', [key]: value }, value })),
      fc.tuple(name, secret).map(([key, value]) => ({ given: [{ [key]: value }], value })),
      secret.map((value) => ({ given: [`amqps://user:${value}@broker:5671/v`], value })),
      secret.map((value) => ({ given: `amqp://u:${value}@h`, value, as: 'uri' })),
      fc.integer({ min: 100_000 }).map((n) => ({ given: n, value: String(n), as: 'pass' })),
    )
    fc.assert(
      fc.property(carrier, ({ given, value, as }) => {
        const issues = Connection.validate({ url: 'amqp://h', [as ?? 'url']: given })
        expect(issues).toHaveLength(1)
        // Not even its start: cut short, a shown secret no longer holds all of itself.
        expect(issues[0]?.message).not.toContain(value.slice(0, 8))
      }),
    )
  })

  it("build() hides a URL's password in every problem's message, whoever wrote it", () => {
    const sink: Sink = {
      kind: 'leaky',
      validate: () => {
        throw new Error('cannot read amqp://u:s3cret@h')
      },
      write: async () => undefined,
    }
    let error: unknown
    try {
      new TopologyBuilder({ onWarning: () => {} })
        .source('in', testSource([]))
        .sink('out', ['in'], sink)
        .build()
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(TopologyError)
    expect((error as TopologyError).message).not.toContain('s3cret')
    expect((error as TopologyError).problems[0]?.message).toContain('amqp://u:***@h')
  })

  it("build() hides a URL's password in what a component's own issue says was expected", () => {
    // A problem is logged whole (console.error shows its fields), not only its message.
    const sink: Sink = {
      kind: 'mirror',
      validate: () => [
        {
          field: 'url',
          message: 'must be another broker',
          expected: 'a broker other than amqp://u:s3cret@h',
        },
      ],
      write: async () => undefined,
    }
    let error: unknown
    try {
      new TopologyBuilder({ onWarning: () => {} })
        .source('in', testSource([]))
        .sink('out', ['in'], sink)
        .build()
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(TopologyError)
    expect((error as TopologyError).problems[0]?.expected).toBe('a broker other than amqp://u:***@h')
  })

  it("build() hides a long URL's password given where a declaration's options are due, before cutting it short", () => {
    // Cut to 40 characters first, the URL lost its '@' and the start of its password showed.
    const url = `amqp://user:${'p'.repeat(50)}@h`
    let error: unknown
    try {
      new TopologyBuilder({ onWarning: () => {} })
        .source('in', testSource([]))
        .sink('out', ['in'], { kind: 'k', write: async () => undefined }, url as never)
        .build()
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(TopologyError)
    expect((error as TopologyError).message).toContain("got 'amqp://user:***@h'")
    expect((error as TopologyError).message).not.toContain('ppp')
    // A passphrase holding white space, the same.
    try {
      new TopologyBuilder({ onWarning: () => {} })
        .source('in', testSource([]))
        .sink('out', ['in'], { kind: 'k', write: async () => undefined }, 'amqp://user:Zq horse@h' as never)
        .build()
    } catch (e) {
      error = e
    }
    expect((error as TopologyError).message).toContain("got 'amqp://user:***@h'")
    expect((error as TopologyError).message).not.toContain('Zq')
  })

  it('a getter that throws with a URL in its message shows the URL without its password', () => {
    const [issue] = Connection.validate({
      get url(): string {
        throw new Error('no amqp://u:s3cret@h')
      },
    })
    expect(issue?.got).toContain('amqp://u:***@h')
  })
})

describe('defaults and types', () => {
  it('resolve fills in the defaults of unset options and keeps the rest as given', () => {
    const predicate = (): boolean => true
    expect(Example.defaults).toEqual({ batchSize: 100, whenFull: 'block' })
    expect(
      Example.resolve({ fields: ['a'], predicate, batchSize: undefined, whenFull: 'drop_newest' }),
    ).toEqual({
      fields: ['a'],
      predicate,
      batchSize: 100,
      whenFull: 'drop_newest',
    })
  })

  it('resolve reads each option as validate checked it: a getter or an inherited value is kept, not replaced by its default', () => {
    // Options as a class with getters, or layered with Object.create: validate read 7 and 9 and
    // passed them, then resolve (which the runtime reads, as a sink's retry policy) gave 100.
    class Batching {
      readonly fields = ['id']
      readonly predicate = (): boolean => true
      get batchSize(): number {
        return 7
      }
    }
    const layered = Object.assign(Object.create({ batchSize: 9, whenFull: 'drop_newest' }) as object, valid)
    for (const [options, batchSize] of [
      [new Batching(), 7],
      [layered, 9],
    ] as const) {
      expect(Example.validate(options)).toEqual([])
      expect(Example.resolve(options as never).batchSize).toBe(batchSize)
    }
    expect(Example.resolve(layered as never).whenFull).toBe('drop_newest')
  })

  it('infers the option types: defaults are optional to give and present once resolved', () => {
    type Given = OptionsOf<typeof Example>
    type Resolved = ResolvedOptionsOf<typeof Example>
    expectTypeOf<Given['batchSize']>().toEqualTypeOf<number | undefined>()
    expectTypeOf<Resolved['batchSize']>().toEqualTypeOf<number>()
    expectTypeOf<Given['whenFull']>().toEqualTypeOf<'block' | 'drop_newest' | undefined>()
    expectTypeOf<Given['predicate']>().toEqualTypeOf<(n: number) => boolean>()
  })
})

describe('jsonSchema', () => {
  it('describes what a config file can give: types, bounds, enums, defaults, descriptions, no unknown options', () => {
    const schema = Example.jsonSchema()
    expect(schema).toMatchObject({
      type: 'object',
      additionalProperties: false,
      required: ['fields'],
      properties: {
        count: { type: 'integer', minimum: 0, description: 'How many events in all.' },
        batchSize: { type: 'integer', minimum: 1, default: 100, description: 'Events per batch.' },
        ratePerSecond: { type: 'number', exclusiveMinimum: 0 },
        whenFull: { enum: ['block', 'drop_newest'], default: 'block' },
        fields: { type: 'array', minItems: 1, items: { type: 'string', minLength: 1 } },
        retry: { type: 'object', properties: { attempts: { type: 'integer', minimum: 1 } } },
      },
    })
  })

  it('leaves out options only code can give, and hands out a copy each time', () => {
    const schema = Example.jsonSchema() as { properties: Record<string, unknown>; required: string[] }
    expect(Object.keys(schema.properties)).not.toContain('predicate')
    expect(schema.required).not.toContain('predicate')
    schema.properties.count = 'edited'
    expect((Example.jsonSchema() as typeof schema).properties.count).not.toBe('edited')
  })

  it('leaves out a code-only option that was described, and still words its issue', () => {
    const Described = defineOptions({
      onEvent: codeOption<() => void>('a callback').describe('Called for each event.'),
      size: z.int().min(1).optional(),
    })
    expect(Described.jsonSchema()).toMatchObject({ properties: { size: { type: 'integer' } } })
    expect(Object.keys((Described.jsonSchema() as { properties: object }).properties)).toEqual(['size'])
    expect(Described.validate({ onEvent: 1 })).toMatchObject([
      { field: 'onEvent', message: 'must be a callback, got 1' },
    ])
  })
})

describe('a third-party component', () => {
  const WebhookSinkOptions = defineOptions({
    url: z.url().describe('Where to POST each batch.'),
    timeoutMs: z.int().min(1).default(5000),
  })
  type WebhookSinkOptions = OptionsOf<typeof WebhookSinkOptions>
  const webhook = (options: WebhookSinkOptions): Sink => ({
    kind: 'webhook',
    validate: () => WebhookSinkOptions.validate(options),
    write: async () => undefined,
  })

  it('gets its problems reported by build() with the builder’s own, in the same style', () => {
    let error: unknown
    try {
      new TopologyBuilder({ onWarning: () => {}, ackTimeoutMs: -5 })
        .source('in', testSource([]))
        .sink('hook', ['in'], webhook({ url: 'not a url', timeoutMs: 0 }))
        .build()
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(TopologyError)
    expect((error as TopologyError).problems).toEqual([
      {
        code: 'INVALID_OPTION',
        component: '(topology)',
        field: 'ackTimeoutMs',
        expected: 'a positive number of at most 2147483647',
        got: '-5',
        message: 'must be a positive number of at most 2147483647, got -5',
      },
      {
        code: 'INVALID_CONFIG',
        component: 'hook',
        field: 'url',
        expected: 'a URL',
        got: '"not a url"',
        message: 'webhook: must be a URL, got "not a url"',
      },
      {
        code: 'INVALID_CONFIG',
        component: 'hook',
        field: 'timeoutMs',
        expected: 'a positive integer',
        got: '0',
        message: 'webhook: must be a positive integer, got 0',
      },
    ])
  })
})
