// The transform contract as the runtime enforces it: what becomes of every input event, whatever
// a transform does with it (emits, drops, merges, forgets, throws, holds for a flush).

import { type BatchStatus, EventArray, type JsonObject, type LogEvent } from '@ackline/core'
import {
  type LifecycleEvent,
  perEvent,
  TopologyBuilder,
  type Transform,
  type TransformContext,
} from '@ackline/topology'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { n, on, records, run, through } from './support/Harness.js'
import { Gate, testSink, testSource } from './support/TestComponents.js'

afterEach(() => {
  vi.useRealTimers()
})

/** Whether a handle keeps no batch waiting: ended, or live with no finalizers left. */
const holdsNoBatch = (event: LogEvent): boolean => {
  if (event.isEnded) return true
  let batches = 0
  event.forEachBatch(() => batches++)
  return batches === 0
}

/**
 * Runs `transform` (fake timers) on two arrays, the second sent only once `afterFirst` has looked
 * at the first call, then force-stops the topology (a drain of 1000 ms that the call given up
 * outlasts) and resolves once the stop returned, with what the source, sink and lifecycle saw.
 */
const forceStoppedAfterTwoArrays = async (transform: Transform, afterFirst: () => void = () => {}) => {
  const second = new Gate()
  const source = testSource([records(1), records(2)], {
    untilStopped: true,
    afterSend: (sent) => (sent === 1 ? second.wait() : undefined),
  })
  const sink = testSink()
  const topology = through(source, transform, sink)
  const facts: LifecycleEvent[] = []
  topology.lifecycle.subscribe((f) => facts.push(f))
  await topology.start()
  await vi.advanceTimersByTimeAsync(0)
  afterFirst()
  second.open()
  await vi.advanceTimersByTimeAsync(0)
  return {
    source,
    sink,
    topology,
    facts,
    /** Force-stops the topology: resolves once `stop()` returned. */
    stop: async () => {
      const stopped = topology.stop({ drainTimeoutMs: 1000 })
      await vi.advanceTimersByTimeAsync(1000)
      await stopped
    },
  }
}

