import { createHash } from 'node:crypto'
import { EventArray, type JsonObject, LogEvent, RecordId } from '@ackline/core'
import { jetstream, jetstreamSink } from '@ackline/nats'
import { generator } from '@ackline/sources'
import { tcpProxy } from '@ackline/testkit'
import { TopologyBuilder } from '@ackline/topology'
import { remap, route } from '@ackline/transforms'
import { MsgHdrsImpl } from '@nats-io/transport-node'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  NATS_HOST,
  NATS_PORT,
  NATS_URL,
  NatsAdmin,
  skipWithoutNats,
  uniqueName,
  until,
} from './support/natsFixture.js'

const skip = await skipWithoutNats('JetStreamSink.test.ts')

/** The default Nats-Msg-Id of a payload from `origin` on `subject`: `<origin>:<22 characters of base64url of the SHA-256 of subject, LF, payload>`. */
const defaultId = (origin: string, subject: string, payload: JsonObject): string =>
  `${origin}:${createHash('sha256')
    .update(`${subject}\n${JSON.stringify(payload)}`)
    .digest('base64url')
    .slice(0, 22)}`

/** Runs generator → jetstream sink to the end; returns the batches' statuses and the sink. */
async function runInto(
  subject: string,
  count: number,
  record: (i: number) => JsonObject,
  msgId?: (n: number) => string,
  concurrency?: number,
) {
  const sink = jetstreamSink({
    servers: NATS_URL,
    subject,
    ...(msgId !== undefined ? { msgId: (event) => msgId(event.get('n') as number) } : {}),
  })
  const statuses: Promise<string>[] = []
  const topology = new TopologyBuilder({ acknowledgements: true })
    .source(
      'gen',
      generator({ count, batchSize: 7, record, onBatch: (receipt) => statuses.push(receipt.status) }),
    )
    .sink('out', ['gen'], sink, concurrency === undefined ? {} : { concurrency })
    .build()
  await topology.start()
  await topology.done
  return { statuses: await Promise.all(statuses), sink }
}

