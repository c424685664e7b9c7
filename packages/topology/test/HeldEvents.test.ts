// Unit test of an internal module (`src/internal/HeldEvents.ts`), so it imports it by path: the
// queue a transform runner keeps its held events in must agree with a plain set of them, whatever
// order events leave in, which no public call shows directly (fast-check prints the seed).
import { LogEvent } from '@ackline/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { HeldEvents } from '../src/internal/HeldEvents.js'

/** One step of a random run: hold a new event, or act on the held event at `at` (mod the count). */
type Step =
  | { readonly op: 'add' }
  | { readonly op: 'leave' | 'end'; readonly at: number }
  | { readonly op: 'leaveFront' | 'leaveStranger' | 'settle' }
  | { readonly op: 'takeFront'; readonly count: number; readonly stranger: boolean }

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ op: 'add' as const }) },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constantFrom('leave' as const, 'end' as const), at: fc.nat() }),
  },
  { weight: 2, arbitrary: fc.constantFrom({ op: 'leaveFront' as const }, { op: 'leaveStranger' as const }) },
  { weight: 1, arbitrary: fc.constant({ op: 'settle' as const }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('takeFront' as const), count: fc.nat(), stranger: fc.boolean() }),
  },
)

describe('HeldEvents', () => {
  it('holds exactly the events added that neither ended nor left, in the order added', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 400 }), (steps) => {
        const held = new HeldEvents()
        // The model: the events still held, in the order added.
        let model: LogEvent[] = []
        let n = 0
        for (const s of steps) {
          switch (s.op) {
            case 'add': {
              const event = new LogEvent({ n: n++ })
              held.add(event)
              model.push(event)
              break
            }
            case 'leave':
            case 'end': {
              if (model.length === 0) break
              const event = model[s.at % model.length]!
              if (s.op === 'leave') held.leave(event)
              else event.end()
              model = model.filter((e) => e !== event)
              break
            }
            case 'leaveFront': {
              const event = model[0]
              if (event === undefined) break
              held.leave(event)
              model.shift()
              break
            }
            case 'leaveStranger':
              // An event the call made, or one of its own inputs: never held.
              held.leave(new LogEvent({ stranger: true }))
              break
            case 'settle':
              held.settle()
              break
            case 'takeFront': {
              // The oldest events in order (what a window emits), perhaps followed by one never
              // held: frontRun counts the held ones, unless a leaver is still noted (then none).
              const front = model.slice(0, s.count % (model.length + 1))
              const list = s.stranger ? [...front, new LogEvent({ stranger: true })] : front
              const noted = held.noted
              const run = held.frontRun(list)
              expect(run).toBe(noted > 0 ? 0 : front.length)
              held.takeFront(run)
              model = model.slice(run)
              break
            }
          }
          expect(held.live()).toEqual(model)
          if (model.length > 0) expect(held.isEmpty).toBe(false)
        }
        held.settle()
        expect(held.live()).toEqual(model)
        expect(held.isEmpty).toBe(model.length === 0)
      }),
      { numRuns: 300 },
    )
  })

  it('a window that holds n events keeps its queue within a constant factor of n', () => {
    const held = new HeldEvents()
    const window: LogEvent[] = []
    let peak = 0
    for (let i = 0; i < 50_000; i++) {
      const event = new LogEvent({ i })
      held.add(event)
      window.push(event)
      if (window.length > 1000) held.leave(window.shift()!)
      if (i % 10 === 9) held.settle()
      peak = Math.max(peak, held.slots)
    }
    expect(held.live()).toHaveLength(1000)
    expect(peak).toBeLessThanOrEqual(4 * 1000)
  })

  it('holds the right events after a burst it compacted down, reusing and cutting its queue', () => {
    // The queue is no longer cut to its live length at each compaction (it was grown back by
    // copying, a fifth of a window's time at 10,000 held), only when far larger than what it holds.
    const held = new HeldEvents()
    const burst = Array.from({ length: 5000 }, (_, i) => new LogEvent({ i }))
    for (const event of burst) held.add(event)
    held.settle()
    for (const event of burst.slice(0, 4998)) held.leave(event)
    held.settle()
    expect(held.live()).toEqual(burst.slice(4998))
    const more = Array.from({ length: 3 }, (_, i) => new LogEvent({ more: i }))
    for (const event of more) held.add(event)
    held.leave(burst[4998]!)
    held.settle()
    expect(held.live()).toEqual([burst[4999], ...more])
    expect(held.slots).toBe(4)
  })

  it('forgets merged events and strangers at a compaction, so they are not kept for ever', () => {
    const held = new HeldEvents()
    const first = new LogEvent({ group: 1 })
    held.add(first)
    for (let i = 0; i < 10_000; i++) {
      const merged = new LogEvent({ i })
      held.add(merged)
      merged.end()
      held.leave(new LogEvent({ created: i }))
      held.settle()
    }
    expect(held.live()).toEqual([first])
    expect(held.slots).toBeLessThanOrEqual(2 * 64)
  })

  it('reads ended events at the front once, not at every call that finds nothing to take there', () => {
    // Events merged in place before the oldest live one: a call that takes nothing from the
    // front (it passes its inputs on) must not step over them again and again.
    const held = new HeldEvents()
    const events = Array.from({ length: 10_001 }, (_, i) => new LogEvent({ i }))
    for (const event of events) held.add(event)
    held.settle()
    for (const event of events.slice(0, 10_000)) events[10_000]!.merge(event)
    const isEnded = Object.getOwnPropertyDescriptor(LogEvent.prototype, 'isEnded')!
    let reads = 0
    Object.defineProperty(LogEvent.prototype, 'isEnded', {
      configurable: true,
      get(this: LogEvent) {
        reads++
        return isEnded.get!.call(this)
      },
    })
    try {
      for (let call = 0; call < 1000; call++) {
        expect(held.frontRun([new LogEvent({ call })])).toBe(0)
        held.settle()
      }
    } finally {
      Object.defineProperty(LogEvent.prototype, 'isEnded', isEnded)
    }
    expect(held.live()).toEqual([events[10_000]])
    // Each ended event read about once, and the live one once a call: not 10,000 a call.
    expect(reads).toBeGreaterThan(10_000)
    expect(reads).toBeLessThan(3 * (10_000 + 1000))
  })

  it('cuts its array back after a burst, once a window lets the burst go from the front', () => {
    const held = new HeldEvents()
    const window: LogEvent[] = []
    for (let i = 0; i < 200_000; i++) {
      const event = new LogEvent({ i })
      held.add(event)
      window.push(event)
    }
    held.settle()
    for (let call = 0; call < 50_000; call++) {
      for (let k = 0; k < 10; k++) {
        const event = new LogEvent({ call, k })
        held.add(event)
        window.push(event)
      }
      // Down to 10,000 held, 100 leaving a call; then 10 a call, as many as come in.
      const leaving = window.length > 10_000 ? Math.min(window.length - 10_000, 100) : 10
      for (const event of window.splice(0, leaving)) held.leave(event)
      held.settle()
    }
    expect(held.live()).toHaveLength(window.length)
    expect(held.capacity).toBeLessThanOrEqual(8 * window.length)
  })

  it('takes the front in order over events ended between the ones taken', () => {
    const held = new HeldEvents()
    const [a, b, c, d] = [1, 2, 3, 4].map((i) => new LogEvent({ i }))
    for (const event of [a!, b!, c!, d!]) held.add(event)
    b!.end()
    expect(held.frontRun([a!, c!])).toBe(2)
    held.takeFront(2)
    expect(held.live()).toEqual([d])
    expect(held.frontRun([d!])).toBe(1)
  })
})