describe('user transforms', () => {
  const withTransform = async (transform: Transform, batches = [records(1, 2, 3)]) => {
    const source = testSource(batches)
    const sink = testSink()
    const topology = through(source, transform, sink)
    const facts = await run(topology)
    return { source, sink, facts, topology, statuses: await source.statuses() }
  }

  it('settles a forgotten event errored and reports the leak', async () => {
    const { statuses, facts, sink, topology } = await withTransform({
      kind: 'forgetful',
      process(events, context) {
        for (const event of events) if (n(event) !== 2) context.emit(event)
      },
    })
    expect(statuses).toEqual(['errored'])
    expect(sink.received).toEqual(records(1, 3))
    expect(facts.filter((f) => f.type === 'component_error')).toMatchObject([
      { component: 't', code: 'LEAKED_EVENTS', events: 1 },
    ])
    expect(topology.metrics().t!.erroredEvents).toBe(1)
  })

  it.each([
    [
      'splice(0)',
      (events: EventArray, context: TransformContext) => {
        const list = (events.events as LogEvent[]).splice(0)
        context.emit(list[0]!)
      },
    ],
    [
      'shift()',
      (events: EventArray, context: TransformContext) => {
        context.emit((events.events as LogEvent[]).shift()!)
      },
    ],
    [
      'length = 0',
      (events: EventArray, context: TransformContext) => {
        const first = events.events[0]!
        ;(events.events as LogEvent[]).length = 0
        context.emit(first)
      },
    ],
    [
      'pop() and passes the rest on',
      (events: EventArray, context: TransformContext) => {
        ;(events.events as LogEvent[]).pop()
        context.emitAll(events)
      },
    ],
  ])(
    'reports a transform that changes its input array with %s, and settles its later calls',
    async (_, process) => {
      // Taken out of the array the runtime checks, events escaped the leak check unreported, and
      // every batch they were in waited for the stop.
      const source = testSource([records(1, 2, 3), records(4, 5, 6)])
      const topology = through(source, { kind: 'mutator', process }, testSink())
      const facts: LifecycleEvent[] = []
      topology.lifecycle.subscribe((f) => facts.push(f))
      await topology.start()
      await topology.done
      const errors = facts.filter((f) => f.type === 'component_error')
      expect(errors[0]).toMatchObject({ component: 't', code: 'INPUT_MUTATED' })
      expect(errors[0]!.message).toContain(
        "transform 't' changed its input array in process() (3 event(s) given",
      )
      // The second call's array is frozen: the change throws, and its every input is settled.
      expect(errors.at(-1)).toMatchObject({ component: 't', code: 'PROCESS_FAILED', events: 3 })
      const resolved = facts.filter((f) => f.type === 'batch_resolved')
      expect(resolved.filter((f) => !f.timedOut).map((f) => f.status)).toEqual(['errored'])
      expect(await source.statuses()).toEqual(['errored', 'errored'])
    },
  )

  describe('a transform that writes into its input array and keeps its length', () => {
    /** A sink that keeps every handle it is given, to tell one handle written twice. */
    const handleSink = () => {
      const handles: LogEvent[] = []
      const received: number[] = []
      const sink = testSink({
        write: async (events) => {
          handles.push(...events.events)
          received.push(...events.events.map(n))
          return events.events.map(() => 'delivered' as const)
        },
      })
      return { sink, handles, received }
    }
    const runMutator = async (transform: Transform) => {
      const source = testSource([records(1, 2, 3), records(4, 5, 6)])
      const { sink, handles, received } = handleSink()
      const topology = through(source, transform, sink)
      const facts = await run(topology)
      return {
        facts,
        handles,
        received,
        errors: facts.filter((f) => f.type === 'component_error'),
        statuses: await source.statuses(),
        // Resolved by what the runtime did, not by the stop settling what still waited.
        early: facts.filter((f) => f.type === 'batch_resolved' && !f.timedOut),
      }
    }

    it.each([
      [
        'list[0] = list[1], then emitAll',
        (events: EventArray, context: TransformContext) => {
          const list = events.events as LogEvent[]
          list[0] = list[1]!
          context.emitAll(events)
        },
        [2, 2, 3],
        'put in again',
        1,
      ],
      [
        'splice(0, 1, a clone of list[1]), then emitAll',
        (events: EventArray, context: TransformContext) => {
          const list = events.events as LogEvent[]
          list.splice(0, 1, list[1]!.clone())
          context.emitAll(events)
        },
        [2, 2, 3],
        'it made or held put in',
        // The second call's clone is made before the frozen array refuses the splice: it holds
        // the second batch until the stop, as any clone a transform forgets does.
        0,
      ],
      [
        'list[0] = list[2], then emits each',
        (events: EventArray, context: TransformContext) => {
          const list = events.events as LogEvent[]
          list[0] = list[2]!
          for (const event of list) context.emit(event)
        },
        [3, 2, 3],
        'put in again',
        1,
      ],
    ])(
      'reports %s, passes no handle on twice, and settles its later calls',
      async (_, process, received, what, early) => {
        // The quick check compared what was emitted with the changed array, and vouched for it:
        // one handle reached the sink twice (ended twice there, its batch never resolved), the
        // handle replaced was lost, and nothing was reported.
        const { errors, handles, statuses, facts, ...seen } = await runMutator({ kind: 'mutator', process })
        expect(errors[0]).toMatchObject({ component: 't', code: 'INPUT_MUTATED', events: 1 })
        expect(errors[0]!.message).toContain(
          "transform 't' changed its input array in process() and kept its length (3 event(s) given;",
        )
        expect(errors[0]!.message).toContain(what)
        // One handle once: the second emission of a handle is a copy, as it always is.
        expect(new Set(handles).size).toBe(handles.length)
        expect(seen.received).toEqual(received)
        // The second call's array is frozen: the change throws, and its every input is settled.
        expect(errors.at(-1)).toMatchObject({ component: 't', code: 'PROCESS_FAILED', events: 3 })
        expect(errors).toHaveLength(2)
        expect(seen.early.map((f) => (f as { status: BatchStatus }).status)).toEqual(
          Array(early).fill('errored'),
        )
        // The event replaced is out of everyone's sight: its batch waits for the stop.
        expect(statuses).toEqual(['errored', 'errored'])
        expect(facts.some((f) => f.type === 'component_error' && f.code === 'WRITE_FAILED')).toBe(false)
      },
    )

    it('reports an event it made with create() put in, and passes that event on live', async () => {
      // The general check took the event made for an input: it was "passed on in its own call",
      // then settled errored as a made event neither emitted nor ended, and reached the sink
      // ended.
      const { errors, received, handles } = await runMutator({
        kind: 'mutator',
        process(events, context) {
          const list = events.events as LogEvent[]
          list[0] = context.create({ n: 9 }, [list[1]!])
          context.emitAll(events)
        },
      })
      expect(errors[0]).toMatchObject({ component: 't', code: 'INPUT_MUTATED', events: 1 })
      // The second call made its event before the frozen array refused it: settled as made and left.
      expect(errors.map((f) => f.code)).toEqual(['INPUT_MUTATED', 'PROCESS_FAILED', 'LEAKED_EVENTS'])
      expect(received).toEqual([9, 2, 3])
      expect(new Set(handles).size).toBe(handles.length)
    })

    it('reports a holding transform that puts a handle in twice, and holds it once', async () => {
      // The quick check of a holding call held the handle twice, and the flush passed it on twice.
      const { errors, received, handles, statuses } = await runMutator({
        kind: 'holder',
        held: [] as LogEvent[],
        process(events: EventArray) {
          const list = events.events as LogEvent[]
          list[0] = list[1]!
          const held = (this as unknown as { held: LogEvent[] }).held
          for (const event of list) if (!held.includes(event)) held.push(event)
        },
        flush(context: TransformContext) {
          for (const event of (this as unknown as { held: LogEvent[] }).held.splice(0)) context.emit(event)
        },
      } as Transform)
      expect(errors[0]).toMatchObject({ component: 't', code: 'INPUT_MUTATED', events: 1 })
      expect(errors.map((f) => f.code)).toEqual(['INPUT_MUTATED', 'PROCESS_FAILED'])
      expect(new Set(handles).size).toBe(handles.length)
      expect(statuses).toEqual(['errored', 'errored'])
      expect(received).toEqual([2, 3])
    })

    it.each([
      [
        'sort, then emitAll',
        (events: EventArray, context: TransformContext) => {
          ;(events.events as LogEvent[]).sort((x, y) => n(y) - n(x))
          context.emitAll(events)
        },
      ],
      [
        'reverse, then emits each',
        (events: EventArray, context: TransformContext) => {
          for (const event of (events.events as LogEvent[]).reverse()) context.emit(event)
        },
      ],
    ])('lets a permutation (%s) go unreported: it loses nothing', async (_, process) => {
      const { errors, received, statuses, early } = await runMutator({ kind: 'permuter', process })
      expect(errors).toEqual([])
      expect(received).toEqual([3, 2, 1, 6, 5, 4])
      expect(statuses).toEqual(['delivered', 'delivered'])
      expect(early).toHaveLength(2)
    })

    it('passes on a read-only input array passed on whole as a copy: a correct transform after it may still sort its own', async () => {
      // After INPUT_MUTATED the runtime freezes the transform's input arrays; one it passed on
      // whole (emitAll) went downstream frozen, and the next transform's sort in place, which the
      // contract allows, threw: its calls failed and their events were errored for the first's bug.
      let calls = 0
      const mutator: Transform = {
        kind: 'mutator',
        process(events, context) {
          const list = events.events as LogEvent[]
          if (calls++ === 0) list[0] = list[1]!
          context.emitAll(events)
        },
      }
      const sorter: Transform = {
        kind: 'sorter',
        process(events, context) {
          ;(events.events as LogEvent[]).sort((x, y) => n(y) - n(x))
          context.emitAll(events)
        },
      }
      const source = testSource([records(1, 2, 3), records(4, 5, 6)])
      const { sink, received } = handleSink()
      const topology = new TopologyBuilder<string>(on)
        .source('in', source)
        .transform('t', ['in'], mutator)
        .transform('sort', ['t'], sorter)
        .sink('out', ['sort'], sink)
        .build()
      const facts = await run(topology)
      const errors = facts.filter((f) => f.type === 'component_error')
      expect(errors.map((f) => [f.component, f.code])).toEqual([['t', 'INPUT_MUTATED']])
      expect(received).toEqual([3, 2, 2, 6, 5, 4])
      expect(await source.statuses()).toEqual(['errored', 'delivered'])
    })
  })

  it('settles the unhandled events of a throwing transform errored and passes on what it emitted', async () => {
    const { statuses, facts, sink } = await withTransform({
      kind: 'thrower',
      process(events, context) {
        for (const event of events) {
          if (n(event) === 2) throw new Error('boom')
          context.emit(event)
        }
      },
    })
    expect(statuses).toEqual(['errored'])
    expect(sink.received).toEqual(records(1))
    expect(facts.find((f) => f.type === 'component_error')).toMatchObject({
      code: 'PROCESS_FAILED',
      events: 2,
    })
  })

  it('does not pass on an event ended after it was emitted', async () => {
    const { statuses, facts, sink } = await withTransform({
      kind: 'confused',
      process(events, context) {
        for (const event of events) context.emit(event)
        context.drop(events.events[0]!)
      },
    })
    expect(statuses).toEqual(['delivered'])
    expect(sink.received).toEqual(records(2, 3))
    expect(facts.find((f) => f.type === 'component_error')).toMatchObject({
      code: 'ENDED_AFTER_EMIT',
      events: 1,
    })
  })

  it('emitAll passes a whole array on, in order', async () => {
    const { statuses, sink } = await withTransform(
      {
        kind: 'in_place',
        process(events, context) {
          for (const event of events) event.set('seen', true)
          context.emitAll(events)
        },
      },
      [records(1, 2), records(3)],
    )
    expect(statuses).toEqual(['delivered', 'delivered'])
    expect(sink.received).toEqual([1, 2, 3].map((value) => ({ n: value, seen: true })))
  })

  it('emitAll after ending one of the events passes on only the live ones, and says so', async () => {
    const { statuses, facts, sink } = await withTransform({
      kind: 'confused_in_place',
      process(events, context) {
        context.drop(events.events[1]!)
        context.emitAll(events)
      },
    })
    expect(statuses).toEqual(['delivered'])
    expect(sink.received).toEqual(records(1, 3))
    expect(facts.find((f) => f.type === 'component_error')).toMatchObject({
      code: 'ENDED_AFTER_EMIT',
      events: 1,
    })
  })

  it('emit after emitAll appends behind the whole array, and emitAll after emit behind the event', async () => {
    const { statuses, sink } = await withTransform({
      kind: 'mixed',
      process(events, context) {
        const [first, ...rest] = events.events
        const extra = first!.clone().replaceFields({ n: 99 })
        context.emitAll(events)
        context.emit(extra)
        const again = context.create({ n: 100 }, [first!])
        context.emit(again)
        context.emitAll(new EventArray(rest.map((e) => e.clone())))
      },
    })
    expect(statuses).toEqual(['delivered'])
    expect(sink.received).toEqual([...records(1, 2, 3), { n: 99 }, { n: 100 }, ...records(2, 3)])
  })

  it('an event ended after its whole array was passed on is taken out, and the rest still goes', async () => {
    const { statuses, facts, sink } = await withTransform({
      kind: 'ends_after_pass',
      process(events, context) {
        context.emitAll(events)
        events.events[2]!.end('rejected')
      },
    })
    expect(statuses).toEqual(['rejected'])
    expect(sink.received).toEqual(records(1, 2))
    expect(facts.find((f) => f.type === 'component_error')).toMatchObject({
      code: 'ENDED_AFTER_EMIT',
      events: 1,
    })
  })

  it('emitting one handle on two ports sends a clone the second time', async () => {
    const source = testSource([records(1)])
    const x = testSink({ outcome: () => 'delivered' })
    const y = testSink({ outcome: () => 'errored' })
    const both: Transform<'x' | 'y'> = {
      kind: 'both',
      outputs: ['x', 'y'],
      process(events, context) {
        for (const event of events) {
          context.emit(event, 'x')
          context.emit(event, 'y')
        }
      },
    }
    await run(
      new TopologyBuilder(on)
        .source('in', source)
        .transform('t', ['in'], both)
        .sink('x', ['t.x'], x)
        .sink('y', ['t.y'], y)
        .build(),
    )
    expect(x.received).toEqual(records(1))
    expect(y.received).toEqual(records(1))
    expect(await source.statuses()).toEqual(['errored'])
  })

  it('a created event inherits the finalizers it is told to', async () => {
    const a = testSource([records(1)])
    const b = testSource([records(2)])
    const summary: Transform = {
      kind: 'summary',
      held: [] as LogEvent[],
      process(events, context) {
        const held = (this as unknown as { held: LogEvent[] }).held
        held.push(...events)
        if (held.length < 2) return
        const total = context.create({ total: held.reduce((sum, e) => sum + n(e), 0) }, held)
        for (const event of held.splice(0)) context.drop(event)
        context.emit(total)
      },
      flush() {},
    } as Transform
    const sink = testSink({ outcome: () => 'errored' })
    await run(
      new TopologyBuilder(on)
        .source('a', a)
        .source('b', b)
        .transform('t', ['a', 'b'], summary)
        .sink('out', ['t'], sink)
        .build(),
    )
    expect(sink.received).toEqual([{ total: 3 }])
    expect(await a.statuses()).toEqual(['errored'])
    expect(await b.statuses()).toEqual(['errored'])
  })

  it('takes a class instance as fields, as JSON writes its own members', async () => {
    class Reading {
      readonly n = 1
      readonly nested = { unit: 'C' }
    }
    const source = testSource([records(1)])
    const sink = testSink()
    const transform: Transform = {
      kind: 'creator',
      process(events, context) {
        context.emit(context.create(new Reading() as never, events.events))
        for (const event of events.events) context.drop(event) // the new event stands for them
      },
    }
    const facts = await run(through(source, transform, sink))
    expect(facts.filter((f) => f.type === 'component_error')).toEqual([])
    expect(await source.statuses()).toEqual(['delivered'])
    expect(JSON.parse(JSON.stringify(sink.received))).toEqual([{ n: 1, nested: { unit: 'C' } }])
  })

  it.each([
    ['null', null],
    ['an array', [{ n: 1 }]],
    ['a string', 'text'],
    ['a Map', new Map([['n', 1]])],
    ['a Promise', Promise.resolve({ n: 1 })],
    ['a Date', new Date(0)],
  ])(
    'fails a call whose create() is given %s as fields, instead of passing on an event no sink can read',
    async (what, fields) => {
      // Taken in, the event reached the sink with those fields (a file sink writes `null`) and was delivered.
      const source = testSource([records(1)])
      const sink = testSink()
      let thrown: unknown
      const transform: Transform = {
        kind: 'creator',
        process(events, context) {
          try {
            context.emit(context.create(fields as never, events.events))
          } catch (error) {
            thrown = error
            throw error
          }
        },
      }
      const facts = await run(through(source, transform, sink))
      expect(thrown).toMatchObject({ code: 'NOT_FIELDS', component: 't', field: 'create' })
      expect((thrown as Error).message).toContain(`got ${what}`)
      expect(await source.statuses()).toEqual(['errored'])
      expect(sink.received).toEqual([])
      expect(facts.filter((f) => f.type === 'component_error').map((f) => f.code)).toEqual(['PROCESS_FAILED'])
    },
  )

  it.each([
    [
      'throws after create, before emitting',
      (events: EventArray, context: TransformContext) => {
        context.create({ total: events.length }, events.events)
        throw new Error('lookup failed')
      },
      ['PROCESS_FAILED', 'LEAKED_EVENTS'],
    ],
    [
      'forgets an event it created',
      (events: EventArray, context: TransformContext) => {
        context.create({ total: events.length }, events.events)
        context.emitAll(events)
      },
      ['LEAKED_EVENTS'],
    ],
    [
      'creates from a parent it already dropped',
      (events: EventArray, context: TransformContext) => {
        const [first, second] = events.events
        context.drop(second!)
        context.create({ pair: true }, [first!, second!])
      },
      ['PROCESS_FAILED'],
    ],
  ])('settles errored the clones inside a created event when the call %s', async (_, process, codes) => {
    // Left live inside an event nobody ends, the clones would hold the batch up for good.
    const source = testSource([records(1, 2)])
    const sink = testSink()
    const topology = through(source, { kind: 'creator', process }, sink)
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    let decidedBeforeEnd: BatchStatus | undefined
    topology.lifecycle.subscribe((f) => {
      if (f.type === 'batch_resolved' && !f.timedOut) decidedBeforeEnd = f.status
    })
    await topology.start()
    await topology.done
    expect(decidedBeforeEnd).toBe('errored')
    expect(await source.statuses()).toEqual(['errored'])
    expect(facts.filter((f) => f.type === 'component_error').map((f) => f.code)).toEqual(codes)
  })

  it('flushes on its timer and at stop', async () => {
    vi.useFakeTimers()
    const held: LogEvent[] = []
    const flushes: number[] = []
    const window: Transform = {
      kind: 'window',
      flushIntervalMs: 1000,
      process(events) {
        held.push(...events)
      },
      flush(context) {
        flushes.push(held.length)
        for (const event of held.splice(0)) context.emit(event)
      },
    }
    const source = testSource([records(1, 2)], { untilStopped: true })
    const sink = testSink()
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .transform('w', ['in'], window)
      .sink('out', ['w'], sink)
      .build()
    await topology.start()
    await vi.advanceTimersByTimeAsync(999)
    expect(sink.received).toEqual([])
    await vi.advanceTimersByTimeAsync(1)
    expect(sink.received).toEqual(records(1, 2))
    expect(await source.statuses()).toEqual(['delivered'])
    await topology.stop()
    expect(flushes.at(-1)).toBe(0)
    expect(flushes.length).toBeGreaterThanOrEqual(2)
  })
})

