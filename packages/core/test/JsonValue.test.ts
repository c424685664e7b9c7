import { runInNewContext } from 'node:vm'
import { type JsonValue as Json, type JsonObject, JsonValue, LogEvent } from '@ackline/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'

/** `{ a: [ { a: [ … 0 … ] } ] }`, `levels` containers deep, as JSON.parse makes it (it takes any depth). */
const nested = (levels: number): Json =>
  JSON.parse(`${'{"a":['.repeat(levels / 2)}0${']}'.repeat(levels / 2)}`)

/** The depth of a value made by {@link nested}, counted without recursion. */
/**
 * The copy of `value` put 100,000 arrays deep, taken back out: what `JsonValue.copy` makes of it on
 * its path without recursion, for a value deeper than the stack.
 */
function copiedDeep(value: Json): Json {
  const deep = JSON.parse(`${'['.repeat(100_000)}0${']'.repeat(100_000)}`) as Json[]
  let inner = deep
  for (let i = 0; i < 99_999; i++) inner = inner[0] as Json[]
  inner[0] = value
  let copied = JsonValue.copy(deep) as Json
  while (Array.isArray(copied)) copied = copied[0]!
  return copied
}

function depthOf(value: Json): number {
  let depth = 0
  let v: Json | undefined = value
  while (typeof v === 'object' && v !== null) {
    depth++
    v = Array.isArray(v) ? v[0] : v.a
  }
  return depth
}

