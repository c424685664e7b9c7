import { runInNewContext } from 'node:vm'
import { LogEvent } from '@ackline/core'
import { ComponentError } from '@ackline/topology'
import { remap } from '@ackline/transforms'
import { describe, expect, it } from 'vitest'
import { FakeTransformContext } from './support/FakeTransformContext.js'
import { everyHandleLeft, testBatch } from './support/TestBatch.js'

/** A handle that has ended (what a function may return by mistake). */
function ended(): LogEvent {
  const event = new LogEvent({ gone: true })
  event.end()
  return event
}

/** A remap function that ends its input, then returns `result`. */
function endsThenReturns(result: unknown): (e: LogEvent) => unknown {
  return (e) => {
    e.end()
    return result
  }
}

describe('remap', () => {
  it('passes the input on after an in-place edit when the function returns nothing', () => {
    const t = remap((e) => {
      e.set('seen', true)
    })
    const { events } = testBatch([{ n: 1 }])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    expect(ctx.emitted[0]!.event).toBe(events.events[0])
    expect(ctx.fieldsOn()).toEqual([{ n: 1, seen: true }])
  })

  it('keeps the order when in-place edits come before and after other outputs', async () => {
    const t = remap((e) => {
      const n = e.get('n') as number
      if (n === 3) return null
      if (n === 4) return { n: 40 }
      if (n === 5) return [e.clone(), { n: 50 }]
      e.set('seen', true)
      return undefined
    })
    const { events, receiver } = testBatch([1, 2, 3, 4, 5, 6].map((n) => ({ n })))
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    expect(ctx.fieldsOn()).toEqual([
      { n: 1, seen: true },
      { n: 2, seen: true },
      { n: 40 },
      { n: 5 },
      { n: 50 },
      { n: 6, seen: true },
    ])
    expect(ctx.dropped.map((e) => e.isEnded)).toEqual([true])
    expect(everyHandleLeft(events, ctx.emitted)).toBe(true)
    ctx.settle()
    expect(await receiver).toBe('delivered')
  })

  it('passes on every other event when the function throws for one, and leaves that one to the runtime', () => {
    const t = remap((e) => {
      if (e.get('n') === 3) throw new Error('bad event')
      e.set('seen', true)
    })
    const { events } = testBatch([1, 2, 3, 4].map((n) => ({ n })))
    const ctx = FakeTransformContext.for(t)
    expect(() => t.process(events, ctx)).toThrow('bad event')
    expect(ctx.fieldsOn()).toEqual([
      { n: 1, seen: true },
      { n: 2, seen: true },
      { n: 4, seen: true },
    ])
    // One call may hold several batches (coalesced): the event that failed is the only one left.
    expect(everyHandleLeft(events, ctx.emitted)).toBe(false)
    expect(events.events[2]!.isEnded).toBe(false)
    expect(ctx.on()).not.toContain(events.events[2])
  })

  it('gives the input new fields when the function returns a fields object, keeping its finalizers', async () => {
    const t = remap((e) => ({ doubled: (e.get('n') as number) * 2 }))
    const { events, receiver } = testBatch([{ n: 2 }])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    expect(ctx.fieldsOn()).toEqual([{ doubled: 4 }])
    expect(everyHandleLeft(events, ctx.emitted)).toBe(true)
    ctx.settle(() => 'errored')
    expect(await receiver).toBe('errored')
  })

  it.each([
    [
      'an object inheriting from another',
      () => Object.create({ n: 1 }),
      'returned an object that inherits from another object (Object.create?);',
    ],
    ['a Map', () => new Map(), 'returned an instance of Map;'],
    [
      'an array inside its array',
      (e: LogEvent) => [e.clone(), [{ n: 1 }]],
      'returned an array whose output 1 is an array;',
    ],
    ['a number', () => 5, 'returned a number;'],
  ])('names what the function returned in good English when it returns %s', (_, fn, words) => {
    // The class name went after "a" whatever it was: "a Object object", "a Array object".
    const t = remap(fn as never)
    const { events } = testBatch([{ n: 1 }])
    let thrown: unknown
    try {
      t.process(events, FakeTransformContext.for(t))
    } catch (error) {
      thrown = error
    }
    expect((thrown as Error).message).toContain(words)
    events.events[0]!.end('errored')
  })

  it('takes a fields object made in another realm (a function run in a vm context) as a fields object, and refuses its Map or class instance', () => {
    // Its prototype is that realm's Object.prototype, not this one's: refused with BAD_RESULT
    // ("a Object object"), every event of such a function was settled errored.
    const t = remap((e) => runInNewContext('({ doubled: n * 2, at: { n } })', { n: e.get('n') }))
    const { events } = testBatch([{ n: 2 }])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    expect(ctx.fieldsOn()).toEqual([{ doubled: 4, at: { n: 2 } }])
    expect(everyHandleLeft(events, ctx.emitted)).toBe(true)
    const split = remap(() => runInNewContext('[{ m: 1 }, { m: 2 }]'))
    const many = testBatch([{ n: 1 }])
    const ctx2 = FakeTransformContext.for(split)
    split.process(many.events, ctx2)
    expect(ctx2.fieldsOn()).toEqual([{ m: 1 }, { m: 2 }])
    for (const source of ['new Map()', 'new (class Row {})()', 'Promise.resolve({})', 'new Date(0)']) {
      const bad = remap(() => runInNewContext(source))
      expect(() => bad.process(testBatch([{ n: 1 }]).events, FakeTransformContext.for(bad))).toThrow(
        ComponentError,
      )
    }
  })

  it('splits one event into many that all share its finalizers', async () => {
    const t = remap((e) => (e.get('lines') as string[]).map((message) => ({ message })))
    const { events, receiver } = testBatch([{ lines: ['a', 'b', 'c'] }])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    expect(ctx.fieldsOn()).toEqual([{ message: 'a' }, { message: 'b' }, { message: 'c' }])
    expect(everyHandleLeft(events, ctx.emitted)).toBe(true)
    const [a, b, c] = ctx.on()
    a!.end('delivered')
    c!.end('delivered')
    expect(receiver.status).toBeUndefined()
    b!.end('rejected')
    expect(await receiver).toBe('rejected')
  })

  it('keeps outputs independent when the input and a clone both go on', () => {
    const t = remap((e) => [e, e.clone().set('copy', true)])
    const { events } = testBatch([{ n: 1 }])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    expect(ctx.fieldsOn()).toEqual([{ n: 1 }, { n: 1, copy: true }])
    expect(everyHandleLeft(events, ctx.emitted)).toBe(true)
  })

  it("keeps another copy of the input whole when the function spreads the input's fields and a later set edits a nested value", () => {
    // What a fan-out gives: the input shares its fields with a copy on another path.
    const t = remap((e) => ({ ...e.fields, tag: 1 }))
    const { events } = testBatch([{ http: { status: 200 } }])
    const other = events.events[0]!.clone()
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    ctx.on()[0]!.set('http.status', 500)
    expect(ctx.fieldsOn()).toEqual([{ http: { status: 500 }, tag: 1 }])
    expect(other.fields).toEqual({ http: { status: 200 } })
  })

  it('keeps the outputs of a split independent when each spreads the input and a later set edits a nested value', () => {
    const t = remap((e) => [
      { ...e.fields, part: 1 },
      { ...e.fields, part: 2 },
    ])
    const { events } = testBatch([{ http: { status: 200 } }])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    ctx.on()[0]!.set('http.status', 500)
    expect(ctx.fieldsOn()).toEqual([
      { http: { status: 500 }, part: 1 },
      { http: { status: 200 }, part: 2 },
    ])
  })

  it("keeps another copy of the input whole when the function returns a new event made of a spread of the input's fields", () => {
    const t = remap((e) => new LogEvent({ ...e.fields, tag: 1 }))
    const { events } = testBatch([{ http: { status: 200 } }])
    const other = events.events[0]!.clone() // a fan-out's copy on another path
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    ctx.on()[0]!.set('http.status', 500)
    expect(ctx.fieldsOn()).toEqual([{ http: { status: 500 }, tag: 1 }])
    expect(other.fields).toEqual({ http: { status: 200 } })
  })

  it('keeps the input whole when the function returns it beside a new event made of a spread of its fields', () => {
    const t = remap((e) => [e, new LogEvent({ ...e.fields, part: 2 })])
    const { events } = testBatch([{ http: { status: 200 } }])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    ctx.on()[1]!.set('http.status', 500)
    expect(ctx.fieldsOn()).toEqual([{ http: { status: 200 } }, { http: { status: 500 }, part: 2 }])
  })

  it('ends the input when its only output is a clone it returned', async () => {
    const t = remap((e) => e.clone().set('c', 1))
    const { events, receiver } = testBatch([{ n: 1 }])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    expect(events.events[0]!.isEnded).toBe(true)
    expect(ctx.fieldsOn()).toEqual([{ n: 1, c: 1 }])
    expect(receiver.status).toBeUndefined()
    ctx.settle(() => 'errored')
    expect(await receiver).toBe('errored')
  })

  it.each([
    ['a new LogEvent', () => new LogEvent({ made: 1 })],
    ['an array of a new LogEvent and the input', (e: LogEvent) => [new LogEvent({ made: 1 }), e]],
    ['an array of a clone and a new LogEvent', (e: LogEvent) => [e.clone(), new LogEvent({ made: 1 })]],
  ])(
    "gives the input's finalizers to an output it made itself (%s): the batch waits for it and takes its status",
    async (_, fn) => {
      const t = remap(fn as never)
      const { events, receiver } = testBatch([{ n: 1 }])
      const ctx = FakeTransformContext.for(t)
      t.process(events, ctx)
      // Before, a new LogEvent carried no finalizer: once the input was ended (or its other
      // output delivered), the batch resolved delivered, whatever became of the new event.
      expect(receiver.status).toBeUndefined()
      ctx.settle((e) => (e.get('made') === 1 ? 'errored' : 'delivered'))
      expect(await receiver).toBe('errored')
    },
  )

  it.each([
    ['null', null],
    ['an empty array', []],
  ])('drops the input when the function returns %s, with the default status delivered', async (_, result) => {
    const t = remap(() => result)
    const { events, receiver } = testBatch([{ n: 1 }])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    expect(ctx.emitted).toEqual([])
    expect(ctx.dropped).toEqual([events.events[0]])
    expect(await receiver).toBe('delivered')
  })

  it("rejects the batch of an event with no outputs under dropStatus 'rejected'", async () => {
    const t = remap((e) => (e.get('n') === 2 ? null : undefined), { dropStatus: 'rejected' })
    const { events, receiver } = testBatch([{ n: 1 }, { n: 2 }])
    const ctx = FakeTransformContext.for(t)
    t.process(events, ctx)
    ctx.settle()
    expect(await receiver).toBe('rejected')
  })

  it.each([
    ['a promise', async () => ({ n: 2 })],
    ['a number', () => 5],
    ['a Map', () => new Map([['n', 2]])],
    ['an array holding undefined', (e: LogEvent) => [e.clone(), undefined]],
    ['an ended LogEvent', () => ended()],
    ['an array holding an ended LogEvent', (e: LogEvent) => [e.clone(), ended()]],
  ])('fails the call naming the transform and fn when the function returns %s', async (_, fn) => {
    const t = remap(fn as never)
    const { events, receiver } = testBatch([{ n: 1 }])
    const ctx = FakeTransformContext.for(t)
    let thrown: unknown
    try {
      t.process(events, ctx)
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(ComponentError)
    expect(thrown).toMatchObject({ code: 'BAD_RESULT', component: 'under_test', field: 'fn' })
    // Nothing went on; the input is left to the runtime, which settles it errored, and no clone
    // the function made is left to hold the batch up.
    expect(ctx.emitted).toEqual([])
    const input = events.events[0]!
    expect(input.isEnded).toBe(false)
    input.end('errored')
    expect(await receiver).toBe('errored')
  })

  it.each([
    [
      'a Proxy whose getPrototypeOf trap throws',
      () =>
        new Proxy(
          {},
          {
            getPrototypeOf() {
              throw new Error('trap: getPrototypeOf')
            },
          },
        ),
    ],
    [
      'a Proxy of a class instance whose constructor trap throws',
      () =>
        new Proxy(new Map(), {
          get(target, key) {
            if (key === 'constructor') throw new Error('trap: constructor')
            return Reflect.get(target, key)
          },
        }),
    ],
    [
      'a revoked Proxy',
      () => {
        const { proxy, revoke } = Proxy.revocable({}, {})
        revoke()
        return proxy
      },
    ],
    [
      'an array holding a clone and a Proxy whose getPrototypeOf trap throws',
      (e: LogEvent) => [
        e.clone(),
        new Proxy(
          {},
          {
            getPrototypeOf() {
              throw new Error('trap: getPrototypeOf')
            },
          },
        ),
      ],
    ],
    [
      'a Proxy of an array whose get trap throws',
      () =>
        new Proxy([{ n: 2 }], {
          get() {
            throw new Error('trap: get')
          },
        }),
    ],
  ])(
    "fails the call with remap's own BAD_RESULT naming the transform and fn when the function returns %s, not the trap's raw error",
    async (_, fn) => {
      // Before: the trap's error (or the TypeError of a revoked proxy, of a private field read
      // through a proxy) left the call as it was, naming neither the transform nor its function.
      const t = remap(fn as never)
      const { events, receiver } = testBatch([{ n: 1 }])
      const ctx = FakeTransformContext.for(t)
      let thrown: unknown
      try {
        t.process(events, ctx)
      } catch (error) {
        thrown = error
      }
      expect(thrown).toBeInstanceOf(ComponentError)
      expect(thrown).toMatchObject({
        code: 'BAD_RESULT',
        component: 'under_test',
        field: 'fn',
        message: expect.stringMatching(/: the remap function returned .*cannot be inspected/),
      })
      expect(ctx.emitted).toEqual([])
      const input = events.events[0]!
      expect(input.isEnded).toBe(false)
      input.end('errored')
      expect(await receiver).toBe('errored')
    },
  )

  it.each([
    ['as its result', (proxy: object) => proxy],
    ['inside an array', (proxy: object) => [{ n: 2 }, proxy]],
  ])(
    "attaches the trap's error as the BAD_RESULT's cause when a returned Proxy's constructor trap throws, %s",
    (_, wrap) => {
      // Before: the trap's error was only in the message ("its constructor could not be read: ..."),
      // not the error's cause, unlike every other trap's error a BAD_RESULT carries.
      const trap = new Error('trap: constructor')
      const proxy = new Proxy(new Map(), {
        get(target, key) {
          if (key === 'constructor') throw trap
          return Reflect.get(target, key)
        },
      })
      const t = remap(() => wrap(proxy) as never)
      const { events } = testBatch([{ n: 1 }])
      const ctx = FakeTransformContext.for(t)
      let thrown: unknown
      try {
        t.process(events, ctx)
      } catch (error) {
        thrown = error
      }
      expect(thrown).toBeInstanceOf(ComponentError)
      expect(thrown).toMatchObject({
        code: 'BAD_RESULT',
        field: 'fn',
        message: expect.stringContaining('its constructor could not be read: Error: trap: constructor'),
      })
      expect((thrown as Error).cause).toBe(trap)
      events.events[0]!.end('errored')
    },
  )

  it('ends errored the clones held by an array nested in a refused array (map where flatMap was meant)', async () => {
    // Before: only the refused array's own outputs were ended; a clone one level down stayed live
    // (it holds the input's finalizers), so the batch waited for the leak detector.
    const clones: LogEvent[] = []
    const t = remap((e) => {
      const inner: unknown[] = [e.clone(), { n: 2 }]
      inner.push(inner) // a cycle: walked once
      clones.push(inner[0] as LogEvent)
      const deeper = [[e.clone()]]
      clones.push(deeper[0]![0]!)
      return [inner, deeper] as never
    })
    const { events, receiver } = testBatch([{ n: 1 }])
    const ctx = FakeTransformContext.for(t)
    expect(() => t.process(events, ctx)).toThrow(/returned an array whose output 0 is an array/)
    expect(ctx.emitted).toEqual([])
    expect(clones.map((c) => c.isEnded)).toEqual([true, true])
    const input = events.events[0]!
    expect(input.isEnded).toBe(false)
    input.end('errored')
    expect(await receiver).toBe('errored')
  })

  it('ends errored the clones held by a returned Proxy of an array whose getPrototypeOf trap throws, as it does those of any refused array', async () => {
    // Before: telling the result's kind threw at its prototype, and the BAD_RESULT left the clone
    // inside live (it holds the input's finalizers), so the batch waited for the leak detector.
    let clone: LogEvent | undefined
    const t = remap((e) => {
      clone = e.clone()
      return new Proxy([clone, { n: 2 }], {
        getPrototypeOf() {
          throw new Error('trap: getPrototypeOf')
        },
      }) as never
    })
    const { events, receiver } = testBatch([{ n: 1 }])
    const ctx = FakeTransformContext.for(t)
    expect(() => t.process(events, ctx)).toThrow(/returned an object that cannot be inspected/)
    expect(ctx.emitted).toEqual([])
    expect(clone?.isEnded).toBe(true)
    const input = events.events[0]!
    expect(input.isEnded).toBe(false)
    input.end('errored')
    expect(await receiver).toBe('errored')
  })

  it.each([
    ['a new LogEvent it merged the input into', (e: LogEvent) => new LogEvent({ made: 1 }).merge(e)],
    [
      'a clone, after it ended the input',
      (e: LogEvent) => {
        const clone = e.clone()
        e.end()
        return clone
      },
    ],
    [
      'an array of a new LogEvent it merged the input into',
      (e: LogEvent) => [new LogEvent({ made: 1 }).merge(e)],
    ],
    [
      'an array of two clones, after it ended the input',
      (e: LogEvent) => {
        const outputs = [e.clone(), e.clone()]
        e.end()
        return outputs
      },
    ],
  ])(
    'fails the call when the function ended or merged its input and returned %s, leaving nothing live',
    async (_, fn) => {
      const t = remap(fn as never)
      const { events, receiver } = testBatch([{ n: 1 }])
      const ctx = FakeTransformContext.for(t)
      let thrown: unknown
      try {
        t.process(events, ctx)
      } catch (error) {
        thrown = error
      }
      expect(thrown).toMatchObject({ code: 'BAD_RESULT', component: 'under_test', field: 'fn' })
      expect(ctx.emitted).toEqual([])
      // The runtime settles errored every input a failed call left live: here none. Before, the
      // merge into the output threw on the ended input, and the output, holding the input's
      // finalizers, was neither emitted nor ended: the batch waited until the stop.
      expect(events.events[0]!.isEnded).toBe(true)
      expect(receiver.status).toBe('errored')
      expect(receiver.reason).toMatchObject({ componentId: 'under_test', code: 'BAD_RESULT' })
    },
  )

  it.each([
    ['nothing', (e: LogEvent) => void e.end()],
    [
      'the input',
      (e: LogEvent) => {
        e.end()
        return e
      },
    ],
    ['null (a drop)', endsThenReturns(null)],
    ['[] (a drop)', endsThenReturns([])],
    ['a fields object', endsThenReturns({ n: 2 })],
    [
      'nothing, having merged its input into an event it kept',
      (e: LogEvent) => void new LogEvent({}).merge(e),
    ],
  ])(
    'fails the call naming the transform and fn when the function ended its input and returned %s, rather than pass it on as a delivered, silent drop',
    (_, fn) => {
      const t = remap(fn as never)
      const { events } = testBatch([{ n: 1 }, { n: 2 }])
      const ctx = FakeTransformContext.for(t)
      expect(() => t.process(events, ctx)).toThrow(
        expect.objectContaining({
          code: 'BAD_RESULT',
          component: 'under_test',
          field: 'fn',
          message: expect.stringContaining('ended its input'),
        }),
      )
      // Neither emitted nor dropped again; its status is what the function ended it with.
      expect(ctx.emitted).toEqual([])
      expect(ctx.dropped).toEqual([])
    },
  )

  it('reports bad options by field', () => {
    expect(
      remap(undefined as never, { dropStatus: 'x' as never })
        .validate()
        .map((i) => i.field),
    ).toEqual(['fn', 'dropStatus'])
  })
})