describe('slow flushes', () => {
  it('queues at most one timed flush behind a flush that takes longer than the interval', async () => {
    vi.useFakeTimers()
    const gate = new Gate()
    let flushes = 0
    const slow: Transform = {
      kind: 'slow_flush',
      flushIntervalMs: 10,
      process(events, context) {
        context.emitAll(events)
      },
      async flush() {
        flushes++
        await gate.wait()
      },
    }
    const source = testSource([records(1)], { untilStopped: true })
    const sink = testSink()
    const topology = through(source, slow, sink)
    await topology.start()
    // The first flush waits on the gate while 100 intervals pass.
    await vi.advanceTimersByTimeAsync(1000)
    expect(flushes).toBe(1)
    gate.open()
    await vi.advanceTimersByTimeAsync(0)
    // The one tick kept while it waited runs; the rest were not piled up behind it.
    expect(flushes).toBe(2)
    const stopped = topology.stop()
    await vi.advanceTimersByTimeAsync(0)
    await stopped
    expect(await source.statuses()).toEqual(['delivered'])
  })

  it.each(['process', 'flush'] as const)(
    'a forced stop while %s never returns leaves no flush timer behind',
    async (hung) => {
      // The interval was cleared only once the run loop ended, which a call that never returns
      // never lets it do: the timer outlived the stopped topology and kept the process from exiting.
      vi.useFakeTimers()
      let flushes = 0
      const stuck: Transform = {
        kind: 'stuck',
        flushIntervalMs: 10,
        process(events, context) {
          if (hung === 'process') return new Promise<void>(() => {})
          context.emitAll(events)
          return undefined
        },
        flush() {
          flushes++
          return hung === 'flush' ? new Promise<void>(() => {}) : undefined
        },
      }
      // The second batch comes once the first timed flush hangs: its call waits behind it.
      const source = testSource([records(1), records(2)], {
        untilStopped: true,
        afterSend: () => new Promise<void>((resolve) => setTimeout(resolve, 15)),
      })
      const topology = through(source, stuck, testSink())
      await topology.start()
      await vi.advanceTimersByTimeAsync(40)
      const stopped = topology.stop({ drainTimeoutMs: 1000 })
      await vi.advanceTimersByTimeAsync(1000)
      await stopped
      expect(await source.statuses()).toEqual(
        hung === 'process' ? ['errored', 'errored'] : ['delivered', 'errored'],
      )
      expect(vi.getTimerCount()).toBe(0)
      const after = flushes
      await vi.advanceTimersByTimeAsync(1000)
      expect(flushes).toBe(after)
    },
  )
})

