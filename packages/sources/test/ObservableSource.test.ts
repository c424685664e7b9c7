import type { JsonObject } from '@ackline/core'
import { fromObservable, type RecordAck } from '@ackline/sources'
import { type LifecycleEvent, type Sink, TopologyBuilder } from '@ackline/topology'
import { from, lastValueFrom, Subject, throwError, toArray } from 'rxjs'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { FakeSourceContext } from './support/FakeSourceContext.js'

const failing = (fail: (record: JsonObject) => 'delivered' | 'errored' | 'rejected'): Sink => ({
  kind: 'outcomes',
  async write(events) {
    return events.events.map((e) => fail(e.fields as JsonObject))
  },
})

afterEach(() => {
  vi.useRealTimers()
})

describe('fromObservable', () => {
  it('acknowledges each record with its batch status, through the callback and the acks Observable', async () => {
    const viaCallback: RecordAck[] = []
    const source = fromObservable(from([{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]), {
      batchSize: 2,
      onAck: (ack) => viaCallback.push(ack),
    })
    const viaObservable = lastValueFrom(source.acks.pipe(toArray()))
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink(
        'out',
        ['in'],
        failing((r) => (r.n === 3 ? 'rejected' : 'delivered')),
      )
      .build()
    await topology.start()
    await topology.done
    const acks = await viaObservable
    expect(acks.map((a) => [a.record.n, a.status])).toEqual([
      [1, 'delivered'],
      [2, 'delivered'],
      [3, 'rejected'],
      [4, 'rejected'],
    ])
    expect(acks[0]!.batchId).toBe(acks[1]!.batchId)
    expect(acks[0]!.batchId).not.toBe(acks[2]!.batchId)
    expect(viaCallback).toEqual(acks)
  })

  it('acknowledges records the topology stopped before sending as errored, never delivered', async () => {
    vi.useFakeTimers()
    const records = new Subject<JsonObject>()
    const acks: RecordAck[] = []
    const never: Sink = { kind: 'stuck', write: () => new Promise(() => {}) }
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', fromObservable(records, { batchSize: 1, onAck: (a) => acks.push(a) }))
      .sink('out', ['in'], never, { buffer: { maxEvents: 1 } })
      .build()
    await topology.start()
    for (let n = 1; n <= 5; n++) records.next({ n })
    await vi.advanceTimersByTimeAsync(0)
    const stopped = topology.stop({ drainTimeoutMs: 1000 })
    await vi.advanceTimersByTimeAsync(1000)
    await stopped
    expect(acks.map((a) => [a.record.n, a.status]).sort()).toEqual([
      [1, 'errored'],
      [2, 'errored'],
      [3, 'errored'],
      [4, 'errored'],
      [5, 'errored'],
    ])
    expect(acks.filter((a) => a.batchId === undefined).map((a) => a.record.n)).toEqual([4, 5])
  })

  it('reports an Observable that errors as a failed source', async () => {
    const facts: LifecycleEvent[] = []
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', fromObservable(throwError(() => new Error('upstream broke'))))
      .sink(
        'out',
        ['in'],
        failing(() => 'delivered'),
      )
      .build()
    topology.lifecycle.subscribe((f) => facts.push(f))
    await topology.start()
    await topology.done
    expect(facts.find((f) => f.type === 'component_error')).toMatchObject({
      component: 'in',
      code: 'RUN_FAILED',
      message: expect.stringContaining('upstream broke'),
    })
  })

  it('acknowledges the records of a batch the pipeline did not accept as errored', async () => {
    const context = new FakeSourceContext()
    let refuse = (_error: Error): void => {}
    context.gate = new Promise((_resolve, reject) => {
      refuse = reject
    })
    const records = new Subject<JsonObject>()
    const acks: RecordAck[] = []
    const run = fromObservable(records, { batchSize: 1, onAck: (a) => acks.push(a) }).run(context)
    const sending = new Promise<void>((resolve) => {
      const send = context.send.bind(context)
      context.send = (batch, options) => {
        resolve()
        return send(batch, options)
      }
    })
    records.next({ n: 1 })
    records.next({ n: 2 })
    await sending
    refuse(new Error('not accepted'))
    await expect(run).rejects.toThrow('not accepted')
    expect(acks.map((a) => [a.record.n, a.status]).sort()).toEqual([
      [1, 'errored'],
      [2, 'errored'],
    ])
  })

  it('reports an onAck that throws as a warning, and still acknowledges every record and completes acks', async () => {
    const warnings: string[] = []
    const called: number[] = []
    const source = fromObservable(from([{ n: 1 }, { n: 2 }, { n: 3 }]), {
      batchSize: 2,
      onAck: ({ record }) => {
        called.push(record.n as number)
        throw new Error('onAck broke')
      },
      onWarning: (message) => warnings.push(message),
    })
    const acks = lastValueFrom(source.acks.pipe(toArray()))
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink(
        'out',
        ['in'],
        failing(() => 'delivered'),
      )
      .build()
    await topology.start()
    await topology.done
    expect((await acks).map((a) => [a.record.n, a.status])).toEqual([
      [1, 'delivered'],
      [2, 'delivered'],
      [3, 'delivered'],
    ])
    expect(called).toEqual([1, 2, 3])
    expect(warnings).toHaveLength(3)
    expect(warnings[0]).toBe(
      "observable source 'in' (onAck): threw on a record acknowledged delivered: Error: onAck broke",
    )
  })

  it('reports an onAck whose promise rejects as a warning, leaving no rejection unhandled', async () => {
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    const warnings: string[] = []
    try {
      const source = fromObservable(from([{ n: 1 }]), {
        onAck: async () => {
          throw new Error('ledger down')
        },
        onWarning: (message) => warnings.push(message),
      })
      const acks = lastValueFrom(source.acks.pipe(toArray()))
      const topology = new TopologyBuilder({ acknowledgements: true })
        .source('in', source)
        .sink(
          'out',
          ['in'],
          failing(() => 'delivered'),
        )
        .build()
      await topology.start()
      await topology.done
      expect((await acks).map((a) => a.status)).toEqual(['delivered'])
      await vi.waitUntil(() => warnings.length === 1)
      await new Promise((resolve) => setTimeout(resolve, 20))
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
    expect(unhandled.map(String)).toEqual([])
    expect(warnings).toEqual([
      "observable source 'in' (onAck): rejected on a record acknowledged delivered: Error: ledger down",
    ])
  })

  it('refuses a second run, whose records acks would never report (it completed with the first)', async () => {
    const onAck = vi.fn()
    const source = fromObservable(from([{ n: 1 }]), { onAck })
    const acks = lastValueFrom(source.acks.pipe(toArray()))
    const first = new FakeSourceContext()
    first.onBatch = (batch) => batch.end('delivered')
    await source.run(first)
    expect((await acks).map((a) => [a.record.n, a.status])).toEqual([[1, 'delivered']])
    const second = new FakeSourceContext({ id: 'again' })
    second.onBatch = (batch) => batch.end('delivered')
    await expect(source.run(second)).rejects.toMatchObject({
      name: 'ComponentError',
      code: 'RUNS_ONCE',
      component: 'again',
    })
    // Nothing of the Observable is sent again, nor acknowledged where acks cannot tell it.
    expect(second.batches).toEqual([])
    expect(onAck).toHaveBeenCalledTimes(1)
  })

  it('reports bad options by field, the callback included', () => {
    expect(
      fromObservable(from([{ n: 1 }]), { batchSize: 0, onAck: 'log' as never })
        .validate()
        .map((i) => i.message),
    ).toEqual(['must be a positive integer, got 0', 'must be a function, got "log"'])
    expect(fromObservable(from([{ n: 1 }])).validate()).toEqual([])
  })
})
