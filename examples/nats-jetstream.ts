// NATS JetStream in and out: reads stream ORDERS_<id> through a durable pull consumer, drops the
// orders the sink refuses (terminated at the server, with the reason), and republishes the others
// to a second subject that the same stream does not capture, awaiting each PubAck.
// Needs a NATS server with JetStream (default 127.0.0.1:4222, or NATS_URL).
// Run it: npx tsx --conditions=source examples/nats-jetstream.ts
import { pathToFileURL } from 'node:url'
import { jetstream, jetstreamSink } from '@ackline/nats'
import { TopologyBuilder } from '@ackline/topology'
import { filter } from '@ackline/transforms'
import { jetstream as jetstreamClient, jetstreamManager } from '@nats-io/jetstream'
import { connect } from '@nats-io/transport-node'

const servers = process.env.NATS_URL ?? '127.0.0.1:4222'

/** Publishes 10 orders, runs the pipeline until each was acked or terminated, and cleans up. */
export async function main(): Promise<{ acked: number; terminated: number; republished: number }> {
  const id = Date.now().toString(36)
  const [orders, archive] = [`ORDERS_${id}`, `ARCHIVE_${id}`]
  // Setting up the example: two streams, and ten orders to read (in your system they exist already).
  const nc = await connect({ servers })
  const jsm = await jetstreamManager(nc)
  await jsm.streams.add({ name: orders, subjects: [`${orders}.>`] })
  await jsm.streams.add({ name: archive, subjects: [`${archive}.>`] })
  const js = jetstreamClient(nc)
  for (let n = 0; n < 10; n++) await js.publish(`${orders}.new`, JSON.stringify({ n, amount: n * 10 }))

  const source = jetstream({ servers, stream: orders, consumer: 'archiver', onWarning: () => {} })
  const sink = jetstreamSink({ servers, subject: `${archive}.orders` })
  const topology = new TopologyBuilder({ acknowledgements: true })
    .source('orders', source)
    // Orders of amount 0 are rejected: their messages are terminated, never redelivered.
    .transform(
      'nonzero',
      ['orders'],
      filter((e) => e.get('amount') !== 0),
      { dropStatus: 'rejected' },
    )
    .sink('archive', ['nonzero'], sink)
    .build()
  await topology.start()
  while (source.counters.acked + source.counters.terminated < 10) await new Promise((r) => setTimeout(r, 20))
  await topology.stop()

  const { acked, terminated } = source.counters
  const republished = (await jsm.streams.info(archive)).state.messages
  await jsm.streams.delete(orders)
  await jsm.streams.delete(archive)
  await nc.close()
  return { acked, terminated, republished }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(JSON.stringify(await main()))
}
