// What a source is told about why a batch was not delivered: the receipt's `failure`, the
// `batch_resolved` fact, and the per-component `failures` counters.

import { RejectError, RetryableError, TopologyBuilder, type Transform } from '@ackline/topology'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { linear, n, on, records, run, through } from './support/Harness.js'
import { Gate, keepIf, passThrough, testSink, testSource } from './support/TestComponents.js'

afterEach(() => {
  vi.useRealTimers()
})

describe('BatchReceipt.failure', () => {
  it('is undefined for a delivered batch', async () => {
    const source = testSource([records(1, 2)])
    await run(linear(source, testSink()))
    expect(await source.statuses()).toEqual(['delivered'])
    expect(source.receipts[0]!.failure).toBeUndefined()
  })

  it('names the sink and the cause once its retries ran out', async () => {
    const source = testSource([records(1)])
    const sink = testSink({
      write: async () => {
        throw new RetryableError('db', 'connection reset')
      },
    })
    const facts = await run(linear(source, sink, { retry: { attempts: 2, initialBackoffMs: 1 } }))
    expect(await source.statuses()).toEqual(['errored'])
    const failure = source.receipts[0]!.failure
    expect(failure).toMatchObject({ componentId: 'out', code: 'WRITE_FAILED' })
    expect(failure!.message).toContain('connection reset')
    expect(facts.find((f) => f.type === 'batch_resolved')).toMatchObject({ status: 'errored', failure })
  })

  it('names the sink that rejected, with its reason', async () => {
    const source = testSource([records(1)])
    const sink = testSink({
      write: async () => {
        throw new RejectError('db', 'schema mismatch')
      },
    })
    await run(linear(source, sink))
    expect(await source.statuses()).toEqual(['rejected'])
    expect(source.receipts[0]!.failure).toMatchObject({
      componentId: 'out',
      code: 'REJECTED',
      message: expect.stringContaining('schema mismatch'),
    })
  })

  it('explains a rejected batch by the rejection, not by an earlier error of another event', async () => {
    const source = testSource([records(1, 2)])
    const sink = testSink({ outcome: (e) => (n(e) === 1 ? 'errored' : 'rejected') })
    await run(linear(source, sink))
    expect(await source.statuses()).toEqual(['rejected'])
    expect(source.receipts[0]!.failure).toMatchObject({ componentId: 'out', code: 'REJECTED' })
  })

  it("names the transform that dropped with dropStatus 'rejected'", async () => {
    const source = testSource([records(1, 2)])
    await run(
      new TopologyBuilder(on)
        .source('in', source)
        .transform(
          'valid',
          ['in'],
          keepIf((e) => n(e) === 1, 'rejected'),
        )
        .sink('out', ['valid'], testSink())
        .build(),
    )
    expect(await source.statuses()).toEqual(['rejected'])
    expect(source.receipts[0]!.failure).toMatchObject({ componentId: 'valid', code: 'DROPPED' })
  })

  it('names the transform that leaked events', async () => {
    const source = testSource([records(1)])
    await run(
      new TopologyBuilder(on)
        .source('in', source)
        .transform('forgetful', ['in'], { kind: 'forgetful', process() {} })
        .sink('out', ['forgetful'], testSink())
        .build(),
    )
    expect(await source.statuses()).toEqual(['errored'])
    expect(source.receipts[0]!.failure).toMatchObject({ componentId: 'forgetful', code: 'LEAKED_EVENTS' })
  })

  it('names the full buffer that dropped the events', async () => {
    const gate = new Gate()
    const source = testSource([records(1), records(2), records(3)])
    const sink = testSink({ gate })
    const topology = linear(source, sink, { buffer: { maxEvents: 1, whenFull: 'drop_newest' } })
    await topology.start()
    await vi.waitFor(() => expect(source.receipts).toHaveLength(3))
    gate.open()
    await topology.done
    const statuses = await source.statuses()
    expect(statuses).toContain('rejected')
    const dropped = source.receipts.filter((_, i) => statuses[i] === 'rejected')
    for (const receipt of dropped)
      expect(receipt.failure).toMatchObject({ componentId: 'out', code: 'BUFFER_FULL' })
    expect(topology.metrics().out!.failures.BUFFER_FULL).toBe(dropped.length)
  })

  it('says the ack timeout decided, naming the source', async () => {
    vi.useFakeTimers()
    const gate = new Gate()
    const source = testSource([records(1)], { untilStopped: true })
    const topology = new TopologyBuilder({ ...on, ackTimeoutMs: 1000 })
      .source('in', source)
      .transform('t', ['in'], passThrough())
      .sink('out', ['t'], testSink({ gate }))
      .build()
    await topology.start()
    await vi.waitFor(() => expect(source.receipts).toHaveLength(1))
    await vi.advanceTimersByTimeAsync(1000)
    expect(await source.receipts[0]!.status).toBe('errored')
    expect(source.receipts[0]!.failure).toMatchObject({ componentId: 'in', code: 'ACK_TIMEOUT' })
    expect(topology.metrics().in!.failures).toEqual({ ACK_TIMEOUT: 1 })
    gate.open()
    await topology.stop()
  })

  it('counts the failures of a sink by code in its metrics', async () => {
    const source = testSource([records(1, 2, 3)])
    const sink = testSink({ outcome: (e) => (n(e) === 1 ? 'delivered' : 'rejected') })
    const topology = linear(source, sink)
    await run(topology)
    expect(topology.metrics().out!.failures).toEqual({ REJECTED: 2 })
    expect(topology.metrics().in!.failures).toEqual({})
  })

  it('an authoritative sink explains the early decision', async () => {
    const source = testSource([records(1)])
    const gate = new Gate()
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .sink('pager', ['in'], testSink({ outcome: () => 'rejected' }), { authoritative: true })
      .sink('slow', ['in'], testSink({ gate }))
      .build()
    await topology.start()
    await vi.waitFor(() => expect(source.receipts).toHaveLength(1))
    expect(await source.receipts[0]!.status).toBe('rejected')
    expect(source.receipts[0]!.failure).toMatchObject({ componentId: 'pager', code: 'REJECTED' })
    gate.open()
    await topology.done
  })
})

