// Issue 13, what crosses the topology's edges from code the types cannot vouch for: a sink's
// start that throws, per-event results that are not statuses, emits a transform makes wrongly.

import { BatchNotifier, EventArray, LogEvent } from '@ackline/core'
import {
  type BatchReceipt,
  ComponentError,
  type LifecycleEvent,
  type Sink,
  type Topology,
  TopologyBuilder,
  TopologyError,
  type Transform,
  type TransformContext,
} from '@ackline/topology'
import { describe, expect, it, vi } from 'vitest'
import { linear, on, records, run, through } from './support/Harness.js'
import {
  Gate,
  queueBuffer,
  routeBy,
  type TestSource,
  testSink,
  testSource,
} from './support/TestComponents.js'

describe('a sink whose start() throws', () => {
  it('makes start() reject with a TopologyError naming the sink, its kind and the cause', async () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })
    const started: string[] = []
    const stopped: string[] = []
    const topology = new TopologyBuilder(on)
      .source('in', testSource([]))
      .sink('db', ['in'], {
        kind: 'postgres',
        start: () => Promise.reject(refused),
        write: async () => undefined,
      })
      .sink('ok', ['in'], {
        kind: 'fine',
        start: async () => {
          started.push('ok')
        },
        stop: async () => {
          stopped.push('ok')
        },
        write: async () => undefined,
      })
      .build()
    const error = await topology.start().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(TopologyError)
    expect(error).toMatchObject({
      cause: refused,
      problems: [{ code: 'SINK_START_FAILED', component: 'db', field: 'start', cause: refused }],
    })
    expect((error as Error).message).toContain("sink 'db' (postgres)")
    expect((error as Error).message).toContain('ECONNREFUSED')
    expect(stopped).toEqual(started) // the sink that did start is stopped again
  })

  it('a sink whose start() throws synchronously is reported the same way', async () => {
    const topology = new TopologyBuilder(on)
      .source('in', testSource([]))
      .sink('out', ['in'], {
        kind: 'sync_thrower',
        start: () => {
          throw new TypeError('bad config')
        },
        write: async () => undefined,
      } as Sink)
      .build()
    await expect(topology.start()).rejects.toMatchObject({
      name: 'TopologyError',
      problems: [{ code: 'SINK_START_FAILED', component: 'out' }],
    })
  })
})

