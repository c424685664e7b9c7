/** The reconnecting connection the source and the sink share, against RabbitMQ. Internal module: imported by path. */
import type { Channel, ConsumeMessage } from 'amqplib'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { Connection } from '../../src/internal/Connection.js'
import { Admin, BROKER_URL, brokerAvailable } from './broker.js'

const available = await brokerAvailable()

describe.skipIf(!available)('amqp Connection against RabbitMQ', () => {
  let admin: Admin
  beforeAll(async () => {
    admin = await Admin.open()
  })
  afterAll(async () => {
    await admin?.close()
  })

  it('close(): acks the channel sent right before reach the broker; the Close does not overtake them', async () => {
    // amqplib writes each channel's frames through a buffer of its own and interleaves them with
    // the connection's (channel 0) on the socket, so a Connection.Close written right after acks
    // went out before them, and RabbitMQ discards what follows a Close: the acks were lost and the
    // messages redelivered. The source acks what settles during a stop and then closes.
    const { queue } = await admin.queueWithDeadLetters()
    await admin.publish(
      queue,
      Array.from({ length: 3 }, (_, n) => ({ n })),
      (n) => `m-${n}`,
    )
    const got: ConsumeMessage[] = []
    const connection = new Connection<Channel>({
      url: BROKER_URL,
      component: 'test',
      openChannel: (model) => model.createChannel(),
      setup: async (generation) => {
        await generation.channel.consume(queue, (message) => {
          if (message !== null) got.push(message)
        })
      },
      onLost: () => undefined,
      onWarning: () => {},
      backoff: { initialDelayMs: 10, maxDelayMs: 10 },
      heartbeatSeconds: 0,
      connectTimeoutMs: 5000,
      closeTimeoutMs: 5000,
    })
    const generation = await connection.open()
    await vi.waitFor(() => expect(got).toHaveLength(3), { timeout: 5000, interval: 5 })
    for (const message of got) generation.channel.ack(message)
    await connection.close()
    expect(await admin.messageCount(queue)).toBe(0)
  })
})
