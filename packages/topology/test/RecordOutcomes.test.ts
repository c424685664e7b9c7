// Per-record outcomes through real topologies: what a source that sends with { outcomes: true }
// is told about each record, on every shape (linear, fan-out, drop, merge, authoritative, timeout).
import type { JsonObject, LogEvent, RecordOutcome } from '@ackline/core'
import { type BatchReceipt, type Source, TopologyBuilder } from '@ackline/topology'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { Gate, keepIf, mergeAll, testSink } from './support/TestComponents.js'

const quiet = { onWarning: () => {} }
const on = { ...quiet, acknowledgements: true }
const n = (event: LogEvent): number => event.get('n') as number
const records = (...ns: number[]): JsonObject[] => ns.map((value) => ({ n: value }))

/** A source that sends each batch with per-record outcomes and keeps the receipts. */
const outcomeSource = (batches: JsonObject[][]): Source & { receipts: BatchReceipt[] } => ({
  kind: 'outcome_source',
  canAcknowledge: true,
  receipts: [],
  async run(context) {
    for (const batch of batches) this.receipts.push(await context.send(batch, { outcomes: true }))
  },
})

const outcomesOf = async (receipt: BatchReceipt): Promise<RecordOutcome[]> => {
  const outcomes = await receipt.outcomes
  if (outcomes === undefined) throw new Error('the receipt has no outcomes')
  return outcomes.toArray()
}

afterEach(() => {
  vi.useRealTimers()
})

describe('per-record outcomes', () => {
  it('reports each record of a batch in send order, next to the batch status', async () => {
    const source = outcomeSource([records(1, 2, 3, 4)])
    const sink = testSink({
      outcome: (e) => (n(e) === 2 ? 'errored' : n(e) === 3 ? 'rejected' : 'delivered'),
    })
    const topology = new TopologyBuilder(on).source('in', source).sink('out', ['in'], sink).build()
    await topology.start()
    await topology.done
    expect(await source.receipts[0]!.status).toBe('rejected')
    expect(await outcomesOf(source.receipts[0]!)).toEqual(['delivered', 'errored', 'rejected', 'delivered'])
  })

  it('a batch sent without asking has no outcomes', async () => {
    const plain: Source & { receipt?: BatchReceipt } = {
      kind: 'plain',
      canAcknowledge: true,
      async run(context) {
        this.receipt = await context.send(records(1))
      },
    }
    const topology = new TopologyBuilder(on).source('in', plain).sink('out', ['in'], testSink()).build()
    await topology.start()
    await topology.done
    expect(plain.receipt!.outcomes).toBeUndefined()
  })

  it('fan-out: each record takes the worst of its copies', async () => {
    const source = outcomeSource([records(1, 2, 3)])
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .sink('a', ['in'], testSink({ outcome: (e) => (n(e) === 1 ? 'errored' : 'delivered') }))
      .sink('b', ['in'], testSink({ outcome: (e) => (n(e) === 2 ? 'rejected' : 'delivered') }))
      .build()
    await topology.start()
    await topology.done
    expect(await outcomesOf(source.receipts[0]!)).toEqual(['errored', 'rejected', 'delivered'])
  })

  it('a dropped record says what its drop counted as', async () => {
    const source = outcomeSource([records(1, 2, 3)])
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .transform(
        'keep',
        ['in'],
        keepIf((e) => n(e) !== 2),
      )
      .transform(
        'strict',
        ['keep'],
        keepIf((e) => n(e) !== 3, 'rejected'),
      )
      .sink('out', ['strict'], testSink())
      .build()
    await topology.start()
    await topology.done
    expect(await outcomesOf(source.receipts[0]!)).toEqual(['delivered', 'dropped', 'rejected'])
  })

  it('a merged event folds into every record it carries', async () => {
    const source = outcomeSource([records(1, 2), records(3)])
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .transform('merge', ['in'], mergeAll())
      .sink('out', ['merge'], testSink({ outcome: () => 'errored' }))
      .build()
    await topology.start()
    await topology.done
    expect(await outcomesOf(source.receipts[0]!)).toEqual(['errored', 'errored'])
  })

  it('an authoritative sink decides early, and the outcomes agree with it', async () => {
    const gate = new Gate()
    const source = outcomeSource([records(1, 2)])
    const topology = new TopologyBuilder(on)
      .source('in', source)
      .sink('primary', ['in'], testSink({ outcome: (e) => (n(e) === 2 ? 'rejected' : 'delivered') }), {
        authoritative: true,
      })
      .sink('mirror', ['in'], testSink({ outcome: () => 'errored', gate }))
      .build()
    await topology.start()
    await vi.waitUntil(() => source.receipts.length === 1)
    expect(await outcomesOf(source.receipts[0]!)).toEqual(['delivered', 'rejected'])
    expect(gate.waiting).toBe(1)
    gate.open()
    await topology.done
  })

  it('after the ack timeout, records not finished for good count as errored', async () => {
    vi.useFakeTimers()
    const gate = new Gate()
    const source = outcomeSource([records(1, 2)])
    const topology = new TopologyBuilder({ ...on, ackTimeoutMs: 1000 })
      .source('in', source)
      .sink('out', ['in'], testSink({ gate }))
      .build()
    await topology.start()
    await vi.advanceTimersByTimeAsync(1000)
    expect(await source.receipts[0]!.status).toBe('errored')
    expect(await outcomesOf(source.receipts[0]!)).toEqual(['errored', 'errored'])
    gate.open()
    await topology.done
    // Decided once: the late deliveries do not change what the source was told.
    expect(await outcomesOf(source.receipts[0]!)).toEqual(['errored', 'errored'])
  })

  it('with acknowledgements off, every accepted record is delivered', async () => {
    const source = outcomeSource([records(1, 2)])
    const topology = new TopologyBuilder(quiet).source('in', source).sink('out', ['in'], testSink()).build()
    await topology.start()
    await topology.done
    expect(source.receipts[0]!.batchId).toBeUndefined()
    expect(await outcomesOf(source.receipts[0]!)).toEqual(['delivered', 'delivered'])
  })
})
