// The bytes the writer just wrote, held for the reader at the tail: what a lookup finds, and the bound.
import { describe, expect, it } from 'vitest'
import type { Segment } from '../src/internal/Segment.js'
import { TailCache } from '../src/internal/TailCache.js'

const segment = (firstSeq: number): Segment => ({
  firstSeq,
  name: `${firstSeq}`,
  size: 0,
  visible: 0,
  sealed: false,
})
const bytes = (text: string): Buffer => Buffer.from(text)

describe('TailCache', () => {
  it('finds bytes held in one group, from any offset inside it, up to what was asked', () => {
    const cache = new TailCache()
    const seg = segment(0)
    cache.add(seg, 0, [bytes('abc'), bytes('def')], 6)
    cache.add(seg, 6, [bytes('ghij')], 4)
    expect(cache.slice(seg, 0, 2, 100)?.toString()).toBe('abcdef')
    expect(cache.slice(seg, 4, 2, 100)?.toString()).toBe('ef')
    expect(cache.slice(seg, 4, 1, 1)?.toString()).toBe('e')
    expect(cache.slice(seg, 7, 3, 100)?.toString()).toBe('hij')
    expect(cache.bytes).toBe(10)
  })

  it('finds nothing that is not held whole in one group: across groups, past the end, another segment', () => {
    const cache = new TailCache()
    const seg = segment(0)
    cache.add(seg, 10, [bytes('abcdef')], 6)
    cache.add(seg, 16, [bytes('ghij')], 4)
    expect(cache.slice(seg, 14, 4, 100)).toBeUndefined() // 'ef' + 'gh': two groups
    expect(cache.slice(seg, 18, 3, 100)).toBeUndefined() // past what was written
    expect(cache.slice(seg, 5, 1, 100)).toBeUndefined() // before what is held
    expect(cache.slice(segment(0), 10, 1, 100)).toBeUndefined() // another segment, even of the same number
  })

  it('holds a copy: the writer reusing its buffers changes nothing held', () => {
    const cache = new TailCache()
    const seg = segment(0)
    const part = bytes('abc')
    cache.add(seg, 0, [part], 3)
    part.fill(0)
    expect(cache.slice(seg, 0, 3, 3)?.toString()).toBe('abc')
  })

  it('holds at most MAX_BYTES, dropping the oldest groups first, and never a group larger than that', () => {
    const cache = new TailCache()
    const seg = segment(0)
    const third = Math.floor(TailCache.MAX_BYTES / 3)
    for (let i = 0; i < 4; i++) cache.add(seg, i * third, [Buffer.alloc(third, i)], third)
    expect(cache.bytes).toBe(3 * third)
    expect(cache.slice(seg, 0, 1, 1)).toBeUndefined() // the oldest went
    expect(cache.slice(seg, 3 * third, 1, 1)?.[0]).toBe(3)
    const big = TailCache.MAX_BYTES + 1
    cache.add(seg, 4 * third, [Buffer.alloc(big)], big)
    expect(cache.bytes).toBe(3 * third)
    expect(cache.slice(seg, 4 * third, 1, 1)).toBeUndefined()
  })
})