describe('JsonValue.copy', () => {
  it('copies deeply: the copy shares no container with the original', () => {
    const value = { a: [1, { b: 'x', c: null }], d: { e: true } }
    const copy = JsonValue.copy(value)
    expect(copy).toEqual(value)
    expect(copy.a).not.toBe(value.a)
    expect(copy.a[1]).not.toBe(value.a[1])
    expect(copy.d).not.toBe(value.d)
  })

  it('keeps an own __proto__ key as data, as JSON.parse made it', () => {
    const value = JSON.parse('{"__proto__":{"x":1},"y":2}') as JsonObject
    const copy = JsonValue.copy(value)
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype)
    expect(Object.hasOwn(copy, '__proto__')).toBe(true)
    expect(JSON.stringify(copy)).toBe('{"__proto__":{"x":1},"y":2}')
  })

  it('copies a value nested deeper than the call stack allows (what a small JSON body can be)', () => {
    const value = nested(100_000)
    const copy = JsonValue.copy(value)
    expect(depthOf(copy)).toBe(100_000)
    expect(copy === value).toBe(false)
    // A `__proto__` key deep down stays data on this path too.
    const proto = JSON.parse(`${'['.repeat(50_000)}{"__proto__":{"x":1}}${']'.repeat(50_000)}`) as Json
    let inner: Json = JsonValue.copy(proto)
    while (Array.isArray(inner)) inner = inner[0]!
    expect(Object.hasOwn(inner as JsonObject, '__proto__')).toBe(true)
    expect(Object.getPrototypeOf(inner)).toBe(Object.prototype)
  })

  it('copies a value with a toJSON method (a Date) as the JSON it writes, at any depth', () => {
    const at = new Date(Date.UTC(2026, 0, 2, 3, 4, 5))
    const iso = '2026-01-02T03:04:05.000Z'
    const value = { at, list: [at, { at }] } as unknown as JsonObject
    expect(JsonValue.copy(value)).toEqual({ at: iso, list: [iso, { at: iso }] })
    expect(JsonValue.copy(at as unknown as Json)).toBe(iso)
    // The path without recursion, for a value deeper than the stack.
    const copied = copiedDeep({ at } as unknown as Json)
    expect(copied).toEqual({ at: iso })
  })

  it('throws a TypeError for a toJSON that makes a new object each time, holding itself or another such: JSON cannot write it either', () => {
    // Each call makes a new object: no container is met twice, and the copy without recursion
    // (taken once the stack ran out) went on until the heap was full and the process died.
    class Holder {
      toJSON(): unknown {
        return { self: this }
      }
    }
    class Chain {
      toJSON(): unknown {
        return { next: new Chain() }
      }
    }
    for (const value of [new Holder(), { in: [new Holder()] }, new Chain(), { in: new Chain() }]) {
      expect(() => JSON.stringify(value)).toThrow(RangeError)
      expect(() => JsonValue.copy(value as unknown as Json)).toThrow(TypeError)
    }
  })

  it('keeps a Date in the fields of a clone that is written (copy on write) as its ISO string, not {}', () => {
    const event = new LogEvent({ at: new Date(0) } as unknown as JsonObject)
    const copy = event.clone().set('n', 1)
    expect(JSON.stringify(copy)).toBe('{"at":"1970-01-01T00:00:00.000Z","n":1}')
  })

  it('copies a boxed number, string, boolean or BigInt as the primitive JSON writes, at any depth', () => {
    // A transform may set a boxed value (`new Number(n)`): JSON writes the number it holds. Copied
    // by its own keys it became `{}` (a boxed string `{"0":"a","1":"b"}`), so a clone written on
    // one path of a fan-out sent other data than the original on the other.
    const boxes = {
      n: new Number(5),
      s: new String('ab'),
      t: new Boolean(false),
      list: [new Number(-1.5), { s: new String('') }],
      // A toJSON that returns a box: JSON unboxes what toJSON returns.
      made: { toJSON: () => new String('made') },
    } as unknown as JsonObject
    const written = '{"n":5,"s":"ab","t":false,"list":[-1.5,{"s":""}],"made":"made"}'
    expect(JSON.stringify(boxes)).toBe(written)
    expect(JSON.stringify(JsonValue.copy(boxes))).toBe(written)
    expect(JsonValue.copy(new Number(7) as unknown as Json)).toBe(7)
    // A boxed BigInt is a BigInt to JSON, which cannot write it: the copy throws where JSON does.
    const big = { b: Object(10n) } as unknown as JsonObject
    expect(() => JSON.stringify(big)).toThrow(TypeError)
    expect(() => JSON.stringify(JsonValue.copy(big))).toThrow(TypeError)
    // The path without recursion, for a value deeper than the stack.
    const copied = copiedDeep({ s: new String('ab'), n: new Number(1) } as unknown as Json)
    expect(JSON.stringify(copied)).toBe('{"s":"ab","n":1}')
    // Through an event: a clone written (copy on write) writes what the original writes.
    const event = new LogEvent({ v: new Number(3), s: new String('x') } as unknown as JsonObject)
    const copy = event.clone().set('seen', true)
    expect(JSON.stringify(copy)).toBe('{"v":3,"s":"x","seen":true}')
    expect(JSON.stringify(event)).toBe('{"v":3,"s":"x"}')
  })

  it('tells a boxed value by what it holds, as JSON does: not by its prototype', () => {
    // Taken for a box by its prototype, an object that only inherits from Number.prototype (a
    // Proxy of a box, Object.create(Number.prototype)) made the copy throw (its valueOf refuses
    // it), where JSON writes it as the object it is: a clone written (copy on write) failed.
    const notBoxes = {
      proxy: new Proxy(new Number(5), {}),
      number: Object.create(Number.prototype) as object,
      string: Object.create(String.prototype) as object,
      boolean: Object.create(Boolean.prototype) as object,
      tagged: { [Symbol.toStringTag]: 'Number', n: 1 },
    } as unknown as JsonObject
    const written = '{"proxy":{},"number":{},"string":{},"boolean":{},"tagged":{"n":1}}'
    expect(JSON.stringify(notBoxes)).toBe(written)
    expect(JSON.stringify(JsonValue.copy(notBoxes))).toBe(written)
    // And a box made in another realm (a `vm` context) is one, whose prototype is not this
    // realm's: JSON writes its primitive, the copy wrote `{}` (a string, its characters).
    const foreign = runInNewContext(
      '({ n: new Number(5), s: new String("ab"), b: new Boolean(false) })',
    ) as JsonObject
    expect(JSON.stringify(foreign)).toBe('{"n":5,"s":"ab","b":false}')
    expect(JSON.stringify(JsonValue.copy(foreign))).toBe('{"n":5,"s":"ab","b":false}')
    // The path without recursion, for a value deeper than the stack.
    const copied = copiedDeep({ ...notBoxes, foreign } as Json)
    expect(JSON.stringify(copied)).toBe(`${written.slice(0, -1)},"foreign":{"n":5,"s":"ab","b":false}}`)
  })

  it('tells a box of a class that names itself (its Symbol.toStringTag) by what it holds, as JSON does', () => {
    // Told by its tag alone, a box whose class declares a tag of its own (`class Cents extends
    // Number`, a debugger's name) was taken for an object: copied as its own keys, `{}` for a
    // number, where JSON writes the primitive it holds; a clone written sent other data.
    class Cents extends Number {
      get [Symbol.toStringTag]() {
        return 'Cents'
      }
    }
    const named = Object.defineProperty(new String('ab'), Symbol.toStringTag, { value: 'Name' })
    const foreign = runInNewContext(
      'class C extends Boolean { get [Symbol.toStringTag]() { return "C" } }; new C(false)',
    ) as object
    const notBoxes = {
      map: new Map([[1, 2]]),
      bytes: new Uint8Array([7]),
      tagged: { [Symbol.toStringTag]: 'X' },
    }
    const value = { cents: new Cents(5), named, foreign, ...notBoxes } as unknown as JsonObject
    const written = '{"cents":5,"named":"ab","foreign":false,"map":{},"bytes":{"0":7},"tagged":{}}'
    expect(JSON.stringify(value)).toBe(written)
    expect(JSON.stringify(JsonValue.copy(value))).toBe(written)
    // The path without recursion, for a value deeper than the stack.
    const copied = copiedDeep(value)
    expect(JSON.stringify(copied)).toBe(written)
  })

  it('writes what a toJSON returned once, as JSON does, though the result holds a toJSON of its own', () => {
    // `{ ...this }` in a toJSON keeps that method: JSON calls toJSON once and leaves the function
    // member out, but the copy kept it as a member, and writing the copy called it a second time.
    const price = {
      cents: 500,
      toJSON(this: { cents: number }) {
        return { ...this, cents: this.cents / 100 }
      },
    }
    const value = { price, list: [price] } as unknown as JsonObject
    const written = '{"price":{"cents":5},"list":[{"cents":5}]}'
    expect(JSON.stringify(value)).toBe(written)
    expect(JSON.stringify(JsonValue.copy(value))).toBe(written)
    // The path without recursion, for a value deeper than the stack.
    const copied = copiedDeep(value)
    expect(JSON.stringify(copied)).toBe(written)
    const event = new LogEvent({ price } as unknown as JsonObject)
    expect(JSON.stringify(event.clone().set('seen', true))).toBe('{"price":{"cents":5},"seen":true}')
  })

  it('copies only the own members of an object, as JSON writes it: never what its prototype holds', () => {
    // `Object.create(defaults)` and a prototype's data (`Legacy.prototype.kind`) are enumerable,
    // so a `for…in` copy made them members: a clone written (copy on write) sent keys JSON never
    // wrote for the original. A class instance is taken as fields (`TransformContext.create`).
    const defaults = { level: 'info' }
    const withDefaults = Object.assign(Object.create(defaults) as object, { message: 'x' })
    function Legacy(this: { own: number }) {
      this.own = 1
    }
    Legacy.prototype.kind = 'legacy'
    const legacy = new (Legacy as unknown as new () => object)()
    const value = { a: withDefaults, b: [legacy] } as unknown as JsonObject
    const written = '{"a":{"message":"x"},"b":[{"own":1}]}'
    expect(JSON.stringify(value)).toBe(written)
    expect(JSON.stringify(JsonValue.copy(value))).toBe(written)
    // The path without recursion, for a value deeper than the stack.
    const copied = copiedDeep(withDefaults as Json)
    expect(JSON.stringify(copied)).toBe('{"message":"x"}')
    const event = new LogEvent({ a: withDefaults } as unknown as JsonObject)
    expect(JSON.stringify(event.clone().set('seen', true))).toBe('{"a":{"message":"x"},"seen":true}')
  })

  it('writes a copy as JSON writes the original, for values holding boxes, Dates, toJSON results and prototypes (property)', () => {
    const seed = Number(process.env.ACKLINE_SEED ?? Date.now() % 2 ** 31)
    console.log(`JsonValue.copy property seed: ${seed}`)
    const leaf = fc.oneof(
      fc.jsonValue({ maxDepth: 1 }),
      fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => new Number(n)),
      fc.string().map((s) => new String(s)),
      fc.boolean().map((b) => new Boolean(b)),
      fc.integer({ min: 0, max: 2 ** 40 }).map((ms) => new Date(ms)),
      fc.string().map((s) => ({ toJSON: () => new String(s) })),
      fc.string().map((s) => Object.assign(Object.create({ inherited: s }) as object, { own: s })),
      // A toJSON whose result keeps the method (`{ ...this }`): JSON calls it once.
      fc.string().map((s) => ({
        s,
        toJSON(this: { s: string }) {
          return { ...this, s: `${this.s}!` }
        },
      })),
    )
    const value = fc.letrec<{ v: unknown }>((tie) => ({
      v: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        leaf,
        fc.array(tie('v'), { maxLength: 4 }),
        fc.dictionary(fc.constantFrom('a', 'b', '0', '__proto__', 'constructor'), tie('v'), { maxKeys: 4 }),
      ),
    })).v
    fc.assert(
      fc.property(value, (v) => {
        expect(JSON.stringify(JsonValue.copy(v as Json))).toBe(JSON.stringify(v))
      }),
      { seed, numRuns: 500 },
    )
  })

  it('throws a TypeError naming the cycle for a cyclic value (not JSON), not a stack overflow', () => {
    const value: JsonObject = { a: { b: [] } }
    ;((value.a as JsonObject).b as Json[]).push(value)
    expect(() => JsonValue.copy(value)).toThrow(
      new TypeError("JsonValue.copy: the value is cyclic (at key '0'), not JSON"),
    )
  })

  it('lets a clone of an event with deeply nested fields be written (copy on write)', () => {
    const event = new LogEvent({ deep: nested(100_000) })
    const copy = event.clone()
    copy.set('seen', true)
    expect(copy.get('seen')).toBe(true)
    expect(event.get('seen')).toBeUndefined()
    expect(depthOf(copy.get('deep')!)).toBe(100_000)
  })
})

