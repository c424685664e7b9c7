// Random topologies with transforms that hold, permute, pass arrays whole, clone and share one
// instance between runners: a correct program is never reported INPUT_MUTATED or ALREADY_SENT.
import type { LogEvent } from '@ackline/core'
import { RandomTopology } from '@ackline/testkit'
import type { Transform } from '@ackline/topology'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'

/** Holds every event of a call and emits what it held in the next call (then the rest on flush). */
const window = (): Transform => {
  let held: LogEvent[] = []
  return {
    kind: 'window',
    process(events, context) {
      const out = held
      held = [...events]
      for (const e of out) context.emit(e)
    },
    flush(context) {
      const out = held
      held = []
      for (const e of out) context.emit(e)
    },
  }
}
/** Reverses its input array in place (a permutation, allowed) and passes it on whole. */
const reverse = (): Transform => ({
  kind: 'reverse',
  process(events, context) {
    ;(events.events as LogEvent[]).reverse()
    context.emitAll(events)
  },
})
const whole = (): Transform => ({
  kind: 'whole',
  coalesce: true,
  process(events, context) {
    context.emitAll(events)
  },
})
/** Emits each input twice (the runtime copies the second). */
const twice = (): Transform => ({
  kind: 'twice',
  process(events, context) {
    for (const e of events) {
      context.emit(e)
      context.emit(e)
    }
  },
})
/** One instance for every runner that uses it. */
const sharedOne: Transform = {
  kind: 'shared',
  synchronous: true,
  process(events, context) {
    for (const e of events) context.emit(e)
  },
}
const shared = (): Transform => sharedOne
/** Makes a new event from each input and ends the input. */
const remake = (): Transform => ({
  kind: 'remake',
  process(events, context) {
    for (const e of events) {
      context.emit(context.create({ ...e.fields }, [e]))
      context.drop(e)
    }
  },
})
/** Emits a clone of each input and drops the input. */
const cloner = (): Transform => ({
  kind: 'cloner',
  process(events, context) {
    for (const e of events) {
      context.emit(e.clone())
      e.end()
    }
  },
})

describe('RandomTopology: handles on correct programs', () => {
  it('reports no INPUT_MUTATED, ALREADY_SENT or other error for correct transforms', async () => {
    const transforms = { window, reverse, whole, twice, shared, remake, cloner }
    await fc.assert(
      fc.asyncProperty(
        RandomTopology.arbitrary({
          transforms,
          maxTransforms: 6,
          maxSinks: 3,
          faults: process.env.RT_FAULTS !== '0',
        }),
        async (spec) => {
          const { ledger, facts } = await RandomTopology.run(spec, { transforms })
          // A failed attempt the spec's failure schedule caused is expected (retried until it passes).
          const errors = facts.filter(
            (f) =>
              f.type === 'component_error' &&
              !(f.code === 'WRITE_FAILED' && f.message.includes('scheduled failure')),
          )
          expect(errors).toEqual([])
          await ledger.expectMatchesModel()
          // A drawn run may have acknowledgements off for every source: no batch to read then.
          await ledger.expectNoAckWithoutDelivery({ allowEmpty: true })
        },
      ),
      { numRuns: Number(process.env.RT_RUNS ?? 100), seed: Number(process.env.RT_SEED ?? 11) },
    )
  })
})
