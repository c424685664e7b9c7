// RabbitMQ in and out: one topology publishes five orders with the amqp sink (publisher confirms,
// the queue declared at start), a second consumes them with the amqp source and acknowledges each
// message only once its sink delivered it; the order the sink refuses is nacked without requeue
// (a queue with a dead-letter exchange would keep it).
// Run it (RabbitMQ at 127.0.0.1:5672, guest/guest): npx tsx --conditions=source examples/rabbitmq.ts
import { pathToFileURL } from 'node:url'
import { type AmqpSourceCounters, amqpSink, amqpSource } from '@ackline/amqp'
import { memory } from '@ackline/sinks'
import { generator } from '@ackline/sources'
import { TopologyBuilder } from '@ackline/topology'

/** Publishes and consumes five orders through `queue`; returns what the consumer's sink kept. */
export async function main(
  url = 'amqp://guest:guest@127.0.0.1:5672',
  queue = 'ackline-example-orders',
): Promise<{ delivered: number[]; counters: AmqpSourceCounters }> {
  const publish = new TopologyBuilder({ acknowledgements: true })
    .source('orders', generator({ count: 5, record: (i) => ({ order: i, amount: i * 10 }) }))
    // The default exchange ('') routes by queue name; the queue is declared when the sink starts.
    .sink(
      'rabbit',
      ['orders'],
      amqpSink({ url, routingKey: queue, declare: { queue: { name: queue, durable: false } } }),
    )
    .build()
  await publish.start()
  await publish.done

  const source = amqpSource({ url, queue, prefetch: 10 })
  const sink = memory({
    outcome: (event) => ((event.get('amount') as number) > 30 ? 'rejected' : 'delivered'),
  })
  const consume = new TopologyBuilder({ acknowledgements: true })
    .source('rabbit', source)
    .sink('out', ['rabbit'], sink)
    .build()
  await consume.start()
  // The queue never ends: stop once the source has settled every message with the broker.
  while (source.counters.acked + source.counters.rejected < 5) await new Promise((r) => setTimeout(r, 10))
  await consume.stop()
  const delivered = sink.events
    .filter((_, i) => sink.statuses[i] === 'delivered')
    .map((f) => f.order as number)
  return { delivered, counters: source.counters }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(JSON.stringify(await main()))
}
