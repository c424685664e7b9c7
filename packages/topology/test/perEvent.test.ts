// perEvent: the per-event plumbing of map- and filter-like transforms.
import { EventArray, type LogEvent } from '@ackline/core'
import { keepIf, perEvent, type TransformContext } from '@ackline/topology'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'

/** A context that records, in order, what reached it. */
function recorder() {
  const calls: string[] = []
  const context: TransformContext = {
    id: 't',
    acknowledgements: true,
    emit: (event) => void calls.push(`emit ${event.get('n')}`),
    emitAll: (events) => void calls.push(`emitAll ${events.events.map((e) => e.get('n')).join(',')}`),
    drop: (event) => void calls.push(`drop ${event.get('n')}`),
    create: () => {
      throw new Error('not used')
    },
  }
  return { calls, context }
}

const batch = (...ns: number[]): EventArray => EventArray.fromRecords(ns.map((n) => ({ n })))
const n = (event: LogEvent): number => event.get('n') as number

describe('perEvent', () => {
  it('passes the array on whole, in one emitAll, when every event goes on as it is', () => {
    const { calls, context } = recorder()
    const events = batch(1, 2, 3)
    let passed: EventArray | undefined
    const process = perEvent(
      (event) => void event.set('seen', true),
      () => {},
    )
    process(events, {
      ...context,
      emitAll: (array) => {
        passed = array
      },
    })
    expect(passed).toBe(events)
    expect(calls).toEqual([])
    expect(events.events.every((e) => e.get('seen') === true)).toBe(true)
  })

  it('emits the unchanged prefix in order, then goes event by event, settling what the step returned', () => {
    const { calls, context } = recorder()
    const settled: unknown[] = []
    const process = perEvent(
      (event) => (n(event) % 2 === 0 ? `even ${n(event)}` : undefined),
      (event, result, ctx) => {
        settled.push(result)
        ctx.drop(event)
      },
    )
    process(batch(1, 3, 4, 5, 6), context)
    expect(calls).toEqual(['emit 1', 'emit 3', 'drop 4', 'emit 5', 'drop 6'])
    expect(settled).toEqual(['even 4', 'even 6'])
  })

  it('leaves an event whose step or settle throws for the runtime, decides the others, then throws the first error', () => {
    const { calls, context } = recorder()
    const process = perEvent(
      (event) => {
        if (n(event) === 3) throw new Error('boom')
        return n(event) % 2 === 0 ? 'even' : undefined
      },
      (event, _even, ctx) => {
        if (n(event) === 4) throw new Error('late')
        ctx.drop(event)
      },
    )
    // Coalesced, one call may hold several batches: one event's failure must not touch the others.
    expect(() => process(batch(1, 2, 3, 4, 5, 6), context)).toThrow('boom')
    expect(calls).toEqual(['emit 1', 'drop 2', 'emit 5', 'drop 6'])
  })

  it('hands every event to the context exactly once, in order, whatever the verdicts', () => {
    fc.assert(
      fc.property(fc.array(fc.boolean(), { maxLength: 40 }), (keep) => {
        const { calls, context } = recorder()
        const ns = keep.map((_, i) => i)
        perEvent(
          (event) => (keep[n(event)] === true ? undefined : 'out'),
          (event, _out, ctx) => ctx.drop(event),
        )(batch(...ns), context)
        const expected = keep.every((k) => k)
          ? [`emitAll ${ns.join(',')}`]
          : keep.map((k, i) => `${k ? 'emit' : 'drop'} ${i}`)
        expect(calls).toEqual(expected)
      }),
    )
  })
})

describe('keepIf', () => {
  it('drops what the predicate does not accept with exactly true, and passes the array whole when it accepts all', () => {
    const { calls, context } = recorder()
    keepIf((event) => (n(event) === 2 ? ('yes' as unknown as boolean) : true))(batch(1, 2, 3), context)
    expect(calls).toEqual(['emit 1', 'drop 2', 'emit 3'])
    const all = recorder()
    keepIf(() => true)(batch(1, 2), all.context)
    expect(all.calls).toEqual(['emitAll 1,2'])
  })

  it('drops, as any answer but true, one whose then cannot be read (a Proxy whose get trap throws, a revoked Proxy)', () => {
    const throwing = new Proxy(
      {},
      {
        get() {
          throw new Error('trap')
        },
      },
    )
    const revocable = Proxy.revocable({}, {})
    revocable.revoke()
    const answers: unknown[] = [true, throwing, revocable.proxy]
    const { calls, context } = recorder()
    keepIf((event) => answers[n(event) - 1] as boolean)(batch(1, 2, 3), context)
    expect(calls).toEqual(['emit 1', 'drop 2', 'drop 3'])
  })
})
