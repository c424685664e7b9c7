import type { BatchStatus, JsonObject } from '@ackline/core'
import { generator } from '@ackline/sources'
import { type LifecycleEvent, type Sink, TopologyBuilder } from '@ackline/topology'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { FakeSourceContext } from './support/FakeSourceContext.js'

/** A sink that keeps fields and array sizes, and errors the events `fail` picks. */
const recorder = (fail: (record: JsonObject) => boolean = () => false) => {
  const records: JsonObject[] = []
  const sink: Sink = {
    kind: 'recorder',
    async write(events) {
      return events.events.map((e) => {
        records.push(e.fields as JsonObject)
        return fail(e.fields as JsonObject) ? 'errored' : 'delivered'
      })
    },
  }
  return { sink, records }
}

afterEach(() => {
  vi.useRealTimers()
})

describe('generator', () => {
  it('sends count events in batches of batchSize, and reports each batch', async () => {
    const batches: [number, number, Promise<BatchStatus>][] = []
    const { sink, records } = recorder((r) => r.index === 120)
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source(
        'gen',
        generator({
          count: 250,
          batchSize: 100,
          onBatch: (receipt, first, size) => batches.push([first, size, receipt.status]),
        }),
      )
      .sink('out', ['gen'], sink)
      .build()
    await topology.start()
    await topology.done
    expect(records).toHaveLength(250)
    expect(records[7]).toEqual({ message: 'event 7', index: 7 })
    expect(batches.map(([first, size]) => [first, size])).toEqual([
      [0, 100],
      [100, 100],
      [200, 50],
    ])
    expect(await Promise.all(batches.map(([, , status]) => status))).toEqual([
      'delivered',
      'errored',
      'delivered',
    ])
  })

  it('uses the record function', async () => {
    const { sink, records } = recorder()
    const topology = new TopologyBuilder()
      .source('gen', generator({ count: 3, record: (i) => ({ square: i * i }) }))
      .sink('out', ['gen'], sink)
      .build()
    await topology.start()
    await topology.done
    expect(records).toEqual([{ square: 0 }, { square: 1 }, { square: 4 }])
  })

  it('keeps to ratePerSecond', async () => {
    vi.useFakeTimers()
    const { sink, records } = recorder()
    const topology = new TopologyBuilder()
      .source('gen', generator({ count: 30, batchSize: 10, ratePerSecond: 10 }))
      .sink('out', ['gen'], sink)
      .build()
    await topology.start()
    await vi.advanceTimersByTimeAsync(0)
    expect(records).toHaveLength(10)
    await vi.advanceTimersByTimeAsync(999)
    expect(records).toHaveLength(10)
    await vi.advanceTimersByTimeAsync(1)
    expect(records).toHaveLength(20)
    await vi.advanceTimersByTimeAsync(1000)
    expect(records).toHaveLength(30)
    await topology.done
  })

  it('keeps to a ratePerSecond so low that the next batch is due past the longest timer (2^31 - 1 ms)', async () => {
    vi.useFakeTimers()
    const context = new FakeSourceContext({ id: 'gen', acknowledgements: false })
    // One event every 10^10 ms (about 116 days).
    const run = generator({ count: 2, batchSize: 1, ratePerSecond: 1e-7 }).run(context)
    await vi.advanceTimersByTimeAsync(1000)
    expect(context.batches).toHaveLength(1)
    await vi.advanceTimersByTimeAsync(2 ** 31)
    expect(context.batches).toHaveLength(1)
    await vi.advanceTimersByTimeAsync(1e10 - 2 ** 31 - 1001)
    expect(context.batches).toHaveLength(1)
    await vi.advanceTimersByTimeAsync(1)
    expect(context.batches).toHaveLength(2)
    await run
  })

  it('runs until the topology stops when count is unset', async () => {
    vi.useFakeTimers()
    const { sink, records } = recorder()
    const topology = new TopologyBuilder()
      .source('gen', generator({ batchSize: 5, ratePerSecond: 5 }))
      .sink('out', ['gen'], sink)
      .build()
    await topology.start()
    await vi.advanceTimersByTimeAsync(2500)
    expect(records).toHaveLength(15)
    await topology.stop()
    expect(records).toHaveLength(15)
  })

  it('at full speed still lets a timer run and stop it (the runtime lets the event loop turn)', async () => {
    // A cap far beyond what runs before the timer: had the timer not run, all of them would be sent.
    const cap = 3_000_000
    let count = 0
    const sink: Sink = {
      kind: 'counter',
      write(events) {
        count += events.length
        return Promise.resolve(undefined)
      },
    }
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('gen', generator({ count: cap, batchSize: 1 }))
      .sink('out', ['gen'], sink)
      .build()
    await topology.start()
    let stoppedAt = -1
    setTimeout(() => {
      stoppedAt = count
      void topology.stop()
    }, 20)
    await topology.done
    expect(stoppedAt).toBeGreaterThan(0)
    expect(count).toBeLessThan(cap)
    expect(topology.metrics().gen!.ackLatencyMs.count).toBe(count)
  })

  it('asks for no receipt unless onBatch reads it', async () => {
    const quiet = new FakeSourceContext()
    quiet.onBatch = (batch) => batch.end('delivered')
    await generator({ count: 4, batchSize: 2 }).run(quiet)
    expect(quiet.sendOptions).toEqual([{ receipt: false }, { receipt: false }])
    const told = new FakeSourceContext()
    told.onBatch = (batch) => batch.end('delivered')
    const statuses: Promise<BatchStatus>[] = []
    await generator({ count: 4, batchSize: 2, onBatch: (receipt) => statuses.push(receipt.status) }).run(told)
    expect(told.sendOptions).toEqual([undefined, undefined])
    expect(await Promise.all(statuses)).toEqual(['delivered', 'delivered'])
  })

  it('stops with an error naming the record field when record throws or returns no object, sending nothing of that batch', async () => {
    const cases: [(i: number) => unknown, string][] = [
      [
        (i) => {
          if (i === 3) throw new Error('no record 3')
          return { i }
        },
        'gen (record): record(3) threw: Error: no record 3',
      ],
      [(i) => (i === 3 ? null : { i }), 'gen (record): record(3) must return a JSON object, got null'],
      [(i) => (i === 3 ? [i] : { i }), 'gen (record): record(3) must return a JSON object, got an array'],
      [(i) => (i === 3 ? i : { i }), 'gen (record): record(3) must return a JSON object, got number'],
      // An async record function: its promise would have been sent as an event with no fields.
      [
        (i) => (i === 3 ? Promise.resolve({ i }) : { i }),
        'gen (record): record(3) must return a JSON object, got a promise (record is not awaited)',
      ],
    ]
    for (const [record, message] of cases) {
      const { sink, records } = recorder()
      const facts: LifecycleEvent[] = []
      const topology = new TopologyBuilder({ acknowledgements: true })
        .source('gen', generator({ count: 6, batchSize: 2, record: record as never }))
        .sink('out', ['gen'], sink)
        .build()
      topology.lifecycle.subscribe((fact) => facts.push(fact))
      await topology.start()
      await topology.done
      expect(records).toEqual([{ i: 0 }, { i: 1 }])
      const error = facts.find((fact) => fact.type === 'component_error')
      expect(error).toMatchObject({ component: 'gen', code: 'RUN_FAILED' })
      expect((error as { cause: unknown }).cause).toMatchObject({
        code: 'RECORD_FAILED',
        field: 'record',
        message,
      })
    }
  })

  it('stops with RECORD_FAILED on an async record that throws, and leaves its rejection handled', async () => {
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      const run = generator({
        count: 2,
        batchSize: 1,
        record: (async (i: number) => {
          throw new Error(`no record ${i}`)
        }) as never,
      }).run(new FakeSourceContext({ id: 'gen', acknowledgements: false }))
      await expect(run).rejects.toMatchObject({ code: 'RECORD_FAILED', field: 'record' })
      // Two macrotasks: a rejection left unhandled would have been reported by now.
      await new Promise((resolve) => setImmediate(resolve))
      await new Promise((resolve) => setImmediate(resolve))
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
    expect(unhandled).toEqual([])
  })

  it('stops with an error naming the onBatch field when onBatch throws or its promise rejects, and leaves nothing unhandled', async () => {
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      const cases: [() => unknown, string][] = [
        [
          () => {
            throw new Error('ledger down')
          },
          'gen (onBatch): onBatch threw on the batch of events 0 to 1: Error: ledger down',
        ],
        [
          () => Promise.reject(new Error('ledger down')),
          'gen (onBatch): onBatch rejected on the batch of events 0 to 1: Error: ledger down',
        ],
      ]
      for (const [onBatch, message] of cases) {
        const context = new FakeSourceContext({ id: 'gen', acknowledgements: false })
        const run = generator({ count: 6, batchSize: 2, onBatch: onBatch as never }).run(context)
        await expect(run).rejects.toMatchObject({
          code: 'ON_BATCH_FAILED',
          component: 'gen',
          field: 'onBatch',
          message,
        })
        expect(context.batches.length).toBeLessThanOrEqual(2)
      }
      await new Promise((resolve) => setTimeout(resolve, 20))
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
    expect(unhandled.map(String)).toEqual([])
  })

  it('reports bad options through the builder', () => {
    expect(() =>
      new TopologyBuilder()
        .source('gen', generator({ count: -1, batchSize: 0, ratePerSecond: Number.NaN }))
        .sink('out', ['gen'], recorder().sink)
        .build(),
    ).toThrow(/gen \(count\).*\n.*gen \(batchSize\).*\n.*gen \(ratePerSecond\)/)
    expect(generator({ count: -1, record: 'x' as never }).validate()).toEqual([
      {
        field: 'count',
        expected: 'a non-negative integer',
        got: '-1',
        message: 'must be a non-negative integer, got -1',
      },
      { field: 'record', expected: 'a function', got: '"x"', message: 'must be a function, got "x"' },
    ])
    // A batch is made whole before it is sent: a billion events exhausted memory (the process died).
    expect(
      generator({ batchSize: 1e9 })
        .validate()
        .map((issue) => issue.message),
    ).toEqual(['must be an integer from 1 to 1000000, got 1000000000'])
    expect(generator({ batchSize: 1_000_000 }).validate()).toEqual([])
  })
})
