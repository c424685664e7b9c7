// A transform that holds events across calls (a window, a reduce group), driven by random
// choices, against a model of what it did: the runner checks each call quickly when it emitted
// held events from the front in order and then inputs in order (one by one, or the whole array
// with emitAll), and generally otherwise (events emitted out of order or twice, ended after they
// were emitted, merged in place). Whichever check ran, the sink must receive exactly what the
// model says, in order, and every batch must resolve with the status its events (and the events
// merged into them) met (fast-check prints the seed).

import type { JsonObject, LogEvent } from '@ackline/core'
import type { Transform, TransformContext } from '@ackline/topology'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { n, run, through } from './support/Harness.js'
import { testSink, testSource } from './support/TestComponents.js'

/** The sink rejects the events whose `n` is 3 mod 7 and delivers the rest. */
const rejects = (value: number): boolean => value % 7 === 3

interface Model {
  /** The `n` of every event the sink should receive, in order. */
  readonly expected: number[]
  /** `n` of a merged event → `n` of the event it was merged into. */
  readonly mergedInto: Map<number, number>
  /** Events ended by the transform (dropped, or dropped after being emitted): never written. */
  readonly dropped: Set<number>
  /** How many events were dropped after being emitted (each reported `ENDED_AFTER_EMIT`). */
  endedAfterEmit: number
}

/** The transform: each call and the flush act on `choices`, read in turn (cyclically). */
function holder(choices: readonly number[], model: Model): Transform {
  const held: LogEvent[] = []
  let cursor = 0
  const next = (): number => choices[cursor++ % choices.length]!
  const emit = (context: TransformContext, event: LogEvent, out: number[]): void => {
    context.emit(event)
    out.push(n(event))
  }
  return {
    kind: 'holder',
    process(events, context) {
      const out: number[] = []
      // Now and then the inputs are passed on whole with emitAll, after what the call emits below.
      const whole = next() % 4 === 0
      for (const event of whole ? [] : events.events) {
        const choice = next() % 10
        if (choice === 0) {
          model.dropped.add(n(event))
          context.drop(event)
        } else if (choice <= 2) {
          emit(context, event, out)
        } else {
          held.push(event)
        }
      }
      const front = (): LogEvent[] => held.splice(0, next() % (held.length + 1))
      switch (next() % 6) {
        case 1: // the oldest k, in order: what a window does
          for (const event of front()) emit(context, event, out)
          break
        case 2: {
          // one from anywhere
          if (held.length === 0) break
          const [event] = held.splice(next() % held.length, 1)
          emit(context, event!, out)
          break
        }
        case 3: {
          // the oldest k, and the first of them a second time (the runtime clones it)
          const taken = front()
          for (const event of taken) emit(context, event, out)
          if (taken.length > 0) emit(context, taken[0]!, out)
          break
        }
        case 4: {
          // the oldest k, then the last of them dropped: ended after emit, it is not passed on
          const taken = front()
          for (const event of taken) emit(context, event, out)
          const last = taken.at(-1)
          if (last !== undefined) {
            const value = n(last)
            context.drop(last)
            model.dropped.add(value)
            model.endedAfterEmit++
            out.splice(out.lastIndexOf(value), 1)
          }
          break
        }
        case 5: {
          // one held event merged into another, which stays held (the merged one ends in place)
          if (held.length < 2) break
          const into = next() % held.length
          let from = next() % held.length
          if (from === into) from = (from + 1) % held.length
          model.mergedInto.set(n(held[from]!), n(held[into]!))
          held[into]!.merge(held[from]!)
          held.splice(from, 1)
          break
        }
      }
      if (whole) {
        for (const event of events.events) out.push(n(event))
        context.emitAll(events)
      }
      model.expected.push(...out)
    },
    flush(context) {
      for (const event of held.splice(0)) {
        context.emit(event)
        model.expected.push(n(event))
      }
    },
  }
}

describe('a transform that holds events', () => {
  it('passes on and settles exactly what it did, whichever check the runner made of each call', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 1, maxLength: 25 }),
        fc.array(fc.nat({ max: 1000 }), { minLength: 1, maxLength: 60 }),
        async (sizes, choices) => {
          let next = 0
          const batches: JsonObject[][] = sizes.map((size) =>
            Array.from({ length: size }, () => ({ n: next++ })),
          )
          const model: Model = { expected: [], mergedInto: new Map(), dropped: new Set(), endedAfterEmit: 0 }
          const source = testSource(batches)
          const sink = testSink({ outcome: (event) => (rejects(n(event)) ? 'rejected' : 'delivered') })
          const topology = through(source, holder(choices, model), sink)
          const facts = await run(topology)

          expect(sink.received.map((fields) => fields.n)).toEqual(model.expected)
          // An event's fate is that of the event it was merged into, followed to the end.
          const fateOf = (value: number): number => {
            let at = value
            while (model.mergedInto.has(at)) at = model.mergedInto.get(at)!
            return at
          }
          const rejected = (value: number): boolean => {
            const fate = fateOf(value)
            return !model.dropped.has(fate) && rejects(fate)
          }
          const expectedStatuses = batches.map((batch) =>
            batch.some((record) => rejected(record.n as number)) ? 'rejected' : 'delivered',
          )
          expect(await source.statuses()).toEqual(expectedStatuses)
          expect(topology.metrics().t!.erroredEvents).toBe(0)
          const errors = facts.filter((f) => f.type === 'component_error')
          expect(errors.filter((f) => f.code !== 'ENDED_AFTER_EMIT')).toEqual([])
          expect(errors.reduce((sum, f) => sum + f.events, 0)).toBe(model.endedAfterEmit)
        },
      ),
      { numRuns: 150 },
    )
  })
})
