import { EventArray, LogEvent } from '@ackline/core'
import { type FailureSchedule, faultySink } from '@ackline/testkit'
import { RejectError, type Sink } from '@ackline/topology'
import { describe, expect, it } from 'vitest'

const events = () => EventArray.from([new LogEvent({ n: 2 }), new LogEvent({ n: 3 })])
const rejectEven = { errorOnCalls: [], hangMs: 0, rejectWhen: { field: 'n', modulo: 2 } }

describe('faultySink', () => {
  it('turns the scheduled records into RejectErrors and keeps what the inner sink reported for the rest', async () => {
    const inner: Sink = { kind: 'inner', write: async () => ['delivered', 'errored'] }
    expect(await faultySink(inner, rejectEven).write(events())).toEqual([expect.any(RejectError), 'errored'])
  })

  it('passes a malformed inner result on as it is, never filled in with delivered', async () => {
    for (const malformed of [42, ['delivered'], 'delivered']) {
      const inner: Sink = { kind: 'inner', write: async () => malformed as never }
      expect(await faultySink(inner, rejectEven).write(events())).toBe(malformed)
    }
  })

  it('keeps an inner entry that is no status (null, a hole) as it is beside a scheduled rejection, never delivered', async () => {
    // It became 'delivered' (`?? 'delivered'`): the runtime settles such an entry errored
    // (BAD_RESULT), so a sink that lost an event's status was acknowledged once a neighbour of
    // that event was scheduled for rejection.
    const hole: unknown[] = ['delivered']
    hole.length = 2
    for (const result of [['delivered', null], ['delivered', undefined], hole]) {
      const inner: Sink = { kind: 'inner', write: async () => result as never }
      const out = (await faultySink(inner, rejectEven).write(events())) as unknown[]
      expect(out[0]).toBeInstanceOf(RejectError)
      expect(out[1]).toBe(result[1])
    }
  })

  it('fails the scheduled call, counted at its start, when writes overlap during a hang', async () => {
    const inner: Sink = { kind: 'inner', concurrency: 2, write: async () => undefined }
    const sink = faultySink(inner, { errorOnCalls: [1], hangMs: 1 })
    // Both calls start before either hang ends: call 1 must fail, call 2 must not.
    const results = await Promise.allSettled([sink.write(events()), sink.write(events())])
    expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled'])
  })

  it('refuses a schedule it cannot follow, naming the field, instead of failing at the first write', () => {
    const inner: Sink = { kind: 'inner', write: async () => undefined }
    const bad = [
      [{ hangMs: 0 }, "'errorOnCalls' must be an array of write call numbers (1 or more), got undefined"],
      [{ errorOnCalls: [0], hangMs: 0 }, "'errorOnCalls'"],
      [
        { errorOnCalls: [], hangMs: 2 ** 31 },
        "'hangMs' must be a number from 0 to 2147483647, got 2147483648",
      ],
      [{ errorOnCalls: [], hangMs: Number.NaN }, "'hangMs'"],
      [{ errorOnCalls: [], hangMs: 0, rejectWhen: { field: 'n', modulo: 0 } }, "'rejectWhen'"],
    ] as const
    for (const [schedule, message] of bad) {
      expect(() => faultySink(inner, schedule as unknown as FailureSchedule)).toThrow(message)
    }
  })
})
