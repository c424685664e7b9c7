import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'
import { ownTables } from '../src/internal/ownTables.js'

// amqplib's own table codec (not exported by its package): what the broker sends and what a copy is written as.
const codec = createRequire(createRequire(import.meta.url).resolve('amqplib'))('./lib/codec.js') as {
  encodeTable(buffer: Buffer, table: object, offset: number): number
  decodeFields(slice: Buffer): Record<string, unknown>
}

describe('ownTables', () => {
  it('copies arrays and tables nested deeper than a recursion could go (amqplib decodes them), in order', () => {
    // A header of arrays 2,200 deep encodes and decodes (amqplib reads some 11,000): the copy of a
    // rejected message threw RangeError at its headers, and the message was left unacked for good.
    const depth = 12_000
    let value: unknown = 'leaf'
    for (let i = 0; i < depth; i++) value = i % 2 === 0 ? [value, i] : { a: value, b: i }
    let copy = ownTables(value)
    for (let i = depth - 1; i >= 0; i--) {
      if (i % 2 === 0) {
        expect(Array.isArray(copy)).toBe(true)
        expect((copy as unknown[])[1]).toBe(i)
        copy = (copy as unknown[])[0]
      } else {
        expect(Object.keys(copy as object)).toEqual(['a', 'b'])
        expect((copy as { b: number }).b).toBe(i)
        copy = (copy as { a: unknown }).a
      }
    }
    expect(copy).toBe('leaf')
  })

  it('keeps every type amqplib decodes, and a __proto__ header at any depth, as amqplib reads them again (by design)', () => {
    // Every type amqplib encodes, and headers named __proto__ (JSON.parse makes them own keys).
    const original = Object.assign(
      JSON.parse(
        '{"s":"x","i":-5,"big":1099511627776,"d":1.5,"t":true,"v":null,"arr":[[1,[2,"y"]],{"k":[]}],' +
          '"tab":{"__proto__":{"deep":1},"b":2},"list":[{"__proto__":[1,{"__proto__":{"z":null}}]}]}',
      ) as object,
      {
        bytes: Buffer.from([0, 255, 1]),
        decimal: { '!': 'decimal', value: { places: 2, digits: 12345 } },
        timestamp: { '!': 'timestamp', value: 1_700_000_000 },
        float: { '!': 'float', value: 0.5 },
        long: { '!': 'long', value: 2 ** 40 },
      },
    )
    const sent = Buffer.alloc(4096)
    const size = codec.encodeTable(sent, original, 0)
    const read = codec.decodeFields(sent.subarray(4, size))
    const copy = Buffer.alloc(4096)
    const copied = codec.encodeTable(copy, ownTables(read) as object, 0)
    // The copy, read by amqplib and copied again, is written byte for byte as it was.
    const twice = Buffer.alloc(4096)
    const twiceSize = codec.encodeTable(
      twice,
      ownTables(codec.decodeFields(copy.subarray(4, copied))) as object,
      0,
    )
    expect(twice.subarray(0, twiceSize)).toEqual(copy.subarray(0, copied))
    const back = codec.decodeFields(copy.subarray(4, copied))
    expect(Object.getPrototypeOf(back.tab)).toEqual({ deep: 1 })
    expect(back.bytes).toEqual(Buffer.from([0, 255, 1]))
    expect(back.decimal).toEqual({ '!': 'decimal', value: { places: 2, digits: 12345 } })
    expect(back.timestamp).toEqual({ '!': 'timestamp', value: 1_700_000_000 })
    expect(back.big).toBe(1099511627776)
    expect(back.long).toBe(2 ** 40)
    expect(back.float).toBe(0.5)
    expect(back.arr).toEqual([[1, [2, 'y']], { k: [] }])
    const [item] = back.list as object[]
    expect(Object.keys(item!)).toEqual([])
    const inner = Object.getPrototypeOf(item) as unknown[]
    expect(inner[0]).toBe(1)
    expect(Object.getPrototypeOf(inner[1])).toEqual({ z: null })
  })
})