/** Whether a parsed value holds a number JSON cannot carry (what JSON.parse makes of one too large). */
function holdsNonFinite(value: Json): boolean {
  if (typeof value === 'number') return !Number.isFinite(value)
  if (typeof value !== 'object' || value === null) return false
  return Object.values(value).some(holdsNonFinite)
}

/** A JSON number literal, of any size: up to 400 digits before the point, exponents up to four digits. */
const numberLiteral = fc
  .tuple(
    fc.boolean(),
    fc.oneof(
      fc.constant('0'),
      fc
        .tuple(
          fc.integer({ min: 1, max: 9 }),
          fc.integer({ min: 0, max: 400 }),
          fc.integer({ min: 0, max: 9 }),
        )
        .map(([lead, n, d]) => `${lead}${String(d).repeat(n)}`),
    ),
    fc.option(fc.integer({ min: 0, max: 300 }).map((n) => `.${'0'.repeat(n)}7`)),
    fc.option(
      fc
        .tuple(fc.constantFrom('e', 'E', 'e+', 'e-', 'E-'), fc.integer({ min: 0, max: 2000 }), fc.boolean())
        .map(([e, n, pad]) => `${e}${pad ? '0' : ''}${n}`),
    ),
  )
  .map(([minus, int, fraction, exponent]) => `${minus ? '-' : ''}${int}${fraction ?? ''}${exponent ?? ''}`)