describe("a forced stop finding an ended handle in a sink's queue", () => {
  it('settles the rest of the queue and every batch, and the stop resolves', async () => {
    // A transform that ended a handle it had passed on (against its contract) left it in the
    // sink's queue: the forced stop's settling of the queue threw at it (ALREADY_ENDED), and the
    // stop was left half done: the sink's pending write and the batches never settled, stop()
    // rejected.
    vi.useFakeTimers()
    const passed: LogEvent[] = []
    const leaky: Transform = {
      kind: 'leaky',
      process(events, context) {
        passed.push(...events)
        context.emitAll(events)
      },
    }
    const written: number[] = []
    // The first write never returns: the second array waits in the sink's queue.
    const sink = testSink({
      write: (events) => {
        written.push(events.length)
        return new Promise(() => {})
      },
    })
    const second = new Gate()
    const source = testSource([records(1), records(2, 3)], {
      untilStopped: true,
      afterSend: (sent) => (sent === 1 ? second.wait() : undefined),
    })
    const topology = through(source, leaky, sink)
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await topology.start()
    await vi.advanceTimersByTimeAsync(0)
    expect(written).toEqual([1])
    second.open()
    await vi.advanceTimersByTimeAsync(0)
    expect(passed).toHaveLength(3)
    expect(written).toEqual([1])
    passed[1]!.end() // queued for the sink, ended upstream
    const stopped = topology.stop({ drainTimeoutMs: 1000 })
    const outcome = stopped.then(
      () => 'resolved',
      (error: unknown) => error,
    )
    await vi.advanceTimersByTimeAsync(1000)
    expect(await outcome).toBe('resolved')
    expect(await source.statuses()).toEqual(['errored', 'errored'])
    expect(passed[2]!.isEnded).toBe(true)
    // The write given up, and the one live handle of the queue: not the handle ended upstream.
    expect(topology.metrics().out).toMatchObject({ erroredEvents: 2, failures: { STOPPED: 2 } })
    expect(facts.some((f) => f.type === 'topology_stopped')).toBe(true)
  })
})

describe('a late drop of an event a late emit ended', () => {
  it.each([false, true])(
    'is reported, not thrown into the callback (topology stopped first: %s)',
    async (forced) => {
      // A late emit of an event made by a late create ends it; a drop of it after that ended it
      // again and threw ALREADY_ENDED into the callback (a timer's: nobody catches it).
      vi.useFakeTimers()
      const thrown: unknown[] = []
      const made: LogEvent[] = []
      const late: Transform = {
        kind: 'late',
        process(events, context) {
          for (const event of events) context.emit(event)
          setTimeout(() => {
            try {
              const event = context.create({ late: true })
              made.push(event)
              context.emit(event)
              context.drop(event)
            } catch (error) {
              thrown.push(error)
            }
          }, 5000)
        },
      }
      const source = testSource([records(1)], { untilStopped: true })
      const sink = testSink()
      const topology = through(source, late, sink)
      const facts: LifecycleEvent[] = []
      topology.lifecycle.subscribe((f) => facts.push(f))
      await topology.start()
      await vi.advanceTimersByTimeAsync(0)
      expect(await source.statuses()).toEqual(['delivered'])
      if (forced) {
        const stopped = topology.stop({ drainTimeoutMs: 0 })
        await vi.advanceTimersByTimeAsync(0)
        await stopped
      }
      const metrics = topology.metrics().t
      const before = facts.length
      await vi.advanceTimersByTimeAsync(5000)
      expect(thrown).toEqual([])
      expect(made).toHaveLength(1)
      expect(made[0]!.isEnded).toBe(true)
      expect(facts.slice(before)).toEqual([
        expect.objectContaining({ code: 'EMIT_AFTER_RETURN' }),
        expect.objectContaining({ code: 'EMIT_AFTER_RETURN', events: 0 }),
      ])
      // The drop counts nothing: the emit settled the event (errored, counted once, unless forced).
      expect(topology.metrics().t!.discardedEvents).toBe(metrics!.discardedEvents)
      if (!forced) await topology.stop()
    },
  )
})

