// Testing a sink you wrote with @ackline/testkit: the conformance suite, a property over random
// batches and failure schedules checked by the delivery ledger, then random topologies around it. The sink here upserts
// into a key-value store by `id`, so it may see a record twice and still store it once.
// Run it: npx tsx --conditions=source examples/testkit-sink.ts
import { pathToFileURL } from 'node:url'
import type { JsonObject } from '@ackline/core'
import { Arbitraries, checkSink, DeliveryLedger, faultySink, RandomTopology } from '@ackline/testkit'
import { type Sink, type Source, TopologyBuilder } from '@ackline/topology'
import fc from 'fast-check'

/** The sink under test: upserts each event by its `n` into a map. */
export function kvSink(store: Map<string, JsonObject>): Sink {
  return {
    kind: 'kv',
    async write(events) {
      for (const event of events) store.set(String(event.get('n')), { ...event.fields })
      return undefined
    },
  }
}

/** A broken variant, for contrast: it ends the events itself. */
export function kvSinkThatEndsEvents(store: Map<string, JsonObject>): Sink {
  return {
    kind: 'kv_broken',
    async write(events) {
      for (const event of events) store.set(String(event.get('n')), { ...event.fields })
      events.end('delivered')
      return undefined
    },
  }
}

const listSource = (batches: readonly JsonObject[][]): Source => ({
  kind: 'list',
  canAcknowledge: true,
  async run(context) {
    for (const batch of batches) await context.send(batch)
  },
})

export async function main(): Promise<{
  good: string[]
  broken: string[]
  propertyRuns: number
  topologiesWithKv: number
}> {
  // 1. Conformance: every rule a sink must keep (read lets the suite check what was stored).
  const stores = new WeakMap<Sink, Map<string, JsonObject>>()
  const make = (factory: (s: Map<string, JsonObject>) => Sink) => () => {
    const store = new Map<string, JsonObject>()
    const sink = factory(store)
    stores.set(sink, store)
    return sink
  }
  const read = (sink: Sink) => [...(stores.get(sink)?.values() ?? [])]
  const good = (await checkSink(make(kvSink), { read })).map((f) => f.code)
  const broken = (await checkSink(make(kvSinkThatEndsEvents), { read })).map((f) => f.code)

  // 2. A property: whatever the batches and however the sink fails, every record ends up stored
  // exactly once by key, and no source hears "delivered" for what was not.
  let propertyRuns = 0
  await fc.assert(
    fc.asyncProperty(Arbitraries.batches(), Arbitraries.failureSchedule(), async (batches, faults) => {
      propertyRuns++
      const store = new Map<string, JsonObject>()
      const ledger = new DeliveryLedger({ acknowledgements: true })
      const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
        .source('in', ledger.source('in', listSource(batches)))
        .sink('kv', ['in'], ledger.sink('kv', faultySink(kvSink(store), faults)), {
          retry: { attempts: faults.errorOnCalls.length + 1, initialBackoffMs: 0 },
        })
        .build()
      await topology.start()
      await topology.done
      await ledger.expectMatchesModel()
      await ledger.expectNoAckWithoutDelivery()
      // Rejected records (the schedule's rejectWhen) are not owed; the rest are, once by key.
      const owed = batches
        .flat()
        .filter((r) => faults.rejectWhen === undefined || (r.n as number) % faults.rejectWhen.modulo !== 0)
      for (const record of owed)
        if (!store.has(String(record.n))) throw new Error(`record ${record.n} not stored`)
    }),
    { numRuns: 30, seed: 1 },
  )
  // 3. Random topologies (sources, filters, routes, merges, other sinks, faults) with the sink in
  // them: each runs clean, and every batch is told what the lattice computes from the reports.
  let topologiesWithKv = 0
  const sinks = { kv: () => kvSink(new Map()) }
  await fc.assert(
    fc.asyncProperty(RandomTopology.arbitrary({ sinks, faults: true }), async (spec) => {
      if (spec.sinks.some((k) => k.kind === 'user:kv')) topologiesWithKv++
      await RandomTopology.check(spec, { sinks })
    }),
    { numRuns: 30, seed: 1 },
  )
  return { good, broken, propertyRuns, topologiesWithKv }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(JSON.stringify(await main()))
}