describe('a stop while start() waits on a sink or a buffer that does not answer', () => {
  /** A sink whose start() waits for `gate` and that notes its start and stop. */
  const hanging = (gate: Gate, log: string[], name: string): Sink => ({
    kind: 'remote',
    start: async () => {
      await gate.wait()
      log.push(`${name} started`)
    },
    stop: async () => {
      log.push(`${name} stopped`)
    },
    write: async () => undefined,
  })

  it('a second stop() gives the start up: start() rejects naming the sink, done resolves, and the sink is stopped once its start finishes', async () => {
    const gate = new Gate()
    const log: string[] = []
    const topology = new TopologyBuilder(on)
      .source('in', testSource([records(1)]))
      .sink('db', ['in'], hanging(gate, log, 'db'))
      .sink('ok', ['in'], hanging(new Gate(), log, 'ok'))
      .build()
    // 'ok' never finishes either; 'db' will, after the give-up.
    const starting = topology.start().catch((e: unknown) => e)
    await new Promise((resolve) => setImmediate(resolve))
    const first = topology.stop({ drainTimeoutMs: Number.POSITIVE_INFINITY }) // waits for the start
    const second = topology.stop() // gives it up at once
    const error = await starting
    expect(error).toBeInstanceOf(TopologyError)
    expect((error as TopologyError).problems).toMatchObject([
      { code: 'STOPPED_WHILE_STARTING', component: 'db', field: 'start' },
      { code: 'STOPPED_WHILE_STARTING', component: 'ok', field: 'start' },
    ])
    expect((error as Error).message).toContain("sink 'db' (remote) had not finished start()")
    await Promise.all([first, second])
    await topology.done
    expect(log).toEqual([])
    gate.open() // the start that hung finishes now: nothing will write to it, so it is stopped
    await vi.waitFor(() => expect(log).toEqual(['db started', 'db stopped']))
  })

  it('a stop() whose drainTimeoutMs passes gives the start up too, and stops the sinks that did start', async () => {
    const log: string[] = []
    const quick = new Gate()
    quick.open()
    const topology = new TopologyBuilder(on)
      .source('in', testSource([records(1)]))
      .sink('fast', ['in'], hanging(quick, log, 'fast'))
      .sink('slow', ['in'], hanging(new Gate(), log, 'slow'))
      .build()
    const starting = topology.start().catch((e: unknown) => e)
    await vi.waitFor(() => expect(log).toEqual(['fast started']))
    await topology.stop({ drainTimeoutMs: 0 })
    expect(await starting).toMatchObject({
      problems: [{ code: 'STOPPED_WHILE_STARTING', component: 'slow' }],
    })
    expect(log).toEqual(['fast started', 'fast stopped'])
  })

  it('a buffer that never opens is given up, and closed if it opens later; no sink is started', async () => {
    const opened = new Gate()
    const log: string[] = []
    let disposed = false
    const topology = new TopologyBuilder(on)
      .source('in', testSource([records(1)]))
      .sink('out', ['in'], hanging(opened, log, 'out'), {
        buffer: {
          kind: 'remote_queue',
          open: async () => {
            await opened.wait()
            const buffer = queueBuffer()
            buffer.dispose = async () => {
              disposed = true
            }
            return buffer
          },
        },
      })
      .build()
    const starting = topology.start().catch((e: unknown) => e)
    await topology.stop({ drainTimeoutMs: 0 })
    expect(await starting).toMatchObject({
      problems: [{ code: 'STOPPED_WHILE_STARTING', component: 'out', field: 'buffer' }],
    })
    opened.open()
    await vi.waitFor(() => expect(disposed).toBe(true))
    expect(log).toEqual([])
  })

  it("a stop's disposeTimeoutMs bounds how long the given-up start waits for a started sink's stop() and an opened buffer's dispose()", async () => {
    vi.useFakeTimers()
    try {
      const quick = new Gate()
      quick.open()
      const stopped = new Gate() // the fast sink's stop() and the buffer's dispose() wait on it
      const log: string[] = []
      const topology = new TopologyBuilder(on)
        .source('in', testSource([records(1)]))
        .sink(
          'fast',
          ['in'],
          { ...hanging(quick, log, 'fast'), stop: () => stopped.wait() },
          {
            buffer: {
              kind: 'remote_queue',
              open: async () => {
                const buffer = queueBuffer()
                buffer.dispose = () => stopped.wait()
                return buffer
              },
            },
          },
        )
        .sink('slow', ['in'], hanging(new Gate(), log, 'slow'))
        .build()
      const facts: LifecycleEvent[] = []
      topology.lifecycle.subscribe((f) => facts.push(f))
      let rejected = false
      const starting = topology.start().catch((e: unknown) => {
        rejected = true
        return e
      })
      await vi.advanceTimersByTimeAsync(0)
      expect(log).toEqual(['fast started'])
      const stopping = topology.stop({ drainTimeoutMs: 0, disposeTimeoutMs: 30 })
      await vi.advanceTimersByTimeAsync(29)
      expect(rejected).toBe(false)
      await vi.advanceTimersByTimeAsync(1) // the sink's stop() is given up: now the buffer's dispose()
      expect(rejected).toBe(false)
      await vi.advanceTimersByTimeAsync(30)
      expect(await starting).toMatchObject({
        problems: [{ code: 'STOPPED_WHILE_STARTING', component: 'slow' }],
      })
      await stopping
      expect(facts.filter((f) => f.type === 'component_error')).toEqual([
        expect.objectContaining({
          component: 'fast',
          code: 'STOP_FAILED',
          message: expect.stringMatching(/sink 'fast'.*stop\(\) 30 ms after the failed start/),
        }),
        expect.objectContaining({
          component: 'fast',
          code: 'STOP_FAILED',
          message: expect.stringMatching(
            /remote_queue buffer in front of sink 'fast'.*dispose\(\) 30 ms after the failed start/,
          ),
        }),
      ])
      stopped.open()
    } finally {
      vi.useRealTimers()
    }
  })

  it('a given-up start whose stop() allows Infinity waits for a slow stop() as long as it takes, and reports no failure', async () => {
    vi.useFakeTimers()
    try {
      const quick = new Gate()
      quick.open()
      const stopped = new Gate()
      const log: string[] = []
      const topology = new TopologyBuilder(on)
        .source('in', testSource([records(1)]))
        .sink('fast', ['in'], {
          ...hanging(quick, log, 'fast'),
          stop: async () => {
            await stopped.wait()
            log.push('fast stopped')
          },
        })
        .sink('slow', ['in'], hanging(new Gate(), log, 'slow'))
        .build()
      const facts: LifecycleEvent[] = []
      topology.lifecycle.subscribe((f) => facts.push(f))
      let rejected = false
      const starting = topology.start().catch((e: unknown) => {
        rejected = true
        return e
      })
      await vi.advanceTimersByTimeAsync(0)
      const stopping = topology.stop({ drainTimeoutMs: 0, disposeTimeoutMs: Number.POSITIVE_INFINITY })
      await vi.advanceTimersByTimeAsync(60_000)
      expect(rejected).toBe(false)
      stopped.open()
      expect(await starting).toMatchObject({
        problems: [{ code: 'STOPPED_WHILE_STARTING', component: 'slow' }],
      })
      await stopping
      expect(log).toEqual(['fast started', 'fast stopped'])
      expect(facts.filter((f) => f.type === 'component_error')).toEqual([])
    } finally {
      vi.useRealTimers()
    }
  })

  it("a stop() that comes while a start that failed by itself waits for a started sink's stop() bounds that wait by its own disposeTimeoutMs", async () => {
    vi.useFakeTimers()
    try {
      const stopped = new Gate() // the started sink's stop() waits on it
      const topology = new TopologyBuilder(on)
        .source('in', testSource([records(1)]))
        .sink('fast', ['in'], { ...testSink(), stop: () => stopped.wait() })
        .sink('bad', ['in'], { ...testSink(), start: () => Promise.reject(new Error('refused')) })
        .build()
      const facts: LifecycleEvent[] = []
      topology.lifecycle.subscribe((f) => facts.push(f))
      const starting = topology.start().catch((e: unknown) => e)
      await vi.advanceTimersByTimeAsync(0) // 'bad' failed: the start waits for 'fast' to stop
      expect(stopped.waiting).toBe(1)
      let done = false
      const stopping = topology.stop({ drainTimeoutMs: 0, disposeTimeoutMs: 30 }).then(() => {
        done = true
      })
      await vi.advanceTimersByTimeAsync(30)
      expect(done).toBe(true)
      await stopping
      expect(await starting).toMatchObject({ problems: [{ code: 'SINK_START_FAILED', component: 'bad' }] })
      expect(facts.filter((f) => f.type === 'component_error')).toEqual([
        expect.objectContaining({
          component: 'fast',
          code: 'STOP_FAILED',
          message: expect.stringMatching(/stop\(\) 30 ms after the failed start/),
        }),
      ])
      stopped.open()
    } finally {
      vi.useRealTimers()
    }
  })

  it("a stop() asking more than 5000 ms, while a start that failed by itself waits for a started sink's stop(), lengthens that wait as it does the buffers' one", async () => {
    vi.useFakeTimers()
    try {
      const stopped = new Gate() // the started sink's stop() waits on it
      const topology = new TopologyBuilder(on)
        .source('in', testSource([records(1)]))
        .sink('slow', ['in'], { ...testSink(), stop: () => stopped.wait() })
        .sink('bad', ['in'], { ...testSink(), start: () => Promise.reject(new Error('refused')) })
        .build()
      const facts: LifecycleEvent[] = []
      topology.lifecycle.subscribe((f) => facts.push(f))
      const starting = topology.start().catch((e: unknown) => e)
      await vi.advanceTimersByTimeAsync(0) // 'bad' failed: the start waits for 'slow' to stop
      expect(stopped.waiting).toBe(1)
      let done = false
      const stopping = topology.stop({ drainTimeoutMs: 0, disposeTimeoutMs: 10_000 }).then(() => {
        done = true
      })
      await vi.advanceTimersByTimeAsync(6000) // past the 5000 ms the start waits without a stop()
      expect(facts.filter((f) => f.type === 'component_error')).toEqual([])
      expect(done).toBe(false)
      await vi.advanceTimersByTimeAsync(4000)
      expect(done).toBe(true)
      await stopping
      expect(await starting).toMatchObject({ problems: [{ code: 'SINK_START_FAILED', component: 'bad' }] })
      expect(facts.filter((f) => f.type === 'component_error')).toEqual([
        expect.objectContaining({
          component: 'slow',
          code: 'STOP_FAILED',
          message: expect.stringMatching(/stop\(\) 10000 ms after the failed start/),
        }),
      ])
      stopped.open()
    } finally {
      vi.useRealTimers()
    }
  })

  it('a start that finishes while the stop waits runs, and is then stopped as a running topology is', async () => {
    const gate = new Gate()
    const log: string[] = []
    const topology = new TopologyBuilder(on)
      .source('in', testSource([records(1)], { untilStopped: true }))
      .sink('db', ['in'], hanging(gate, log, 'db'))
      .build()
    const starting = topology.start()
    const stopping = topology.stop({ drainTimeoutMs: Number.POSITIVE_INFINITY })
    gate.open()
    await starting
    await stopping
    expect(log).toEqual(['db started', 'db stopped'])
  })

  it('a sink whose start() finishes just as the stop gives up is stopped once, whatever the microtask it lands in', async () => {
    for (let k = 0; k < 30; k++) {
      const log: string[] = []
      let release!: () => void
      const sink: Sink = {
        kind: 'remote',
        start: () =>
          new Promise<void>((resolve) => {
            release = resolve
          }),
        stop: async () => {
          log.push('stopped')
        },
        write: async () => undefined,
      }
      const topology = new TopologyBuilder(on)
        .source('in', testSource([records(1)]))
        .sink('db', ['in'], sink)
        .build()
      const starting = topology.start().catch((e: unknown) => e)
      await new Promise((resolve) => setImmediate(resolve))
      const first = topology.stop({ drainTimeoutMs: Number.POSITIVE_INFINITY })
      for (let i = 0; i < k; i++) await Promise.resolve()
      release()
      const second = topology.stop()
      const outcome = await starting
      await Promise.all([first, second])
      await topology.done
      // Given up (the start rejects naming the sink) or run and stopped: either way stopped once.
      if (outcome !== undefined) {
        expect(outcome).toMatchObject({ problems: [{ code: 'STOPPED_WHILE_STARTING', component: 'db' }] })
      }
      await vi.waitFor(() => expect(log).toEqual(['stopped']))
    }
  })

  it('two stops of a topology without a sink, while it starts, stop it cleanly', async () => {
    const topology = new TopologyBuilder(on)
      .source('in', testSource([records(1)], { untilStopped: true }))
      .transform('t', ['in'], { kind: 'pass', process: (events, context) => context.emitAll(events) })
      .build()
    const starting = topology.start()
    await Promise.all([topology.stop(), topology.stop()])
    await starting // nothing was pending: it started, and was stopped
    await topology.done
  })

  it('the error start() rejects with does not change when a buffer it gave up on fails later', async () => {
    let fail!: (error: Error) => void
    const topology = new TopologyBuilder(on)
      .source('in', testSource([records(1)]))
      .sink('out', ['in'], testSink(), {
        buffer: {
          kind: 'remote_queue',
          open: () =>
            new Promise((_, reject) => {
              fail = reject
            }),
        },
      })
      .build()
    const starting = topology.start().catch((e: unknown) => e)
    await topology.stop({ drainTimeoutMs: 0 })
    const error = (await starting) as TopologyError
    fail(new Error('connection refused'))
    await new Promise((resolve) => setImmediate(resolve))
    expect(error.problems.map((p) => p.code)).toEqual(['STOPPED_WHILE_STARTING'])
  })

  it.each([
    [
      'a second stop()',
      async (topology: Topology) => {
        const first = topology.stop({ drainTimeoutMs: Number.POSITIVE_INFINITY })
        await new Promise((resolve) => setImmediate(resolve))
        return Promise.all([first, topology.stop()])
      },
    ],
    [
      'a stop() whose drainTimeoutMs passes',
      async (topology: Topology) => {
        await new Promise((resolve) => setImmediate(resolve))
        return topology.stop({ drainTimeoutMs: 0 })
      },
    ],
  ])(
    'a start given up by %s stays given up when a sink finishes starting while the others are stopped: each sink is stopped once and never written to',
    async (_, stop) => {
      const log: string[] = []
      const slow = new Gate()
      const fast: Sink = {
        kind: 'fast',
        start: async () => {
          log.push('fast started')
        },
        stop: async () => {
          // The slow sink's host answers while this one is being stopped.
          log.push('fast stopped')
          slow.open()
          for (let i = 0; i < 5; i++) await Promise.resolve()
        },
        write: async () => {
          log.push('write')
          return undefined
        },
      }
      const remote: Sink = {
        kind: 'remote',
        start: async () => {
          await slow.wait()
          log.push('slow started')
        },
        stop: async () => {
          log.push('slow stopped')
        },
        write: async () => {
          log.push('write')
          return undefined
        },
      }
      const topology = new TopologyBuilder(on)
        .source('in', testSource([records(1)], { untilStopped: true }))
        .sink('fast', ['in'], fast)
        .sink('slow', ['in'], remote)
        .build()
      const starting = topology.start().then(
        () => 'resolved',
        (e: TopologyError) => e.problems.map((p) => `${p.code} ${p.component}`),
      )
      await stop(topology)
      expect(await starting).toEqual(['STOPPED_WHILE_STARTING slow'])
      await topology.done
      await vi.waitFor(() => expect(log).toContain('slow stopped'))
      expect(log).toEqual(['fast started', 'fast stopped', 'slow started', 'slow stopped'])
    },
  )

  it('a sink whose start() failed before the give-up is reported too (SINK_START_FAILED), as a buffer that failed is', async () => {
    const topology = new TopologyBuilder(on)
      .source('in', testSource([records(1)]))
      .sink('db', ['in'], {
        kind: 'postgres',
        start: () => Promise.reject(new Error('ECONNREFUSED')),
        write: async () => undefined,
      })
      .sink('slow', ['in'], {
        kind: 'remote',
        start: () => new Promise<void>(() => {}),
        write: async () => undefined,
      })
      .build()
    const starting = topology.start().catch((e: unknown) => e)
    await new Promise((resolve) => setImmediate(resolve))
    await topology.stop({ drainTimeoutMs: 0 })
    const error = (await starting) as TopologyError
    expect(error.problems.map((p) => [p.code, p.component])).toEqual([
      ['SINK_START_FAILED', 'db'],
      ['STOPPED_WHILE_STARTING', 'slow'],
    ])
  })

  it('done resolves after a start() that failed, so nothing waits on it for ever', async () => {
    const topology = new TopologyBuilder(on)
      .source('in', testSource([]))
      .sink('db', ['in'], {
        kind: 'postgres',
        start: () => Promise.reject(new Error('refused')),
        write: async () => undefined,
      })
      .build()
    await expect(topology.start()).rejects.toBeInstanceOf(TopologyError)
    await topology.done
  })
})

