import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { AmqpError, amqpSink, amqpSource } from '@ackline/amqp'
import { type BatchStatus, EventArray, LogEvent, type RecordOutcome, RecordOutcomes } from '@ackline/core'
import { memory } from '@ackline/sinks'
import { generator } from '@ackline/sources'
import type { TcpProxy } from '@ackline/testkit'
import { type SourceContext, TopologyBuilder } from '@ackline/topology'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import {
  Admin,
  BROKER_URL,
  brokerAvailable,
  brokerProxy,
  closingBrokerProxy,
  hasHeartbeat,
  hasMethod,
  holdingBrokerProxy,
  Method,
  stallingBrokerProxy,
  uniqueName,
} from './broker.js'

const available = await brokerAvailable()

describe.skipIf(!available)('amqp connection loss (through a TCP proxy the test cuts)', () => {
  let admin: Admin
  let proxy: TcpProxy
  let throughProxy: string
  beforeAll(async () => {
    admin = await Admin.open()
    ;({ proxy, url: throughProxy } = await brokerProxy())
  })
  afterAll(async () => {
    await proxy?.close()
    await admin?.close()
  })

  it('source: reconnects, never acks an old delivery on the new channel, loses nothing, counts duplicates', async () => {
    const { queue } = await admin.queueWithDeadLetters()
    const N = 300
    await admin.publish(
      queue,
      Array.from({ length: N }, (_, n) => ({ n })),
      (n) => `m-${n}`,
    )
    const warnings: string[] = []
    const source = amqpSource({
      url: throughProxy,
      queue,
      prefetch: 25,
      batchSize: 10,
      reconnectInitialDelayMs: 20,
      onWarning: (message) => warnings.push(message),
    })
    let cuts = 0
    const sink = memory({
      // Cut twice mid-flow, each time once the source reported more acks. The first time the write
      // waits until the source reported the loss: the array is then delivered downstream but its
      // channel is dead, so its acks must not be sent (they are abandoned). The second cut races
      // the acks, as a real network failure does: acks written to the dying socket are lost and
      // the broker redelivers those messages (duplicates, never losses).
      beforeWrite: async () => {
        const acked = source.counters.acked
        if (cuts === 0 && acked >= 60) {
          cuts++
          proxy.cut()
          await vi.waitFor(() => expect(warnings.some((w) => w.includes('lost the connection'))).toBe(true), {
            timeout: 5000,
            interval: 5,
          })
        } else if (cuts === 1 && acked >= 180) {
          cuts++
          proxy.cut()
        }
      },
    })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    await topology.start()
    await vi.waitFor(
      async () => {
        expect(cuts).toBe(2)
        // The work may be through before the second cut lands: wait for its reconnect too.
        expect(source.counters.reconnects).toBe(2)
        expect(source.counters.inFlight).toBe(0)
        expect(await admin.messageCount(queue)).toBe(0)
        const seen = new Set(sink.events.map((f) => f.n as number))
        expect(seen.size).toBe(N)
      },
      { timeout: 20_000, interval: 50 },
    )
    await topology.stop()
    const c = source.counters
    const duplicates = sink.events.length - N
    console.log(`connection loss: counters ${JSON.stringify(c)}; duplicates in the sink: ${duplicates}`)
    expect(c.reconnects).toBe(2)
    // Acks sent on the dying socket of the second cut may be lost: then counted and redelivered.
    expect(c.acked).toBeGreaterThanOrEqual(N)
    // The array in hand at the first cut was delivered after its channel died, so its acks were
    // abandoned. How many events it holds depends on what the sink had queued (a sink takes every
    // queued array in one write), so only "some" is certain.
    expect(c.abandoned).toBeGreaterThan(0)
    // Every duplicate is a redelivery of something a dead channel held.
    expect(duplicates).toBeGreaterThan(0)
    expect(duplicates).toBeLessThanOrEqual(c.redelivered)
    const redeliveredInSink = sink.events.filter(
      (f) => (f._amqp as { redelivered: boolean }).redelivered,
    ).length
    expect(redeliveredInSink).toBe(c.redelivered)
    expect(warnings.some((w) => w.includes('lost the connection'))).toBe(true)
    expect(await admin.messageCount(queue)).toBe(0)
  })

  it('sink: a channel lost before the confirm makes its events errored; every delivered event is in the queue', async () => {
    const queue = uniqueName('sinkq')
    admin.queues.push(queue)
    await admin.channel.assertQueue(queue, { durable: false })
    const sink = amqpSink({
      url: throughProxy,
      routingKey: queue,
      maxInFlight: 50,
      reconnectInitialDelayMs: 20,
      onWarning: () => {},
    })
    const statuses: { first: number; size: number; status: Promise<BatchStatus> }[] = []
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source(
        'gen',
        generator({
          count: 2000,
          batchSize: 50,
          onBatch: (receipt, first, size) => statuses.push({ first, size, status: receipt.status }),
        }),
      )
      .sink('bus', ['gen'], sink, { retry: { attempts: 20, initialBackoffMs: 20, maxBackoffMs: 100 } })
      .build()
    await topology.start()
    await vi.waitFor(() => expect(sink.counters.confirmed).toBeGreaterThanOrEqual(300), {
      timeout: 10_000,
      interval: 1,
    })
    proxy.cut()
    await topology.done
    const settled = await Promise.all(statuses.map(async (s) => ({ ...s, status: await s.status })))
    const held = (await admin.drain(queue)).map(
      (m) => (JSON.parse(m.content.toString()) as { index: number }).index,
    )
    const inQueue = new Set(held)
    const delivered = settled.filter((s) => s.status === 'delivered')
    const errored = settled.filter((s) => s.status === 'errored')
    console.log(
      `sink connection loss: ${delivered.length} batches delivered, ${errored.length} errored; counters ${JSON.stringify(sink.counters)}`,
    )
    expect(sink.counters.reconnects).toBe(1)
    expect(errored.length + sink.counters.nacked).toBeGreaterThan(0)
    for (const batch of delivered) {
      for (let i = batch.first; i < batch.first + batch.size; i++) expect(inQueue.has(i)).toBe(true)
    }
    expect(settled.every((s) => s.status !== 'rejected')).toBe(true)
  })

  it('sink: a write waiting for the socket to drain settles errored once the connection is lost', async () => {
    const queue = uniqueName('drain')
    admin.queues.push(queue)
    await admin.channel.assertQueue(queue, { durable: false })
    const stalling = await stallingBrokerProxy()
    const sink = amqpSink({
      url: stalling.url,
      routingKey: queue,
      maxInFlight: 5000,
      // No reconnect during the test: the write must settle on the loss alone.
      reconnectInitialDelayMs: 60_000,
      onWarning: () => {},
    })
    await sink.start()
    try {
      stalling.stall()
      const body = 'x'.repeat(8 * 1024)
      const events = new EventArray(Array.from({ length: 3000 }, (_, n) => new LogEvent({ n, body })))
      let settled = false
      const writing = sink.write(events).finally(() => {
        settled = true
      })
      // 24 MB through a socket nobody reads: the write waits for it to drain.
      await vi.waitFor(() => expect(sink.counters.published).toBe(3000), { timeout: 10_000, interval: 10 })
      await new Promise((resolve) => setTimeout(resolve, 200))
      expect(settled).toBe(false)
      stalling.cut()
      await vi.waitFor(() => expect(settled).toBe(true), { timeout: 5000, interval: 10 })
      const results = (await writing) as unknown[]
      console.log(`drain then loss: counters ${JSON.stringify(sink.counters)}`)
      expect(results).toHaveLength(3000)
      expect(results.every((r) => r instanceof Error && r.name === 'RetryableError')).toBe(true)
      expect(sink.counters).toMatchObject({ confirmed: 0, nacked: 3000, inFlight: 0 })
    } finally {
      await sink.stop()
      await stalling.close()
    }
  })

  it('source and sink: an onWarning that throws, or returns a promise that rejects, neither crashes nor stops the reconnect', async () => {
    // The warning about a lost connection is given from amqplib's 'close' handler: a throw there
    // used to be an uncaught exception, and it cut short the reconnect (the source and the sink
    // stayed disconnected for good, and the topology's stop hung).
    const { queue } = await admin.queueWithDeadLetters()
    const { proxy: own, url } = await brokerProxy()
    const warned: string[] = []
    const fallbacks: string[] = []
    const onProcessWarning = (warning: Error): void => {
      fallbacks.push(warning.message)
    }
    process.on('warning', onProcessWarning)
    const source = amqpSource({
      url,
      queue,
      reconnectInitialDelayMs: 10,
      onWarning: (message) => {
        warned.push(message)
        throw new Error('the logger is down')
      },
    })
    const sink = amqpSink({
      url,
      routingKey: queue,
      reconnectInitialDelayMs: 10,
      // Untyped code may pass an async function.
      onWarning: (async (message: string) => {
        warned.push(message)
        throw new Error('the async logger is down')
      }) as unknown as (message: string) => void,
    })
    const out = memory()
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], out)
      .build()
    try {
      await topology.start()
      await sink.start()
      await admin.publish(queue, [{ n: 1 }])
      await vi.waitFor(() => expect(source.counters.acked).toBe(1), { timeout: 5000, interval: 5 })
      own.cut()
      await vi.waitFor(
        () => {
          expect(source.counters.reconnects).toBe(1)
          expect(sink.counters.reconnects).toBe(1)
        },
        { timeout: 5000, interval: 5 },
      )
      expect(warned.filter((w) => w.includes('lost the connection'))).toHaveLength(2)
      // What the callback could not take went to process.emitWarning, with why.
      await vi.waitFor(
        () => expect(fallbacks.filter((w) => w.includes('the onWarning of'))).toHaveLength(2),
        {
          timeout: 5000,
          interval: 5,
        },
      )
      expect(await sink.write(EventArray.of(new LogEvent({ n: 2 })))).toBeUndefined()
      await vi.waitFor(() => expect(out.events.map((e) => e.n)).toContain(2), { timeout: 5000, interval: 5 })
      // The ack of 1 may have died with the cut: 1 again is a duplicate, never a loss.
      expect(new Set(out.events.map((e) => e.n))).toEqual(new Set([1, 2]))
    } finally {
      process.off('warning', onProcessWarning)
      await topology.stop()
      await sink.stop()
      await own.close()
    }
  })

  it('sink and source: a stop whose connection dies before the broker answered its close still ends', async () => {
    // The client sends Connection.Close and waits for Close-Ok; a link that dies in between (the
    // proxy drops it on seeing the Close) closes the connection without that answer, and amqplib
    // never settles the promise of its close: stop and run used to wait for it for ever.
    const { queue } = await admin.queueWithDeadLetters()
    let closes = 0
    const { proxy: own, url } = await brokerProxy((direction, chunk) => {
      if (direction === 'up' && isConnectionClose(chunk)) {
        closes++
        throw new Error('the link dies with the close')
      }
    })
    const sink = amqpSink({ url, routingKey: queue, onWarning: () => {} })
    const stop = new AbortController()
    let opened!: () => void
    const first = new Promise<void>((resolve) => (opened = resolve))
    const source = amqpSource({ url, queue, onWarning: () => {} })
    try {
      await sink.start()
      expect(await sink.write(EventArray.of(new LogEvent({ n: 1 })))).toBeUndefined()
      await sink.stop()
      expect(closes).toBe(1)
      const run = source.run(delivering(stop.signal, opened))
      await first
      await vi.waitFor(() => expect(source.counters.acked).toBe(1), { timeout: 5000, interval: 5 })
      stop.abort()
      await expect(run).resolves.toBeUndefined()
      expect(closes).toBe(2)
    } finally {
      await own.close().catch(() => undefined)
    }
  })

  it('sink and source: a link that dies while the channel opens fails that attempt (start rejects, a reconnect is retried), never an uncaught exception', async () => {
    // amqplib hands the connection over once its handshake is done, and the channel opens after
    // that: a link that died in between (a broker restart, a proxy dropping it) made amqplib emit
    // 'error' on a connection nothing listened to yet, an uncaught exception, and the attempt
    // never settled. The proxy drops the link on the Channel.Open of connections 1 and 3.
    const { queue } = await admin.queueWithDeadLetters()
    const { proxy: own, url } = await brokerProxy((direction, chunk, connection) => {
      if (
        direction === 'up' &&
        (connection === 1 || connection === 3) &&
        hasMethod(chunk, Method.channelOpen)
      )
        throw new Error('the link dies as the channel opens')
    })
    const warnings: string[] = []
    const source = amqpSource({
      url,
      queue,
      reconnectInitialDelayMs: 10,
      onWarning: (message) => warnings.push(message),
    })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], memory())
      .build()
    try {
      const sink = amqpSink({ url, routingKey: queue })
      const error: unknown = await sink.start().catch((e: unknown) => e)
      expect(error).toBeInstanceOf(AmqpError)
      expect((error as AmqpError).code).toBe('AMQP_CONNECT_FAILED')
      expect((error as AmqpError).message).toMatch(
        /cannot connect to amqp:\/\/guest@127\.0\.0\.1:\d+: the connection was lost while its channel opened/,
      )
      await sink.stop()
      await topology.start()
      await admin.publish(queue, [{ n: 1 }])
      await vi.waitFor(() => expect(source.counters.acked).toBe(1), { timeout: 5000, interval: 5 })
      own.cut()
      await vi.waitFor(() => expect(source.counters.reconnects).toBe(1), { timeout: 10_000, interval: 10 })
      expect(own.connections).toBe(4)
      expect(warnings.filter((w) => /reconnect attempt 1 .* failed/.test(w))).toHaveLength(1)
    } finally {
      await topology.stop()
      await own.close().catch(() => undefined)
    }
  })

  it('source and sink: the warning of a lost connection says why it was lost (the broker closing it, the link breaking), not only that the channel closed', async () => {
    // amqplib closes the channel before it tells of the connection's close (with its reason), and
    // the channel's close was reported at once: every loss but a channel error was warned as
    // 'lost the connection to the broker (channel closed)'.
    const { queue, dead: published } = await admin.queueWithDeadLetters()
    const closing = await closingBrokerProxy()
    const warnings: string[] = []
    const options = {
      url: closing.url,
      reconnectInitialDelayMs: 10,
      onWarning: (message: string) => warnings.push(message),
    }
    const source = amqpSource({ ...options, queue })
    const sink = amqpSink({ ...options, routingKey: published })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    try {
      await topology.start()
      await admin.publish(queue, [{ n: 1 }])
      await vi.waitFor(() => expect(source.counters.acked).toBe(1), { timeout: 5000, interval: 5 })
      closing.forceClose('CONNECTION_FORCED - broker shutdown')
      await vi.waitFor(() => expect([source.counters.reconnects, sink.counters.reconnects]).toEqual([1, 1]), {
        timeout: 5000,
        interval: 5,
      })
      const forced =
        /lost the connection to the broker \(Connection closed: 320 \(CONNECTION-FORCED\) with message "CONNECTION_FORCED - broker shutdown"\)/
      expect(warnings.filter((w) => w.startsWith('in: ') && forced.test(w))).toHaveLength(1)
      expect(warnings.filter((w) => w.startsWith('amqp sink: ') && forced.test(w))).toHaveLength(1)
      closing.cut()
      await vi.waitFor(() => expect([source.counters.reconnects, sink.counters.reconnects]).toEqual([2, 2]), {
        timeout: 5000,
        interval: 5,
      })
      const broken = /lost the connection to the broker \((Unexpected close|read ECONNRESET)\)/
      expect(warnings.filter((w) => w.startsWith('in: ') && broken.test(w))).toHaveLength(1)
      expect(warnings.filter((w) => w.startsWith('amqp sink: ') && broken.test(w))).toHaveLength(1)
      expect(warnings.filter((w) => w.includes('(channel closed)'))).toEqual([])
    } finally {
      await topology.stop()
      await closing.close()
    }
  })

  it("sink: a failed reconnect attempt is warned of as 'amqp sink: …', as its loss was", async () => {
    // The loss read 'amqp sink: lost the connection …' and each failed attempt after it
    // 'amqp: reconnect attempt 1 … failed', so a filter on the sink's own warnings missed them.
    const { proxy: own, url } = await brokerProxy()
    const warnings: string[] = []
    const sink = amqpSink({
      url,
      reconnectInitialDelayMs: 10,
      reconnectMaxDelayMs: 20,
      onWarning: (message) => warnings.push(message),
    })
    try {
      await sink.start()
      await own.close()
      await vi.waitFor(
        () => expect(warnings.filter((w) => w.includes('reconnect attempt'))).not.toEqual([]),
        {
          timeout: 5000,
          interval: 5,
        },
      )
      console.log(`sink reconnect warnings: ${JSON.stringify(warnings)}`)
      expect(warnings.some((w) => w.startsWith('amqp sink: lost the connection'))).toBe(true)
      expect(warnings.filter((w) => !w.startsWith('amqp sink: '))).toEqual([])
    } finally {
      await sink.stop()
    }
  })

  it('source: copies to the dead-letter exchange lost with the connection are not warned as refused', async () => {
    // The proxy drops the link on the first copy the source publishes, before the broker sees it:
    // the copy's confirm fails with the channel ('channel closed'). amqplib fails it before the
    // source heard of the loss, so the source used to warn that the dead-letter exchange had
    // refused a copy. After the reconnect the message comes back and its copy goes through.
    const { queue } = await admin.queueWithDeadLetters()
    const { exchange: reasons, queue: withReasons } = await admin.reasonsExchange()
    let drops = 0
    const { proxy: own, url } = await brokerProxy((direction, chunk) => {
      if (direction === 'up' && drops === 0 && isBasicPublish(chunk)) {
        drops++
        throw new Error('the link dies with the copy')
      }
    })
    const warnings: string[] = []
    const source = amqpSource({
      url,
      queue,
      deadLetterExchange: reasons,
      reconnectInitialDelayMs: 10,
      onWarning: (message) => warnings.push(message),
    })
    const stop = new AbortController()
    const run = source.run({
      id: 'in',
      acknowledgements: true,
      signal: stop.signal,
      send: (records) =>
        Promise.resolve({
          batchId: undefined,
          status: Promise.resolve('rejected'),
          failure: { componentId: 'out', code: 'BAD', message: 'refused by the sink' },
          outcomes: Promise.resolve(RecordOutcomes.all('rejected', [...records].length)),
        }),
      sendEvents: () => Promise.resolve(),
    })
    try {
      await admin.publish(queue, [{ n: 1 }])
      await vi.waitFor(() => expect(source.counters.deadLettered).toBe(1), { timeout: 10_000, interval: 5 })
      stop.abort()
      await run
      console.log(
        `copy lost with the connection: ${JSON.stringify(source.counters)}; warnings ${JSON.stringify(warnings)}`,
      )
      expect(drops).toBe(1)
      expect(source.counters).toMatchObject({
        received: 2,
        abandoned: 1,
        rejected: 1,
        reconnects: 1,
        inFlight: 0,
      })
      expect(warnings.filter((w) => w.includes('lost the connection'))).toHaveLength(1)
      expect(warnings.filter((w) => w.includes('refused'))).toEqual([])
      expect((await admin.drain(withReasons)).length).toBe(1)
      expect(await admin.messageCount(queue)).toBe(0)
    } finally {
      stop.abort()
      await own.close().catch(() => undefined)
    }
  })

  it('sink and source: with heartbeats off, a stop ends when the broker stops answering (closeTimeoutMs)', async () => {
    // The proxy stops forwarding what the clients send and keeps their connections open: the
    // consumer's cancel and the Close never reach the broker, which says nothing more (no
    // heartbeats). Both used to wait for the answer for ever: the source's run and the sink's stop.
    const { queue } = await admin.queueWithDeadLetters()
    const stalling = await stallingBrokerProxy()
    const options = { url: stalling.url, heartbeatSeconds: 0, closeTimeoutMs: 200, onWarning: () => {} }
    const sink = amqpSink({ ...options, routingKey: queue })
    const source = amqpSource({ ...options, queue })
    const stop = new AbortController()
    try {
      await sink.start()
      expect(await sink.write(EventArray.of(new LogEvent({ n: 1 })))).toBeUndefined()
      const run = source.run(delivering(stop.signal))
      await vi.waitFor(() => expect(source.counters.acked).toBe(1), { timeout: 5000, interval: 5 })
      stalling.stall()
      stop.abort()
      await expect(run).resolves.toBeUndefined()
      await expect(sink.stop()).resolves.toBeUndefined()
      console.log(`silent broker at stop: source ${JSON.stringify(source.counters)}`)
      expect(source.counters).toMatchObject({ acked: 1, inFlight: 0 })
    } finally {
      await stalling.close()
    }
  })

  it('source: with heartbeats off, a stop ends when the broker answers the cancel and then confirms no dead-letter copy (closeTimeoutMs)', async () => {
    // The broker answers the consumer's cancel, then the proxy stops forwarding what the source
    // sends: the copy of the rejected message never reaches the broker and its confirm never
    // comes, and the ack of the delivered one waits for that confirm (an ack sent before it would
    // be dropped if the broker refused the copy). The run used to wait for it for ever, so
    // connection.close(), which closeTimeoutMs bounds, was never reached.
    const { queue } = await admin.queueWithDeadLetters()
    const { exchange: reasons, queue: withReasons } = await admin.reasonsExchange()
    await admin.publish(queue, [{ n: 1 }, { n: 2 }])
    const stalling = await stallingBrokerProxy(isBasicCancelOk)
    const source = amqpSource({
      url: stalling.url,
      queue,
      deadLetterExchange: reasons,
      heartbeatSeconds: 0,
      closeTimeoutMs: 200,
      onWarning: () => {},
    })
    const stop = new AbortController()
    // Each record's outcome, told once the broker answered the cancel: n 1 rejected, n 2 delivered.
    let tell!: () => void
    const answered = new Promise<void>((resolve) => (tell = resolve))
    const run = source.run({
      id: 'in',
      acknowledgements: true,
      signal: stop.signal,
      send: (records) => {
        const outcomes = [...records].map((r): RecordOutcome => (r.n === 1 ? 'rejected' : 'delivered'))
        return Promise.resolve({
          batchId: undefined,
          status: answered.then(
            (): BatchStatus => (outcomes.includes('rejected') ? 'rejected' : 'delivered'),
          ),
          failure: { componentId: 'out', code: 'BAD', message: 'refused by the sink' },
          outcomes: answered.then(() => RecordOutcomes.of(outcomes)),
        })
      },
      sendEvents: () => Promise.resolve(),
    })
    try {
      await vi.waitFor(() => expect(source.counters.inFlight).toBe(2), { timeout: 5000, interval: 5 })
      stop.abort()
      await vi.waitFor(() => expect(stalling.stalled).toBe(true), { timeout: 5000, interval: 5 })
      tell()
      await expect(run).resolves.toBeUndefined()
      console.log(`silent broker after the cancel, copy unconfirmed: ${JSON.stringify(source.counters)}`)
      // Nothing was acked or copied: the broker has both messages back (at least once, never lost).
      expect(source.counters).toMatchObject({
        received: 2,
        acked: 0,
        deadLettered: 0,
        abandoned: 2,
        inFlight: 0,
      })
      await stalling.close()
      await vi.waitFor(async () => expect(await admin.messageCount(queue)).toBe(2), {
        timeout: 5000,
        interval: 10,
      })
      expect(await admin.messageCount(withReasons)).toBe(0)
    } finally {
      stop.abort()
      await stalling.close()
    }
  })

  it('source: a stop while it reconnects cancels the consumer of the new channel, not the one of the dead channel', async () => {
    // The stop lands while the reconnect's consume awaits the broker's answer. The source kept one
    // consumer tag across generations, still the dead channel's then, and cancelled that one on the
    // new channel: the broker answered (a cancel of an unknown tag is no error) and the new
    // consumer stayed, taking messages after the stop. The proxy stalls once the broker answered
    // the stop's cancel, so the connection stays up at the broker: its consumers can be counted.
    const { queue } = await admin.queueWithDeadLetters()
    await admin.publish(queue, [{ n: 1 }])
    const stop = new AbortController()
    const stalling = await stallingBrokerProxy(isBasicCancelOk, (_, chunk, connection) => {
      if (connection === 2 && hasMethod(chunk, Method.basicConsume)) stop.abort()
    })
    const warnings: string[] = []
    const source = amqpSource({
      url: stalling.url,
      queue,
      heartbeatSeconds: 0,
      closeTimeoutMs: 200,
      reconnectInitialDelayMs: 10,
      onWarning: (message) => warnings.push(message),
    })
    try {
      const run = source.run(delivering(stop.signal))
      await vi.waitFor(() => expect(source.counters.acked).toBe(1), { timeout: 5000, interval: 5 })
      stalling.cut()
      await expect(run).resolves.toBeUndefined()
      console.log(`stop during the reconnect's consume: ${JSON.stringify(source.counters)}`)
      expect(stop.signal.aborted).toBe(true)
      expect(warnings.some((w) => w.includes('lost the connection'))).toBe(true)
      // The stop's cancel was answered; nothing the source sent after it reached the broker.
      expect(stalling.stalled).toBe(true)
      expect((await admin.channel.checkQueue(queue)).consumerCount).toBe(0)
    } finally {
      stop.abort()
      await stalling.close()
    }
  })

  it('source: messages the new consumer gets between a stop and its cancel go back to the queue once each', async () => {
    // The stop lands while the reconnect's consume awaits its answer, with messages waiting: the
    // broker delivers them right after its answer, before the stop's cancel. Each was nacked at
    // once, so the broker gave it straight back to the same consumer (not cancelled yet), which
    // nacked it again: every round counted as a delivery (the redelivered flag, a quorum queue's
    // x-delivery-count, which the source takes for the attempts made).
    const { queue } = await admin.queueWithDeadLetters()
    await admin.publish(queue, [{ n: 1 }])
    const stop = new AbortController()
    const stalling = await stallingBrokerProxy(undefined, (_, chunk, connection) => {
      if (connection === 2 && hasMethod(chunk, Method.basicConsume)) stop.abort()
    })
    const source = amqpSource({
      url: stalling.url,
      queue,
      reconnectInitialDelayMs: 200,
      onWarning: () => undefined,
    })
    try {
      const run = source.run(delivering(stop.signal))
      await vi.waitFor(() => expect(source.counters.acked).toBe(1), { timeout: 5000, interval: 5 })
      stalling.cut()
      // In the queue before the reconnect (200 ms away) consumes.
      await admin.publish(queue, [{ n: 2 }, { n: 3 }, { n: 4 }, { n: 5 }, { n: 6 }])
      await expect(run).resolves.toBeUndefined()
      console.log(`deliveries between the stop and its cancel: ${JSON.stringify(source.counters)}`)
      expect(stop.signal.aborted).toBe(true)
      const left = await admin.messageCount(queue)
      // Five, or six when the ack of the first was lost with the cut: nothing lost, nothing acked.
      expect(left).toBeGreaterThanOrEqual(5)
      expect(source.counters.acked).toBe(1)
      // The new consumer got each of them once (the case at hand), and sent each back once.
      expect(source.counters.received - source.counters.acked).toBe(left)
      expect(source.counters.nacked).toBe(left)
    } finally {
      stop.abort()
      await stalling.close()
    }
  })

  it('source: a stop while it reconnects, before its consume, starts no consumer on the new channel', async () => {
    // The stop lands while the reconnect's prefetch (basic.qos) awaits the broker's answer: the
    // setup went on to consume after the stop had cancelled, and that consumer took messages
    // until the connection closed.
    const { queue } = await admin.queueWithDeadLetters()
    await admin.publish(queue, [{ n: 1 }])
    const stop = new AbortController()
    let consumesAfterStop = 0
    const stalling = await stallingBrokerProxy(undefined, (_, chunk, connection) => {
      if (connection !== 2) return
      if (hasMethod(chunk, Method.basicQos)) stop.abort()
      if (stop.signal.aborted && hasMethod(chunk, Method.basicConsume)) consumesAfterStop++
    })
    const warnings: string[] = []
    const source = amqpSource({
      url: stalling.url,
      queue,
      reconnectInitialDelayMs: 10,
      onWarning: (message) => warnings.push(message),
    })
    try {
      const run = source.run(delivering(stop.signal))
      await vi.waitFor(() => expect(source.counters.acked).toBe(1), { timeout: 5000, interval: 5 })
      stalling.cut()
      await expect(run).resolves.toBeUndefined()
      console.log(`stop during the reconnect's prefetch: ${JSON.stringify(source.counters)}`)
      expect(stop.signal.aborted).toBe(true)
      expect(warnings.some((w) => w.includes('lost the connection'))).toBe(true)
      expect(consumesAfterStop).toBe(0)
    } finally {
      stop.abort()
      await stalling.close()
    }
  })

  it('source: a stop while a reconnect attempt is connecting leaves no connection behind once run returned', async () => {
    // The stop lands while the reconnect's handshake awaits the broker (the proxy stalls it). The
    // close found no connection yet and returned, and run with it, while the attempt went on until
    // connectTimeoutMs: its socket stayed open after the stop, and a broker that answered late got
    // a whole connection opened after it.
    const { queue } = await admin.queueWithDeadLetters()
    await admin.publish(queue, [{ n: 1 }])
    const stop = new AbortController()
    const stalling = await stallingBrokerProxy(undefined, (_, __, connection) => {
      if (connection !== 2 || stop.signal.aborted) return
      stalling.stall()
      stop.abort()
    })
    const source = amqpSource({
      url: stalling.url,
      queue,
      reconnectInitialDelayMs: 10,
      connectTimeoutMs: 60_000,
      onWarning: () => undefined,
    })
    try {
      const run = source.run(delivering(stop.signal))
      await vi.waitFor(() => expect(source.counters.acked).toBe(1), { timeout: 5000, interval: 5 })
      stalling.cut()
      await expect(run).resolves.toBeUndefined()
      expect(stop.signal.aborted).toBe(true)
      // The attempt's socket is closed by the stop, not by connectTimeoutMs (60 s).
      await vi.waitFor(() => expect(stalling.open).toBe(0), { timeout: 5000, interval: 5 })
    } finally {
      stop.abort()
      await stalling.close()
    }
  })

  it('source: a stop while the first connect gets no answer (a server that accepts and never speaks) ends the run at once', async () => {
    const silent = await silentServer()
    try {
      const stop = new AbortController()
      // The default connect timeout (10 s) is longer than the test's: only the stop can end the run.
      const source = amqpSource({ url: `amqp://guest:guest@${silent.address}`, queue: 'unused' })
      const run = source.run({
        id: 'in',
        acknowledgements: true,
        signal: stop.signal,
        send: () => Promise.reject(new Error('unused')),
        sendEvents: () => Promise.resolve(),
      })
      await silent.accepted
      stop.abort()
      await expect(run).resolves.toBeUndefined()
    } finally {
      await silent.close()
    }
  })

  it('sink: start fails naming connectTimeoutMs when the server accepts and never answers', async () => {
    const silent = await silentServer()
    try {
      const sink = amqpSink({ url: `amqp://guest:secret@${silent.address}`, connectTimeoutMs: 200 })
      const error: unknown = await sink.start().catch((e: unknown) => e)
      expect(error).toBeInstanceOf(AmqpError)
      expect((error as AmqpError).code).toBe('AMQP_CONNECT_FAILED')
      expect((error as AmqpError).message).toMatch(
        /cannot connect to amqp:\/\/guest@127\.0\.0\.1:\d+: the server did not complete the AMQP handshake within 200 ms \(connectTimeoutMs\)/,
      )
      expect((error as AmqpError).message).not.toContain('secret')
    } finally {
      await silent.close()
    }
  })

  it('source: a reconnect attempt the server never answers fails after connectTimeoutMs and the next one reconnects', async () => {
    const { queue } = await admin.queueWithDeadLetters()
    // Forwards to the broker, except the one connection after the cut, which it holds without a word.
    const broker = new URL(BROKER_URL)
    const open = new Set<Socket>()
    let connections = 0
    const server: Server = createServer((client) => {
      open.add(client)
      client.on('close', () => open.delete(client)).on('error', () => undefined)
      if (++connections === 2) return
      const upstream = createConnection({ host: broker.hostname, port: Number(broker.port || 5672) })
      open.add(upstream)
      upstream.on('close', () => open.delete(upstream)).on('error', () => client.destroy())
      client.on('close', () => upstream.destroy())
      upstream.on('close', () => client.destroy())
      client.pipe(upstream)
      upstream.pipe(client)
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as { port: number }
    const warnings: string[] = []
    const source = amqpSource({
      url: `${broker.protocol}//${broker.username}:${broker.password}@127.0.0.1:${port}${broker.pathname}`,
      queue,
      reconnectInitialDelayMs: 10,
      // Long enough that a loaded machine completes a handshake the proxy forwards within it.
      connectTimeoutMs: 1000,
      onWarning: (message) => warnings.push(message),
    })
    const out = memory()
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], out)
      .build()
    try {
      await topology.start()
      await admin.publish(queue, [{ n: 1 }])
      await vi.waitFor(() => expect(source.counters.acked).toBe(1), { timeout: 5000, interval: 5 })
      for (const socket of open) socket.destroy()
      await vi.waitFor(() => expect(source.counters.reconnects).toBe(1), { timeout: 10_000, interval: 10 })
      expect(connections).toBeGreaterThanOrEqual(3)
      expect(
        warnings.some((w) => /reconnect attempt 1 .* failed: .*within 1000 ms \(connectTimeoutMs\)/.test(w)),
      ).toBe(true)
      await admin.publish(queue, [{ n: 2 }])
      // An ack is not confirmed: one the cut took before the broker read it has n 1 delivered
      // again after the reconnect (at least once), so wait for n 2 itself, not for two acks.
      await vi.waitFor(() => expect(out.events.map((e) => e.n)).toContain(2), { timeout: 5000, interval: 5 })
      expect(new Set(out.events.map((e) => e.n))).toEqual(new Set([1, 2]))
    } finally {
      await topology.stop()
      for (const socket of open) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  })

  it.each([
    ['opening the channel', Method.connectionOpen],
    ['its consume', Method.basicQos],
  ])(
    'source: with heartbeats off, a reconnect the broker stops answering after the handshake (%s) fails after connectTimeoutMs and the next one reconnects',
    async (_, stallAfter) => {
      // The proxy passes on the reconnect's chunk holding `stallAfter` (the broker answers it), then
      // nothing more the source sends: the socket's timeout ends with the handshake and no heartbeat
      // comes, so the attempt waited for the next answer for ever: no error, no retry, no messages.
      const { queue } = await admin.queueWithDeadLetters()
      await admin.publish(queue, [{ n: 1 }])
      const stalling = await stallingBrokerProxy(undefined, (__, chunk, connection) => {
        if (connection === 2 && !stalling.stalled && hasMethod(chunk, stallAfter)) stalling.stall()
      })
      const warnings: string[] = []
      const source = amqpSource({
        url: stalling.url,
        queue,
        heartbeatSeconds: 0,
        reconnectInitialDelayMs: 10,
        // Long enough that a loaded machine completes a handshake the proxy forwards within it.
        connectTimeoutMs: 1000,
        closeTimeoutMs: 200,
        onWarning: (message) => warnings.push(message),
      })
      const out = memory()
      const topology = new TopologyBuilder({ acknowledgements: true })
        .source('in', source)
        .sink('out', ['in'], out)
        .build()
      try {
        await topology.start()
        await vi.waitFor(() => expect(source.counters.acked).toBe(1), { timeout: 5000, interval: 5 })
        stalling.cut()
        await vi.waitFor(() => expect(source.counters.reconnects).toBe(1), { timeout: 10_000, interval: 10 })
        console.log(`reconnect stalled after the handshake: ${JSON.stringify(warnings)}`)
        expect(stalling.stalled).toBe(true)
        expect(
          warnings.some((w) =>
            /reconnect attempt 1 .* failed: the broker did not answer the setup after the handshake .*within 1000 ms \(connectTimeoutMs\)/.test(
              w,
            ),
          ),
        ).toBe(true)
        await admin.publish(queue, [{ n: 2 }])
        await vi.waitFor(() => expect(out.events.map((e) => e.n)).toContain(2), {
          timeout: 5000,
          interval: 5,
        })
      } finally {
        await topology.stop()
        await stalling.close()
      }
    },
  )

  it('source: with heartbeats off, a stop while a reconnect waits for its channel to open leaves no socket or timer of it once run returned', async () => {
    // The reconnect's handshake completes, then the broker gets nothing more (its channel's open
    // waits). The stop's close waited closeTimeoutMs for the attempt and returned, and run with
    // it, while the attempt kept its socket and its timer until connectTimeoutMs (60 s here).
    const { queue } = await admin.queueWithDeadLetters()
    await admin.publish(queue, [{ n: 1 }])
    const stop = new AbortController()
    const stalling = await stallingBrokerProxy(undefined, (_, chunk, connection) => {
      if (connection === 2 && !stalling.stalled && hasMethod(chunk, Method.connectionOpen)) stalling.stall()
    })
    const port = Number(new URL(stalling.url).port)
    const sockets: Socket[] = []
    const onSocket = (message: unknown): void => {
      const { socket } = message as { socket: Socket }
      socket.once('connect', () => {
        if (socket.remotePort === port) sockets.push(socket)
      })
    }
    subscribe('net.client.socket', onSocket)
    const source = amqpSource({
      url: stalling.url,
      queue,
      heartbeatSeconds: 0,
      reconnectInitialDelayMs: 10,
      connectTimeoutMs: 60_000,
      closeTimeoutMs: 200,
      onWarning: () => undefined,
    })
    try {
      const run = source.run(delivering(stop.signal))
      await vi.waitFor(() => expect(source.counters.acked).toBe(1), { timeout: 5000, interval: 5 })
      stalling.cut()
      // amqplib clears the socket's timeout once the handshake is done: the channel's open is next.
      await vi.waitFor(
        () => {
          expect(stalling.stalled).toBe(true)
          expect(sockets[1]?.timeout).toBe(0)
        },
        { timeout: 5000, interval: 5 },
      )
      stop.abort()
      await expect(run).resolves.toBeUndefined()
      expect(sockets).toHaveLength(2)
      // Cut by the stop, not by connectTimeoutMs.
      expect(sockets[1]?.destroyed).toBe(true)
    } finally {
      stop.abort()
      unsubscribe('net.client.socket', onSocket)
      await stalling.close()
    }
  })

  it('sink: with heartbeats off, start fails after connectTimeoutMs when the broker stops answering after the handshake', async () => {
    // The first connect's handshake completes, then nothing the sink sends reaches the broker:
    // start waited for the channel to open for ever.
    const stalling = await stallingBrokerProxy(undefined, (_, chunk) => {
      if (!stalling.stalled && hasMethod(chunk, Method.connectionOpen)) stalling.stall()
    })
    // The sink's own socket (the proxy, which stopped reading it, cannot tell it closed).
    const port = Number(new URL(stalling.url).port)
    const sockets: Socket[] = []
    const onSocket = (message: unknown): void => {
      const { socket } = message as { socket: Socket }
      socket.once('connect', () => {
        if (socket.remotePort === port) sockets.push(socket)
      })
    }
    subscribe('net.client.socket', onSocket)
    try {
      const sink = amqpSink({
        url: stalling.url,
        heartbeatSeconds: 0,
        connectTimeoutMs: 1000,
        closeTimeoutMs: 200,
      })
      const error: unknown = await sink.start().catch((e: unknown) => e)
      expect(error).toBeInstanceOf(AmqpError)
      expect((error as AmqpError).code).toBe('AMQP_CONNECT_FAILED')
      expect((error as AmqpError).message).toMatch(
        /cannot connect to amqp:\/\/.*: the broker did not answer the setup after the handshake .*within 1000 ms \(connectTimeoutMs\)/,
      )
      expect(stalling.stalled).toBe(true)
      // The attempt's socket is cut, not left open.
      expect(sockets).toHaveLength(1)
      expect(sockets[0]?.destroyed).toBe(true)
    } finally {
      unsubscribe('net.client.socket', onSocket)
      await stalling.close()
    }
  })

  it('sink: with heartbeats on, a broker slower to answer the setup than connectTimeoutMs is waited for: start succeeds', async () => {
    // The proxy holds the broker's answers from the channel's Open-Ok on, and lets them through
    // once the sink sent a heartbeat: it waited half a heartbeat interval (500 ms) at least with
    // nothing to send, past connectTimeoutMs (100 ms), and got no answer. A heartbeat timeout
    // takes two intervals without a word from the broker: the sink is still waiting. The setup's
    // bound failed such a start, though heartbeats catch a broker that went silent.
    const held = await holdingBrokerProxy(
      (chunk) => hasMethod(chunk, Method.channelOpenOk),
      (direction, chunk) => direction === 'up' && hasHeartbeat(chunk),
    )
    const sink = amqpSink({ url: held.url, heartbeatSeconds: 1, connectTimeoutMs: 100, closeTimeoutMs: 200 })
    try {
      await expect(sink.start()).resolves.toBeUndefined()
      expect(held.state).toBe('released')
    } finally {
      await sink.stop()
      await held.close()
    }
  })

  it('sink: with heartbeats on, start fails by the heartbeat timeout (not connectTimeoutMs) when the broker goes silent after the handshake', async () => {
    // Nothing the broker sends from the channel's Open-Ok on reaches the sink (its heartbeats neither).
    const held = await holdingBrokerProxy(
      (chunk) => hasMethod(chunk, Method.channelOpenOk),
      () => false,
    )
    try {
      const sink = amqpSink({
        url: held.url,
        heartbeatSeconds: 1,
        connectTimeoutMs: 100,
        closeTimeoutMs: 200,
      })
      const error: unknown = await sink.start().catch((e: unknown) => e)
      expect(held.state).toBe('holding')
      expect(error).toBeInstanceOf(AmqpError)
      expect((error as AmqpError).code).toBe('AMQP_CONNECT_FAILED')
      expect((error as AmqpError).message).toMatch(
        /cannot connect to amqp:\/\/.*: the connection was lost while its channel opened: Heartbeat timeout/,
      )
    } finally {
      await held.close()
    }
  })

  it("sink: a url's own heartbeat=0 turns heartbeats off whatever heartbeatSeconds says: the setup is bounded by connectTimeoutMs", async () => {
    const held = await holdingBrokerProxy(
      (chunk) => hasMethod(chunk, Method.channelOpenOk),
      () => false,
    )
    try {
      const url = new URL(held.url)
      url.searchParams.set('heartbeat', '0')
      // heartbeatSeconds is left at its default, 15.
      const sink = amqpSink({ url: url.toString(), connectTimeoutMs: 300, closeTimeoutMs: 200 })
      const error: unknown = await sink.start().catch((e: unknown) => e)
      expect(held.state).toBe('holding')
      expect(error).toBeInstanceOf(AmqpError)
      expect((error as AmqpError).message).toMatch(
        /: the broker did not answer the setup after the handshake .*within 300 ms \(connectTimeoutMs\)/,
      )
    } finally {
      await held.close()
    }
  })
})

