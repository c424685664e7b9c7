import { Socket } from 'node:net'
import { AmqpError, amqpSink } from '@ackline/amqp'
import { type BatchStatus, EventArray, type JsonObject, LogEvent, RecordId } from '@ackline/core'
import { generator } from '@ackline/sources'
import { RejectError, RetryableError, TopologyBuilder } from '@ackline/topology'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { Admin, BROKER_URL, brokerAvailable, brokerUser, confirmHoldingProxy, uniqueName } from './broker.js'

const available = await brokerAvailable()

describe.skipIf(!available)('amqp sink against RabbitMQ', () => {
  let admin: Admin
  beforeAll(async () => {
    admin = await Admin.open()
  })
  afterAll(async () => {
    await admin?.close()
  })

  it('counts an event delivered only once confirmed, and the queue holds exactly those messages with distinct ids', async () => {
    const exchange = uniqueName('ex')
    const queue = uniqueName('sinkq')
    admin.exchanges.push(exchange)
    admin.queues.push(queue)
    const sink = amqpSink({
      url: BROKER_URL,
      exchange,
      routingKey: 'audit',
      maxInFlight: 8,
      declare: {
        exchange: { type: 'direct', durable: false },
        queue: { name: queue, durable: false, bindingKey: 'audit' },
      },
    })
    const statuses: Promise<BatchStatus>[] = []
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source(
        'gen',
        generator({ count: 100, batchSize: 25, onBatch: (receipt) => statuses.push(receipt.status) }),
      )
      .sink('bus', ['gen'], sink)
      .build()
    await topology.start()
    await topology.done
    expect(await Promise.all(statuses)).toEqual(['delivered', 'delivered', 'delivered', 'delivered'])
    expect(sink.counters).toMatchObject({
      published: 100,
      confirmed: 100,
      nacked: 0,
      returned: 0,
      inFlight: 0,
    })
    const held = await admin.drain(queue)
    // Several writes are in flight (the sink's default concurrency): messages of different writes interleave.
    expect(
      held.map((m) => (JSON.parse(m.content.toString()) as { index: number }).index).sort((a, b) => a - b),
    ).toEqual(Array.from({ length: 100 }, (_, i) => i))
    // The generator gives no record id: each message gets a unique one.
    const ids = held.map((m) => m.properties.messageId as string)
    expect(new Set(ids).size).toBe(100)
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9_-]{11}\/[0-9a-z]+$/)
    expect(
      held.every((m) => m.properties.deliveryMode === 2 && m.properties.contentType === 'application/json'),
    ).toBe(true)
  })

  it("takes the message-id from the record's identity (RecordId), else an amqp source's, else the option's field; one write at a time keeps order", async () => {
    const queue = uniqueName('ids')
    admin.queues.push(queue)
    await admin.channel.assertQueue(queue, { durable: false })
    const record = (i: number): JsonObject => {
      const fields: JsonObject = { i, order: `o-${i}` }
      if (i % 3 === 0) RecordId.set(fields, `rec-${i}`)
      if (i % 3 !== 2) fields._amqp = { messageId: `up-${i}` }
      return fields
    }
    const run = async (sink: ReturnType<typeof amqpSink>): Promise<[string, JsonObject][]> => {
      const topology = new TopologyBuilder({ acknowledgements: true })
        .source('gen', generator({ count: 9, batchSize: 2, record }))
        .sink('bus', ['gen'], sink, { concurrency: 1 })
        .build()
      await topology.start()
      await topology.done
      const held = await admin.drain(queue)
      return held.map((m) => [
        m.properties.messageId as string,
        JSON.parse(m.content.toString()) as JsonObject,
      ])
    }
    const byDefault = await run(amqpSink({ url: BROKER_URL, routingKey: queue }))
    expect(byDefault.map(([, body]) => body.i)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8])
    expect(byDefault.map(([id]) => id).filter((_, i) => i % 3 !== 2)).toEqual([
      'rec-0',
      'up-1',
      'rec-3',
      'up-4',
      'rec-6',
      'up-7',
    ])
    for (const [id] of byDefault.filter((_, i) => i % 3 === 2))
      expect(id).toMatch(/^[A-Za-z0-9_-]{11}\/[0-9a-z]+$/)
    // The identity goes out as the message-id, not in the body; nor does the source metadata.
    for (const [, body] of byDefault) expect(Object.keys(body).sort()).toEqual(['i', 'order'])
    const byField = await run(amqpSink({ url: BROKER_URL, routingKey: queue, messageIdField: 'order' }))
    expect(byField.map(([id]) => id)).toEqual(Array.from({ length: 9 }, (_, i) => `o-${i}`))
  })

  it('rejects an event whose message no queue takes (mandatory), and delivers the routable ones of the same write', async () => {
    const exchange = uniqueName('ex')
    const queue = uniqueName('sinkq')
    admin.exchanges.push(exchange)
    admin.queues.push(queue)
    const sink = amqpSink({
      url: BROKER_URL,
      exchange,
      routingKeyField: 'key',
      declare: {
        exchange: { type: 'direct', durable: false },
        queue: { name: queue, durable: false, bindingKey: 'good' },
      },
    })
    const statuses: Promise<BatchStatus>[] = []
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source(
        'gen',
        generator({
          count: 6,
          batchSize: 1,
          record: (i) => ({ i, key: i % 3 === 0 ? 'nowhere' : 'good' }),
          onBatch: (receipt) => statuses.push(receipt.status),
        }),
      )
      .sink('bus', ['gen'], sink)
      .build()
    await topology.start()
    await topology.done
    expect(await Promise.all(statuses)).toEqual([
      'rejected',
      'delivered',
      'delivered',
      'rejected',
      'delivered',
      'delivered',
    ])
    expect(sink.counters).toMatchObject({ published: 6, confirmed: 4, returned: 2 })
    const held = await admin.drain(queue)
    expect(held.map((m) => (JSON.parse(m.content.toString()) as { i: number }).i)).toEqual([1, 2, 4, 5])
  })

  it('tells a returned message from a routable one with the same message-id still awaiting its confirm', async () => {
    // messageIdField on a field that repeats (several events per order), routed by another field:
    // the broker returns the unroutable one while the routable ones before it, persistent on a
    // durable queue, still await their confirms. Matched by id alone, the return used to mark the
    // oldest of those: a routable event was rejected and the unroutable one counted delivered (lost).
    const exchange = uniqueName('ex')
    const queue = uniqueName('sameid')
    admin.exchanges.push(exchange)
    admin.queues.push(queue)
    const sink = amqpSink({
      url: BROKER_URL,
      exchange,
      routingKeyField: 'key',
      messageIdField: 'order',
      declare: {
        exchange: { type: 'direct', durable: false },
        queue: { name: queue, durable: true, bindingKey: 'good' },
      },
    })
    await sink.start()
    try {
      const pad = 'x'.repeat(10_000)
      const routable = Array.from(
        { length: 200 },
        (_, n) => new LogEvent({ order: 'o-1', key: 'good', n, pad }),
      )
      const result = await sink.write(
        EventArray.from([...routable, new LogEvent({ order: 'o-1', key: 'nowhere', n: 200 })]),
      )
      expect(Array.isArray(result)).toBe(true)
      const statuses = (result as unknown[]).map((r) =>
        r === 'delivered' ? r : (r as Error).constructor.name,
      )
      expect(statuses).toEqual([...Array.from({ length: 200 }, () => 'delivered'), 'RejectError'])
      expect(sink.counters).toMatchObject({ published: 201, confirmed: 200, returned: 1 })
      expect(await admin.messageCount(queue)).toBe(200)
    } finally {
      await sink.stop()
    }
  })

  it('rejects an event whose routing key or message-id is longer than 255 bytes (it cannot be encoded), and delivers the others of the same write', async () => {
    const queue = uniqueName('long')
    admin.queues.push(queue)
    await admin.channel.assertQueue(queue, { durable: false })
    const sink = amqpSink({ url: BROKER_URL, routingKey: queue, routingKeyField: 'rk', messageIdField: 'id' })
    await sink.start()
    try {
      const result = await sink.write(
        new EventArray([
          new LogEvent({ n: 0, rk: queue }),
          new LogEvent({ n: 1, rk: 'k'.repeat(300) }),
          new LogEvent({ n: 2, id: 'i'.repeat(300) }),
          new LogEvent({ n: 3 }),
        ]),
      )
      const results = result as unknown[]
      expect(results[0]).toBe('delivered')
      expect(results[3]).toBe('delivered')
      for (const [i, field] of [
        [1, 'routingKey'],
        [2, 'messageId'],
      ] as const) {
        expect(results[i]).toBeInstanceOf(RejectError)
        expect((results[i] as RejectError).message).toMatch(
          new RegExp(
            `^amqp: message .* cannot be encoded, and no retry would change that: .*'${field}'.*255`,
          ),
        )
      }
      expect(sink.counters).toMatchObject({
        published: 2,
        confirmed: 2,
        unencodable: 2,
        nacked: 0,
        inFlight: 0,
      })
      const held = await admin.drain(queue)
      expect(held.map((m) => (JSON.parse(m.content.toString()) as { n: number }).n)).toEqual([0, 3])
    } finally {
      await sink.stop()
    }
  })

  it('a write that waited for room in the window and published nothing hands the room on: a write waiting behind it is not left waiting', async () => {
    // With maxInFlight 1, writes 2 and 3 wait for the confirm of write 1. The confirm wakes one
    // waiter; write 2 then publishes nothing (its routing key cannot be encoded), and write 3 used to
    // wait for a confirm that no message in flight would ever bring.
    const queue = uniqueName('room')
    admin.queues.push(queue)
    await admin.channel.assertQueue(queue, { durable: false })
    const sink = amqpSink({ url: BROKER_URL, routingKey: queue, routingKeyField: 'rk', maxInFlight: 1 })
    await sink.start()
    try {
      const writes = [
        sink.write(EventArray.of(new LogEvent({ n: 1 }))),
        sink.write(EventArray.of(new LogEvent({ n: 2, rk: 'k'.repeat(300) }))),
        sink.write(EventArray.of(new LogEvent({ n: 3 }))),
      ]
      const [first, second, third] = await Promise.all(writes)
      expect(first).toBeUndefined()
      expect((second as unknown[])[0]).toBeInstanceOf(RejectError)
      expect(third).toBeUndefined()
      expect(sink.counters).toMatchObject({ published: 2, confirmed: 2, unencodable: 1, inFlight: 0 })
    } finally {
      await sink.stop()
    }
  })

  it('never has more than maxInFlight messages unconfirmed, counted on the wire, when a whole window of confirms arrives at once', async () => {
    // Three writes of 40 events, maxInFlight 10: the first fills the window, the others wait. The
    // proxy passes confirms on only once every publish it saw is confirmed, in one chunk, so one
    // read of several confirms frees room while the three writes wait. Each woken write used to publish without looking again: the first took all
    // 10 slots, and the next two published one more each (12 unconfirmed).
    const queue = uniqueName('window')
    admin.queues.push(queue)
    await admin.channel.assertQueue(queue, { durable: false })
    const proxy = await confirmHoldingProxy()
    const maxInFlight = 10
    const sink = amqpSink({ url: proxy.url, routingKey: queue, maxInFlight, heartbeatSeconds: 0 })
    await sink.start()
    try {
      proxy.hold()
      const write = (w: number): Promise<unknown> =>
        sink.write(new EventArray(Array.from({ length: 40 }, (_, n) => new LogEvent({ w, n }))))
      expect(await Promise.all([write(1), write(2), write(3)])).toEqual([undefined, undefined, undefined])
      console.log(
        `confirm window: ${proxy.published} published, at most ${proxy.peakUnconfirmed} unconfirmed on the wire (maxInFlight ${maxInFlight})`,
      )
      expect(proxy.published).toBe(120)
      // A lower bound of what the sink had unconfirmed (see confirmHoldingProxy): on the code before, 11 or 12.
      expect(proxy.peakUnconfirmed).toBeLessThanOrEqual(maxInFlight)
      expect(sink.counters).toMatchObject({ published: 120, confirmed: 120, inFlight: 0 })
      expect(await admin.messageCount(queue)).toBe(120)
    } finally {
      await sink.stop()
      await proxy.close()
    }
  })

  it('rejects an event larger than maxMessageBytes without publishing it, and delivers the others of the same write', async () => {
    const queue = uniqueName('big')
    admin.queues.push(queue)
    await admin.channel.assertQueue(queue, { durable: false })
    const sink = amqpSink({ url: BROKER_URL, routingKey: queue, maxMessageBytes: 100 })
    await sink.start()
    try {
      const results = (await sink.write(
        new EventArray([
          new LogEvent({ n: 0 }),
          new LogEvent({ n: 1, pad: 'x'.repeat(100) }),
          new LogEvent({ n: 2 }),
        ]),
      )) as unknown[]
      expect(results[0]).toBe('delivered')
      expect(results[2]).toBe('delivered')
      expect(results[1]).toBeInstanceOf(RejectError)
      expect((results[1] as Error).message).toBe(
        "amqp: the event's message is 116 bytes, more than 100 (maxMessageBytes): the broker would close the channel on it",
      )
      expect(sink.counters).toMatchObject({ published: 2, confirmed: 2, tooLarge: 1, nacked: 0 })
      const held = await admin.drain(queue)
      expect(held.map((m) => (JSON.parse(m.content.toString()) as { n: number }).n)).toEqual([0, 2])
    } finally {
      await sink.stop()
    }
  })

  it("takes the broker's max_message_size once the broker closes the channel on a larger message: the retry rejects that event instead of looping, and the events beside it are delivered", async () => {
    const queue = uniqueName('huge')
    admin.queues.push(queue)
    await admin.channel.assertQueue(queue, { durable: false })
    // The broker here (RabbitMQ 3.10) keeps 3.x's default max_message_size, 128 MiB: a limit of
    // our own above it lets the broker decide.
    const brokerMax = 128 * 1024 * 1024
    const warnings: string[] = []
    const sink = amqpSink({
      url: BROKER_URL,
      routingKey: queue,
      maxMessageBytes: 2 * brokerMax,
      reconnectInitialDelayMs: 10,
      onWarning: (message) => warnings.push(message),
    })
    const records = [{ n: 0 }, { n: 1, pad: 'x'.repeat(brokerMax) }, { n: 2 }]
    // A source that resends its batch while it comes back errored, as a broker's redelivery does.
    const statuses: BatchStatus[] = []
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', {
        kind: 'resending',
        canAcknowledge: true,
        async run(context) {
          do statuses.push(await (await context.send(records)).status)
          while (statuses.at(-1) === 'errored' && statuses.length < 10)
        },
      })
      .sink('out', ['in'], sink)
      .build()
    await topology.start()
    await topology.done
    // The first attempt: the broker closed the channel on the large message, and the one
    // published after it went with it; the second: the large event is rejected, the rest delivered.
    expect(statuses).toEqual(['errored', 'rejected'])
    expect(sink.counters.tooLarge).toBe(1)
    expect(warnings.some((w) => w.includes(`at most ${brokerMax} bytes`))).toBe(true)
    const held = await admin.drain(queue)
    expect(new Set(held.map((m) => (JSON.parse(m.content.toString()) as { n: number }).n))).toEqual(
      new Set([0, 2]),
    )
  }, 60_000)

  it('closes the connection under a channel the broker closed, so a reconnect leaves none open', async () => {
    const exchange = uniqueName('gone')
    admin.exchanges.push(exchange)
    /** This process's open sockets to the broker. */
    const sockets = (): number =>
      (process as unknown as { _getActiveHandles(): unknown[] })
        ._getActiveHandles()
        .filter(
          (h) =>
            h instanceof Socket && !h.destroyed && h.remotePort === Number(new URL(BROKER_URL).port || 5672),
        ).length
    const before = sockets()
    const sink = amqpSink({
      url: BROKER_URL,
      exchange,
      declare: { exchange: { type: 'fanout', durable: false } },
      reconnectInitialDelayMs: 10,
      onWarning: () => {},
    })
    await sink.start()
    try {
      expect(sockets()).toBe(before + 1)
      // A publish to an exchange that is gone: the broker closes the channel (404), not the connection.
      await admin.channel.deleteExchange(exchange)
      const [result] = (await sink.write(new EventArray([new LogEvent({ n: 1 })]))) as unknown[]
      expect((result as Error).message).toMatch(/the broker did not confirm message/)
      await vi.waitFor(() => expect(sink.counters.reconnects).toBe(1), { timeout: 10_000, interval: 10 })
      await vi.waitFor(() => expect(sockets()).toBe(before + 1), { timeout: 5000, interval: 10 })
    } finally {
      await sink.stop()
    }
    await vi.waitFor(() => expect(sockets()).toBe(before), { timeout: 5000, interval: 10 })
  })

  it('warns once per failed reconnect when the setup fails (the exchange is gone), not also of a loss', async () => {
    const exchange = uniqueName('vanishing')
    await admin.channel.assertExchange(exchange, 'fanout', { durable: false })
    admin.exchanges.push(exchange)
    const warnings: string[] = []
    // No declaration: every setup checks the exchange, and fails on a 404 once it is gone.
    const sink = amqpSink({
      url: BROKER_URL,
      exchange,
      reconnectInitialDelayMs: 10,
      reconnectMaxDelayMs: 20,
      onWarning: (message) => warnings.push(message),
    })
    await sink.start()
    try {
      await admin.channel.deleteExchange(exchange)
      await sink.write(new EventArray([new LogEvent({ n: 1 })]))
      const failed = (): number => warnings.filter((w) => /reconnect attempt \d+ .* failed/.test(w)).length
      await vi.waitFor(() => expect(failed()).toBeGreaterThanOrEqual(3), { timeout: 10_000, interval: 10 })
      // The publish's loss, once; then each attempt's failure, once.
      expect(warnings.filter((w) => w.includes('lost the connection'))).toHaveLength(1)
      expect(warnings.filter((w) => /reconnect attempt 1 .* failed: .*NOT_FOUND/.test(w))).toHaveLength(1)
    } finally {
      await sink.stop()
    }
  })

  it('an event whose publish the broker refused (closing the channel) is errored naming the refusal, not only that the channel closed', async () => {
    // An internal exchange passes the start's check and refuses every publish (403). Each event of
    // the write was errored 'the broker did not confirm message …: channel closed', which is what
    // a retry, and in the end a dead letter, said of it; why was only in a warning.
    const exchange = await admin.refusingExchange()
    const sink = amqpSink({ url: BROKER_URL, exchange, reconnectInitialDelayMs: 10, onWarning: () => {} })
    await sink.start()
    try {
      const result = await sink.write(new EventArray([new LogEvent({ n: 1 }), new LogEvent({ n: 2 })]))
      expect(result).toHaveLength(2)
      for (const error of result as Error[]) {
        expect(error).toBeInstanceOf(RetryableError)
        expect(error.message).toMatch(
          new RegExp(
            `^amqp: the broker did not confirm message \\S+: the channel closed \\(Channel closed by server: 403 \\(ACCESS-REFUSED\\).*cannot publish to internal exchange '${exchange}'`,
          ),
        )
      }
    } finally {
      await sink.stop()
    }
  })

  it("names a channel's refusal only for the events published on that channel: a later channel's nack says its own reason", async () => {
    // The reason is kept per connection and channel: after a 404 closed the first channel and the
    // sink reconnected, an event the broker nacks on the new channel must not be told 'the channel
    // closed (... NOT_FOUND ...)', which would send whoever reads its retries after a gone exchange.
    const exchange = uniqueName('comeback')
    const queue = uniqueName('full')
    admin.exchanges.push(exchange)
    admin.queues.push(queue)
    await admin.channel.assertQueue(queue, {
      durable: false,
      arguments: { 'x-max-length': 0, 'x-overflow': 'reject-publish' },
    })
    await admin.channel.assertExchange(exchange, 'fanout', { durable: false })
    const sink = amqpSink({ url: BROKER_URL, exchange, reconnectInitialDelayMs: 10, onWarning: () => {} })
    await sink.start()
    try {
      await admin.channel.deleteExchange(exchange)
      const [refused] = (await sink.write(new EventArray([new LogEvent({ n: 1 })]))) as Error[]
      expect(refused?.message).toMatch(/the channel closed \(.*NOT_FOUND/)
      // Back, and bound to a queue that takes nothing: the next channel's publishes are nacked.
      await admin.channel.assertExchange(exchange, 'fanout', { durable: false })
      await admin.channel.bindQueue(queue, exchange, '')
      await vi.waitFor(() => expect(sink.counters.reconnects).toBe(1), { timeout: 10_000, interval: 10 })
      const [nacked] = (await sink.write(new EventArray([new LogEvent({ n: 2 })]))) as Error[]
      console.log(`after the refusal: '${refused?.message}'; on the next channel: '${nacked?.message}'`)
      expect(nacked).toBeInstanceOf(RetryableError)
      expect(nacked?.message).toMatch(/^amqp: the broker did not confirm message \S+: message nacked$/)
    } finally {
      await sink.stop()
    }
  })

  it('counts an event errored when the broker nacks its message (a full queue with reject-publish)', async () => {
    const queue = uniqueName('full')
    admin.queues.push(queue)
    await admin.channel.assertQueue(queue, {
      durable: false,
      arguments: { 'x-max-length': 3, 'x-overflow': 'reject-publish' },
    })
    const sink = amqpSink({ url: BROKER_URL, routingKey: queue })
    const statuses: Promise<BatchStatus>[] = []
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source(
        'gen',
        generator({ count: 5, batchSize: 1, onBatch: (receipt) => statuses.push(receipt.status) }),
      )
      .sink('bus', ['gen'], sink)
      .build()
    await topology.start()
    await topology.done
    expect(await Promise.all(statuses)).toEqual(['delivered', 'delivered', 'delivered', 'errored', 'errored'])
    expect(sink.counters).toMatchObject({ published: 5, confirmed: 3, nacked: 2, returned: 0 })
    expect(await admin.messageCount(queue)).toBe(3)
  })

  it('fails start with AMQP_DECLARATION_FAILED naming the exchange when it does not exist and is not declared', async () => {
    const exchange = uniqueName('missing')
    const sink = amqpSink({ url: BROKER_URL, exchange })
    const error = await sink.start().then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(AmqpError)
    expect((error as AmqpError).code).toBe('AMQP_DECLARATION_FAILED')
    expect((error as AmqpError).field).toBe('exchange')
    expect((error as AmqpError).message).toMatch(
      new RegExp(`^amqp \\(exchange\\): the exchange '${exchange}' cannot be published to: .*NOT_FOUND`),
    )
    await sink.stop()
  })

  it('fails start with AMQP_DECLARATION_FAILED naming declare.exchange when the exchange exists with another type', async () => {
    const exchange = uniqueName('fanout')
    await admin.channel.assertExchange(exchange, 'fanout', { durable: false })
    admin.exchanges.push(exchange)
    const sink = amqpSink({
      url: BROKER_URL,
      exchange,
      declare: { exchange: { type: 'topic', durable: false } },
    })
    const error: unknown = await sink.start().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(AmqpError)
    expect((error as AmqpError).code).toBe('AMQP_DECLARATION_FAILED')
    expect((error as AmqpError).field).toBe('declare.exchange')
    expect((error as AmqpError).message).toMatch(/PRECONDITION_FAILED/)
    await sink.stop()
  })

  it('fails start naming the virtual host when the broker refuses to open it (it does not exist, or the user has no permission on it)', async () => {
    // amqplib only says 'Expected ConnectionOpenOk; got <ConnectionClose channel:0>', the broker's
    // reason left out: nothing told that the vhost of the url was the matter.
    const vhost = uniqueName('no-vhost')
    const url = new URL(BROKER_URL)
    url.pathname = `/${vhost}`
    const sink = amqpSink({ url: url.toString() })
    const error = await sink.start().then(
      () => undefined,
      (thrown: unknown) => thrown,
    )
    expect(error).toBeInstanceOf(AmqpError)
    expect((error as AmqpError).code).toBe('AMQP_CONNECT_FAILED')
    expect((error as AmqpError).field).toBe('url')
    expect((error as AmqpError).message).toContain(
      `the broker refused to open the virtual host '${vhost}' (it does not exist or is stopped, the user has no permission on it, or the user's or the virtual host's connection limit is reached; the broker's log says which)`,
    )
  })

  it('fails start saying a connection limit may be the cause when the broker refuses to open the virtual host for it, not only a missing vhost or permission', async () => {
    // The broker refuses the Connection.Open of a user at its connection limit as it refuses a
    // missing vhost, and amqplib leaves its reason out of both: the error said the vhost did not
    // exist or the user had no permission on it, though it existed and the user had every one.
    const user = await brokerUser({ maxConnections: 0 })
    if (user === undefined) return // said by brokerUser: this broker cannot be given a second user
    try {
      const sink = amqpSink({ url: user.url })
      const error = await sink.start().then(
        () => undefined,
        (thrown: unknown) => thrown,
      )
      expect(error).toBeInstanceOf(AmqpError)
      expect((error as AmqpError).code).toBe('AMQP_CONNECT_FAILED')
      expect((error as AmqpError).message).toMatch(/the broker refused to open the virtual host '\/'/)
      expect((error as AmqpError).message).toMatch(/connection limit/)
    } finally {
      await user.remove()
    }
  }, 60_000) // rabbitmqctl takes seconds to make and delete the user

  it('fails start naming the server when the credentials are refused', async () => {
    const sink = amqpSink({ url: 'amqp://nobody:nope@127.0.0.1:5672' })
    await expect(sink.start()).rejects.toThrow(
      /amqp \(url\): cannot connect to amqp:\/\/nobody@127\.0\.0\.1:5672: .*ACCESS.REFUSED/,
    )
  })
})