/** JSON texts holding such numbers, and strings that look like them (`"e400"`, escaped quotes). */
const jsonText: fc.Arbitrary<string> = fc.letrec<{ value: string }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    numberLiteral,
    numberLiteral.map((n) => JSON.stringify(`x${n}\\"${n}`)),
    fc.constantFrom('true', 'null', '"e999"', `"${'9'.repeat(400)}"`),
    fc.array(tie('value'), { maxLength: 4 }).map((items) => `[${items.join(', ')}]`),
    fc
      .array(fc.tuple(fc.constantFrom('a', 'e400', '1e999'), tie('value')), { maxLength: 4 })
      .map((entries) => `{${entries.map(([k, v], i) => `"${k}${i}":${v}`).join(',')}}`),
  ),
})).value

/** `JsonValue.numberOutOfRange` of a text and what JSON.parse makes of it. */
const outOfRange = (text: string) => JsonValue.numberOutOfRange(text, JSON.parse(text) as Json)

describe('JsonValue.numberOutOfRange', () => {
  it('finds a number JSON.parse reads as Infinity exactly when there is one, and where', () => {
    let found = 0
    fc.assert(
      fc.property(jsonText, (text) => {
        const parsed = JSON.parse(text) as Json
        const out = JsonValue.numberOutOfRange(text, parsed)
        expect(out !== undefined).toBe(holdsNonFinite(parsed))
        if (out === undefined) return
        found++
        expect(text.startsWith(out.number, out.offset)).toBe(true)
        expect(Number.isFinite(Number(out.number))).toBe(false)
      }),
      { numRuns: 2000 },
    )
    expect(found).toBeGreaterThan(100)
  })

  it('names the number and its offset, past strings that hold numbers and escaped quotes', () => {
    const text = '{"a":"1e999 \\" 2e999","b":[1e308, -1e309]}'
    expect(outOfRange(text)).toEqual({
      offset: text.indexOf('-1e309'),
      number: '-1e309',
      shown: '-1e309',
    })
  })

  it('finds 309 digits, and 210 digits with a two-digit exponent; not 308, not 10^308', () => {
    const big = `1${'0'.repeat(209)}e99` // 10^308: fits
    const bigger = `2${'0'.repeat(209)}e99` // 2 × 10^308: does not
    expect(outOfRange(`[${big}]`)).toBeUndefined()
    expect(outOfRange(`[${bigger}]`)).toEqual({
      offset: 1,
      number: bigger,
      shown: '20000000000000000000… (213 characters)',
    })
    expect(outOfRange(`${'9'.repeat(309)}`)).toMatchObject({
      offset: 0,
      number: '9'.repeat(309),
    })
    expect(outOfRange(`${'9'.repeat(308)}`)).toBeUndefined()
  })

  it('leaves numbers too small or too precise alone: JSON.parse makes them 0 or rounds them', () => {
    expect(outOfRange('[1e-400, 9007199254740993, 1.7976931348623157e308]')).toBeUndefined()
  })

  it('searches a value nested 100 000 deep without recursion, and finds the number in it', () => {
    const deep = `${'['.repeat(100_000)}1e999${']'.repeat(100_000)}`
    expect(outOfRange(deep)).toMatchObject({ offset: 100_000, number: '1e999' })
    expect(outOfRange(`${'{"a":['.repeat(50_000)}1${']}'.repeat(50_000)}`)).toBeUndefined()
  })

  it('answers for the value parsed: a number a later duplicate key replaced is not in it', () => {
    expect(outOfRange('{"a":1e400,"a":1}')).toBeUndefined()
    expect(outOfRange('{"a":1,"a":1e400}')).toMatchObject({ offset: 11, number: '1e400' })
    // The value holds -9e999; where is the text's first number out of range, the replaced 1e400.
    expect(outOfRange('{"a":1e400,"a":2,"b":-9e999}')).toMatchObject({ offset: 5, number: '1e400' })
  })
})
