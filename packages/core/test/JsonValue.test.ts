import { type JsonValue as Json, type JsonObject, JsonValue, LogEvent } from '@ackline/core'
import { describe, expect, it } from 'vitest'

/** `{ a: [ { a: [ … 0 … ] } ] }`, `levels` containers deep, as JSON.parse makes it (it takes any depth). */
const nested = (levels: number): Json =>
  JSON.parse(`${'{"a":['.repeat(levels / 2)}0${']}'.repeat(levels / 2)}`)

/** The depth of a value made by {@link nested}, counted without recursion. */
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
