import type { LogEvent } from '@ackline/core'
import { filter } from '@ackline/transforms'
import { describe, expect, it, vi } from 'vitest'
import { FakeTransformContext } from './support/FakeTransformContext.js'
import { everyHandleLeft, testBatch } from './support/TestBatch.js'

/** A Proxy that has been revoked: every operation on it throws a TypeError. */
function revokedProxy(): object {
  const { proxy, revoke } = Proxy.revocable({}, {})
  revoke()
  return proxy
}

describe('filter', () => {
  it('emits what the predicate accepts and drops the rest', () => {
    const t = filter((e) => e.get('level') === 'error')
    const { events } = testBatch([
      { level: 'error', n: 1 },
      { level: 'info', n: 2 },
      { level: 'error', n: 3 },
    ])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    expect(ctx.fieldsOn().map((f) => f.n)).toEqual([1, 3])
    expect(ctx.dropped.map((e) => e.isEnded)).toEqual([true])
    expect(everyHandleLeft(events, ctx.emitted)).toBe(true)
  })

  it.each([
    ['all kept', [true, true, true], [1, 2, 3]],
    ['none kept', [false, false, false], []],
    ['the first dropped', [false, true, true], [2, 3]],
    ['the last dropped', [true, true, false], [1, 2]],
  ])('keeps the order with %s', (_, keep, expected) => {
    const t = filter((e) => keep[(e.get('n') as number) - 1] === true)
    const { events } = testBatch([{ n: 1 }, { n: 2 }, { n: 3 }])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    expect(ctx.fieldsOn().map((f) => f.n)).toEqual(expected)
    expect(ctx.dropped.length).toBe(3 - expected.length)
    expect(everyHandleLeft(events, ctx.emitted)).toBe(true)
  })

  it('decides every other event when the predicate throws for one, and leaves that one to the runtime', () => {
    const t = filter((e) => {
      if (e.get('n') === 3) throw new Error('bad event')
      return true
    })
    const { events } = testBatch([1, 2, 3, 4].map((n) => ({ n })))
    const ctx = FakeTransformContext.for(t)
    expect(() => t.process(events, ctx)).toThrow('bad event')
    // One call may hold several batches (coalesced): the event that failed is the only one left.
    expect(ctx.fieldsOn().map((f) => f.n)).toEqual([1, 2, 4])
    expect(events.events[2]!.isEnded).toBe(false)
  })

  it.each([
    ['a number', 1, 'a number (1)'],
    ['a string', 'yes', 'a string ("yes")'],
    ['an object', { keep: true }, 'an object'],
    ['undefined (a predicate that forgot to return)', undefined, 'undefined'],
    ['null', null, 'null'],
    // Before: reading the answer's `then` (a Proxy whose get trap throws) or asking whether it is an
    // array (a revoked Proxy) threw that raw error out of the call, naming no component.
    [
      'a Proxy whose get trap throws',
      new Proxy(
        {},
        {
          get() {
            throw new Error('trap: get')
          },
        },
      ),
      'an object',
    ],
    ['a revoked Proxy', revokedProxy(), 'an object'],
  ])(
    'fails the call naming the component when the predicate returns %s, rather than drop an event meant to be kept',
    (_, answer, what) => {
      const t = filter((e) => (e.get('n') === 2 ? (answer as never) : true))
      const { events } = testBatch([1, 2, 3].map((n) => ({ n })))
      const ctx = FakeTransformContext.for(t)
      expect(() => t.process(events, ctx)).toThrow(
        expect.objectContaining({
          code: 'BAD_RESULT',
          component: 'under_test',
          field: 'predicate',
          message: expect.stringContaining(`returned ${what}`),
        }),
      )
      // Not dropped: left for the runtime, which settles it errored and reports the failure.
      expect(ctx.dropped).toEqual([])
      expect(events.events[1]!.isEnded).toBe(false)
      expect(ctx.fieldsOn().map((f) => f.n)).toEqual([1, 3])
    },
  )

  it.each([true, false])(
    'fails the call naming the component when the predicate ends the event and answers %s, rather than pass it on or drop it again',
    (answer) => {
      const t = filter((e) => {
        if (e.get('n') === 2) e.end()
        return answer
      })
      const { events } = testBatch([1, 2, 3].map((n) => ({ n })))
      const ctx = FakeTransformContext.for(t)
      expect(() => t.process(events, ctx)).toThrow(
        expect.objectContaining({
          code: 'BAD_RESULT',
          component: 'under_test',
          field: 'predicate',
          message: expect.stringContaining('ended the event'),
        }),
      )
      expect(ctx.on()).not.toContain(events.events[1])
      expect(ctx.dropped).not.toContain(events.events[1])
      expect(ctx.emitted.length + ctx.dropped.length).toBe(2)
    },
  )

  it('handles the rejection of a promise answered by a predicate that also ended the event', () => {
    // An async predicate that ends its event before its first await, then rejects: unhandled,
    // the rejection would end the process.
    const then = vi.fn()
    const t = filter(((e: LogEvent) => {
      e.end()
      return { then }
    }) as never)
    const { events } = testBatch([{ n: 1 }])
    const ctx = FakeTransformContext.for(t)
    expect(() => t.process(events, ctx)).toThrow(
      expect.objectContaining({ code: 'BAD_RESULT', field: 'predicate' }),
    )
    expect(then).toHaveBeenCalledWith(undefined, expect.any(Function))
  })

  it('names the component when the predicate returns a promise', () => {
    const t = filter((async () => true) as never)
    const { events } = testBatch([{ n: 1 }])
    const ctx = FakeTransformContext.for(t)
    expect(() => t.process(events, ctx)).toThrow(
      expect.objectContaining({
        code: 'BAD_RESULT',
        component: 'under_test',
        field: 'predicate',
        message: expect.stringContaining('a promise'),
      }),
    )
    expect(events.events[0]!.isEnded).toBe(false)
  })

  it('counts a discarded event as delivered by default', async () => {
    const t = filter((e) => e.get('keep') === true)
    expect(t.dropStatus).toBe('delivered')
    const { events, receiver } = testBatch([{ keep: true }, { keep: false }])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    ctx.settle()
    expect(await receiver).toBe('delivered')
  })

  it("rejects the batch of a discarded event with dropStatus 'rejected'", async () => {
    const t = filter((e) => e.get('keep') === true, { dropStatus: 'rejected' })
    expect(t.dropStatus).toBe('rejected')
    const { events, receiver } = testBatch([{ keep: true }, { keep: false }])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    ctx.settle()
    expect(await receiver).toBe('rejected')
  })

  it('waits for the sinks of the kept events and takes their worst status', async () => {
    const t = filter(() => true)
    const { events, receiver } = testBatch([{ n: 1 }, { n: 2 }])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    ctx.emitted[0]!.event.end('delivered')
    expect(receiver.status).toBeUndefined()
    ctx.emitted[1]!.event.end('errored')
    expect(await receiver).toBe('errored')
  })

  it('reports bad options by field', () => {
    const t = filter('nope' as never, { dropStatus: 'lost' as never })
    expect(t.validate().map((i) => i.field)).toEqual(['predicate', 'dropStatus'])
    expect(t.validate().map((i) => i.message)).toEqual([
      'must be a function, got "nope"',
      'must be "delivered" or "rejected", got "lost"',
    ])
    expect(filter(() => true).validate()).toEqual([])
  })
})
