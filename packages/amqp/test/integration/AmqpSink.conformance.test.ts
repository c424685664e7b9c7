// The amqp sink against the testkit's sink conformance suite, on the local RabbitMQ: each sink
// publishes to a queue of its own (declared by the sink, deleted at the end), which the suite
// reads back. Under CI=true an unreachable broker fails the file instead of skipping it.
import { type AmqpSink, amqpSink } from '@ackline/amqp'
import type { JsonObject } from '@ackline/core'
import { sinkConformance } from '@ackline/testkit'
import { afterAll, describe, it } from 'vitest'
import { Admin, BROKER_URL, brokerAvailable, uniqueName } from './broker.js'

const available = await brokerAvailable()
const admin = available ? await Admin.open() : undefined
afterAll(async () => {
  await admin?.close()
})

/** Each sink's queue, and what the suite has read from it so far (reading takes the messages). */
const queues = new WeakMap<AmqpSink, { name: string; read: JsonObject[] }>()

sinkConformance(
  'amqp sink conformance',
  () => {
    const name = uniqueName('conformance')
    admin!.queues.push(name)
    const sink = amqpSink({
      url: BROKER_URL,
      routingKey: name,
      declare: { queue: { name, durable: false } },
    })
    queues.set(sink, { name, read: [] })
    return sink
  },
  {
    read: async (sink) => {
      const queue = queues.get(sink)!
      for (const message of await admin!.drain(queue.name))
        queue.read.push(JSON.parse(message.content.toString('utf8')) as JsonObject)
      return queue.read
    },
    runner: { describe: describe.skipIf(!available) as typeof describe, it },
  },
)
