// The topology the topology benchmarks measure (not a benchmark itself: no `.bench.ts`):
// generator → remap (sets one field in place) → blackhole(s), run to its end and checked.
import type { JsonObject } from '@ackline/core'
import { blackhole } from '@ackline/sinks'
import { generator } from '@ackline/sources'
import { type BatchReceipt, TopologyBuilder } from '@ackline/topology'
import { remap } from '@ackline/transforms'

const record = (index: number): JsonObject => ({ message: 'event', index })

/**
 * Runs `events` events in batches of `batch` through the remap into `sinks` blackholes (default
 * 1); throws unless every blackhole saw every event and, with acknowledgements, every batch
 * resolved. Returns `events`. With `receipts`, the generator reads every batch's receipt and
 * waits on its status, as a source that tells its upstream does (an HTTP or broker source);
 * without, it asks for none (`send(records, { receipt: false })`), as a source with no upstream.
 */
export async function remapPipeline(
  acknowledgements: boolean,
  events: number,
  batch: number,
  sinks = 1,
  receipts = false,
): Promise<number> {
  let told = 0
  const onBatch = receipts
    ? (receipt: BatchReceipt) => {
        void receipt.status.then(() => {
          told++
        })
      }
    : undefined
  const builder = new TopologyBuilder<string>({ acknowledgements })
    .source('gen', generator({ count: events, batchSize: batch, record, onBatch }))
    .transform(
      'remap',
      ['gen'],
      remap((event) => {
        event.set('seen', true)
      }),
    )
  const holes = Array.from({ length: sinks }, () => blackhole())
  holes.forEach((hole, i) => {
    builder.sink(`out${i}`, ['remap'], hole)
  })
  const built = builder.build()
  await built.start()
  await built.done
  for (const hole of holes) if (hole.count !== events) throw new Error(`a blackhole saw ${hole.count} events`)
  if (acknowledgements && built.metrics().gen!.ackLatencyMs.count !== Math.ceil(events / batch))
    throw new Error('not every batch resolved')
  if (receipts) {
    await new Promise((resolve) => setImmediate(resolve))
    if (told !== Math.ceil(events / batch)) throw new Error('not every receipt was told')
  }
  return events
}
