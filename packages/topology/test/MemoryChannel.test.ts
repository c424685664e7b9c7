// The in-memory channel on its own: order, reuse of its queue, its bound, blocked producers and a
// forced stop. Counts and orders, never times.
import { BatchNotifier, EventArray } from '@ackline/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { EMPTY, type MemoryChannel, RESOLVED, WAKE_AT } from '../src/internal/MemoryChannel.js'
import { blockingChannel as channel } from './support/blockingChannel.js'

/** An array of `n` events whose fields number them from `first`. */
const numbered = (first: number, n: number): EventArray =>
  EventArray.fromRecords(Array.from({ length: n }, (_, i) => ({ n: first + i })))

const numbers = (array: EventArray): number[] => array.events.map((e) => e.fields.n as number)

describe('MemoryChannel', () => {
  // Small arrays and large ones: coalescing copies the two kinds differently (a loop, `concat`).
  it('hands out every event once, in order, through pushes, pulls, coalescing and drains (property)', () => {
    const op = fc.oneof(
      fc.record({
        kind: fc.constant('push' as const),
        size: fc.oneof(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 16, max: 40 })),
      }),
      fc.record({ kind: fc.constant('pull' as const) }),
      fc.record({
        kind: fc.constant('coalesce' as const),
        upTo: fc.oneof(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 30, max: 150 })),
      }),
    )
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
        const c = channel(1_000_000)
        let next = 0
        const out: number[] = []
        const take = (coalesceUpTo?: number): void => {
          const first = c.tryPull()
          if (first === EMPTY || first === undefined) return
          const array = coalesceUpTo === undefined ? first : c.coalesce(first, coalesceUpTo)
          out.push(...numbers(array))
          array.end('delivered')
        }
        for (const o of ops) {
          if (o.kind === 'push') {
            void c.push(numbered(next, o.size))
            next += o.size
          } else take(o.kind === 'coalesce' ? o.upTo : undefined)
        }
        for (;;) {
          const before = out.length
          take()
          if (out.length === before) break
        }
        expect(out).toEqual(Array.from({ length: next }, (_, i) => i))
        expect(c.queuedEvents).toBe(0)
      }),
    )
  })

  it('coalesces more arrays than one call takes as arguments (a sink with millions of maxEvents)', () => {
    // The same array pushed again and again: the channel only copies references, and this keeps
    // the test small while the count of arrays passes V8's limit on a call's arguments (~125,000).
    const c = channel(10_000_000)
    const array = numbered(0, 16)
    for (let i = 0; i < 140_001; i++) void c.push(array)
    const first = c.tryPull() as EventArray
    const all = c.coalesce(first)
    expect(all.length).toBe(140_001 * 16)
    expect(all.events[16 * 140_000 + 15]).toBe(array.events[15])
    expect(c.queuedEvents).toBe(0)
    array.end('delivered')
  })

  it('reuses its queue after each drain, and lets a burst that grew it go', () => {
    const c = channel(1_000_000)
    for (let i = 0; i < 1000; i++) {
      void c.push(numbered(i, 1))
      ;(c.tryPull() as EventArray).end('delivered')
    }
    expect(c.slots).toBe(1) // one slot, used again for every array
    for (let i = 0; i < 2000; i++) void c.push(numbered(i, 1))
    expect(c.slots).toBe(2000)
    for (let i = 0; i < 2000; i++) (c.tryPull() as EventArray).end('delivered')
    expect(c.slots).toBe(0)
  })

  it('keeps its queue bounded under a steady backlog that never drains', () => {
    const c = channel(1_000_000)
    let pushed = 0
    let taken = 0
    for (let i = 0; i < 100; i++) void c.push(numbered(pushed++, 1)) // the backlog
    for (let i = 0; i < 20_000; i++) {
      void c.push(numbered(pushed++, 1))
      const array = c.tryPull() as EventArray
      expect(numbers(array)).toEqual([taken++])
      array.end('delivered')
    }
    expect(c.queuedEvents).toBe(100)
    expect(c.slots).toBeLessThan(2 * 1024 + 200)
  })

  it('admits blocked producers in order as room frees, and a forced stop settles what is left', async () => {
    const c = channel(2)
    const admitted: number[] = []
    void c.push(numbered(0, 2))
    const waits = [2, 3, 4].map((n) => c.push(numbered(n, 1)).then(() => admitted.push(n)))
    ;(c.tryPull() as EventArray).end('delivered') // room for two
    await Promise.resolve()
    expect(admitted).toEqual([2, 3])
    const next = c.tryPull() as EventArray
    expect(numbers(next)).toEqual([2])
    next.end('delivered')
    await Promise.all(waits.slice(0, 2))
    expect(c.queuedEvents).toBe(2) // 3 and 4
    expect(c.force('errored')).toBe(2)
    await waits[2]
    expect(admitted).toEqual([2, 3, 4])
    expect(c.tryPull()).toBeUndefined() // closed and empty
  })

  describe('a consumer waiting in pull', () => {
    /** Ends `array` delivered and returns its numbers. */
    const taken = (array: EventArray | undefined): number[] => {
      if (array === undefined) return []
      const list = numbers(array)
      array.end('delivered')
      return list
    }

    it('is woken once the burst that fed it is over, and coalesces the burst behind its array', async () => {
      const c = channel(100)
      const pulled = c.pull()
      let woken = false
      void pulled.then(() => (woken = true))
      // A producer sending in microtasks, as a source whose sends find room does.
      for (let i = 0; i < 10; i++) {
        await c.push(numbered(i, 1))
        expect(woken).toBe(false)
      }
      const first = (await pulled)!
      expect(numbers(first)).toEqual([0]) // handed over at the first push, outside the queue
      expect(c.queuedEvents).toBe(9)
      expect(taken(c.coalesce(first))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
      expect(c.queuedEvents).toBe(0)
    })

    it(`is woken without waiting for the burst's end once ${WAKE_AT} events wait, or by an array that large`, async () => {
      const c = channel(1000)
      let got: EventArray | undefined
      void c.pull().then((array) => (got = array))
      for (let i = 0; i < WAKE_AT - 1; i++) void c.push(numbered(i, 1))
      await Promise.resolve()
      await Promise.resolve()
      expect(got).toBeUndefined() // the burst is not over and fewer than WAKE_AT wait
      void c.push(numbered(WAKE_AT - 1, 1))
      await Promise.resolve()
      expect(numbers(got!)).toEqual([0])
      expect(c.queuedEvents).toBe(WAKE_AT - 1)
      expect(taken(c.coalesce(got!))).toHaveLength(WAKE_AT)

      let large: EventArray | undefined
      void c.pull().then((array) => (large = array))
      void c.push(numbered(0, WAKE_AT))
      await Promise.resolve()
      expect(large?.length).toBe(WAKE_AT)
    })

    it('that finds a few events queued waits for the end of their burst; a full wake, a blocked producer or a close is taken at once', async () => {
      const c = channel(1000)
      void c.push(numbered(0, 1))
      void c.push(numbered(1, 1))
      expect(c.pullNow()).toBe(EMPTY)
      let got: EventArray | undefined
      void c.pull().then((array) => (got = array))
      void c.push(numbered(2, 1))
      await Promise.resolve()
      await Promise.resolve()
      expect(got).toBeUndefined()
      await new Promise((resolve) => setImmediate(resolve))
      expect(taken(c.coalesce(got!))).toEqual([0, 1, 2])

      for (let i = 0; i < WAKE_AT; i++) void c.push(numbered(i, 1))
      expect(taken(c.coalesce(c.pullNow() as EventArray))).toHaveLength(WAKE_AT)

      const small = channel(4) // a full channel is a full wake
      void small.push(numbered(0, 4))
      expect(taken(small.pullNow() as EventArray)).toEqual([0, 1, 2, 3])
      void small.push(numbered(0, 3))
      void small.push(numbered(3, 2)) // blocked: 3 + 2 > 4
      expect(taken(small.pullNow() as EventArray)).toEqual([0, 1, 2])
      expect(small.pullNow()).toBe(EMPTY) // [3, 4] admitted, and no one blocked any more
      await small.close()
      expect(taken(small.pullNow() as EventArray)).toEqual([3, 4])
      expect(small.pullNow()).toBeUndefined()
    })

    it('whose wake is scheduled is handed its array at once by a second pull, a producer that finds the channel full, or a close', async () => {
      const wakeNow = async (act: (c: MemoryChannel) => void, max = 100): Promise<number[] | undefined> => {
        const c = channel(max)
        let got: EventArray | undefined
        void c.pull().then((array) => (got = array))
        void c.push(numbered(0, 1)) // held for the consumer; its wake is scheduled
        act(c)
        await Promise.resolve()
        return got === undefined ? undefined : taken(got)
      }
      expect(await wakeNow(() => {})).toBeUndefined() // nothing else: it waits for the burst's end
      expect(await wakeNow((c) => void c.pull())).toEqual([0])
      expect(await wakeNow((c) => void c.push(numbered(1, 100)))).toEqual([0]) // blocked: 100 + 100 > 100
      expect(await wakeNow((c) => void c.close())).toEqual([0])
    })

    it('a second pull while the first one waits for its wake loses nothing', async () => {
      const c = channel(100)
      const first = c.pull()
      void c.push(numbered(0, 1))
      const second = c.pull()
      void c.push(numbered(1, 1))
      expect(taken(await first)).toEqual([0])
      expect(taken(await second)).toEqual([1])
    })

    it('is woken even when a fake-timer library replaced process.nextTick', async () => {
      const original = process.nextTick
      let faked = 0
      // A fake that never runs what it is given, as fake timers do until the test advances them.
      process.nextTick = (() => void faked++) as typeof process.nextTick
      try {
        const c = channel(100)
        const pulled = c.pull()
        void c.push(numbered(0, 1))
        expect(taken(await pulled)).toEqual([0])
      } finally {
        process.nextTick = original
      }
      expect(faked).toBe(0)
    })

    it('does not count the array handed to it against maxEvents', async () => {
      const c = channel(1)
      const pulled = c.pull()
      expect(c.push(numbered(0, 1))).toBe(RESOLVED) // handed over
      expect(c.push(numbered(1, 1))).toBe(RESOLVED) // queued: the one event the channel holds
      let admitted = false
      void c.push(numbered(2, 1)).then(() => (admitted = true)) // waits for room
      expect(taken(await pulled)).toEqual([0])
      expect(admitted).toBe(false)
      expect(taken(c.tryPull() as EventArray)).toEqual([1])
      await Promise.resolve()
      expect(admitted).toBe(true)
    })

    it('that stops waiting before its wake leaves its array at the head of the queue', async () => {
      const c = channel(100)
      const controller = new AbortController()
      const pulled = c.pull(controller.signal)
      void c.push(numbered(0, 1))
      void c.push(numbered(1, 2))
      controller.abort()
      expect(await pulled).toBeUndefined()
      await new Promise((resolve) => setImmediate(resolve)) // the wake has run, and handed nothing
      expect(c.queuedEvents).toBe(3)
      expect(taken(c.coalesce(c.tryPull() as EventArray))).toEqual([0, 1, 2])
    })

    it('is handed nothing when a forced stop came before its wake, which settles its array', async () => {
      const c = channel(100)
      const pulled = c.pull()
      const notifier = BatchNotifier.open('in')
      void c.push(EventArray.fromRecords([{ n: 0 }, { n: 1 }], { batch: notifier }))
      void c.push(numbered(2, 1))
      expect(c.force('errored')).toBe(3) // the handed-over array counts among what it settled
      expect(await notifier.receiver).toBe('errored')
      expect(await pulled).toBeUndefined()
      expect(c.tryPull()).toBeUndefined()
    })

    it('with a signal, answered by a forced stop, is not disturbed by an abort after it', async () => {
      const c = channel(100)
      const controller = new AbortController()
      const pulled = c.pull(controller.signal)
      void c.push(numbered(0, 1))
      expect(c.force('errored')).toBe(1)
      controller.abort() // threw inside the listener, and left the pull waiting, before the fix
      expect(await pulled).toBeUndefined()
      expect(c.tryPull()).toBeUndefined()
      expect(c.queuedEvents).toBe(0)
    })
  })
})
