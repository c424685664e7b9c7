import { LogEvent, RecordId } from '@ackline/core'
import { describe, expect, it } from 'vitest'

describe('RecordId', () => {
  it('a source sets the identity on the fields and a sink reads it from the event', () => {
    const fields = RecordId.set({ order: 42 }, 'orders:42')
    expect(fields).toEqual({ order: 42, _recordId: 'orders:42' })
    expect(RecordId.of(new LogEvent(fields))).toBe('orders:42')
  })

  it('travels with the fields of a copy', () => {
    const event = new LogEvent(RecordId.set({ n: 1 }, 'src/1'))
    expect(RecordId.of(event.clone())).toBe('src/1')
  })

  it('is none unless the field holds a non-empty string', () => {
    for (const value of [undefined, '', 7, null, { id: 'x' }, ['x']]) {
      const fields = value === undefined ? {} : { _recordId: value }
      expect(RecordId.of(new LogEvent(fields as never))).toBeUndefined()
    }
  })

  it('refuses fields that are no object (null, from untyped code) with a TypeError naming RecordId.set', () => {
    expect(() => RecordId.set(null as never, 'a')).toThrow(
      /^RecordId\.set: the fields must be an object, got null$/,
    )
    expect(() => RecordId.set('text' as never, 'a')).toThrow(
      /^RecordId\.set: the fields must be an object, got "text"$/,
    )
  })

  it('refuses an empty id, naming the helper', () => {
    expect(() => RecordId.set({}, '')).toThrow(/RecordId.set: the id must be a non-empty string/)
  })

  it('says what it got for an id JSON cannot print: a BigInt, a Symbol, an object without a prototype', () => {
    // JSON.stringify threw its own TypeError ('Do not know how to serialize a BigInt') instead.
    expect(() => RecordId.set({}, 10n as never)).toThrow('the id must be a non-empty string, got 10n')
    expect(() => RecordId.set({}, Symbol('s') as never)).toThrow('got Symbol(s)')
    expect(() => RecordId.set({}, Object.create(null) as never)).toThrow('got [object Object]')
  })
})