describe.skipIf(skip)('jetstream sink against a NATS server', () => {
  let admin: NatsAdmin
  beforeAll(async () => {
    admin = await NatsAdmin.open()
  })
  afterAll(async () => {
    await admin?.close()
  })

  it('delivers an event only once the stream stored it: the stream holds every event (in order with one write at a time)', async () => {
    const stream = await admin.stream('SINK')
    const { statuses, sink } = await runInto(`${stream}.out`, 50, (n) => ({ n, text: `event ${n}` }))
    expect(new Set(statuses)).toEqual(new Set(['delivered']))
    const held = await admin.contents(stream)
    // Several writes are in flight (the sink's default concurrency): messages of different writes interleave.
    expect(held.map((m) => JSON.parse(m.data) as { n: number }).sort((a, b) => a.n - b.n)).toEqual(
      Array.from({ length: 50 }, (_, n) => ({ n, text: `event ${n}` })),
    )
    const ordered = await admin.stream('ORDERED')
    await runInto(`${ordered}.out`, 30, (n) => ({ n }), undefined, 1)
    expect((await admin.contents(ordered)).map((m) => (JSON.parse(m.data) as { n: number }).n)).toEqual(
      Array.from({ length: 30 }, (_, n) => n),
    )
    expect(sink.counters).toMatchObject({ published: 50, duplicates: 0, failed: 0, inFlight: 0 })
  })

  it('counts a PubAck marked duplicate as delivered, and the stream holds each message id once', async () => {
    const stream = await admin.stream('DUP')
    const { statuses, sink } = await runInto(
      `${stream}.out`,
      20,
      (n) => ({ n }),
      (n) => `id-${n % 10}`,
    )
    expect(new Set(statuses)).toEqual(new Set(['delivered']))
    const held = await admin.contents(stream)
    expect(held.map((m) => m.msgId).sort()).toEqual(Array.from({ length: 10 }, (_, n) => `id-${n}`))
    expect(sink.counters).toMatchObject({ published: 10, duplicates: 10 })
  })

  it("takes the message id from a jetstream source's metadata and leaves the metadata out of the payload", async () => {
    const stream = await admin.stream('META')
    const record = (i: number): JsonObject => ({
      n: i % 5,
      _nats: { stream: 'UP', streamSequence: (i % 5) + 1 },
    })
    const { sink } = await runInto(`${stream}.out`, 10, record)
    const held = await admin.contents(stream)
    expect(held.map((m) => [m.msgId, JSON.parse(m.data)])).toEqual(
      Array.from({ length: 5 }, (_, n) => [defaultId(`UP:${n + 1}`, `${stream}.out`, { n }), { n }]),
    )
    expect(sink.counters.duplicates).toBe(5)
  })

  it('a stream made again (its sequences start over) is not taken for the one before: its messages are stored, not dropped as duplicates', async () => {
    // The default Nats-Msg-Id was <stream>:<sequence>, and a stream deleted and made again (to
    // change its storage or retention) numbers from 1 again: within the duplicate window (2 min)
    // the sink's stream took each new message for the old one with that sequence, answered
    // 'duplicate', and the sink counted it delivered: acked at the source, stored nowhere.
    const up = uniqueName('UP')
    const down = await admin.stream('DOWN')
    const runOnce = async (payloads: string[]) => {
      await admin.jsm.streams.add({ name: up, subjects: [`${up}.>`] })
      await admin.publish(`${up}.in`, payloads)
      const source = jetstream({ servers: NATS_URL, stream: up, consumer: 'c', onWarning: () => {} })
      const sink = jetstreamSink({ servers: NATS_URL, subject: `${down}.out` })
      const topology = new TopologyBuilder({ acknowledgements: true })
        .source('in', source)
        .sink('out', ['in'], sink)
        .build()
      await topology.start()
      try {
        await until('every message acked', () => source.counters.acked === payloads.length)
      } finally {
        await topology.stop()
        await admin.jsm.streams.delete(up)
      }
      return sink.counters
    }
    expect(await runOnce(['{"n":1}', '{"n":2}'])).toMatchObject({ published: 2, duplicates: 0 })
    const again = await runOnce(['{"n":3}', '{"n":4}'])
    const held = (await admin.contents(down)).map((m) => JSON.parse(m.data) as { n: number })
    console.log(
      `stream made again: the second run ${JSON.stringify(again)}, the sink's stream holds ${JSON.stringify(held)}`,
    )
    expect(held.map((m) => m.n)).toEqual([1, 2, 3, 4])
    expect(again).toMatchObject({ published: 2, duplicates: 0 })
  })

  it("takes the message id from the record's identity (RecordId) before a jetstream source's, and leaves it out of the payload", async () => {
    const stream = await admin.stream('RECID')
    const record = (i: number): JsonObject =>
      RecordId.set({ n: i % 4, _nats: { stream: 'UP', streamSequence: i + 1 } }, `rec-${i % 4}`)
    const { sink } = await runInto(`${stream}.out`, 8, record)
    const held = await admin.contents(stream)
    expect(held.map((m) => [m.msgId, JSON.parse(m.data)]).sort()).toEqual(
      Array.from({ length: 4 }, (_, n) => [defaultId(`rec-${n}`, `${stream}.out`, { n }), { n }]),
    )
    expect(sink.counters).toMatchObject({ published: 4, duplicates: 4 })
  })

  it('events split from one record (the same _recordId, or the same _nats metadata) but different in content are all stored, not dropped as duplicates of the first', async () => {
    // The default Nats-Msg-Id was the origin alone: children of one record (a remap that splits a
    // message into lines) shared it, the stream kept the first and answered 'duplicate' for the
    // others, and the sink counted them delivered: acked at the source, stored nowhere.
    const stream = await admin.stream('SPLIT')
    const sink = jetstreamSink({ servers: NATS_URL, subject: `${stream}.out` })
    await sink.start()
    const origin = { stream: 'UP', streamSequence: 7, timestampMs: 1_700_000_000_000 }
    const result = await sink.write(
      EventArray.of(
        new LogEvent(RecordId.set({ message: 'a' }, 'rec-1')),
        new LogEvent(RecordId.set({ message: 'b' }, 'rec-1')),
        new LogEvent(RecordId.set({ message: 'c' }, 'rec-1')),
        new LogEvent({ message: 'x', _nats: { ...origin } }),
        new LogEvent({ message: 'y', _nats: { ...origin } }),
      ),
    )
    await sink.stop()
    expect(result).toBeUndefined()
    const held = await admin.contents(stream)
    expect(held.map((m) => JSON.parse(m.data).message)).toEqual(['a', 'b', 'c', 'x', 'y'])
    expect(held.map((m) => m.msgId)).toEqual([
      defaultId('rec-1', `${stream}.out`, { message: 'a' }),
      defaultId('rec-1', `${stream}.out`, { message: 'b' }),
      defaultId('rec-1', `${stream}.out`, { message: 'c' }),
      defaultId('UP:7:1700000000000', `${stream}.out`, { message: 'x' }),
      defaultId('UP:7:1700000000000', `${stream}.out`, { message: 'y' }),
    ])
    expect(sink.counters).toMatchObject({ published: 5, duplicates: 0 })
  })

  it('one event fanned out to two sinks on two subjects of one stream is stored on each subject, not dropped as a duplicate of the other', async () => {
    // JetStream drops a repeated Nats-Msg-Id stream-wide, whatever the subject: with the id of the
    // origin and the payload alone, the second sink's copy (an error routed to `<stream>.errors`
    // besides everything to `<stream>.all`) was answered 'duplicate' and counted delivered.
    const stream = await admin.stream('FANOUT')
    const all = jetstreamSink({ servers: NATS_URL, subject: `${stream}.all` })
    const errors = jetstreamSink({ servers: NATS_URL, subject: `${stream}.errors` })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source(
        'in',
        generator({
          count: 2,
          record: (n) => RecordId.set({ n, level: n === 0 ? 'error' : 'info' }, `rec-${n}`),
        }),
      )
      .transform('split', ['in'], route({ errors: (e) => e.get('level') === 'error' }))
      .sink('all', ['in'], all)
      .sink('errors', ['split.errors'], errors)
      .build()
    await topology.start()
    await topology.done
    const held = (await admin.contents(stream)).map((m) => [m.subject, JSON.parse(m.data).n])
    console.log(
      `fan-out: all ${JSON.stringify(all.counters)}, errors ${JSON.stringify(errors.counters)}, stream ${JSON.stringify(held)}`,
    )
    expect(held.sort()).toEqual([
      [`${stream}.all`, 0],
      [`${stream}.all`, 1],
      [`${stream}.errors`, 0],
    ])
    expect(all.counters.duplicates + errors.counters.duplicates).toBe(0)
  })

  it('a remap that splits a message a jetstream source read into lines: every line is stored', async () => {
    const up = await admin.stream('LINESUP')
    const down = await admin.stream('LINESDOWN')
    await admin.publish(`${up}.in`, ['{"lines":["one","two","three"]}', '{"lines":["four"]}'])
    const source = jetstream({ servers: NATS_URL, stream: up, consumer: 'c', onWarning: () => {} })
    const sink = jetstreamSink({ servers: NATS_URL, subject: `${down}.out` })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .transform(
        'split',
        ['in'],
        remap((e) => {
          const { lines, ...rest } = e.fields
          return (lines as string[]).map((line) => ({ ...rest, message: line }))
        }),
      )
      .sink('out', ['split'], sink)
      .build()
    await topology.start()
    try {
      await until('every message acked', () => source.counters.acked === 2)
    } finally {
      await topology.stop()
    }
    const held = (await admin.contents(down)).map((m) => JSON.parse(m.data).message as string)
    console.log(`split: the sink ${JSON.stringify(sink.counters)}, the stream holds ${JSON.stringify(held)}`)
    expect(held.sort()).toEqual(['four', 'one', 'three', 'two'])
    expect(sink.counters).toMatchObject({ published: 4, duplicates: 0 })
  })

  it('the same event published again (a retry, a redelivery of the same record) is stored once: its default id is the same', async () => {
    const stream = await admin.stream('AGAIN')
    const sink = jetstreamSink({ servers: NATS_URL, subject: `${stream}.out` })
    await sink.start()
    const events = () =>
      EventArray.of(
        new LogEvent(RecordId.set({ message: 'a' }, 'rec-1')),
        new LogEvent({
          message: 'x',
          _nats: { stream: 'UP', streamSequence: 7, timestampMs: 1_700_000_000_000 },
        }),
      )
    const batch = events()
    expect(await sink.write(batch)).toBeUndefined()
    // The same events (a write retried) and equal ones made again (a redelivery read anew).
    expect(await sink.write(batch)).toBeUndefined()
    expect(await sink.write(events())).toBeUndefined()
    await sink.stop()
    const held = await admin.contents(stream)
    expect(held.map((m) => JSON.parse(m.data).message)).toEqual(['a', 'x'])
    expect(sink.counters).toMatchObject({ published: 2, duplicates: 4 })
  })

  it('an event that can never be published (over max_payload, or an invalid message id) is rejected alone; its batch-mates are delivered, not retried', async () => {
    const stream = await admin.stream('BIG')
    const max = admin.nc.info?.max_payload
    expect(max).toBeGreaterThan(0)
    const sink = jetstreamSink({
      servers: NATS_URL,
      subject: `${stream}.out`,
      msgId: (event) => (event.get('n') === 5 ? 'id\r\n5' : `id-${event.get('n') as number}`),
    })
    await sink.start()
    // The server's limit counts the headers with the payload: pad a message to exactly `bytes`.
    const sized = (n: number, bytes: number) => {
      const id = new MsgHdrsImpl()
      id.set('Nats-Msg-Id', `id-${n}`)
      const overhead = JSON.stringify({ n, pad: '' }).length + id.encode().length
      return new LogEvent({ n, pad: 'x'.repeat(bytes - overhead) })
    }
    const result = await sink.write(
      EventArray.of(
        new LogEvent({ n: 1 }),
        sized(2, max! + 1),
        new LogEvent({ n: 3 }),
        sized(4, max!),
        new LogEvent({ n: 5 }),
      ),
    )
    expect(result?.map((entry) => (entry instanceof Error ? entry.name : entry))).toEqual([
      'delivered',
      'RejectError',
      'delivered',
      'delivered',
      'RejectError',
    ])
    expect(result?.[1]).toMatchObject({
      code: 'REJECTED',
      component: 'jetstream',
      message: `jetstream: the event's message is ${max! + 1} bytes, over the server's max_payload of ${max} bytes: not published to '${stream}.out'`,
    })
    expect(result?.[4]).toMatchObject({ code: 'REJECTED', component: 'jetstream', field: 'msgId' })
    expect(sink.counters).toMatchObject({ published: 3, failed: 0, inFlight: 0 })
    await sink.stop()
    const held = await admin.contents(stream)
    expect(held.map((m) => m.msgId)).toEqual(['id-1', 'id-3', 'id-4'])
    console.log(
      `checked: max_payload ${max}: a message of exactly ${max} bytes delivered, ${max! + 1} rejected`,
    )
  })

  it("an event over the stream's own max_msg_size is rejected alone; its batch-mates are delivered, not retried", async () => {
    // The stream refuses it in its PubAck (10054, 'message size exceeds maximum allowed') on every
    // attempt: retried, it was a poison message, and with ids on every event its whole write
    // threw, so the batch-mates the stream had stored were reported errored on each retry.
    const stream = await admin.stream('STREAMMAX', { maxMsgSize: 256 })
    const sink = jetstreamSink({
      servers: NATS_URL,
      subject: `${stream}.out`,
      msgId: (event) => `id-${event.get('n') as number}`,
    })
    await sink.start()
    const result = await sink.write(
      EventArray.of(
        new LogEvent({ n: 1 }),
        new LogEvent({ n: 2, pad: 'x'.repeat(300) }),
        new LogEvent({ n: 3 }),
      ),
    )
    await sink.stop()
    expect(result?.map((entry) => (entry instanceof Error ? entry.name : entry))).toEqual([
      'delivered',
      'RejectError',
      'delivered',
    ])
    expect(result?.[1]).toMatchObject({ code: 'REJECTED', component: 'jetstream' })
    expect(result?.[1]).toHaveProperty(
      'message',
      expect.stringMatching(/message size exceeds maximum allowed/),
    )
    expect((await admin.contents(stream)).map((m) => m.msgId)).toEqual(['id-1', 'id-3'])
  })

  it('an event whose msgId throws or returns a non-string (untyped JS) is rejected alone, naming the field; its batch-mates are delivered', async () => {
    const stream = await admin.stream('MSGID')
    const sink = jetstreamSink({
      servers: NATS_URL,
      subject: `${stream}.out`,
      msgId: ((event: LogEvent) => {
        const n = event.get('n')
        if (n === 2) throw new Error('no id for 2')
        if (n === 3) return 3
        return n === 4 ? '' : `id-${n as number}`
      }) as (event: LogEvent) => string,
    })
    await sink.start()
    const result = await sink.write(
      EventArray.of(
        new LogEvent({ n: 1 }),
        new LogEvent({ n: 2 }),
        new LogEvent({ n: 3 }),
        new LogEvent({ n: 4 }),
      ),
    )
    await sink.stop()
    expect(result?.map((entry) => (entry instanceof Error ? entry.name : entry))).toEqual([
      'delivered',
      'RejectError',
      'RejectError',
      'delivered',
    ])
    expect(result?.[1]).toMatchObject({
      code: 'REJECTED',
      field: 'msgId',
      message: 'jetstream (msgId): msgId threw: no id for 2',
    })
    expect(result?.[2]).toMatchObject({ code: 'REJECTED', field: 'msgId' })
    expect(result?.[2]).toHaveProperty('message', expect.stringMatching(/msgId returned number/))
    // An empty id is no id: the message is stored without one.
    const held = await admin.contents(stream)
    expect(held.map((m) => [JSON.parse(m.data).n, m.msgId])).toEqual([
      [1, 'id-1'],
      [4, undefined],
    ])
  })

  it('fails start when no stream captures the subject, naming the subject', async () => {
    const sink = jetstreamSink({ servers: NATS_URL, subject: `nostream_${Date.now()}.x` })
    await expect(sink.start()).rejects.toMatchObject({ code: 'NO_STREAM', field: 'subject' })
  })

  it('fails start when the stream capturing the subject never acknowledges (no_ack), naming the subject and the stream', async () => {
    // Such a stream stores each message and sends no PubAck: every write timed out (an unclear
    // 'timeout'), its events errored, and each redelivery was stored again, for ever.
    const name = uniqueName('NOACK')
    await admin.jsm.streams.add({ name, subjects: [`${name}.>`], no_ack: true })
    admin.streams.push(name)
    const sink = jetstreamSink({ servers: NATS_URL, subject: `${name}.out`, timeoutMs: 300 })
    const error = await sink.start().then(
      async () => {
        const result = await sink.write(EventArray.of(new LogEvent({ n: 1 })))
        await sink.stop()
        return result
      },
      (e: unknown) => e,
    )
    expect(error).toMatchObject({
      name: 'ComponentError',
      code: 'NO_ACK_STREAM',
      component: 'jetstream',
      field: 'subject',
    })
    expect(String((error as Error).message)).toContain(`stream '${name}'`)
    expect((await admin.jsm.streams.info(name)).state.messages).toBe(0)
  })

  it.each([
    ['asks for JetStream', 'PUB $JS.API.INFO'],
    ['looks up the stream', 'PUB $JS.API.STREAM.NAMES'],
    ['reads the stream', 'PUB $JS.API.STREAM.INFO'],
  ])(
    'fails start naming the servers, not the subject, when the connection is lost as it %s',
    async (_, request) => {
      const stream = await admin.stream('LOOKUP')
      const proxy = await tcpProxy({
        target: { host: NATS_HOST, port: NATS_PORT },
        onData: (direction, chunk) => {
          if (direction === 'up' && chunk.toString('latin1').includes(request)) throw new Error('cut')
        },
      })
      try {
        const sink = jetstreamSink({ servers: proxy.address, subject: `${stream}.x`, timeoutMs: 500 })
        const error = await sink.start().then(
          () => undefined,
          (e: unknown) => e,
        )
        expect(error).toMatchObject({ code: 'CONNECT_FAILED', component: 'jetstream', field: 'servers' })
        expect(String((error as Error).message)).toContain(`(servers ${proxy.address})`)
        // The cut happened where it was meant to (onData threw there).
        expect(proxy.error).toBeDefined()
      } finally {
        await proxy.close().catch(() => undefined)
      }
    },
    30_000,
  )

  it('fails start on an unreachable server, naming the component and the server', async () => {
    const sink = jetstreamSink({ servers: '127.0.0.1:1', subject: 'x', connectTimeoutMs: 1000 })
    const error = await sink.start().then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).toMatchObject({ name: 'ComponentError', code: 'CONNECT_FAILED', component: 'jetstream' })
    expect(String((error as Error).message)).toMatch(
      /^jetstream \(servers\): cannot connect \(servers 127\.0\.0\.1:1\)/,
    )
  })

  it('a reply that is no PubAck (a core NATS responder on the subject once no stream captures it) is never delivered', async () => {
    // js.publish is a request: the first reply wins, whoever sends it. The client took any JSON
    // without an error for a PubAck as long as its stream was not '' ('{}' has none at all), so
    // once the stream was deleted, a service answering requests on that subject made every event
    // delivered: acked upstream, stored nowhere.
    const stream = await admin.stream('NOTACK')
    const subject = `${stream}.out`
    const sink = jetstreamSink({ servers: NATS_URL, subject, timeoutMs: 2000 })
    await sink.start()
    await admin.jsm.streams.delete(stream)
    const replies = ['{"received":true}', '{}', '{"stream":"","seq":0}', '{"stream":"X"}']
    let answered = 0
    const service = admin.nc.subscribe(subject, {
      callback: (_error, msg) => {
        msg.respond(replies[answered++ % replies.length])
      },
    })
    await admin.nc.flush()
    try {
      const result = await sink.write(EventArray.of(...replies.map((_, n) => new LogEvent({ n }))))
      expect(answered).toBe(replies.length)
      expect(result?.map((entry) => (entry instanceof Error ? entry.name : entry))).toEqual(
        replies.map(() => 'RetryableError'),
      )
      expect(String(result?.[0])).toMatch(/not a PubAck/)
      expect(sink.counters).toMatchObject({ published: 0, duplicates: 0, failed: replies.length })
      console.log(`checked: replies ${replies.join(' ')} all errored: ${String(result?.[0])}`)
    } finally {
      service.unsubscribe()
      await sink.stop()
    }
  })

  it('a publish once no stream captures the subject (the stream deleted) fails retryable saying so, not that JetStream is not enabled', async () => {
    // The server answers such a request "no responders", which the client turns into
    // "jetstream is not enabled": every event failed naming a cause the user could not find.
    const stream = await admin.stream('GONE')
    const subject = `${stream}.out`
    const sink = jetstreamSink({ servers: NATS_URL, subject, timeoutMs: 2000 })
    await sink.start()
    await admin.jsm.streams.delete(stream)
    try {
      const result = await sink.write(EventArray.of(new LogEvent({ n: 1 }), new LogEvent({ n: 2 })))
      console.log(`checked: a publish with no stream: ${String(result?.[0])}`)
      expect(result?.map((entry) => (entry instanceof Error ? entry.name : entry))).toEqual([
        'RetryableError',
        'RetryableError',
      ])
      expect(String(result?.[0])).toContain(`no stream captures subject '${subject}'`)
      expect(String(result?.[0])).not.toMatch(/jetstream is not enabled/i)
      expect(sink.counters).toMatchObject({ published: 0, failed: 2 })
    } finally {
      await sink.stop()
    }
  })

  it('a publish that gets no PubAck is never delivered: errored alone without ids, the whole write retried with them', async () => {
    const stream = await admin.stream('LOST')
    const proxy = await tcpProxy({ target: { host: NATS_HOST, port: NATS_PORT } })
    const withoutIds = jetstreamSink({
      servers: proxy.address,
      subject: `${stream}.out`,
      timeoutMs: 300,
      reconnectTimeWaitMs: 50,
    })
    const withIds = jetstreamSink({
      servers: proxy.address,
      subject: `${stream}.out`,
      timeoutMs: 300,
      reconnectTimeWaitMs: 50,
      msgId: (event) => `id-${event.get('n') as number}`,
    })
    await withoutIds.start()
    await withIds.start()
    await proxy.close()
    const events = () => EventArray.of(new LogEvent({ n: 1 }), new LogEvent({ n: 2 }))
    const result = await withoutIds.write(events())
    expect(result).toHaveLength(2)
    for (const entry of result ?? [])
      expect(entry).toMatchObject({ name: 'RetryableError', code: 'RETRYABLE' })
    await expect(withIds.write(events())).rejects.toMatchObject({ name: 'RetryableError' })
    expect(withoutIds.counters).toMatchObject({ published: 0, failed: 2 })
    await Promise.all([withoutIds.stop(), withIds.stop()])
    expect((await admin.jsm.streams.info(stream)).state.messages).toBe(0)
  })
})
