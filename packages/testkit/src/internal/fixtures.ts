// What the conformance suites feed components: records, batches with live notifiers, and a
// topology run under a ledger.
import { BatchNotifier, type BatchStatusReceiver, EventArray, type JsonObject } from '@ackline/core'
import type { LifecycleEvent, Sink, Source, Topology } from '@ackline/topology'

/** Records every suite uses unless told otherwise. */
export const defaultRecords = (): JsonObject[] =>
  Array.from({ length: 6 }, (_, n) => ({ n, message: `record ${n}`, level: n % 2 === 0 ? 'info' : 'error' }))

/** One batch of `records` with a live notifier, as a source would send it. */
export function batchOf(records: readonly JsonObject[]): {
  events: EventArray
  receiver: BatchStatusReceiver
} {
  const { notifier, receiver } = BatchNotifier.create({ sourceId: 'conformance' })
  const events = EventArray.fromRecords(
    records.map((r) => structuredClone(r)),
    { sourceId: 'conformance', batch: notifier },
  )
  return { events, receiver }
}

/** A source that sends `batches` in order and returns. */
export const listSource = (batches: readonly (readonly JsonObject[])[]): Source => ({
  kind: 'conformance_source',
  canAcknowledge: true,
  async run(context) {
    for (const batch of batches) await context.send(batch.map((r) => structuredClone(r)))
  },
})

/** Runs `topology` to completion and returns its facts. */
export async function runTopology(topology: Topology): Promise<LifecycleEvent[]> {
  const facts: LifecycleEvent[] = []
  topology.lifecycle.subscribe((f) => facts.push(f))
  await topology.start()
  await topology.done
  return facts
}

/** A sink that keeps the fields and reports `outcome` (default delivered) for every event, for a transform's ports. */
export const collectSink = (outcome: 'delivered' | 'errored' = 'delivered'): Sink & { got: JsonObject[] } => {
  const got: JsonObject[] = []
  return {
    kind: 'conformance_sink',
    got,
    async write(events) {
      for (const e of events) got.push({ ...e.fields })
      return outcome === 'delivered' ? undefined : events.events.map(() => outcome)
    },
  }
}
