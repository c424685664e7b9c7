import type { LogEvent } from '@ackline/core'
import { route, UNMATCHED } from '@ackline/transforms'
import { describe, expect, expectTypeOf, it, vi } from 'vitest'
import { FakeTransformContext } from './support/FakeTransformContext.js'
import { everyHandleLeft, testBatch } from './support/TestBatch.js'

const routes = {
  errors: (e: { get(p: string): unknown }) => e.get('level') === 'error',
  audit: (e: { get(p: string): unknown }) => e.get('audit') === true,
}

/** A Proxy that has been revoked: every operation on it throws a TypeError. */
function revokedProxy(): object {
  const { proxy, revoke } = Proxy.revocable({}, {})
  revoke()
  return proxy
}

describe('route', () => {
  it('declares one output per route and _unmatched', () => {
    expect(route(routes).outputs).toEqual(['errors', 'audit', '_unmatched'])
    expect(UNMATCHED).toBe('_unmatched')
    expectTypeOf(route(routes).outputs).toEqualTypeOf<readonly ('errors' | 'audit' | '_unmatched')[]>()
  })

  it('fails the call naming the route when its predicate returns a promise, leaving the event to the runtime', () => {
    const t = route({ slow: (async () => true) as never })
    const { events } = testBatch([{ n: 1 }])
    const ctx = FakeTransformContext.for(t)
    expect(() => t.process(events, ctx)).toThrow(
      expect.objectContaining({ code: 'BAD_RESULT', component: 'under_test', field: 'routes.slow' }),
    )
    expect(ctx.emitted).toEqual([])
    expect(events.events[0]!.isEnded).toBe(false)
  })

  it.each([
    ['a number', 1, 'a number (1)'],
    ['a string', 'yes', 'a string ("yes")'],
    ['undefined (a predicate that forgot to return)', undefined, 'undefined'],
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
    'fails the call naming the route when its predicate returns %s, rather than send the event to _unmatched',
    (_, answer, what) => {
      const t = route({ errors: () => true, audit: (e) => (e.get('n') === 2 ? (answer as never) : false) })
      const { events } = testBatch([1, 2, 3].map((n) => ({ n })))
      const ctx = FakeTransformContext.for(t)
      expect(() => t.process(events, ctx)).toThrow(
        expect.objectContaining({
          code: 'BAD_RESULT',
          component: 'under_test',
          field: 'routes.audit',
          message: expect.stringContaining(`returned ${what}`),
        }),
      )
      // Left for the runtime (settled errored), on no port: not taken for a miss.
      expect(ctx.emitted.map((e) => [e.event.get('n'), e.port])).toEqual([
        [1, 'errors'],
        [3, 'errors'],
      ])
      expect(events.events[1]!.isEnded).toBe(false)
    },
  )

  it.each([true, false])(
    'fails the call naming the route when its predicate ends the event and answers %s, rather than send it on',
    (answer) => {
      const t = route({
        errors: (e) => {
          if (e.get('n') === 2) e.end()
          return answer
        },
        audit: () => false,
      })
      const { events } = testBatch([1, 2, 3].map((n) => ({ n })))
      const ctx = FakeTransformContext.for(t)
      expect(() => t.process(events, ctx)).toThrow(
        expect.objectContaining({
          code: 'BAD_RESULT',
          component: 'under_test',
          field: 'routes.errors',
          message: expect.stringContaining('ended the event'),
        }),
      )
      expect(ctx.on(answer ? 'errors' : UNMATCHED)).toEqual([events.events[0], events.events[2]])
      expect(ctx.emitted).toHaveLength(2)
    },
  )

  it('handles the rejection of a promise answered by a route predicate that also ended the event', () => {
    const then = vi.fn()
    const t = route({
      slow: ((e: LogEvent) => {
        e.end()
        return { then }
      }) as never,
    })
    const { events } = testBatch([{ n: 1 }])
    const ctx = FakeTransformContext.for(t)
    expect(() => t.process(events, ctx)).toThrow(
      expect.objectContaining({ code: 'BAD_RESULT', field: 'routes.slow' }),
    )
    expect(then).toHaveBeenCalledWith(undefined, expect.any(Function))
  })

  it('routes every other event when a predicate throws for one, leaving that one to the runtime', () => {
    // One call may hold several batches (route coalesces): one event's failure must touch no other.
    const t = route({
      errors: (e) => {
        if (e.get('n') === 2) throw new Error('bad event')
        return e.get('level') === 'error'
      },
    })
    const { events } = testBatch([{ n: 1, level: 'error' }, { n: 2 }, { n: 3 }])
    const ctx = FakeTransformContext.for(t)
    expect(() => t.process(events, ctx)).toThrow('bad event')
    expect(ctx.emitted.map((e) => [e.event.get('n'), e.port])).toEqual([
      [1, 'errors'],
      [3, UNMATCHED],
    ])
    expect(events.events[1]!.isEnded).toBe(false)
  })

  it('sends an event to the one route that matches', () => {
    const t = route(routes)
    const { events } = testBatch([{ level: 'error', n: 1 }])
    const ctx = new FakeTransformContext()
    t.process(events, ctx)
    expect(ctx.emitted.map((e) => e.port)).toEqual(['errors'])
    expect(ctx.emitted[0]!.event).toBe(events.events[0])
  })

  it('sends an event that matches several routes to each, as clones sharing its finalizers', async () => {
    const t = route(routes)
    const { events, receiver } = testBatch([{ level: 'error', audit: true }])
    const ctx = new FakeTransformContext()
    t.process(events, ctx)
    expect(ctx.emitted.map((e) => e.port)).toEqual(['errors', 'audit'])
    expect(ctx.on('errors')[0]).not.toBe(ctx.on('audit')[0])
    ctx.on('audit')[0]!.end('delivered')
    expect(receiver.status).toBeUndefined()
    ctx.on('errors')[0]!.end('errored')
    expect(await receiver).toBe('errored')
  })

  it('sends an event no route accepts to _unmatched, once', async () => {
    const t = route(routes)
    const { events, receiver } = testBatch([{ level: 'info' }])
    const ctx = new FakeTransformContext()
    t.process(events, ctx)
    expect(ctx.emitted.map((e) => e.port)).toEqual(['_unmatched'])
    ctx.settle(() => 'rejected')
    expect(await receiver).toBe('rejected')
  })

  it('lets every handle leave for a mixed array', () => {
    const t = route(routes)
    const { events } = testBatch([{ level: 'error' }, { audit: true }, {}, { level: 'error', audit: true }])
    const ctx = new FakeTransformContext()
    t.process(events, ctx)
    expect(ctx.emitted.map((e) => e.port)).toEqual(['errors', 'audit', '_unmatched', 'errors', 'audit'])
    expect(everyHandleLeft(events, ctx.emitted)).toBe(true)
    expect(ctx.dropped).toEqual([])
  })

  it('reports bad route names and predicates by field', () => {
    expect(
      route({})
        .validate()
        .map((i) => i.field),
    ).toEqual(['routes'])
    const bad = route({ 'a.b': () => true, _unmatched: () => true, ok: 3 as never })
    expect(bad.validate().map((i) => i.field)).toEqual(['routes["a.b"]', 'routes._unmatched', 'routes.ok'])
    expect(bad.validate()[0]!.message).toMatch(
      /^must be a key that is a route name: non-empty, without '\.'.*, got "a\.b"$/,
    )
    expect(route(routes).validate()).toEqual([])
  })

  it('names a route with a bracket in it the same way when its predicate answers badly as validate() does', () => {
    // validate() quotes such a name (routes["a[0]"]), as the options machinery names a record key;
    // the error of a predicate answering 1 read routes.a[0], the first item of a field routes.a.
    const name = 'a[0]'
    const t = route({ [name]: () => 1 as never })
    expect(
      route({ [name]: 5 as never })
        .validate()
        .map((i) => i.field),
    ).toEqual(['routes["a[0]"]'])
    const { events } = testBatch([{ n: 1 }])
    expect(() => t.process(events, new FakeTransformContext())).toThrow(
      expect.objectContaining({ code: 'BAD_RESULT', field: 'routes["a[0]"]' }),
    )
  })

  it.each([
    ['a number', 5, '5'],
    ['a string', 'x', '"x"'],
    ['an array of predicates', [() => true], 'an array'],
    ['an empty array', [], 'an array'],
    ['a Map', new Map([['a', () => true]]), 'an instance of Map'],
    ['null', null, 'null'],
  ])('refuses routes that are %s, naming what was given', (_, given, got) => {
    // A number was reported as "got {}", a string's characters and an array's indexes taken for
    // route names ("routes.0"): an array of predicates was accepted as a route named '0'.
    expect(route(given as never).validate()).toEqual([
      {
        field: 'routes',
        expected: 'an object naming at least one route',
        got,
        message: `must be an object naming at least one route, got ${got}`,
      },
    ])
  })

  it('accepts routes named constructor or __proto__, as it routes on them, and reports a bad predicate under such a name', () => {
    // zod tells a record by its `constructor` (here a predicate: "a valid value", got {}) and
    // writes the record it checked by assignment, which drops a `__proto__` ("naming at least one
    // route"): build() refused routes the runtime serves, naming neither.
    for (const name of ['constructor', '__proto__', 'toString']) {
      const named = (predicate: unknown) => Object.fromEntries([[name, predicate]]) as never
      const t = route(named(() => true))
      expect(t.validate()).toEqual([])
      expect(t.outputs).toEqual([name, '_unmatched'])
      const { events } = testBatch([{ n: 1 }])
      const ctx = new FakeTransformContext()
      t.process(events, ctx)
      expect(ctx.emitted.map((e) => e.port)).toEqual([name])
      expect(route(named(5)).validate()).toEqual([
        { field: `routes.${name}`, expected: 'a function', got: '5', message: 'must be a function, got 5' },
      ])
    }
  })
})
