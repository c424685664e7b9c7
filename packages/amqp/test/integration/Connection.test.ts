/** The reconnecting connection the source and the sink share, against RabbitMQ. Internal module: imported by path. */
import { inspect } from 'node:util'
import { AmqpError, amqpSink } from '@ackline/amqp'
import type { Channel, ConsumeMessage } from 'amqplib'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { Connection } from '../../src/internal/Connection.js'
import { Admin, BROKER_URL, brokerAvailable, brokerProxy, uniqueName } from './broker.js'

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

  it('drop(): acks sent right before the server cancelled the consumer reach the broker; the Close does not overtake them', async () => {
    // The source drops its connection when the server cancels its consumer (a queue deleted).
    // drop() closed the connection before the channel: the Connection.Close (channel 0) went out
    // before the acks waiting in the channel's own buffer, and RabbitMQ discards what follows a
    // Close, so those acks were lost and their messages redelivered (duplicates downstream).
    const { queue } = await admin.queueWithDeadLetters()
    // A second queue whose deletion makes the broker cancel a consumer (basic.cancel) while the
    // first queue, whose messages were acked, stays.
    const cancelled = uniqueName('cancelled')
    await admin.channel.assertQueue(cancelled, { durable: false })
    admin.queues.push(cancelled)
    await admin.publish(
      queue,
      Array.from({ length: 3 }, (_, n) => ({ n })),
      (n) => `m-${n}`,
    )
    const got: ConsumeMessage[] = []
    let cancels = 0
    const connection = new Connection<Channel>({
      url: BROKER_URL,
      component: 'test',
      openChannel: (model) => model.createChannel(),
      setup: async (generation) => {
        if (generation.id > 1) return // the reconnect only shows that the first connection is gone
        const channel = generation.channel
        await channel.consume(queue, (message) => {
          if (message !== null) got.push(message)
        })
        await channel.consume(cancelled, (message) => {
          if (message !== null) return
          // As the source does: what settled just before the cancel is acked, then the drop.
          cancels++
          for (const delivered of got) channel.ack(delivered)
          connection.drop(new Error('the server cancelled the consumer'))
        })
      },
      onLost: () => undefined,
      onWarning: () => {},
      backoff: { initialDelayMs: 10, maxDelayMs: 10 },
      heartbeatSeconds: 0,
      connectTimeoutMs: 5000,
      closeTimeoutMs: 5000,
    })
    try {
      await connection.open()
      await vi.waitFor(() => expect(got).toHaveLength(3), { timeout: 5000, interval: 5 })
      await admin.channel.deleteQueue(cancelled)
      await vi.waitFor(() => expect(connection.current?.id).toBe(2), { timeout: 5000, interval: 5 })
      // The broker handles the end of the first channel in the queue's process (its consumer
      // removed, what it held unacked requeued) before it answers a declare of that queue.
      await vi.waitFor(async () => expect((await admin.channel.checkQueue(queue)).consumerCount).toBe(0), {
        timeout: 5000,
        interval: 5,
      })
      expect(cancels).toBe(1)
      expect(await admin.messageCount(queue)).toBe(0)
    } finally {
      await connection.close()
    }
  })

  it("a broker that a url's misparsed password leads to refuses the virtual host read from the rest of the password: the error never names it", async () => {
    // '127.0.0.1:<proxy port>/s3cret@elsewhere' is a user and password written as is, or a server
    // and the vhost 's3cret@elsewhere': amqplib takes the second, and a broker listens there. The
    // failure named the vhost it refused, the rest of the password: "the virtual host 's3cret@elsewhere'".
    const { proxy, url: through } = await brokerProxy()
    try {
      const { port } = new URL(through)
      const url = `amqp://127.0.0.1:${port}/s3cret@elsewhere`
      const error: unknown = await amqpSink({ url })
        .start()
        .catch((e: unknown) => e)
      console.log(`misparsed credentials, a broker behind them: ${(error as Error).message}`)
      expect(error).toBeInstanceOf(AmqpError)
      expect((error as AmqpError).message).toMatch(
        /^amqp \(url\): cannot connect to amqp:\/\/\*\*\*@elsewhere: /,
      )
      const printed = `${(error as Error).message}\n${inspect(error, { depth: 10 })}`
      expect(printed).not.toContain('s3cret')
      expect(printed).not.toContain(port)
    } finally {
      await proxy.close()
    }
  })

  it("a reconnect's warning never shows the digits of a password that the url's parse took for a port", async () => {
    // '127.0.0.1:<proxy port>?s3cret@elsewhere' parses as the proxy with a query: the first connect
    // reaches the broker; once the proxy is gone, each attempt was warned 'failed: connect
    // ECONNREFUSED 127.0.0.1:<proxy port>'.
    const { proxy, url: through } = await brokerProxy()
    const { port } = new URL(through)
    const warnings: string[] = []
    const sink = amqpSink({
      url: `amqp://127.0.0.1:${port}?s3cret@elsewhere`,
      reconnectInitialDelayMs: 10,
      reconnectMaxDelayMs: 20,
      onWarning: (message) => warnings.push(message),
    })
    try {
      await sink.start()
      await proxy.close()
      await vi.waitFor(
        () => expect(warnings.filter((w) => w.includes('reconnect attempt'))).not.toEqual([]),
        {
          timeout: 5000,
          interval: 5,
        },
      )
      console.log(`misparsed credentials, reconnect warnings: ${JSON.stringify(warnings)}`)
      expect(
        warnings.some((w) =>
          /reconnect attempt 1 to amqp:\/\/\*\*\*@elsewhere failed: .*ECONNREFUSED/.test(w),
        ),
      ).toBe(true)
      for (const warning of warnings) {
        expect(warning).not.toContain(port)
        expect(warning).not.toContain('s3cret')
      }
    } finally {
      await sink.stop()
      await proxy.close().catch(() => undefined)
    }
  })
})
