// A custom source: reads messages from a queue that wants each message acknowledged or
// redelivered, and acknowledges a message only once every sink settled its batch `delivered`.
// Run it: npx tsx --conditions=source examples/custom-source.ts
import { pathToFileURL } from 'node:url'
import type { JsonObject } from '@ackline/core'
import { memory } from '@ackline/sinks'
import { type ConfigIssue, type Source, type SourceContext, TopologyBuilder } from '@ackline/topology'

/** A stand-in for a broker: messages to take, and what the source told it about each. */
export class Queue {
  readonly acked: number[] = []
  readonly redelivered: number[] = []
  constructor(readonly messages: readonly JsonObject[]) {}
}

/**
 * The source. Every member of the `Source` contract is here: `kind`, `canAcknowledge`,
 * `validate` (optional) and `run`.
 */
export function queueSource(queue: Queue, batchSize = 2): Source {
  return {
    kind: 'queue',
    // It can pass acknowledgements upstream, so the builder propagates them to it.
    canAcknowledge: true,
    validate(): readonly ConfigIssue[] {
      return Number.isSafeInteger(batchSize) && batchSize > 0
        ? []
        : [{ field: 'batchSize', message: `must be a positive integer, got ${batchSize}` }]
    },
    async run(context: SourceContext): Promise<void> {
      const settled: Promise<void>[] = []
      for (let from = 0; from < queue.messages.length && !context.signal.aborted; from += batchSize) {
        const offsets = Array.from(
          { length: Math.min(batchSize, queue.messages.length - from) },
          (_, i) => from + i,
        )
        // send() waits for room downstream (back pressure) and returns once the batch is accepted.
        const receipt = await context.send(offsets.map((offset) => queue.messages[offset]!))
        settled.push(
          receipt.status.then((status) => {
            // Only a delivered batch is acknowledged; errored or rejected ones go back to the queue.
            ;(status === 'delivered' ? queue.acked : queue.redelivered).push(...offsets)
          }),
        )
      }
      // A source's run must not return before every batch it sent was accepted; waiting for the
      // statuses too means the queue has heard about every message when the topology is done.
      await Promise.all(settled)
    },
  }
}

/** Runs the example: one message the sink refuses goes back to the queue, the others are acknowledged. */
export async function main(): Promise<{ acked: number[]; redelivered: number[] }> {
  const queue = new Queue([{ n: 0 }, { n: 1 }, { n: 2, poison: true }, { n: 3 }])
  const topology = new TopologyBuilder({ acknowledgements: true })
    .source('queue', queueSource(queue))
    .sink(
      'out',
      ['queue'],
      memory({ outcome: (event) => (event.get('poison') === true ? 'rejected' : 'delivered') }),
    )
    .build()
  await topology.start()
  await topology.done
  return { acked: queue.acked.sort((a, b) => a - b), redelivered: queue.redelivered.sort((a, b) => a - b) }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(JSON.stringify(await main()))
}
