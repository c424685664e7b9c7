// What the conformance suites feed components: records, batches with live notifiers, and a
// topology run under a ledger.
import { BatchNotifier, type BatchStatusReceiver, EventArray, type JsonObject } from '@ackline/core'
import type { LifecycleEvent, Sink, Source, Topology } from '@ackline/topology'
import type { ConformanceError } from '../ConformanceError.js'
import { within } from '../ConformanceRunner.js'

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

/**
 * Runs `topology` to completion and returns its facts; past `timeoutMs`, stops it at once (its
 * sinks' stop() and the forced settling of what is in flight, waited for at most `timeoutMs`
 * more) and rejects with `error()`, so a rule that gives up leaves no topology running.
 */
export async function runTopology(
  topology: Topology,
  timeoutMs: number,
  error: () => ConformanceError,
): Promise<LifecycleEvent[]> {
  const facts: LifecycleEvent[] = []
  topology.lifecycle.subscribe((f) => facts.push(f))
  const run = async () => {
    await topology.start()
    await topology.done
  }
  try {
    await within(run(), timeoutMs, error)
  } catch (failure) {
    await within(topology.stop({ drainTimeoutMs: 0 }), timeoutMs, error).catch(() => undefined)
    throw failure
  }
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