describe('a forced stop while a call never returns', () => {
  it("settles the call's inputs and what it made errored at the stop; what the call does later changes nothing", async () => {
    // The inputs stayed live: their batch was told errored by the stop, but the handles waited
    // for the leak detector, or for ever while the hung call kept them.
    vi.useFakeTimers()
    const gate = new Gate()
    const given: EventArray[] = []
    const made: LogEvent[] = []
    const hung: Transform = {
      kind: 'hung',
      async process(events, context) {
        given.push(events)
        context.emit(events.events[0]!)
        made.push(context.create({ n: 99 }, [events.events[1]!]))
        await gate.wait()
        // After the stop: each of these must settle nothing and pass nothing on.
        context.emit(events.events[0]!)
        context.drop(events.events[1]!)
        context.emit(made[0]!)
        context.emitAll(events)
        throw new Error('late') // nor does a throw: nothing is checked or reported
      },
    }
    const source = testSource([records(1, 2, 3)], { untilStopped: true })
    const sink = testSink()
    const topology = through(source, hung, sink)
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await topology.start()
    await vi.advanceTimersByTimeAsync(0)
    expect(given).toHaveLength(1)
    const stopped = topology.stop({ drainTimeoutMs: 1000 })
    await vi.advanceTimersByTimeAsync(1000)
    await stopped
    expect(given[0]!.events.map(holdsNoBatch)).toEqual([true, true, true])
    expect(holdsNoBatch(made[0]!)).toBe(true)
    expect(await source.statuses()).toEqual(['errored'])
    expect(source.receipts[0]!.failure).toMatchObject({ componentId: 't', code: 'STOPPED' })
    expect(topology.metrics().t!.erroredEvents).toBe(4)
    const before = facts.length
    gate.open()
    await vi.advanceTimersByTimeAsync(100)
    expect(await source.statuses()).toEqual(['errored'])
    expect(source.receipts[0]!.failure).toMatchObject({ componentId: 't', code: 'STOPPED' })
    expect(sink.received).toEqual([])
    expect(topology.metrics().t!.erroredEvents).toBe(4)
    // Reported as the misuse it is, each with no event settled.
    const late = facts.slice(before)
    expect(late.length).toBeGreaterThan(0)
    for (const fact of late)
      expect(fact).toMatchObject({
        type: 'component_error',
        component: 't',
        code: 'EMIT_AFTER_RETURN',
        events: 0,
      })
  })

  it('lets a callback of the call given up read, change and copy its events after the stop, throwing nothing and settling nothing', async () => {
    // The stop ended the handles: the callback threw "cannot read an event whose handle has
    // ended" where nobody catches it (a timer, a client's callback), ending the process.
    vi.useFakeTimers()
    const thrown: unknown[] = []
    const enrich: Transform = {
      kind: 'enrich',
      process(events, context) {
        return new Promise<void>((resolve) => {
          setTimeout(() => {
            try {
              for (const event of events) event.set('double', n(event) * 2)
              const total = context.create({ n: 0 }, events.events)
              context.emitAll(events)
              context.emit(total)
              context.drop(total)
            } catch (error) {
              thrown.push(error)
            }
            resolve()
          }, 5000)
        })
      },
    }
    const source = testSource([records(1, 2)], { untilStopped: true })
    const sink = testSink()
    const topology = through(source, enrich, sink)
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await topology.start()
    await vi.advanceTimersByTimeAsync(0)
    const stopped = topology.stop({ drainTimeoutMs: 1000 })
    await vi.advanceTimersByTimeAsync(1000)
    await stopped
    expect(await source.statuses()).toEqual(['errored'])
    expect(source.receipts[0]!.failure).toMatchObject({ componentId: 't', code: 'STOPPED' })
    const before = facts.length
    await vi.advanceTimersByTimeAsync(5000)
    expect(thrown).toEqual([])
    expect(sink.received).toEqual([])
    expect(topology.metrics().t).toMatchObject({ erroredEvents: 2, discardedEvents: 0 })
    const late = facts.slice(before)
    expect(late).toHaveLength(4)
    for (const fact of late) expect(fact).toMatchObject({ code: 'EMIT_AFTER_RETURN', events: 0 })
  })

  it('lets a callback of the call given up read and emit the events its transform held, throwing nothing and settling nothing more', async () => {
    // The stop ended the held events: a callback of the call still running that read one threw
    // "cannot read an event whose handle has ended" where nobody catches it, ending the process.
    vi.useFakeTimers()
    const thrown: unknown[] = []
    const kept: LogEvent[] = []
    let calls = 0
    const window: Transform = {
      kind: 'slow_window',
      process(events, context) {
        kept.push(...events)
        if (++calls === 1) return undefined // held for a later call
        return new Promise<void>((resolve) => {
          setTimeout(() => {
            try {
              for (const event of kept) event.set('seen', true)
              for (const event of kept.splice(0)) context.emit(event)
            } catch (error) {
              thrown.push(error)
            }
            resolve()
          }, 5000)
        })
      },
      flush(context) {
        for (const event of kept.splice(0)) context.emit(event)
      },
    }
    const { source, sink, topology, facts, stop } = await forceStoppedAfterTwoArrays(window, () =>
      expect(calls).toBe(1),
    )
    expect(calls).toBe(2)
    await stop()
    expect(await source.statuses()).toEqual(['errored', 'errored'])
    expect(source.receipts[0]!.failure).toMatchObject({ componentId: 't', code: 'LEAKED_EVENTS' })
    expect(source.receipts[1]!.failure).toMatchObject({ componentId: 't', code: 'STOPPED' })
    expect(kept.map(holdsNoBatch)).toEqual([true, true])
    const metrics = topology.metrics().t
    expect(metrics).toMatchObject({ erroredEvents: 2, failures: { LEAKED_EVENTS: 1, STOPPED: 1 } })
    const before = facts.length
    await vi.advanceTimersByTimeAsync(5000)
    expect(thrown).toEqual([])
    expect(sink.received).toEqual([])
    expect(topology.metrics().t).toEqual(metrics)
    const late = facts.slice(before)
    expect(late).toHaveLength(2)
    for (const fact of late) expect(fact).toMatchObject({ code: 'EMIT_AFTER_RETURN', events: 0 })
  })

  it('settles nothing more when an earlier call emits late, after the forced stop, an event its transform held', async () => {
    // The stop settled the held event and left its handle live for the call it gave up: a timer of
    // the first call, which had returned, then emitted it and had it settled again (erroredEvents
    // 2 for one event, EMIT_AFTER_RETURN with events 1), its handle ended under the call given up.
    vi.useFakeTimers()
    const kept: LogEvent[] = []
    let calls = 0
    const window: Transform = {
      kind: 'late_window',
      process(events, context) {
        kept.push(...events)
        if (++calls === 1) {
          // Held for a later call; this call's context is used by its timer after the stop.
          setTimeout(() => {
            for (const event of kept.slice(0, 1)) context.emit(event)
          }, 5000)
          return undefined
        }
        return new Promise<void>(() => {}) // hangs: given up at the stop
      },
      flush(context) {
        for (const event of kept.splice(0)) context.emit(event)
      },
    }
    const { topology, facts, stop } = await forceStoppedAfterTwoArrays(window)
    expect(calls).toBe(2)
    await stop()
    const metrics = topology.metrics().t
    expect(metrics).toMatchObject({ erroredEvents: 2, failures: { LEAKED_EVENTS: 1, STOPPED: 1 } })
    const before = facts.length
    await vi.advanceTimersByTimeAsync(5000)
    expect(topology.metrics().t).toEqual(metrics)
    expect(facts.slice(before)).toEqual([expect.objectContaining({ code: 'EMIT_AFTER_RETURN', events: 0 })])
    expect(holdsNoBatch(kept[0]!)).toBe(true)
  })

  it('counts nothing more when a late callback emits a fresh event, or one it made from a handle the forced stop settled', async () => {
    // After the stop nothing a late callback makes carries a batch: a new event, or one made by
    // create from a handle the stop settled through an earlier call's context, was settled errored
    // and counted in erroredEvents (EMIT_AFTER_RETURN with events 1), though it settled nothing.
    vi.useFakeTimers()
    const kept: LogEvent[] = []
    let calls = 0
    const window: Transform = {
      kind: 'late_window',
      process(events, context) {
        kept.push(...events)
        if (++calls === 1) {
          setTimeout(() => {
            context.emit(context.create({ fresh: true }))
            context.emit(context.create({ child: true }, kept.slice(0, 1)))
          }, 5000)
          return undefined
        }
        setTimeout(() => context.emit(context.create({ given: true })), 5000)
        return new Promise<void>(() => {}) // hangs: given up at the stop
      },
      flush(context) {
        for (const event of kept.splice(0)) context.emit(event)
      },
    }
    const { topology, facts, stop } = await forceStoppedAfterTwoArrays(window)
    expect(calls).toBe(2)
    await stop()
    const metrics = topology.metrics().t
    expect(metrics).toMatchObject({ erroredEvents: 2, failures: { LEAKED_EVENTS: 1, STOPPED: 1 } })
    const before = facts.length
    await vi.advanceTimersByTimeAsync(5000)
    expect(topology.metrics().t).toEqual(metrics)
    expect(facts.slice(before)).toEqual([
      expect.objectContaining({ code: 'EMIT_AFTER_RETURN', events: 0 }),
      expect.objectContaining({ code: 'EMIT_AFTER_RETURN', events: 0 }),
      expect.objectContaining({ code: 'EMIT_AFTER_RETURN', events: 0 }),
    ])
  })

  it('counts nothing more when a late callback drops an event it made by create after its call returned', async () => {
    // As for a late emit (2d25866): after the stop, an event create made of nothing, or of a
    // handle the stop settled, carries no batch, yet its late drop was counted in discardedEvents
    // (and, with a dropStatus, in rejectedEvents and failures.DROPPED), though it settled nothing.
    vi.useFakeTimers()
    const kept: LogEvent[] = []
    let calls = 0
    const made: LogEvent[] = []
    const window: Transform = {
      kind: 'late_window',
      dropStatus: 'rejected',
      process(events, context) {
        kept.push(...events)
        if (++calls === 1) {
          setTimeout(() => {
            for (const event of [
              context.create({ fresh: true }),
              context.create({ child: true }, kept.slice(0, 1)),
            ]) {
              made.push(event)
              context.drop(event)
            }
          }, 5000)
          return undefined
        }
        setTimeout(() => {
          const event = context.create({ given: true })
          made.push(event)
          context.drop(event)
        }, 5000)
        return new Promise<void>(() => {}) // hangs: given up at the stop
      },
      flush(context) {
        for (const event of kept.splice(0)) context.emit(event)
      },
    }
    const { topology, stop } = await forceStoppedAfterTwoArrays(window)
    expect(calls).toBe(2)
    await stop()
    const metrics = topology.metrics().t
    expect(metrics).toMatchObject({ discardedEvents: 0, rejectedEvents: 0 })
    await vi.advanceTimersByTimeAsync(5000)
    expect(made).toHaveLength(3)
    expect(made.every((event) => event.isEnded)).toBe(true)
    expect(topology.metrics().t).toEqual(metrics)
  })

  it('ends, counting nothing, what a call given up makes late by create from a handle the stop settled, as one made of nothing', async () => {
    // Made of its own input (settled by the stop) through the given-up call's context, a late
    // drop was reported EMIT_AFTER_RETURN and left the event unended, and a late emit only
    // reported it, where the same made of nothing was ended (and its drop reported nothing).
    vi.useFakeTimers()
    const made: { from: 'nothing' | 'input'; event: LogEvent; how: 'emit' | 'drop' }[] = []
    let calls = 0
    const window: Transform = {
      kind: 'late_window',
      process(events, context) {
        if (++calls === 1) {
          for (const event of events) context.emit(event)
          return undefined
        }
        setTimeout(() => {
          for (const how of ['emit', 'drop'] as const)
            for (const from of ['nothing', 'input'] as const) {
              const event = context.create({ from, how }, from === 'input' ? [events.events[0]!] : [])
              made.push({ from, event, how })
              if (how === 'emit') context.emit(event)
              else context.drop(event)
            }
        }, 5000)
        return new Promise<void>(() => {}) // hangs: given up at the stop
      },
    }
    const { topology, facts, stop } = await forceStoppedAfterTwoArrays(window)
    expect(calls).toBe(2)
    await stop()
    const metrics = topology.metrics().t
    const before = facts.length
    await vi.advanceTimersByTimeAsync(5000)
    expect(made).toHaveLength(4)
    expect(made.map(({ from, how, event }) => [from, how, event.isEnded])).toEqual([
      ['nothing', 'emit', true],
      ['input', 'emit', true],
      ['nothing', 'drop', true],
      ['input', 'drop', true],
    ])
    expect(topology.metrics().t).toEqual(metrics)
    // One report per late emit, each settling nothing; a late drop of its own event reports nothing.
    expect(facts.slice(before)).toEqual([
      expect.objectContaining({ code: 'EMIT_AFTER_RETURN', events: 0 }),
      expect.objectContaining({ code: 'EMIT_AFTER_RETURN', events: 0 }),
    ])
  })

  it('settles what a flush that never returns made, at the stop', async () => {
    vi.useFakeTimers()
    const gate = new Gate()
    const made: LogEvent[] = []
    const hung: Transform = {
      kind: 'hung_flush',
      flushIntervalMs: 10,
      process(events, context) {
        // Held for the flush: settled by the stop as held events always were.
        for (const event of events) made.push(context.create({ n: n(event) + 100 }, [event]))
        for (const event of events) context.drop(event)
      },
      async flush(context) {
        const next = made.splice(0)
        const again = next.map((e) => context.create({ n: n(e) }, [e]))
        for (const e of next) context.drop(e)
        made.push(...again)
        await gate.wait()
        for (const e of again) context.emit(e)
      },
    }
    const source = testSource([records(1, 2)], { untilStopped: true })
    const sink = testSink()
    const topology = through(source, hung, sink)
    await topology.start()
    await vi.advanceTimersByTimeAsync(10)
    expect(made).toHaveLength(2)
    const stopped = topology.stop({ drainTimeoutMs: 1000 })
    await vi.advanceTimersByTimeAsync(1000)
    await stopped
    expect(made.map(holdsNoBatch)).toEqual([true, true])
    expect(await source.statuses()).toEqual(['errored'])
    gate.open()
    await vi.advanceTimersByTimeAsync(100)
    expect(sink.received).toEqual([])
    expect(await source.statuses()).toEqual(['errored'])
  })
})