/**
 * The run context of source `in` that the runtime would give it with one acknowledging sink that
 * delivers every record of every send at once; `onSend`, if given, is called at each send first.
 */
function delivering(signal: AbortSignal, onSend?: () => void): SourceContext {
  return {
    id: 'in',
    acknowledgements: true,
    signal,
    send: (records) => {
      onSend?.()
      return Promise.resolve({
        batchId: undefined,
        status: Promise.resolve('delivered'),
        failure: undefined,
        outcomes: Promise.resolve(RecordOutcomes.all('delivered', [...records].length)),
      })
    },
    sendEvents: () => Promise.resolve(),
  }
}

/** Whether a chunk the client sent holds an AMQP Connection.Close frame (method frame, channel 0, class 10, method 50). */
function isConnectionClose(chunk: Buffer): boolean {
  for (let i = 0; i + 11 <= chunk.length; i++) {
    if (chunk[i] === 1 && chunk.readUInt16BE(i + 1) === 0 && chunk.readUInt32BE(i + 7) === 0x000a0032)
      return true
  }
  return false
}

/** A TCP server that accepts connections and never says a word (a proxy with no backend). */
async function silentServer(): Promise<{ address: string; accepted: Promise<void>; close(): Promise<void> }> {
  const sockets = new Set<Socket>()
  let accepted!: () => void
  const first = new Promise<void>((resolve) => (accepted = resolve))
  const server = createServer((socket) => {
    sockets.add(socket)
    socket.on('error', () => undefined)
    accepted()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  return {
    address: `127.0.0.1:${port}`,
    accepted: first,
    close: () => {
      for (const socket of sockets) socket.destroy()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** Whether a chunk the client sent holds an AMQP Basic.Publish frame (method frame, class 60, method 40). */
function isBasicPublish(chunk: Buffer): boolean {
  for (let i = 0; i + 11 <= chunk.length; i++) {
    if (chunk[i] === 1 && chunk.readUInt32BE(i + 7) === 0x003c0028) return true
  }
  return false
}

/** Whether a chunk the broker sent holds an AMQP Basic.Cancel-Ok frame (method frame, class 60, method 31). */
function isBasicCancelOk(chunk: Buffer): boolean {
  for (let i = 0; i + 11 <= chunk.length; i++) {
    if (chunk[i] === 1 && chunk.readUInt32BE(i + 7) === 0x003c001f) return true
  }
  return false
}
