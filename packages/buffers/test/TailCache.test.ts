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
  it('finds bytes written one group after the other, from any offset, up to what was asked and no further than written', () => {
    const cache = new TailCache()
    const seg = segment(0)
    cache.add(seg, 0, [bytes('abc'), bytes('def')], 6)
    cache.add(seg, 6, [bytes('ghij')], 4)
    expect(cache.slice(seg, 0, 2, 100)?.toString()).toBe('abcdefghij') // one view across both groups
    expect(cache.slice(seg, 4, 2, 100)?.toString()).toBe('efghij')
    expect(cache.slice(seg, 4, 1, 1)?.toString()).toBe('e')
    expect(cache.slice(seg, 7, 3, 100)?.toString()).toBe('hij')
    expect(cache.slice(seg, 8, 3, 100)).toBeUndefined() // past what was written
  })

  it('finds nothing it does not hold: before it, in another segment, across a gap', () => {
    const cache = new TailCache()
    const seg = segment(0)
    cache.add(seg, 10, [bytes('abcdef')], 6)
    cache.add(seg, 20, [bytes('ghij')], 4) // not where the last ended: a chunk of its own
    expect(cache.slice(seg, 5, 1, 100)).toBeUndefined()
    expect(cache.slice(seg, 14, 4, 100)).toBeUndefined() // 'ef' and then bytes it never saw
    expect(cache.slice(seg, 14, 2, 100)?.toString()).toBe('ef')
    expect(cache.slice(seg, 20, 4, 100)?.toString()).toBe('ghij')
    expect(cache.slice(segment(0), 10, 1, 100)).toBeUndefined() // another segment, even of the same number
  })

  it('holds a copy, and a view taken earlier does not change as more is written', () => {
    const cache = new TailCache()
    const seg = segment(0)
    const part = bytes('abc')
    cache.add(seg, 0, [part], 3)
    part.fill(0)
    const view = cache.slice(seg, 0, 3, 100)!
    cache.add(seg, 3, [bytes('def')], 3)
    expect(view.toString()).toBe('abc')
    expect(cache.slice(seg, 0, 3, 100)?.toString()).toBe('abcdef')
  })

  it('holds at most MAX_BYTES, dropping the oldest chunks first, and never a group larger than that', () => {
    const cache = new TailCache()
    const seg = segment(0)
    const group = TailCache.CHUNK_BYTES
    const groups = TailCache.MAX_BYTES / group + 2
    for (let i = 0; i < groups; i++) cache.add(seg, i * group, [Buffer.alloc(group, i)], group)
    expect(cache.bytes).toBe(TailCache.MAX_BYTES)
    expect(cache.slice(seg, 0, 1, 1)).toBeUndefined() // the oldest went
    expect(cache.slice(seg, 2 * group, 1, 1)?.[0]).toBe(2) // the oldest kept
    expect(cache.slice(seg, (groups - 1) * group, 1, 1)?.[0]).toBe(groups - 1)
    const big = TailCache.MAX_BYTES + 1
    cache.add(seg, groups * group, [Buffer.alloc(big)], big)
    expect(cache.bytes).toBe(TailCache.MAX_BYTES)
    expect(cache.slice(seg, groups * group, 1, 1)).toBeUndefined()
  })

  it('keeps many small groups in few chunks: adding and finding stay cheap however many there are', () => {
    const cache = new TailCache()
    const seg = segment(0)
    const group = 22 // one small record a group
    const count = (4 * TailCache.MAX_BYTES) / group
    for (let i = 0; i < count; i++) cache.add(seg, i * group, [Buffer.alloc(group, i & 0xff)], group)
    expect(cache.bytes).toBeLessThanOrEqual(TailCache.MAX_BYTES)
    // A reader behind the tail gets a chunk's worth in one view, not one group.
    const behind = (count - Math.floor(TailCache.MAX_BYTES / 2 / group)) * group
    expect(cache.slice(seg, behind, group, 1 << 20)!.length).toBeGreaterThan(100 * group)
  })
})