describe('a forced stop while a timed flush or a call waits', () => {
  it('settles at the stop an array that waited for a flush that never returns, and never calls process() with it', async () => {
    // The array was out of the channel and in no call: its handles stayed live through the stop,
    // and once the flush returned, process() was called with it after the topology had stopped.
    vi.useFakeTimers()
    const gate = new Gate()
    const second = new Gate()
    const given: number[][] = []
    let flushes = 0
    const transform: Transform = {
      kind: 'hung_timed_flush',
      flushIntervalMs: 10,
      process(events, context) {
        given.push(events.events.map(n))
        context.emitAll(events)
      },
      async flush() {
        flushes++
        await gate.wait()
      },
    }
    const source = testSource([records(1), records(2)], {
      untilStopped: true,
      afterSend: (sent) => (sent === 1 ? second.wait() : undefined),
    })
    const sink = testSink()
    const topology = through(source, transform, sink)
    await topology.start()
    await vi.advanceTimersByTimeAsync(10)
    expect(flushes).toBe(1)
    second.open()
    await vi.advanceTimersByTimeAsync(0)
    expect(source.receipts).toHaveLength(2)
    const stopped = topology.stop({ drainTimeoutMs: 100 })
    await vi.advanceTimersByTimeAsync(100)
    await stopped
    expect(await source.statuses()).toEqual(['delivered', 'errored'])
    expect(source.receipts[1]!.failure).toMatchObject({ componentId: 't', code: 'STOPPED' })
    expect(topology.metrics().t).toMatchObject({ erroredEvents: 1, failures: { STOPPED: 1 } })
    gate.open()
    await vi.advanceTimersByTimeAsync(100)
    expect(given).toEqual([[1]])
    expect(sink.received).toEqual(records(1))
    expect(topology.metrics().t).toMatchObject({ erroredEvents: 1, failures: { STOPPED: 1 } })
  })

  it('does not call flush() after the stop once a process() call it gave up returns', async () => {
    // A tick during the hung call queued a flush behind it, which ran after the stop.
    vi.useFakeTimers()
    const gate = new Gate()
    let flushes = 0
    const transform: Transform = {
      kind: 'hung_process',
      flushIntervalMs: 10,
      async process(events, context) {
        await gate.wait()
        context.emitAll(events)
      },
      flush() {
        flushes++
      },
    }
    const source = testSource([records(1)], { untilStopped: true })
    const topology = through(source, transform, testSink())
    await topology.start()
    await vi.advanceTimersByTimeAsync(25)
    expect(flushes).toBe(0)
    const stopped = topology.stop({ drainTimeoutMs: 100 })
    await vi.advanceTimersByTimeAsync(100)
    await stopped
    gate.open()
    await vi.advanceTimersByTimeAsync(100)
    expect(flushes).toBe(0)
    expect(await source.statuses()).toEqual(['errored'])
  })

  it('does not call the last flush() after the stop once a timed flush it gave up returns', async () => {
    // The drain's last flush queued behind the hung timed flush, and ran once that returned, after
    // the topology had stopped: user code called after the stop, its output reported as misuse.
    vi.useFakeTimers()
    const gate = new Gate()
    let flushes = 0
    const transform: Transform = {
      kind: 'slow_timed_flush',
      flushIntervalMs: 10,
      process(events, context) {
        context.emitAll(events)
      },
      async flush(context) {
        flushes++
        if (flushes === 1) await gate.wait()
        else context.emit(context.create({ n: 99 }))
      },
    }
    const source = testSource([records(1)], { untilStopped: true })
    const sink = testSink()
    const topology = through(source, transform, sink)
    await topology.start()
    await vi.advanceTimersByTimeAsync(10)
    expect(flushes).toBe(1)
    const stopped = topology.stop({ drainTimeoutMs: 100 })
    await vi.advanceTimersByTimeAsync(100)
    await stopped
    gate.open()
    await vi.advanceTimersByTimeAsync(100)
    expect(flushes).toBe(1)
    expect(sink.received).toEqual(records(1))
    expect(topology.metrics().t!.sentEvents).toBe(1)
  })
})