/** `[<hole>, 'delivered']`: an array of length 2 whose first slot was never set. */
const holed = (): unknown[] => {
  const array: unknown[] = new Array(2)
  array[1] = 'delivered'
  return array
}

describe('per-event results from untyped sinks', () => {
  const resultOf = (result: unknown) =>
    testSink({ write: async () => result as readonly ('delivered' | 'errored' | 'rejected')[] })

  it.each([
    ['a typo', ['delivered', 'deliverd']],
    ['a hole', holed()],
    ['null', [null, 'delivered']],
    ['a number', [1, 'delivered']],
    ['recorded', ['recorded', 'delivered']],
  ])('an unknown entry (%s) is never delivered: errored, and reported', async (_, result) => {
    const source = testSource([records(1, 2)])
    const facts = await run(linear(source, resultOf(result)))
    expect(await source.statuses()).toEqual(['errored'])
    expect(source.receipts[0]!.failure).toMatchObject({ componentId: 'out', code: 'BAD_RESULT' })
    expect(facts.find((f) => f.type === 'component_error')).toMatchObject({ code: 'BAD_RESULT', events: 1 })
  })

  it.each([
    ['a string', 'delivered'],
    ['null', null],
    ['an object', { length: 2 }],
    ['true', true],
  ])('a result that is not an array (%s) settles every event errored', async (_, result) => {
    const source = testSource([records(1, 2)])
    const facts = await run(linear(source, resultOf(result)))
    expect(await source.statuses()).toEqual(['errored'])
    expect(facts.find((f) => f.type === 'component_error')).toMatchObject({ code: 'BAD_RESULT', events: 2 })
  })

  it('an Error entry fails that event alone, classified as a throw would be', async () => {
    const source = testSource([records(1), records(2), records(3)])
    const sink = testSink({
      write: async (events: EventArray) =>
        events.events.map((e) =>
          e.get('n') === 2
            ? new RangeError('too deep')
            : e.get('n') === 3
              ? new Error('timeout')
              : 'delivered',
        ),
    })
    await run(linear(source, sink))
    expect(await source.statuses()).toEqual(['delivered', 'rejected', 'errored'])
    expect(source.receipts[1]!.failure).toMatchObject({ code: 'UNENCODABLE' })
    expect(source.receipts[2]!.failure).toMatchObject({ code: 'WRITE_FAILED' })
  })

  it('a TypeError thrown by a write is rejected at once, not retried', async () => {
    const source = testSource([records(1)])
    let writes = 0
    const sink = testSink({
      write: async () => {
        writes++
        throw new TypeError('Do not know how to serialize a BigInt')
      },
    })
    await run(linear(source, sink, { retry: { attempts: 5, initialBackoffMs: 1 } }))
    expect(await source.statuses()).toEqual(['rejected'])
    expect(writes).toBe(1)
    expect(source.receipts[0]!.failure).toMatchObject({ componentId: 'out', code: 'UNENCODABLE' })
  })
})

