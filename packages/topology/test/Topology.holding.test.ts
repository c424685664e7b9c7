// What holding costs through the runner, counted (never timed): a transform with `flush` that
// holds events across calls must get the quick check on its every in-order call, and keep its
// queue's array within a constant factor of what it holds. The runner's queue is an internal
// module (`src/internal/HeldEvents.ts`), watched here by wrapping its prototype's methods: `add`
// finds the instance, `leave` runs only in the general check.
import type { JsonObject, LogEvent } from '@ackline/core'
import type { Transform, TransformContext } from '@ackline/topology'
import { afterEach, describe, expect, it } from 'vitest'
import { HeldEvents } from '../src/internal/HeldEvents.js'
import { n, run, through } from './support/Harness.js'
import { testSink, testSource } from './support/TestComponents.js'

const { add, leave } = HeldEvents.prototype
/** The queue the run's transform holds in, and how many events the general check let leave. */
const watched: { queue: HeldEvents | undefined; leaves: number } = { queue: undefined, leaves: 0 }

function watch(): void {
  watched.queue = undefined
  watched.leaves = 0
  HeldEvents.prototype.add = function (this: HeldEvents, event: LogEvent) {
    watched.queue = this
    add.call(this, event)
  }
  HeldEvents.prototype.leave = function (this: HeldEvents, event: LogEvent) {
    watched.leaves++
    leave.call(this, event)
  }
}

afterEach(() => {
  HeldEvents.prototype.add = add
  HeldEvents.prototype.leave = leave
})

/** `count` batches of `size` records, numbered from 0. */
const numbered = (count: number, size: number): JsonObject[][] =>
  Array.from({ length: count }, (_, b) => Array.from({ length: size }, (_, i) => ({ n: b * size + i })))

/** A window of `size`: each call passes on its oldest events beyond `size`; `during(call, ...)` runs first. */
function window(
  size: number,
  during: (call: number, held: LogEvent[], context: TransformContext) => void = () => {},
): Transform {
  const held: LogEvent[] = []
  let calls = 0
  return {
    kind: 'window',
    process(events, context) {
      held.push(...events.events)
      during(++calls, held, context)
      while (held.length > size) context.emit(held.shift()!)
    },
    flush(context) {
      for (const event of held.splice(0)) context.emit(event)
    },
  }
}

describe('holding through the runner', () => {
  it('a window takes the quick check on every call and keeps its array near what it holds', async () => {
    watch()
    let peak = 0
    const sink = testSink()
    const transform = window(100, () => {
      peak = Math.max(peak, watched.queue?.capacity ?? 0)
    })
    await run(through(testSource(numbered(5000, 10)), transform, sink))
    expect(sink.received.map((fields) => fields.n)).toEqual(Array.from({ length: 50_000 }, (_, i) => i))
    expect(watched.queue).toBeDefined()
    expect(watched.leaves).toBe(0)
    expect(peak).toBeGreaterThanOrEqual(100)
    expect(peak).toBeLessThanOrEqual(8 * 100 + 1024)
  })

  it('a group that only holds and merges in place keeps its array near what it holds', async () => {
    watch()
    let peak = 0
    let first: LogEvent | undefined
    const group: LogEvent[] = []
    const sink = testSink()
    const transform: Transform = {
      kind: 'group',
      process(events) {
        peak = Math.max(peak, watched.queue?.capacity ?? 0)
        // What the last call held is merged into the first event now; this call's inputs are held.
        for (const event of group.splice(0)) first!.merge(event)
        for (const event of events.events) {
          if (first === undefined) first = event
          else group.push(event)
        }
      },
      flush(context) {
        for (const event of group.splice(0)) first!.merge(event)
        context.emit(first!)
      },
    }
    const source = testSource(numbered(5000, 10))
    await run(through(source, transform, sink))
    expect(sink.received).toEqual([{ n: 0 }])
    expect(new Set(await source.statuses())).toEqual(new Set(['delivered']))
    expect(peak).toBeGreaterThan(0)
    expect(peak).toBeLessThanOrEqual(8 * 64 + 1024)
  })

  it('a window gets its quick check back soon after one event left it out of order', async () => {
    watch()
    const generalChecks: number[] = [] // per call, how many events the general check let leave
    let last = 0
    const transform = window(1000, (call, held, context) => {
      generalChecks.push(watched.leaves - last)
      last = watched.leaves
      if (call === 200) context.emit(held.splice(500, 1)[0]!) // once, from the middle
    })
    const sink = testSink()
    await run(through(testSource(numbered(1000, 10)), transform, sink))
    expect(sink.received).toHaveLength(10_000)
    // generalChecks[c] is what the check of call c did (0-based: the check before call c + 1).
    const general = (from: number, to: number): number =>
      generalChecks.slice(from, to).filter((x) => x > 0).length
    expect(general(101, 199)).toBe(0)
    expect(general(199, 201)).toBeGreaterThan(0) // the out-of-order call itself
    // A window of 1,000 turns over in 100 calls: by 200 calls later the leaver is forgotten.
    expect(general(400, 1000)).toBe(0)
  })

  for (const twice of [false, true]) {
    it(`a queue emptied by merging every held event into an input is compacted and cut${twice ? ' (general check)' : ''}`, async () => {
      watch()
      const held: LogEvent[] = []
      let capacityAfter: number | undefined
      let calls = 0
      // 50 batches of 100 held (5,000), one event that takes them all in, then events passed on.
      const batches = [
        ...numbered(50, 100),
        [{ n: -1, last: true }],
        ...Array.from({ length: 5 }, (_, b) => [{ n: 10_000 + b }]),
      ]
      const transform: Transform = {
        kind: 'joiner',
        process(events, context) {
          if (++calls === 52) capacityAfter = watched.queue?.capacity
          for (const event of events.events) {
            if (event.get('last') === true) {
              for (const kept of held.splice(0)) event.merge(kept)
              context.emit(event)
              if (twice) context.emit(event) // a second emission: a clone, and the general check
            } else if (n(event) < 10_000) held.push(event)
            else context.emit(event)
          }
        },
        flush() {},
      }
      const sink = testSink()
      await run(through(testSource(batches), transform, sink))
      expect(sink.received).toHaveLength(twice ? 7 : 6)
      expect(capacityAfter).toBeDefined()
      expect(capacityAfter!).toBeLessThanOrEqual(1024)
    })
  }

  it('a window that emits a handle it passed on earlier does not note it as a leaver', async () => {
    // Noted, it was kept referenced and turned the quick check off until the next compaction.
    watch()
    const left: LogEvent[] = []
    HeldEvents.prototype.leave = function (this: HeldEvents, event: LogEvent) {
      left.push(event)
      leave.call(this, event)
    }
    let first: LogEvent | undefined
    const sink = testSink()
    const transform = window(10, (call, held, context) => {
      first ??= held[0]
      if (call === 20) context.emit(first!, 'again') // passed on in call 2: not the window's any more
    })
    const facts: unknown[] = []
    const topology = through(testSource(numbered(30, 1)), { ...transform, outputs: ['again'] }, sink)
    topology.lifecycle.subscribe((fact) => facts.push(fact))
    await run(topology)
    expect(facts).toContainEqual(expect.objectContaining({ code: 'ENDED_AFTER_EMIT', events: 1 }))
    expect(left).not.toContain(first)
    expect(left).toHaveLength(1) // the held event the call passed on
    expect(sink.received.map((fields) => fields.n)).toEqual(Array.from({ length: 30 }, (_, i) => i))
  })
})
