// A custom sink: writes to a service that refuses some records for good and is sometimes
// unavailable. The sink only reports; the runtime ends every event, retries and acknowledges.
// Run it: npx tsx --conditions=source examples/custom-sink.ts
import { pathToFileURL } from 'node:url'
import type { DeliveryStatus, EventArray, JsonObject } from '@ackline/core'
import { generator } from '@ackline/sources'
import {
  type ConfigIssue,
  RejectError,
  RetryableError,
  type Sink,
  type SinkResult,
  TopologyBuilder,
} from '@ackline/topology'

/** A stand-in for a remote service. */
export class Service {
  readonly stored: JsonObject[] = []
  /** Fails the next this many calls as unavailable. */
  outages = 1

  store(records: readonly JsonObject[]): 'ok' | 'unavailable' {
    if (this.outages > 0) {
      this.outages--
      return 'unavailable'
    }
    this.stored.push(...records)
    return 'ok'
  }
}

/**
 * The sink. Every member of the `Sink` contract is here: `kind` and `write` (required), and
 * `validate`, `start`, `stop` (optional).
 */
export function serviceSink(service: Service, maxBytes = 64): Sink {
  return {
    kind: 'service',
    validate(): readonly ConfigIssue[] {
      return maxBytes > 0 ? [] : [{ field: 'maxBytes', message: `must be positive, got ${maxBytes}` }]
    },
    async start(): Promise<void> {
      // Open connections here: the runtime calls start() before the first write.
    },
    async write(events: EventArray): Promise<SinkResult> {
      const records = events.events.map((event) => event.fields)
      // A record too large can never be stored: one status per event says which ones.
      const statuses: DeliveryStatus[] = records.map((r) =>
        JSON.stringify(r).length > maxBytes ? 'rejected' : 'delivered',
      )
      if (statuses.every((s) => s === 'rejected'))
        throw new RejectError('service', 'every record is too large')
      // Unavailable: throw a RetryableError; the runtime retries per the sink's retry policy.
      if (service.store(records.filter((_, i) => statuses[i] === 'delivered')) === 'unavailable') {
        throw new RetryableError('service', 'service unavailable')
      }
      return statuses
    },
    async stop(): Promise<void> {
      // Flush and close here: the runtime calls stop() after the last write.
    },
  }
}

/** Runs the example: the first write fails and is retried; the one large record is rejected. */
export async function main(): Promise<{ stored: number; statuses: string[] }> {
  const service = new Service()
  const statuses: string[] = []
  const record = (i: number): JsonObject => (i === 3 ? { i, text: 'x'.repeat(100) } : { i })
  const topology = new TopologyBuilder({ acknowledgements: true })
    .source(
      'gen',
      generator({
        count: 6,
        batchSize: 3,
        record,
        onBatch: (r) => void r.status.then((s) => statuses.push(s)),
      }),
    )
    .sink('out', ['gen'], serviceSink(service), { retry: { initialBackoffMs: 1 } })
    .build()
  await topology.start()
  await topology.done
  return { stored: service.stored.length, statuses: statuses.sort() }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(JSON.stringify(await main()))
}