describe('a thrown value without a string form (Object.create(null))', () => {
  // `String(value)` throws for such a value: a message built from it in a catch block once
  // killed the runner, so every later event waited in its buffer and was errored at the stop.
  const bare = (): unknown => Object.create(null)
  /** Three batches, each sent once the one before it resolved. */
  const oneByOne = () => {
    const source: ReturnType<typeof testSource> = testSource([records(1), records(2), records(3)], {
      afterSend: async (sent) => {
        await source.receipts[sent - 1]!.status
      },
    })
    return source
  }

  it('fails the write that threw it, and the sink goes on writing', async () => {
    const source = oneByOne()
    let writes = 0
    const sink = testSink({
      write: async () => {
        if (writes++ === 0) throw bare()
        return undefined
      },
    })
    const facts = await run(linear(source, sink, { retry: { attempts: 1 } }))
    expect(await source.statuses()).toEqual(['errored', 'delivered', 'delivered'])
    expect(source.receipts[0]!.failure).toMatchObject({ componentId: 'out', code: 'WRITE_FAILED' })
    const errors = facts.filter((f) => f.type === 'component_error')
    expect(errors.map((f) => f.code)).toEqual(['WRITE_FAILED'])
  })

  it('rejects the write that threw a RejectError whose message getter throws, and the sink goes on', async () => {
    const source = oneByOne()
    let writes = 0
    const sink = testSink({
      write: async () => {
        if (writes++ === 0) {
          const error = new RejectError('out', 'unused')
          Object.defineProperty(error, 'message', {
            get() {
              throw new Error('no message')
            },
          })
          throw error
        }
        return undefined
      },
    })
    await run(linear(source, sink))
    expect(await source.statuses()).toEqual(['rejected', 'delivered', 'delivered'])
  })

  it('fails the transform call that threw it, and the transform goes on', async () => {
    const source = oneByOne()
    let calls = 0
    const transform: Transform = {
      kind: 'odd',
      process(events, context) {
        if (calls++ === 0) throw bare()
        context.emitAll(events)
      },
    }
    const facts = await run(through(source, transform, testSink()))
    expect(await source.statuses()).toEqual(['errored', 'delivered', 'delivered'])
    expect(source.receipts[0]!.failure).toMatchObject({ componentId: 't', code: 'PROCESS_FAILED' })
    const errors = facts.filter((f) => f.type === 'component_error')
    expect(errors.map((f) => f.code)).toEqual(['PROCESS_FAILED'])
  })

  it.each([
    ['throws undefined', false],
    ['throws undefined, with a flush (its event was held until the last flush)', true],
  ])('a transform call that %s fails as PROCESS_FAILED, not as LEAKED_EVENTS', async (_, withFlush) => {
    const source = oneByOne()
    let calls = 0
    const transform: Transform = {
      kind: 'odd',
      process(events, context) {
        if (calls++ === 0) throw undefined
        context.emitAll(events)
      },
      ...(withFlush ? { flush() {} } : {}),
    }
    const facts = await run(through(source, transform, testSink()))
    expect(await source.statuses()).toEqual(['errored', 'delivered', 'delivered'])
    expect(source.receipts[0]!.failure).toMatchObject({ componentId: 't', code: 'PROCESS_FAILED' })
    const errors = facts.filter((f) => f.type === 'component_error')
    expect(errors.map((f) => f.code)).toEqual(['PROCESS_FAILED'])
  })

  it('is reported as RUN_FAILED when a source run() rejects with it', async () => {
    const facts = await run(
      linear({ kind: 'odd', canAcknowledge: true, run: async () => Promise.reject(bare()) }, testSink()),
    )
    const errors = facts.filter((f) => f.type === 'component_error')
    expect(errors.map((f) => [f.component, f.code])).toEqual([['in', 'RUN_FAILED']])
  })
})
