// Running a topology under fake timers: a sink that hangs and fails on a schedule, retried with a
// long backoff, finishes in no real time once the test pumps the timers until the topology is done.
import type { JsonObject } from '@ackline/core'
import { DeliveryLedger, faultySink, runTopology } from '@ackline/testkit'
import { TopologyBuilder } from '@ackline/topology'
import { afterEach, describe, expect, it, vi } from 'vitest'

afterEach(() => {
  vi.useRealTimers()
})

describe('a topology under fake timers', () => {
  it('runs hangs and retry backoffs of minutes without waiting for them', async () => {
    vi.useFakeTimers()
    const stored: JsonObject[] = []
    const ledger = new DeliveryLedger({ acknowledgements: true })
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source(
        'in',
        ledger.source('in', {
          kind: 'list',
          canAcknowledge: true,
          async run(context) {
            await context.send([{ n: 0 }, { n: 1 }])
            await context.send([{ n: 2 }])
          },
        }),
      )
      .sink(
        'slow',
        ['in'],
        ledger.sink(
          'slow',
          faultySink(
            {
              kind: 'store',
              async write(events) {
                for (const e of events) stored.push({ ...e.fields })
                return undefined
              },
            },
            { errorOnCalls: [1], hangMs: 60_000 },
          ),
        ),
        { retry: { attempts: 2, initialBackoffMs: 120_000, maxBackoffMs: 120_000 } },
      )
      .build()
    const started = Date.now()
    const facts = await runTopology(topology, { advanceTimers: () => vi.runAllTimersAsync() })
    expect(facts.filter((f) => f.type === 'batch_resolved')).toHaveLength(2)
    expect(stored).toEqual([{ n: 0 }, { n: 1 }, { n: 2 }])
    // Both batches were sent in one burst, so the sink took them as one write. Fake time moved on
    // by two hung writes (the failed one and its retry) and the backoff between them; real time
    // did not.
    expect(Date.now() - started).toBeGreaterThanOrEqual(60_000 * 2 + 120_000)
    await ledger.expectMatchesModel()
    expect(ledger.batches.map((b) => b.told)).toEqual(['delivered', 'delivered'])
  })

  it('fails loudly when the topology waits on something no timer will bring', async () => {
    vi.useFakeTimers()
    const topology = new TopologyBuilder({ onWarning: () => {} })
      .source('in', {
        kind: 'until_stopped',
        canAcknowledge: false,
        run: (context) =>
          new Promise<void>((resolve) => context.signal.addEventListener('abort', () => resolve())),
      })
      .sink('out', ['in'], { kind: 'noop', write: async () => undefined })
      .build()
    await expect(
      runTopology(topology, { advanceTimers: () => vi.runAllTimersAsync(), maxRounds: 5 }),
    ).rejects.toThrow(/still running after 5 rounds/)
    vi.useRealTimers()
    await topology.stop()
  })

  it('stops the topology it gives up on, so no source or sink outlives the failed run', async () => {
    vi.useFakeTimers()
    let aborted = false
    let stopped = 0
    const topology = new TopologyBuilder({ onWarning: () => {} })
      .source('in', {
        kind: 'until_stopped',
        canAcknowledge: false,
        run: (context) =>
          new Promise<void>((resolve) =>
            context.signal.addEventListener('abort', () => {
              aborted = true
              resolve()
            }),
          ),
      })
      .sink('out', ['in'], {
        kind: 'conn',
        write: async () => undefined,
        async stop() {
          stopped++
        },
      })
      .build()
    let done = false
    void topology.done.then(() => {
      done = true
    })
    await expect(
      runTopology(topology, { advanceTimers: () => vi.runAllTimersAsync(), maxRounds: 5 }),
    ).rejects.toThrow(/still running after 5 rounds of advanceTimers, and was stopped/)
    // Left running, its source kept reading (real I/O in a real one) and its sink's connection
    // open after the property failed.
    expect({ aborted, stopped }).toEqual({ aborted: true, stopped: 1 })
    await topology.done
    expect(done).toBe(true)
  })

  it('stops and reports a topology it gives up on also when advanceTimers (untyped code) returns no promise', async () => {
    vi.useFakeTimers()
    let aborted = false
    const topology = new TopologyBuilder({ onWarning: () => {} })
      .source('in', {
        kind: 'until_stopped',
        canAcknowledge: false,
        run: (context) =>
          new Promise<void>((resolve) =>
            context.signal.addEventListener('abort', () => {
              aborted = true
              resolve()
            }),
          ),
      })
      .sink('out', ['in'], { kind: 'conn', write: async () => undefined })
      .build()
    // vi.runAllTimers() is synchronous: it returns the vi object, not a promise.
    const advanceTimers = (() => vi.runAllTimers()) as unknown as () => Promise<unknown>
    await expect(runTopology(topology, { advanceTimers, maxRounds: 3 })).rejects.toThrow(
      /still running after 3 rounds of advanceTimers, and was stopped/,
    )
    expect(aborted).toBe(true)
    await topology.done
  })

  it('rejects with the error of a start that fails, without pumping to maxRounds or leaving it unhandled', async () => {
    vi.useFakeTimers()
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', {
        kind: 'list',
        canAcknowledge: true,
        async run(context) {
          await context.send([{ n: 0 }])
        },
      })
      .sink('out', ['in'], {
        kind: 'db',
        async start() {
          throw new Error('no database')
        },
        async write() {
          return undefined
        },
      })
      .build()
    let rounds = 0
    const run = runTopology(topology, {
      advanceTimers: async () => {
        rounds++
        await vi.runAllTimersAsync()
      },
    })
    await expect(run).rejects.toThrow("out (start): sink 'out' (db) failed to start: no database")
    expect(rounds).toBeLessThan(1000)
  })

  it('refuses a maxRounds it cannot pump, naming the field, before starting the topology', async () => {
    let started = 0
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', {
        kind: 'list',
        canAcknowledge: true,
        async run() {
          started++
        },
      })
      .sink('out', ['in'], { kind: 'null', write: async () => undefined })
      .build()
    for (const maxRounds of [Number.NaN, 0, -1, 2.5]) {
      await expect(runTopology(topology, { advanceTimers: async () => {}, maxRounds })).rejects.toThrow(
        `runTopology: 'maxRounds' must be a whole number of 1 or more, got ${maxRounds}`,
      )
    }
    expect(started).toBe(0)
  })
})