describe('transforms that break the contract', () => {
  it('reports an emit on an undeclared port as a failed call and settles the event errored', async () => {
    const source = testSource([records(1)])
    const facts = await run(
      new TopologyBuilder(on)
        .source('in', source)
        .transform('t', ['in'], {
          kind: 'typo',
          process: (events, context) => context.emit(events.events[0]!, 'nope'),
        })
        .sink('out', ['t'], testSink())
        .build(),
    )
    expect(await source.statuses()).toEqual(['errored'])
    const errors = facts.filter((f) => f.type === 'component_error')
    expect(errors[0]).toMatchObject({ code: 'UNDECLARED_PORT', events: 1 })
    expect(errors[1]).toMatchObject({
      code: 'PROCESS_FAILED',
      message: expect.stringContaining("port 'nope'"),
    })
  })

  it.each([
    ['emit', (_events: EventArray, context: TransformContext) => context.emit(undefined as never)],
    ['emitAll', (events: EventArray, context: TransformContext) => context.emitAll(events.events as never)],
  ])(
    'fails the call, not the runner, when %s is given something else than events',
    async (member, misuse) => {
      // Untyped code: the first batch's call passes on something else than events; the second's is fine.
      const source = testSource([records(1), records(2)])
      const sink = testSink()
      const facts = await run(
        through(
          source,
          {
            kind: 'untyped',
            process(events, context) {
              if (n(events.events[0]!) === 1) misuse(events, context)
              else context.emitAll(events)
            },
          },
          sink,
        ),
      )
      expect(await source.statuses()).toEqual(['errored', 'delivered'])
      expect(sink.received).toEqual(records(2))
      expect(facts.filter((f) => f.type === 'component_error')).toMatchObject([
        {
          component: 't',
          code: 'PROCESS_FAILED',
          events: 1,
          message: expect.stringContaining(`t (${member}): context.${member} takes`),
        },
      ])
    },
  )

  it('passes on a call that emitted one event twice among more than a spread can take', async () => {
    const many = Array.from({ length: 200_000 }, (_, i) => ({ n: i }))
    const source = testSource([many])
    const sink = testSink()
    const facts = await run(
      new TopologyBuilder(on)
        .source('in', source)
        .transform('t', ['in'], {
          kind: 'twice',
          process(events, context) {
            context.emitAll(events)
            context.emit(events.events[0]!)
          },
        })
        .sink('out', ['t'], sink, { buffer: { maxEvents: 250_000 } })
        .build(),
    )
    expect(facts.filter((f) => f.type === 'component_error')).toEqual([])
    expect(await source.statuses()).toEqual(['delivered'])
    expect(sink.received.length).toBe(200_001)
  })

  it('settles errored what a flushing transform still holds after its last flush', async () => {
    const source = testSource([records(1, 2)])
    const facts = await run(through(source, { kind: 'hoarder', process() {}, flush() {} }, testSink()))
    expect(await source.statuses()).toEqual(['errored'])
    expect(facts.find((f) => f.type === 'component_error')).toMatchObject({
      code: 'LEAKED_EVENTS',
      events: 2,
    })
  })

  it('settles errored at a forced stop what a transform holds', async () => {
    vi.useFakeTimers()
    const source = testSource([records(1)], { untilStopped: true })
    const sink = testSink()
    const topology = through(
      source,
      { kind: 'hoarder', process() {}, flush: () => new Promise(() => {}) },
      sink,
    )
    await topology.start()
    await vi.advanceTimersByTimeAsync(0)
    const stopped = topology.stop({ drainTimeoutMs: 100 })
    await vi.advanceTimersByTimeAsync(100)
    await stopped
    expect(await source.statuses()).toEqual(['errored'])
    expect(topology.metrics().t!.erroredEvents).toBe(1)
  })

  it('settles errored at a forced stop what a transform keeps from a call that returns after it', async () => {
    // Kept after the forced stop had settled what was held, they were never ended at all. Then
    // they were settled once the call returned (LEAKED_EVENTS); now the stop settles them itself,
    // as the inputs of a call it gives up, and the call's return changes nothing.
    const gate = new Gate()
    const entered = new Gate()
    const kept: LogEvent[] = []
    const source = testSource([records(1, 2)], { untilStopped: true })
    const topology = through(
      source,
      {
        kind: 'hoarder',
        async process(events) {
          kept.push(...events.events)
          entered.open()
          await gate.wait()
        },
        flush() {},
      },
      testSink(),
    )
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await topology.start()
    await entered.wait()
    await topology.stop({ drainTimeoutMs: 0 })
    expect(await source.statuses()).toEqual(['errored'])
    expect(kept.map(holdsNoBatch)).toEqual([true, true])
    expect(source.receipts[0]!.failure).toMatchObject({ componentId: 't', code: 'STOPPED' })
    gate.open()
    // Lets the call's promise and the check after it run (an order, not a time).
    await new Promise<void>((resolve) => setImmediate(resolve))
    expect(facts.filter((f) => f.type === 'component_error')).toEqual([])
    expect(topology.metrics().t!.erroredEvents).toBe(2)
  })

  it('a drop, in a call that returns after a forced stop, of a held event the stop settled is reported, not thrown', async () => {
    // Still marked as the transform's, the ended handle was taken for its own and ended again:
    // ALREADY_ENDED thrown in the transform, where the runtime had settled it (review).
    const gate = new Gate()
    const entered = new Gate()
    let first: LogEvent | undefined
    let calls = 0
    let threw: unknown
    const source = testSource([records(1), records(2)], { untilStopped: true })
    const topology = through(
      source,
      {
        kind: 'hoarder',
        async process(events, context) {
          if (++calls === 1) {
            first = events.events[0] // held by the runtime: the call returns without it
            return
          }
          entered.open()
          await gate.wait()
          try {
            context.drop(first!)
          } catch (error) {
            threw = error
          }
          for (const event of events) context.drop(event)
        },
        flush() {},
      },
      testSink(),
    )
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await topology.start()
    await entered.wait()
    await topology.stop({ drainTimeoutMs: 0 })
    expect(holdsNoBatch(first!)).toBe(true) // the stop settled its batch
    gate.open()
    // Lets the call's promise and the check after it run (an order, not a time).
    await new Promise<void>((resolve) => setImmediate(resolve))
    expect(threw).toBeUndefined()
    // The stop gave the call up: a drop through its context ends nothing, and says so.
    expect(facts).toContainEqual(
      expect.objectContaining({ component: 't', code: 'EMIT_AFTER_RETURN', events: 0 }),
    )
  })
})

