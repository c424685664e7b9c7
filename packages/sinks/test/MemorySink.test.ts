import { type BatchStatus, EventArray, type JsonObject, LogEvent } from '@ackline/core'
import { memory } from '@ackline/sinks'
import { RejectError, RetryableError, type Source, TopologyBuilder } from '@ackline/topology'
import { describe, expect, it } from 'vitest'

/** A source that sends the given batches and keeps their statuses. */
const batches = (list: JsonObject[][]) => {
  const statuses: Promise<BatchStatus>[] = []
  const source: Source = {
    kind: 'batches',
    canAcknowledge: true,
    async run(context) {
      for (const records of list) statuses.push((await context.send(records)).status)
    },
  }
  return { source, statuses: () => Promise.all(statuses) }
}

describe('memory', () => {
  it('keeps every event and reports the status outcome picks for it', async () => {
    const { source, statuses } = batches([[{ n: 1 }, { n: 2 }], [{ n: 3 }], [{ n: 4 }]])
    const sink = memory({
      outcome: (e) => (e.get('n') === 2 ? 'errored' : e.get('n') === 4 ? 'rejected' : 'delivered'),
    })
    // A buffer of one event: the runtime coalesces arrays queued for a sink that fell behind
    // (RFC 0002), and how many queue depends on scheduling; with room for one, none does, so
    // each batch is one write.
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink, { buffer: { maxEvents: 1 } })
      .build()
    await topology.start()
    await topology.done
    expect(await statuses()).toEqual(['errored', 'delivered', 'rejected'])
    expect(sink.events).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }])
    expect(sink.statuses).toEqual(['delivered', 'errored', 'delivered', 'rejected'])
    expect(sink.writes).toBe(3)
  })

  it('settles errored, alone and once, an event whose outcome throws', async () => {
    const { source, statuses } = batches([[{ n: 1 }, { n: 2 }, { n: 3 }]])
    const sink = memory({
      outcome: (e) => {
        if (e.get('n') === 2) throw new Error('no status for 2')
        return 'delivered'
      },
    })
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', source)
      .sink('out', ['in'], sink, { retry: { attempts: 3, initialBackoffMs: 1 } })
      .build()
    await topology.start()
    await topology.done
    expect(await statuses()).toEqual(['errored'])
    // One write, each event recorded once, with what was reported for it.
    expect(sink.writes).toBe(1)
    expect(sink.events).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }])
    expect(sink.statuses).toEqual(['delivered', 'errored', 'delivered'])
  })

  it('refuses, naming outcome, an outcome that ends its event: each event recorded once, the write not retried', async () => {
    const { source, statuses } = batches([[{ n: 1 }, { n: 2 }, { n: 3 }]])
    const sink = memory({
      outcome: (e) => {
        if (e.get('n') === 2) e.end('delivered') // against the contract
        return 'delivered'
      },
    })
    const failures: string[] = []
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', source)
      .sink('out', ['in'], sink, { retry: { attempts: 3, initialBackoffMs: 1 } })
      .build()
    topology.lifecycle.subscribe((fact) => {
      if (fact.type === 'component_error') failures.push(fact.message)
    })
    await topology.start()
    await topology.done
    // Before: reading the ended event's fields threw out of the write, which was retried, so
    // n = 1 was recorded once per attempt, as delivered.
    expect(sink.writes).toBe(1)
    expect(sink.events).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }])
    expect(sink.statuses).toEqual(['delivered', 'errored', 'delivered'])
    expect(await statuses()).toEqual(['delivered'])
    expect(failures).toEqual([expect.stringContaining('memory (outcome): outcome ended its event')])
  })

  it('refuses, naming beforeWrite, an event beforeWrite ended: the others recorded once, the write not retried', async () => {
    const { source, statuses } = batches([[{ n: 1 }, { n: 2 }, { n: 3 }]])
    const sink = memory({
      beforeWrite: (events) => {
        const second = events.events[1]!
        if (!second.isEnded) second.end('errored') // against the contract
      },
    })
    const failures: string[] = []
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', source)
      .sink('out', ['in'], sink, { retry: { attempts: 3, initialBackoffMs: 1 } })
      .build()
    topology.lifecycle.subscribe((fact) => {
      if (fact.type === 'component_error') failures.push(fact.message)
    })
    await topology.start()
    await topology.done
    // Before: reading the ended event's fields threw a raw USE_AFTER_END out of the write, which
    // was retried, so n = 1 was recorded once per attempt, as delivered.
    expect(sink.writes).toBe(1)
    expect(sink.events).toEqual([{ n: 1 }, { n: 3 }])
    expect(sink.statuses).toEqual(['delivered', 'delivered'])
    expect(await statuses()).toEqual(['errored'])
    expect(failures).toEqual([
      expect.stringContaining('memory (beforeWrite): the event had ended before the write'),
    ])
  })

  it('records the fields as outcome left them, whether or not the event shares them with a copy', async () => {
    // Fields are copied on write: a `set` on a handle that shares them with a copy (fan-out, a
    // clone) changes a new object, one on a handle that does not changes the same object.
    const sink = memory({
      outcome: (e) => {
        if (e.get('n') === 3) e.replaceFields({ n: 3, replaced: true })
        else e.set('seen', true)
        return 'delivered'
      },
    })
    const original = new LogEvent({ n: 2 })
    await sink.write(EventArray.from([new LogEvent({ n: 1 }), original.clone(), new LogEvent({ n: 3 })]))
    expect(sink.events).toEqual([
      { n: 1, seen: true },
      { n: 2, seen: true },
      { n: 3, replaced: true },
    ])
    expect(original.fields).toEqual({ n: 2 })
  })

  it('settles errored, naming outcome, an event whose outcome returns no status (undefined, a typo, a promise), and records errored', async () => {
    const { source, statuses } = batches([[{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]])
    const sink = memory({
      outcome: ((e: LogEvent) => {
        const n = e.get('n')
        if (n === 2) return undefined // a branch that forgot to return
        if (n === 3) return 'deliverd'
        if (n === 4) return Promise.resolve('delivered') // an async outcome
        return 'delivered'
      }) as never,
    })
    const failures: string[] = []
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    topology.lifecycle.subscribe((fact) => {
      if (fact.type === 'component_error') failures.push(fact.message)
    })
    await topology.start()
    await topology.done
    expect(await statuses()).toEqual(['errored'])
    // Before: n = 2 was delivered, and 'deliverd' and a promise were recorded as statuses.
    expect(sink.statuses).toEqual(['delivered', 'errored', 'errored', 'errored'])
    expect(topology.metrics().out).toMatchObject({ erroredEvents: 3, failures: { WRITE_FAILED: 3 } })
    expect(failures).toEqual([
      expect.stringContaining(
        "memory (outcome): outcome returned undefined, not 'delivered', 'errored' or 'rejected'",
      ),
    ])
  })

  it('a beforeWrite that throws fails the write retryably, naming beforeWrite, even with a TypeError (not rejected as unencodable)', async () => {
    const events = EventArray.from([new LogEvent({ n: 1 })])
    const buggy = memory({
      beforeWrite: () => {
        ;(undefined as unknown as () => void)()
      },
    })
    const failed = await buggy.write(events).catch((error: unknown) => error)
    expect(failed).toBeInstanceOf(RetryableError)
    expect(failed).toMatchObject({ component: 'memory', field: 'beforeWrite' })
    expect((failed as Error).message).toMatch(/^memory \(beforeWrite\): beforeWrite threw: .*not a function/)
    const async = memory({ beforeWrite: async () => Promise.reject(new RangeError('too deep')) })
    await expect(async.write(events)).rejects.toBeInstanceOf(RetryableError)
    // What a test throws on purpose to simulate a failure is passed as it is.
    const rejecting = memory({
      beforeWrite: () => {
        throw new RejectError('memory', 'no')
      },
    })
    await expect(rejecting.write(events)).rejects.toBeInstanceOf(RejectError)
    expect(buggy.writes + async.writes + rejecting.writes).toBe(0)
  })

  it('an async outcome that rejects fails its event and leaves no unhandled rejection; a beforeWrite throwing what String cannot print fails retryably', async () => {
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown): void => {
      unhandled.push(reason)
    }
    process.on('unhandledRejection', onUnhandled)
    try {
      const sink = memory({
        outcome: (async () => {
          throw new Error('async outcome failed')
        }) as never,
      })
      const result = (await sink.write(
        EventArray.from([new LogEvent({ n: 1 }), new LogEvent({ n: 2 })]),
      )) as unknown[]
      expect(result.map((r) => (r instanceof Error ? (r as Error & { code: string }).code : r))).toEqual([
        'OUTCOME_INVALID',
        'OUTCOME_INVALID',
      ])
      // Two macrotasks: a rejection left unhandled would have been reported by now.
      await new Promise((resolve) => setImmediate(resolve))
      await new Promise((resolve) => setImmediate(resolve))
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
    expect(unhandled).toEqual([])
    const odd = memory({
      beforeWrite: () => {
        throw Object.create(null)
      },
    })
    const failed = await odd.write(EventArray.from([new LogEvent({ n: 1 })])).catch((error: unknown) => error)
    expect(failed).toBeInstanceOf(RetryableError)
    expect((failed as Error).message).toMatch(
      /beforeWrite threw: a value that cannot be converted to a string/,
    )
  })

  it('waits for beforeWrite', async () => {
    const { source, statuses } = batches([[{ n: 1 }]])
    let release!: () => void
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    const sink = memory({ beforeWrite: () => held })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    await topology.start()
    for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve))
    expect(sink.events).toEqual([])
    release()
    await topology.done
    expect(await statuses()).toEqual(['delivered'])
  })

  it('reports an outcome that is not a function (a status given where a function was meant)', () => {
    expect(memory({ outcome: 'rejected' as never }).validate()).toEqual([
      {
        field: 'outcome',
        expected: 'a function',
        got: '"rejected"',
        message: 'must be a function, got "rejected"',
      },
    ])
    expect(memory().validate()).toEqual([])
  })
})