describe('emits a transform makes wrongly', () => {
  /** Starts `topology`, keeping its lifecycle facts, and waits until `ready` passes. */
  const startWatched = async (topology: Topology, ready: () => void): Promise<unknown[]> => {
    const facts: unknown[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await topology.start()
    await vi.waitFor(ready)
    return facts
  }

  /**
   * Emits a kept event through the context of the call that got it, once that call is over, and
   * checks the emit was caught: the event settled `errored` for its source, explained and reported.
   */
  const expectLateEmitCaught = async (
    { event, context }: { event: LogEvent; context: TransformContext },
    receipt: BatchReceipt,
    facts: unknown[],
  ): Promise<void> => {
    context.emit(event)
    expect(event.isEnded).toBe(true)
    expect(await receipt.status).toBe('errored')
    expect(receipt.failure).toMatchObject({ componentId: 't', code: 'EMIT_AFTER_RETURN' })
    expect(facts).toContainEqual(
      expect.objectContaining({ type: 'component_error', code: 'EMIT_AFTER_RETURN', events: 1 }),
    )
  }

  /** A transform that keeps its input for a later flush, and lets a test emit it with a stale context. */
  const keeper = (synchronous?: boolean) => {
    const kept: { event: LogEvent; context: TransformContext }[] = []
    return {
      kept,
      transform: {
        kind: 'keeper',
        ...(synchronous === undefined ? {} : { synchronous }),
        outputs: ['declared'] as const,
        process(events: EventArray, context: TransformContext) {
          for (const event of events) kept.push({ event, context })
        },
        flush() {},
      },
    }
  }

  it('emit on an undeclared port after the call returned settles the event errored before it throws', async () => {
    const source = testSource([records(1)], { untilStopped: true })
    const { kept, transform } = keeper()
    const topology = through(source, transform, testSink())
    // The receipt too: a send may resolve a turn of the event loop after its batch moved on.
    const facts = await startWatched(topology, () => {
      expect(kept).toHaveLength(1)
      expect(source.receipts).toHaveLength(1)
    })
    const { event, context } = kept[0]!
    expect(() => context.emit(event, 'nope')).toThrow(ComponentError)
    expect(event.isEnded).toBe(true)
    expect(await source.receipts[0]!.status).toBe('errored')
    expect(source.receipts[0]!.failure).toMatchObject({ componentId: 't', code: 'UNDECLARED_PORT' })
    expect(facts).toContainEqual(
      expect.objectContaining({ type: 'component_error', code: 'UNDECLARED_PORT' }),
    )
    await topology.stop()
  })

  it('emit after the call returned of an event it passed on ends nothing: the sink writing it says what became of it', async () => {
    // The late emit settled the handle the sink was writing: the sink's write then threw
    // USE_AFTER_END reading it (retried, WRITE_FAILED), and the batch was errored for an event the
    // sink would have delivered.
    const source = testSource([records(1)], { untilStopped: true })
    const gate = new Gate()
    const kept: { event: LogEvent; context: TransformContext }[] = []
    const sink = testSink({ gate })
    const topology = through(
      source,
      {
        kind: 'passer',
        process(events: EventArray, context: TransformContext) {
          for (const event of events) {
            kept.push({ event, context })
            context.emit(event)
          }
        },
      },
      sink,
    )
    const facts = await startWatched(topology, () => {
      expect(gate.waiting).toBe(1)
      expect(source.receipts).toHaveLength(1)
    })
    const { event, context } = kept[0]!
    expect(() => context.emit(event)).not.toThrow()
    expect(event.isEnded).toBe(false) // the sink still holds it
    gate.open()
    expect(await source.receipts[0]!.status).toBe('delivered')
    expect(sink.received).toEqual(records(1))
    expect(facts).toContainEqual(
      expect.objectContaining({ type: 'component_error', code: 'EMIT_AFTER_RETURN', events: 0 }),
    )
    expect(topology.metrics().t!.erroredEvents).toBe(0)
    await topology.stop()
  })

  it("drop after the call returned ends nothing: an event passed on is no longer the transform's to end", async () => {
    // The late drop ended the handle the sink was writing: the batch counted it dropped (as
    // delivered) and resolved before the sink said 'errored', which was then ignored. An
    // acknowledgement for an event no sink had delivered.
    const source = testSource([records(1)], { untilStopped: true })
    const gate = new Gate()
    const kept: { event: LogEvent; context: TransformContext }[] = []
    const topology = through(
      source,
      {
        kind: 'passer',
        process(events: EventArray, context: TransformContext) {
          for (const event of events) {
            kept.push({ event, context })
            context.emit(event)
          }
        },
      },
      testSink({ gate, outcome: () => 'errored' }),
    )
    const facts = await startWatched(topology, () => {
      expect(gate.waiting).toBe(1)
      expect(source.receipts).toHaveLength(1)
    })
    const { event, context } = kept[0]!
    expect(() => context.drop(event)).not.toThrow()
    expect(event.isEnded).toBe(false) // the sink still holds it
    gate.open()
    expect(await source.receipts[0]!.status).toBe('errored')
    expect(facts).toContainEqual(
      expect.objectContaining({ type: 'component_error', code: 'EMIT_AFTER_RETURN', events: 0 }),
    )
    await topology.stop()
  })

  it.each([
    ['a context per call', undefined],
    ['one context for every call (declared synchronous)', true],
  ])(
    'drop, in a later call, of an event an earlier call passed on ends nothing: %s',
    async (_, synchronous) => {
      // Through an open context the drop ended the handle the sink was writing: the batch resolved
      // delivered, and the sink's errored came too late (review of the late drop's fix).
      const source = testSource([records(1), records(2)], { untilStopped: true })
      const gate = new Gate()
      let passedOn: LogEvent | undefined
      const topology = through(
        source,
        {
          kind: 'dropper',
          ...(synchronous === undefined ? {} : { synchronous }),
          process(events: EventArray, context: TransformContext) {
            for (const event of events) {
              if (passedOn !== undefined) context.drop(passedOn) // not this call's: the sink has it
              passedOn ??= event
              context.emit(event)
            }
          },
        },
        testSink({ gate, outcome: () => 'errored' }),
      )
      const facts = await startWatched(topology, () => {
        expect(source.receipts).toHaveLength(2)
        expect(gate.waiting).toBe(1)
      })
      gate.open()
      expect(await source.receipts[0]!.status).toBe('errored')
      expect(facts).toContainEqual(
        expect.objectContaining({ type: 'component_error', code: 'ENDED_AFTER_EMIT', events: 0 }),
      )
      await topology.stop()
    },
  )

  it('emit on an undeclared port, in a later call, of an event an earlier call passed on ends nothing', async () => {
    // Settled before the throw as if it were the call's own, the handle the sink was writing was
    // ended: the sink's write then failed on it, and the batch was errored for an event the sink
    // would have delivered.
    const source = testSource([records(1), records(2)], { untilStopped: true })
    const gate = new Gate()
    let passedOn: LogEvent | undefined
    const thrown: unknown[] = []
    const sink = testSink({ gate })
    const topology = through(
      source,
      {
        kind: 'misrouter',
        process(events: EventArray, context: TransformContext) {
          if (passedOn !== undefined) {
            try {
              context.emit(passedOn, 'nope')
            } catch (error) {
              thrown.push(error)
            }
          }
          for (const event of events) {
            passedOn ??= event
            context.emit(event)
          }
        },
      },
      sink,
    )
    const facts = await startWatched(topology, () => {
      expect(source.receipts).toHaveLength(2)
      expect(thrown).toHaveLength(1)
    })
    expect(thrown[0]).toBeInstanceOf(ComponentError)
    expect(passedOn!.isEnded).toBe(false) // the sink holds it
    gate.open()
    expect(await source.receipts[0]!.status).toBe('delivered')
    expect(sink.received).toEqual([...records(1), ...records(2)])
    expect(facts).toContainEqual(
      expect.objectContaining({ type: 'component_error', code: 'UNDECLARED_PORT', events: 0 }),
    )
    expect(topology.metrics().t!.erroredEvents).toBe(0)
    await topology.stop()
  })

  it('drop in flush of an event a process call passed on ends nothing', async () => {
    const source = testSource([records(1)], { untilStopped: true })
    const gate = new Gate()
    let passedOn: LogEvent | undefined
    let flushes = 0
    const topology = through(
      source,
      {
        kind: 'flush_dropper',
        process(events: EventArray, context: TransformContext) {
          for (const event of events) {
            passedOn = event
            context.emit(event)
          }
        },
        flush(context: TransformContext) {
          if (passedOn !== undefined && !passedOn.isEnded) {
            context.drop(passedOn)
            flushes++
          }
        },
        flushIntervalMs: 10,
      },
      testSink({ gate, outcome: () => 'errored' }),
    )
    await startWatched(topology, () => expect(flushes).toBeGreaterThanOrEqual(2))
    gate.open()
    expect(await source.receipts[0]!.status).toBe('errored')
    await topology.stop()
  })

  it('emit in a later call of an event an earlier call passed on passes nothing on: the sink writing it decides', async () => {
    // Passed on again, one handle was in two sinks: the one that ended it first resolved its batch
    // (delivered) while the other still wrote it, and the other's status was lost.
    const source = testSource([records(1), records(2)], { untilStopped: true })
    const gate = new Gate()
    let kept: LogEvent | undefined
    let wroteOnB: () => void = () => {}
    const writtenOnB = new Promise<void>((resolve) => {
      wroteOnB = resolve
    })
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .transform('t', ['in'], {
        kind: 'keeper',
        outputs: ['a', 'b'],
        process(events: EventArray, context: TransformContext) {
          for (const event of events) {
            if (kept !== undefined) {
              context.emit(kept, 'b')
              context.emit(kept, 'b') // a second emission makes a clone of it
            }
            context.emit(event, 'a')
            kept = event
          }
        },
      })
      .sink('a', ['t.a'], testSink({ gate, outcome: () => 'errored' }))
      .sink('b', ['t.b'], {
        kind: 'blind',
        write: async () => {
          wroteOnB()
          return undefined
        },
      })
      .build()
    const facts: unknown[] = []
    let reported: () => void = () => {}
    const caught = new Promise<void>((resolve) => {
      reported = resolve
    })
    topology.lifecycle.subscribe((fact) => {
      facts.push(fact)
      if (fact.type === 'component_error' && fact.component === 't') reported()
    })
    await topology.start()
    // Sink 'a' holds the first event's only handle until the gate opens.
    await Promise.race([caught, writtenOnB])
    gate.open()
    expect(await source.statuses()).toEqual(['errored', 'errored'])
    expect(facts).toContainEqual(
      expect.objectContaining({ component: 't', code: 'ENDED_AFTER_EMIT', events: 1 }),
    )
    expect(topology.metrics().b!.receivedEvents).toBe(0)
    await topology.stop()
  })

  /**
   * Starts `source` → `transform` ('t') → sink 'a' (its default port; errors every event once
   * its gate opens) and sink 'b' (its port 'b'), waits until the source has `receipts` receipts
   * and the transform's one emit of a handle not its own was reported, then opens the gate.
   */
  const refusingOnce = async (
    source: TestSource,
    receipts: number,
    transform: Transform<'b'>,
  ): Promise<Topology> => {
    const gate = new Gate()
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .transform('t', ['in'], transform)
      .sink('a', ['t'], testSink({ gate, outcome: () => 'errored' }))
      .sink('b', ['t.b'], testSink())
      .build()
    const facts: unknown[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await topology.start()
    await vi.waitFor(() => {
      expect(source.receipts).toHaveLength(receipts)
      expect(facts).toContainEqual(
        expect.objectContaining({ component: 't', code: 'ENDED_AFTER_EMIT', events: 1 }),
      )
    })
    gate.open()
    return topology
  }

  it('emit on a port, in a later call, of an event an earlier call passed on the default port passes nothing on', async () => {
    // The first call took the quick check (its input passed on in order): the handle was in two
    // sinks after the second, and the one that ended it first resolved its batch for both.
    const source = testSource([records(1), records(2)], { untilStopped: true })
    let kept: LogEvent | undefined
    const topology = await refusingOnce(source, 2, {
      kind: 'keeper',
      outputs: ['b'],
      process(events: EventArray, context: TransformContext) {
        for (const event of events) {
          if (kept !== undefined) context.emit(kept, 'b')
          kept ??= event
          context.emit(event)
        }
      },
    })
    expect(await source.statuses()).toEqual(['errored', 'errored'])
    expect(topology.metrics().b!.receivedEvents).toBe(0)
    await topology.stop()
  })

  it('emit of a held event a quick call let go, in a later call, passes nothing on', async () => {
    // A window: each call passes on what it held and holds its input; the third call also emits
    // the first event again, which the second call passed on (taken from the front of the queue).
    const source = testSource([records(1), records(2), records(3)], { untilStopped: true })
    const seen: LogEvent[] = []
    const topology = await refusingOnce(source, 3, {
      kind: 'window_of_one',
      outputs: ['b'],
      process(events: EventArray, context: TransformContext) {
        for (const event of events) {
          if (seen.length === 2) context.emit(seen[0]!, 'b')
          if (seen.length > 0 && seen.length < 3) context.emit(seen[seen.length - 1]!)
          seen.push(event)
        }
      },
      flush() {},
    })
    expect(await source.receipts[0]!.status).toBe('errored')
    expect(topology.metrics().b!.receivedEvents).toBe(0)
    await topology.stop()
  })

  it.each([
    ['emit on a port', 'emit'],
    ['drop', 'drop'],
  ] as const)(
    '%s, in a later call, of an event an earlier call passed on to a transform that keeps it passes nothing on and ends nothing',
    async (_, misuse) => {
      // The transform downstream keeps the handle (a window, a reduce group): kept, it was marked
      // its holder's own, and the upstream transform's stale reference passed for its own too.
      // Emitted again, it went to a second sink, which delivered it and resolved its batch before
      // the keeper's sink said errored; dropped, it was ended under the keeper (delivered).
      const kept: LogEvent[] = []
      const source = testSource([records(1), records(2)], {
        untilStopped: true,
        // The first event is kept downstream before the second call of 't' runs.
        afterSend: (sent) => vi.waitFor(() => expect(kept).toHaveLength(sent)),
      })
      let passedOn: LogEvent | undefined
      const topology = new TopologyBuilder(on)
        .source('in', source)
        .transform('t', ['in'], {
          kind: 'reuser',
          outputs: ['b'],
          process(events: EventArray, context: TransformContext) {
            for (const event of events) {
              if (passedOn !== undefined) {
                if (misuse === 'emit') context.emit(passedOn, 'b')
                else context.drop(passedOn)
              }
              passedOn ??= event
              context.emit(event)
            }
          },
        })
        .transform('window', ['t'], {
          kind: 'keep_until_flush',
          process(events: EventArray) {
            for (const event of events) kept.push(event)
          },
          flush(context: TransformContext) {
            for (const event of kept.splice(0)) context.emit(event)
          },
        })
        .sink('a', ['window'], testSink({ outcome: () => 'errored' }))
        .sink('b', ['t.b'], testSink())
        .build()
      const facts: unknown[] = []
      topology.lifecycle.subscribe((f) => facts.push(f))
      await topology.start()
      await vi.waitFor(() => expect(source.receipts).toHaveLength(2))
      expect(facts).toContainEqual(
        expect.objectContaining({
          component: 't',
          code: 'ENDED_AFTER_EMIT',
          events: misuse === 'emit' ? 1 : 0,
        }),
      )
      await topology.stop()
      expect(await source.statuses()).toEqual(['errored', 'errored'])
      expect(topology.metrics().b!.receivedEvents).toBe(0)
    },
  )

  it('every handle a transform takes in is not its own until it keeps it: fan-out copies, sendEvents, second emissions', async () => {
    // A handle that came in marked as the transform's own (`isLocal`) could be passed on twice
    // unnoticed; each way a runtime passes handles on marks them.
    const local: Record<string, boolean[]> = {}
    const recorder = (id: string, ports?: readonly string[]) => ({
      kind: 'recorder',
      ...(ports === undefined ? {} : { outputs: ports }),
      process(events: EventArray, context: TransformContext) {
        for (const event of events) {
          local[id] ??= []
          local[id].push(event.isLocal)
          context.emit(event)
          for (const port of ports ?? []) context.emit(event, port) // a second emission: a copy
        }
      },
    })
    const topology = new TopologyBuilder(on)
      .source('in', {
        kind: 'builder',
        canAcknowledge: true,
        async run(context) {
          await context.sendEvents(EventArray.of(new LogEvent({ n: 1 }), new LogEvent({ n: 2 })))
          await context.send([{ n: 3 }])
        },
      })
      // The source's first consumer gets the arrays themselves, the second copies of them.
      .transform('fed', ['in'], recorder('fed', ['p']))
      .transform('twin', ['in'], recorder('twin'))
      .transform('copied', ['fed.p'], recorder('copied'))
      .sink('last', ['fed', 'twin', 'copied'], testSink())
      .build()
    await run(topology)
    expect(local.fed).toEqual([false, false, false])
    expect(local.twin).toEqual([false, false, false])
    expect(local.copied).toEqual([false, false, false])
  })

  it("drop of a clone the call made ends it: the transform's own", async () => {
    // Refused as not the transform's, the clone stayed live, and its batch waited for the stop.
    const source = testSource([records(1)], { untilStopped: true })
    const topology = through(
      source,
      {
        kind: 'clone_dropper',
        process(events: EventArray, context: TransformContext) {
          for (const event of events) {
            context.drop(event.clone())
            context.emit(event)
          }
        },
      },
      testSink(),
    )
    const facts = await startWatched(topology, () => expect(source.receipts).toHaveLength(1))
    expect(await source.receipts[0]!.status).toBe('delivered')
    expect(facts).not.toContainEqual(expect.objectContaining({ code: 'ENDED_AFTER_EMIT' }))
    await topology.stop()
  })

  it("drop after the call returned of an event made by a create after it ends it: its parent's batch resolves", async () => {
    // Refused as any late drop, it stayed live, and the batch waited until the stop.
    const source = testSource([records(1)], { untilStopped: true })
    const kept: { event: LogEvent; context: TransformContext }[] = []
    const gate = new Gate()
    const topology = through(
      source,
      {
        kind: 'late_maker',
        process(events: EventArray, context: TransformContext) {
          for (const event of events) {
            kept.push({ event, context })
            context.emit(event)
          }
        },
      },
      testSink({ gate }),
    )
    await startWatched(topology, () => expect(gate.waiting).toBe(1))
    const { event, context } = kept[0]!
    const made = context.create({ summary: true }, [event])
    context.drop(made)
    expect(made.isEnded).toBe(true)
    gate.open()
    expect(await source.receipts[0]!.status).toBe('delivered')
    await topology.stop()
  })

  it('drop after the call returned of an event made by a create after it, which a later call passed on, ends nothing', async () => {
    // Still noted as made late, the event was ended by the stale context's drop while the sink
    // wrote it: its batch counted it dropped (as delivered), and the sink's errored came too late.
    const gate = new Gate()
    const contexts: TransformContext[] = []
    let made: LogEvent | undefined
    const source = testSource([records(1), records(2)], {
      untilStopped: true,
      afterSend: async (sent) => {
        await vi.waitFor(() => expect(contexts).toHaveLength(sent))
        // After the first call returned: made through its context, emitted by the second call.
        if (sent === 1) made = contexts[0]!.create({ made: true }, [])
      },
    })
    const topology = through(
      source,
      {
        kind: 'late_maker',
        process(events: EventArray, context: TransformContext) {
          contexts.push(context)
          for (const event of events) {
            if (made !== undefined) {
              made.merge(event.clone())
              context.emit(made)
            }
            context.emit(event)
          }
        },
      },
      testSink({ gate, outcome: (event) => (event.get('made') === true ? 'errored' : 'delivered') }),
    )
    const facts = await startWatched(topology, () => {
      expect(source.receipts).toHaveLength(2)
      expect(made!.isLocal).toBe(false) // the second call passed it on
    })
    contexts[0]!.drop(made!)
    expect(made!.isEnded).toBe(false) // the sink holds it
    gate.open()
    expect(await source.receipts[1]!.status).toBe('errored')
    expect(facts).toContainEqual(
      expect.objectContaining({ type: 'component_error', code: 'EMIT_AFTER_RETURN', events: 0 }),
    )
    await topology.stop()
  })

  it('drop of its inputs in any order, of what it made and of what it holds, still ends them', async () => {
    const source = testSource([records(1, 2, 3, 4)], { untilStopped: true })
    const sink = testSink()
    let calls = 0
    let held: LogEvent | undefined
    const topology = through(
      source,
      {
        kind: 'owner',
        process(events: EventArray, context: TransformContext) {
          calls++
          const [a, b, c, d] = events.events
          // Out of order: the cursor passes b, then a is found through the set.
          context.drop(b!)
          context.drop(a!)
          context.drop(context.create({ made: true }, [c!]))
          context.emit(c!)
          held = d // kept for flush
        },
        flush(context: TransformContext) {
          if (held !== undefined) context.drop(held)
          held = undefined
        },
      },
      sink,
    )
    const facts = await startWatched(topology, () => expect(calls).toBe(1))
    await topology.stop()
    expect(await source.receipts[0]!.status).toBe('delivered')
    expect(sink.received).toEqual([{ n: 3 }])
    expect(facts.filter((f) => (f as { type: string }).type === 'component_error')).toEqual([])
  })

  it('emit on a declared port after the call returned settles the event errored and reports it', async () => {
    const source = testSource([records(1)], { untilStopped: true })
    const { kept, transform } = keeper()
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .transform('t', ['in'], transform)
      .sink('out', ['t.declared'], testSink())
      .build()
    // The receipt too: a send may resolve a turn of the event loop after its batch moved on.
    const facts = await startWatched(topology, () => {
      expect(kept).toHaveLength(1)
      expect(source.receipts).toHaveLength(1)
    })
    const { event, context } = kept[0]!
    context.emit(event, 'declared')
    expect(event.isEnded).toBe(true)
    expect(await source.receipts[0]!.status).toBe('errored')
    expect(facts).toContainEqual(
      expect.objectContaining({ type: 'component_error', code: 'EMIT_AFTER_RETURN', events: 1 }),
    )
    await topology.stop()
  })

  it.each([
    ['one context for every call (declared synchronous)', true],
    ['a context per call', undefined],
  ])(
    'emit through a context kept from an earlier call, between calls, is caught: %s',
    async (_, synchronous) => {
      // (Declaring itself synchronous, this transform breaks its promise by keeping the context:
      // between calls, the shared context is closed, so the emit is still caught.)
      const source = testSource([records(1), records(2)], { untilStopped: true })
      const { kept, transform } = keeper(synchronous)
      const topology = through(source, transform, testSink())
      const facts = await startWatched(topology, () => expect(kept).toHaveLength(2))
      // The first call's context, after the second call returned.
      await expectLateEmitCaught(kept[0]!, source.receipts[0]!, facts)
      await topology.stop()
    },
  )

  // A transform that keeps each call's context, and whose second call waits: either every call
  // is asynchronous, or the first returns at once and only the second waits (a transform that
  // does not declare itself synchronous). The second call is open while the first call's context
  // is used: that emit must not count as the second call's own.
  it.each([
    [
      "an asynchronous call's context",
      (wait: () => Promise<void>, calls: number) =>
        (async () => {
          if (calls > 1) await wait()
        })(),
    ],
    [
      "a synchronous call's context",
      (wait: () => Promise<void>, calls: number) => (calls > 1 ? wait() : undefined),
    ],
  ])('emit through %s while a later asynchronous call waits is caught', async (_, after) => {
    const source = testSource([records(1), records(2)], { untilStopped: true })
    const gate = new Gate()
    const kept: { event: LogEvent; context: TransformContext }[] = []
    const topology = through(
      source,
      {
        kind: 'keeper',
        process(events: EventArray, context: TransformContext) {
          for (const event of events) kept.push({ event, context })
          return after(() => gate.wait(), kept.length)
        },
        flush() {},
      },
      testSink(),
    )
    const facts = await startWatched(topology, () => expect(gate.waiting).toBe(1))
    await expectLateEmitCaught(kept[0]!, source.receipts[0]!, facts)
    gate.open()
    await topology.stop()
  })

  it('emitAll on an undeclared port settles every event of the array before it throws', async () => {
    const source = testSource([records(1, 2, 3)], { untilStopped: true })
    const arrays: { events: EventArray; context: TransformContext }[] = []
    const topology = through(
      source,
      {
        kind: 'array_keeper',
        process(events: EventArray, context: TransformContext) {
          arrays.push({ events, context })
        },
        flush() {},
      },
      testSink(),
    )
    await topology.start()
    await vi.waitFor(() => expect(arrays).toHaveLength(1))
    const { events, context } = arrays[0]!
    expect(() => context.emitAll(events, 'nope')).toThrow(ComponentError)
    expect(events.events.map((e) => e.isEnded)).toEqual([true, true, true])
    expect(await source.receipts[0]!.status).toBe('errored')
    await topology.stop()
  })
})

describe('handles a source sends with sendEvents', () => {
  it('a handle sent again, while a sink still writes it, is refused (ALREADY_SENT): no second sink ends it for the first', async () => {
    // Taken in again, the handle sat in two sinks: routed to 'y' the second time, it was delivered
    // there and its batch resolved delivered while sink 'x', which never delivered it, still wrote
    // it (its errored came too late). An acknowledgement for an event a sink did not deliver.
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'in' })
    const gate = new Gate()
    const x = testSink({ gate, outcome: () => 'errored' })
    const y = testSink()
    const handle = new LogEvent({ to: 'x' })
    let second: unknown
    const topology = new TopologyBuilder(on)
      .source('in', {
        kind: 'resender',
        canAcknowledge: true,
        async run(context) {
          await context.sendEvents(EventArray.of(handle).attach(notifier))
          await vi.waitFor(() => expect(gate.waiting).toBe(1))
          handle.set('to', 'y')
          second = await context.sendEvents(EventArray.of(handle)).catch((error: unknown) => error)
          // Taken in (the code before), it is written by 'y' before 'x' may go on.
          if (second === undefined) await vi.waitFor(() => expect(y.received).toHaveLength(1))
          gate.open()
        },
      })
      .transform('route', ['in'], routeBy({ x: (e) => e.get('to') === 'x', y: (e) => e.get('to') === 'y' }))
      .sink('x', ['route.x'], x)
      .sink('y', ['route.y'], y)
      .build()
    await run(topology)
    expect(second).toBeInstanceOf(ComponentError)
    expect(second).toMatchObject({ code: 'ALREADY_SENT', component: 'in', field: 'sendEvents' })
    expect(y.received).toEqual([])
    expect(await receiver).toBe('errored')
  })
})