describe('the arrays a transform is handed', () => {
  const batches = [records(1), records(2, 3), records(4), records(5, 6, 7), records(8)]

  /**
   * Runs `batches` through a transform that records each call's input and waits in its first call
   * until every batch was sent, so the rest queues behind it. The source sends the first batch
   * alone and the rest once the first call has begun. The sink rejects event 5.
   */
  const queuedBehindFirstCall = async (coalesce: boolean | undefined, option?: boolean) => {
    const gate = new Gate()
    const calls: number[][] = []
    const firstCall = new Gate()
    const transform: Transform = {
      kind: 'recorder',
      ...(coalesce === undefined ? {} : { coalesce }),
      async process(events, context) {
        calls.push(events.events.map(n))
        firstCall.open()
        if (calls.length === 1) await gate.wait()
        context.emitAll(events)
      },
    }
    const source = testSource(batches, { afterSend: (sent) => (sent === 1 ? firstCall.wait() : undefined) })
    const sink = testSink({ outcome: (event) => (n(event) === 5 ? 'rejected' : 'delivered') })
    const topology =
      option === undefined
        ? through(source, transform, sink)
        : new TopologyBuilder(on)
            .source('in', source)
            .transform('t', ['in'], transform, { coalesce: option })
            .sink('out', ['t'], sink)
            .build()
    await topology.start()
    await vi.waitFor(() => expect(source.receipts).toHaveLength(batches.length))
    expect(calls).toEqual([[1]])
    gate.open()
    await topology.done
    expect(sink.received).toEqual(records(1, 2, 3, 4, 5, 6, 7, 8))
    return { calls, statuses: await source.statuses(), received: topology.metrics().t!.receivedEvents }
  }

  it('a transform that declares coalesce takes every queued array in one call, and each batch is still acknowledged alone', async () => {
    const { calls, statuses, received } = await queuedBehindFirstCall(true)
    expect(calls).toEqual([[1], [2, 3, 4, 5, 6, 7, 8]])
    expect(statuses).toEqual(['delivered', 'delivered', 'delivered', 'rejected', 'delivered'])
    expect(received).toBe(8)
  })

  it('any other transform is handed each array as it was sent', async () => {
    for (const coalesce of [undefined, false]) {
      const { calls, statuses } = await queuedBehindFirstCall(coalesce)
      expect(calls).toEqual([[1], [2, 3], [4], [5, 6, 7], [8]])
      expect(statuses).toEqual(['delivered', 'delivered', 'delivered', 'rejected', 'delivered'])
    }
  })

  it("the declaration's coalesce option wins over the transform's own", async () => {
    const off = await queuedBehindFirstCall(true, false)
    expect(off.calls).toEqual([[1], [2, 3], [4], [5, 6, 7], [8]])
    const on = await queuedBehindFirstCall(undefined, true)
    expect(on.calls).toEqual([[1], [2, 3, 4, 5, 6, 7, 8]])
    for (const { statuses } of [off, on])
      expect(statuses).toEqual(['delivered', 'delivered', 'delivered', 'rejected', 'delivered'])
  })

  it('a perEvent transform whose step throws for one batch errors that batch only, coalesced or not', async () => {
    // A throw used to leave every later event of the call to be settled errored: with coalescing,
    // the events of other batches (of other sources, in a fan-in) that happened to share the call.
    for (const coalesce of [true, false]) {
      const gate = new Gate()
      const firstCall = new Gate()
      const calls: number[][] = []
      const step = perEvent(
        (event) => {
          if (n(event) === 4) throw new Error('cannot parse 4')
          return undefined
        },
        () => {},
      )
      const transform: Transform = {
        kind: 'parse',
        coalesce,
        async process(events, context) {
          calls.push(events.events.map(n))
          firstCall.open()
          if (calls.length === 1) await gate.wait()
          step(events, context)
        },
      }
      const source = testSource(batches, { afterSend: (sent) => (sent === 1 ? firstCall.wait() : undefined) })
      const sink = testSink()
      const topology = through(source, transform, sink)
      const facts: LifecycleEvent[] = []
      topology.lifecycle.subscribe((f) => facts.push(f))
      await topology.start()
      await vi.waitFor(() => expect(source.receipts).toHaveLength(batches.length))
      gate.open()
      await topology.done
      expect(calls.length).toBe(coalesce ? 2 : 5)
      expect(await source.statuses()).toEqual(['delivered', 'delivered', 'errored', 'delivered', 'delivered'])
      expect(sink.received).toEqual(records(1, 2, 3, 5, 6, 7, 8))
      expect(facts.filter((f) => f.type === 'component_error')).toMatchObject([
        { component: 't', code: 'PROCESS_FAILED', events: 1 },
      ])
    }
  })

  /**
   * Runs `sent` batches through a coalescing transform behind a buffer of `maxEvents`, whose first
   * call (the first batch alone: the rest are sent once it began) waits until `waitFor` batches
   * were sent (the rest queue behind it or wait for room); returns each call's input (the `n` of
   * its events) and the sources' statuses.
   */
  const coalescedCalls = async (sent: JsonObject[][], maxEvents: number, waitFor: number) => {
    const gate = new Gate()
    const calls: number[][] = []
    const firstCall = new Gate()
    const source = testSource(sent, { afterSend: (count) => (count === 1 ? firstCall.wait() : undefined) })
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .transform(
        't',
        ['in'],
        {
          kind: 'recorder',
          coalesce: true,
          async process(events, context) {
            calls.push(events.events.map(n))
            firstCall.open()
            if (calls.length === 1) await gate.wait()
            context.emitAll(events)
          },
        },
        { buffer: { maxEvents } },
      )
      .sink('out', ['t'], testSink())
      .build()
    await topology.start()
    await vi.waitFor(() => expect(source.receipts).toHaveLength(waitFor))
    gate.open()
    await topology.done
    return { calls, statuses: await source.statuses() }
  }

  it("coalesces no more than the transform's buffer holds", async () => {
    // [2, 3] and [4] queue (3 events); [5, 6, 7] would pass 4, so the source waits for room.
    const { calls, statuses } = await coalescedCalls(batches, 4, 3)
    expect(calls.flat()).toEqual([1, 2, 3, 4, 5, 6, 7, 8])
    expect(calls[1]).toEqual([2, 3, 4])
    for (const call of calls) expect(call.length).toBeLessThanOrEqual(4)
    expect(statuses).toEqual(Array(5).fill('delivered'))
  })

  it('coalesces at most 128 events into one call, however many the buffer holds', async () => {
    const { calls: inputs, statuses } = await coalescedCalls(
      Array.from({ length: 300 }, (_, i) => records(i)),
      1000,
      300,
    )
    const calls = inputs.map((input) => input.length)
    expect(calls.reduce((a, b) => a + b, 0)).toBe(300)
    expect(Math.max(...calls)).toBe(128) // 299 queued behind the first call: 128, 128, 43
    expect(calls).toEqual([1, 128, 128, 43])
    expect(new Set(statuses)).toEqual(new Set(['delivered']))
  })

  it('a transform that declares itself synchronous is handed one context, any other one per call', async () => {
    for (const synchronous of [true, false, undefined]) {
      const contexts: TransformContext[] = []
      const source = testSource([records(1), records(2), records(3)])
      await run(
        through(
          source,
          {
            kind: 'pass',
            ...(synchronous === undefined ? {} : { synchronous }),
            process(events, context) {
              contexts.push(context)
              context.emitAll(events)
            },
          },
          testSink(),
        ),
      )
      expect(contexts).toHaveLength(3)
      expect(new Set(contexts).size).toBe(synchronous === true ? 1 : 3)
      expect(await source.statuses()).toEqual(['delivered', 'delivered', 'delivered'])
    }
  })
})

describe('an event made with create() of an object taken from its parent', () => {
  it('is copied at its first write, so a set through it leaves the parent as it was', async () => {
    const source = testSource([[{ n: 1, http: { status: 200 } }]])
    const sink = testSink()
    const topology = through(
      source,
      {
        kind: 'creator',
        process(events, context) {
          const input = events.events[0]!
          const made = context.create({ http: input.get('http') as JsonObject }, [input])
          made.set('http.status', 500)
          context.emit(input)
          context.emit(made)
        },
      },
      sink,
    )
    await run(topology)
    expect(sink.received).toEqual([{ n: 1, http: { status: 200 } }, { http: { status: 500 } }])
    expect(await source.statuses()).toEqual(['delivered'])
  })
})
