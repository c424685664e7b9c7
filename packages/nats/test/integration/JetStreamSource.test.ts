import { spawn } from 'node:child_process'
import { createConnection, createServer, type Socket } from 'node:net'
import type { DeliveryStatus, EventArray, LogEvent } from '@ackline/core'
import { jetstream } from '@ackline/nats'
import { memory } from '@ackline/sinks'
import { type EdgeBufferFactory, RejectError, type Sink, TopologyBuilder } from '@ackline/topology'
import { AckPolicy, DeliverPolicy, jetstream as jetstreamClient } from '@nats-io/jetstream'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  NATS_HOST,
  NATS_PORT,
  NATS_URL,
  NatsAdmin,
  reachableAt,
  skipWithoutNats,
  until,
} from './support/natsFixture.js'

/**
 * Runs `source` into a memory sink until `settled()` holds (waited for as `label`), then stops;
 * the events the sink got, without their `_nats` metadata.
 */
async function consume(
  source: ReturnType<typeof jetstream>,
  label: string,
  settled: () => boolean,
): Promise<Record<string, unknown>[]> {
  const sink = memory()
  const topology = new TopologyBuilder({ acknowledgements: true })
    .source('in', source)
    .sink('out', ['in'], sink)
    .build()
  await topology.start()
  await until(label, settled)
  await topology.stop()
  return sink.events.map(({ _nats, ...rest }) => rest)
}

const skip = await skipWithoutNats('JetStreamSource.test.ts')

/** A sink whose outcome per event is a function of the record and its delivery count. */
function scriptedSink(outcome: (n: number, deliveryCount: number) => DeliveryStatus) {
  const seen: { n: number; deliveryCount: number; status: DeliveryStatus; redelivered: boolean }[] = []
  const sink: Sink = {
    kind: 'scripted',
    async write(events: EventArray) {
      return events.events.map((event: LogEvent) => {
        const n = event.get('n') as number
        const deliveryCount = event.get('_nats.deliveryCount') as number
        const status = outcome(n, deliveryCount)
        seen.push({ n, deliveryCount, status, redelivered: event.get('_nats.redelivered') as boolean })
        return status
      })
    },
  }
  return { sink, seen }
}

/**
 * A buffer in front of a sink that refuses every push, as a buffer refuses events it cannot store:
 * it ends them `errored` and rejects, so the source's `send` rejects. Each push is a delivery the
 * program reported (its delivery count, and when). With `hold`, a push waits for `release()`
 * before it refuses.
 */
function refusingBuffer(options: { hold?: boolean } = {}) {
  const pushes: { deliveryCount: number; at: number }[] = []
  let release = (): void => {}
  let closed = (): void => {}
  const closing = new Promise<void>((resolve) => {
    closed = resolve
  })
  const factory: EdgeBufferFactory = {
    kind: 'refusing',
    async open() {
      return {
        async push(events: EventArray) {
          for (const event of events)
            pushes.push({ deliveryCount: event.get('_nats.deliveryCount') as number, at: Date.now() })
          if (options.hold === true)
            await new Promise<void>((resolve) => {
              release = resolve
            })
          events.end('errored')
          throw new Error('refusing buffer: cannot store these events')
        },
        pull: () => closing.then(() => undefined),
        async close() {
          closed()
        },
      }
    },
  }
  return { factory, pushes, release: () => release() }
}

/**
 * A buffer in front of a sink that accepts every push once `open()` was called and holds each
 * push until then (a buffer that is full): the source's `send` is not accepted meanwhile. The
 * sink gets what was pushed, in order.
 */
function gateBuffer() {
  const queue: EventArray[] = []
  let wakePull = (): void => {}
  let opened = false
  let wakePushes = (): void => {}
  const gate = new Promise<void>((resolve) => {
    wakePushes = resolve
  })
  let closed = false
  const factory: EdgeBufferFactory = {
    kind: 'gate',
    async open() {
      return {
        async push(events: EventArray) {
          if (!opened) await gate
          queue.push(events)
          wakePull()
        },
        async pull() {
          while (queue.length === 0 && !closed)
            await new Promise<void>((resolve) => {
              wakePull = resolve
            })
          return queue.shift()
        },
        async close() {
          closed = true
          wakePull()
        },
      }
    },
  }
  return {
    factory,
    open() {
      opened = true
      wakePushes()
    },
  }
}

/** Publishes `payload` with the header block `header` as written, through a bare socket: no client checks it. */
async function rawPublish(subject: string, header: string, payload: string): Promise<void> {
  const socket = createConnection({ host: NATS_HOST, port: NATS_PORT })
  try {
    let received = ''
    const got = (text: string): Promise<void> =>
      new Promise((resolve, reject) => {
        const check = (): void => {
          if (received.includes(text)) {
            socket.off('data', onData)
            resolve()
          }
        }
        const onData = (chunk: Buffer): void => {
          received += chunk.toString()
          check()
        }
        socket.on('data', onData)
        socket.once('error', reject)
        check()
      })
    await got('INFO ')
    const size = Buffer.byteLength(header)
    socket.write(
      `CONNECT {"headers":true,"verbose":false,"pedantic":false}\r\nHPUB ${subject} ${size} ${size + Buffer.byteLength(payload)}\r\n${header}${payload}\r\nPING\r\n`,
    )
    await got('PONG')
  } finally {
    socket.destroy()
  }
  // The stream stored it once the server answered the PING after it (a JetStream publish is stored before the next protocol line is read).
}

describe.skipIf(skip)('jetstream source against a NATS server', () => {
  let admin: NatsAdmin
  beforeAll(async () => {
    admin = await NatsAdmin.open()
  })
  afterAll(async () => {
    await admin?.close()
  })

  it('acks what was delivered, naks what errored until it is delivered, terms what was rejected; nothing stays pending', async () => {
    const stream = await admin.stream('E2E')
    const consumer = 'ackline'
    const N = 40
    await admin.publish(
      `${stream}.in`,
      Array.from({ length: N }, (_, n) => JSON.stringify({ n })),
    )
    const terminatedSeqs: number[] = []
    const advisories = admin.nc.subscribe(
      `$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.${stream}.${consumer}`,
      {
        callback: (_err, msg) => {
          terminatedSeqs.push((msg.json() as { stream_seq: number }).stream_seq)
        },
      },
    )
    const warnings: string[] = []
    const transient = (n: number) => n % 10 === 3
    const poison = (n: number) => n % 10 === 7
    const { sink, seen } = scriptedSink((n, count) =>
      poison(n) ? 'rejected' : transient(n) && count === 1 ? 'errored' : 'delivered',
    )
    const source = jetstream({
      servers: NATS_URL,
      stream,
      consumer,
      nakInitialMs: 50,
      batchSize: 16,
      onWarning: (w) => warnings.push(w),
    })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink, { retry: { attempts: 1 } })
      .build()
    await topology.start()
    const rejected = Array.from({ length: N }, (_, n) => n).filter(poison)
    const retried = Array.from({ length: N }, (_, n) => n).filter(transient)
    await until('every message acked or terminated', () => {
      const c = source.counters
      return c.acked === N - rejected.length && c.terminated === rejected.length
    })
    // Messages that arrived together travel as one batch (each still settled by its own outcome).
    const batches = topology.metrics().in!.ackLatencyMs.count
    await topology.stop()
    advisories.unsubscribe()

    const c = source.counters
    expect(batches).toBeGreaterThan(0)
    expect(batches).toBeLessThan(c.received)
    expect(c).toMatchObject({
      received: N + retried.length,
      acked: N - rejected.length,
      terminated: rejected.length,
      nacked: retried.length,
      redelivered: retried.length,
      inFlight: 0,
    })
    // Delivered exactly once each, the transient ones on their second delivery.
    const delivered = seen.filter((s) => s.status === 'delivered')
    expect(delivered.map((s) => s.n).sort((a, b) => a - b)).toEqual(
      Array.from({ length: N }, (_, n) => n).filter((n) => !poison(n)),
    )
    for (const s of delivered) expect(s.deliveryCount).toBe(transient(s.n) ? 2 : 1)
    expect(delivered.filter((s) => s.redelivered).map((s) => s.n)).toEqual(retried)
    // The rejected ones were terminated (the server says so), never redelivered.
    expect(seen.filter((s) => s.status === 'rejected').map((s) => s.n)).toEqual(rejected)
    // The reason (which sink, which code) is told, whatever the server version reads of it.
    expect(warnings.filter((w) => /terminated message \d+ .*rejected: out REJECTED/.test(w))).toHaveLength(
      rejected.length,
    )
    await until('the terminated advisories', () => terminatedSeqs.length === rejected.length, 5000)
    expect(terminatedSeqs.sort((a, b) => a - b)).toEqual(rejected.map((n) => n + 1))
    // Nothing pending, nothing awaiting an ack, the ack floor at the last message.
    const info = await admin.jsm.consumers.info(stream, consumer)
    expect({
      pending: info.num_pending,
      ackPending: info.num_ack_pending,
      floor: info.ack_floor.stream_seq,
    }).toEqual({
      pending: 0,
      ackPending: 0,
      floor: N,
    })
    console.log(
      `checked: ${N} messages in ${batches} batches, ${retried.length} redelivered then acked, ${rejected.length} terminated`,
    )
  })

  it('a payload that is not JSON is terminated with the reason, or passed raw, as invalidJson says; never dropped', async () => {
    const payloads = ['{"n":0}', 'not json', '42', '{"n":3}']
    for (const invalidJson of ['reject', 'raw'] as const) {
      const stream = await admin.stream('BAD')
      await admin.publish(`${stream}.in`, payloads)
      const warnings: string[] = []
      const sink = memory()
      const source = jetstream({
        servers: NATS_URL,
        stream,
        consumer: 'c',
        invalidJson,
        onWarning: (w) => warnings.push(w),
      })
      const topology = new TopologyBuilder({ acknowledgements: true })
        .source('in', source)
        .sink('out', ['in'], sink)
        .build()
      await topology.start()
      await until('all four settled', () => source.counters.acked + source.counters.terminated === 4)
      await topology.stop()
      const fields = sink.events.map(({ _nats, ...rest }) => rest)
      if (invalidJson === 'reject') {
        expect(fields).toEqual([{ n: 0 }, { message: 42 }, { n: 3 }])
        expect(source.counters).toMatchObject({ acked: 3, terminated: 1, invalid: 2 })
        expect(warnings.join('\n')).toMatch(/terminated message 2 .*not valid JSON/)
      } else {
        expect(fields).toEqual([{ n: 0 }, { message: 'not json' }, { message: 42 }, { n: 3 }])
        expect(source.counters).toMatchObject({ acked: 4, terminated: 0, invalid: 2 })
      }
      const info = await admin.jsm.consumers.info(stream, 'c')
      expect([invalidJson, info.num_pending, info.num_ack_pending]).toEqual([invalidJson, 0, 0])
    }
  })

  it('a payload that is not UTF-8 is invalid: terminated with the reason, never passed on with its bytes replaced', async () => {
    const stream = await admin.stream('UTF8')
    // `{"a":"<0xff>"}`: JSON in shape, but 0xff is no UTF-8; a lenient decoder makes it "\uFFFD".
    const js = jetstreamClient(admin.nc)
    await js.publish(`${stream}.in`, new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]))
    await js.publish(`${stream}.in`, JSON.stringify({ a: 'é' }))
    const warnings: string[] = []
    const sink = memory()
    const source = jetstream({ servers: NATS_URL, stream, consumer: 'c', onWarning: (w) => warnings.push(w) })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    await topology.start()
    await until('both settled', () => source.counters.acked + source.counters.terminated === 2)
    await topology.stop()
    expect(sink.events.map(({ _nats, ...rest }) => rest)).toEqual([{ a: 'é' }])
    expect(source.counters).toMatchObject({ acked: 1, terminated: 1, invalid: 1 })
    expect(warnings.join('\n')).toMatch(/terminated message 1 .*not valid UTF-8/)
  })

  it('a payload holding a number too large for a double is invalid: terminated naming the number, or passed raw, never as Infinity', async () => {
    const stream = await admin.stream('HUGE')
    // JSON.parse reads 1e400 as Infinity, which every sink would write as null.
    const huge = '{"a":"1e400","b":[1e400]}'
    await admin.publish(`${stream}.in`, [huge, JSON.stringify({ b: 1e308 })])
    const warnings: string[] = []
    const source = jetstream({ servers: NATS_URL, stream, consumer: 'c', onWarning: (w) => warnings.push(w) })
    const events = await consume(
      source,
      'both settled',
      () => source.counters.acked + source.counters.terminated === 2,
    )
    expect(events).toEqual([{ b: 1e308 }])
    expect(source.counters).toMatchObject({ acked: 1, terminated: 1, invalid: 1 })
    expect(warnings.join('\n')).toMatch(/terminated message 1 .*the number 1e400 is too large for a double/)

    const raw = await admin.stream('HUGERAW')
    await admin.publish(`${raw}.in`, [huge])
    const source2 = jetstream({ servers: NATS_URL, stream: raw, consumer: 'c', invalidJson: 'raw' })
    expect(await consume(source2, 'acked', () => source2.counters.acked === 1)).toEqual([{ message: huge }])
  })

  it('an onWarning that throws or rejects never stops the source: the next messages are consumed and settled', async () => {
    const stream = await admin.stream('WARN')
    await admin.publish(`${stream}.in`, ['not json', JSON.stringify({ n: 1 }), 'not json either'])
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown): void => {
      unhandled.push(reason)
    }
    process.on('unhandledRejection', onUnhandled)
    const sink = memory()
    let calls = 0
    const source = jetstream({
      servers: NATS_URL,
      stream,
      consumer: 'c',
      // Untyped JS: every other call is an async function's rejection.
      onWarning: ((w: string) => {
        calls++
        if (calls % 2 === 0) return Promise.reject(new Error(`onWarning rejected on: ${w}`))
        throw new Error(`onWarning threw on: ${w}`)
      }) as (w: string) => void,
    })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    try {
      await topology.start()
      await until('all three settled', () => source.counters.acked + source.counters.terminated === 3)
      await topology.stop()
      // A macrotask: a rejection left unhandled would have been reported by now.
      await new Promise((resolve) => setImmediate(resolve))
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
    expect(sink.events.map(({ _nats, ...rest }) => rest)).toEqual([{ n: 1 }])
    expect(source.counters).toMatchObject({ acked: 1, terminated: 2, pullErrors: 0 })
    expect(calls).toBe(2)
    expect(unhandled).toEqual([])
  })

  it('a consumer the server refuses to create fails the run naming the component and the field', async () => {
    const stream = await admin.stream('FILTER')
    const source = jetstream({ servers: NATS_URL, stream, consumer: 'c', filterSubject: 'elsewhere.>' })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], memory())
      .build()
    await topology.start()
    await expect(source.ready()).rejects.toMatchObject({
      code: 'NO_CONSUMER',
      component: 'in',
      field: 'filterSubject',
    })
    await expect(source.ready()).rejects.toThrow(
      /cannot create consumer 'c' of stream '.*' with filterSubject 'elsewhere\.>': .*filter subject/,
    )
    await topology.stop()
  })

  it('carries the broker metadata under _nats', async () => {
    const stream = await admin.stream('META')
    const js = (await import('@nats-io/jetstream')).jetstream(admin.nc)
    const { headers } = await import('@nats-io/transport-node')
    const h = headers()
    h.append('trace', 'abc')
    await js.publish(`${stream}.in.x`, '{"a":1}', { headers: h })
    const sink = memory()
    const source = jetstream({ servers: NATS_URL, stream, consumer: 'c' })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    await topology.start()
    await until('acked', () => source.counters.acked === 1)
    await topology.stop()
    expect(sink.events[0]).toMatchObject({
      a: 1,
      _nats: {
        stream,
        consumer: 'c',
        subject: `${stream}.in.x`,
        streamSequence: 1,
        consumerSequence: 1,
        deliveryCount: 1,
        redelivered: false,
        headers: { trace: ['abc'] },
      },
    })
  })

  it('keeps every header in the metadata, one named __proto__ too (as an own field, the prototype untouched)', async () => {
    const stream = await admin.stream('PROTO')
    const { headers } = await import('@nats-io/transport-node')
    const h = headers()
    h.set('__proto__', 'x')
    h.append('Multi', 'a')
    h.append('Multi', 'b')
    await jetstreamClient(admin.nc).publish(`${stream}.in`, '{"a":1}', { headers: h })
    const sink = memory()
    const source = jetstream({ servers: NATS_URL, stream, consumer: 'c' })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    await topology.start()
    await until('acked', () => source.counters.acked === 1)
    await topology.stop()
    const metadata = sink.events[0]?._nats as { headers: object }
    expect(Object.getPrototypeOf(metadata.headers)).toBe(Object.prototype)
    expect(Object.entries(metadata.headers)).toEqual([
      ['__proto__', ['x']],
      ['Multi', ['a', 'b']],
    ])
  })

  /**
   * Consumes `stream` with a fresh source into a memory sink until `count` messages are acked (or
   * 5 s pass), stops, and prints `label` with what the source said: the run both tests of
   * unparseable headers make.
   */
  async function consumeUntilAcked(stream: string, count: number, label: string) {
    const warnings: string[] = []
    const sink = memory()
    const source = jetstream({ servers: NATS_URL, stream, consumer: 'c', onWarning: (w) => warnings.push(w) })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    await topology.start()
    try {
      await until(`${count} acked`, () => source.counters.acked === count, 5000)
    } finally {
      await topology.stop()
      console.log(
        `${label}: counters ${JSON.stringify(source.counters)}; warnings ${JSON.stringify(warnings)}`,
      )
    }
    return { events: sink.events, warnings, counters: source.counters }
  }

  it('a message whose headers the client cannot parse (a space in a header name) is consumed with the others, its headers left out and said so: never a failed pull', async () => {
    // The server stores what a client that does not check header names publishes; nats.js throws
    // on reading such headers. The read, for the metadata, threw out of the pull: taken for a failed
    // pull, it left that message and the rest of its pull unsettled, to come again after their
    // AckWait and fail the same way, for ever.
    const stream = await admin.stream('BADHDR')
    await admin.publish(`${stream}.in`, ['{"n":0}'])
    await rawPublish(`${stream}.in`, 'NATS/1.0\r\nBad Key: v\r\nGood: w\r\n\r\n', '{"n":1}')
    await admin.publish(`${stream}.in`, ['{"n":2}'])
    const { events, warnings, counters } = await consumeUntilAcked(stream, 3, 'unparseable headers')
    expect(events.map(({ _nats, ...rest }) => rest)).toEqual([{ n: 0 }, { n: 1 }, { n: 2 }])
    expect(events.map((e) => (e._nats as { headers: object }).headers)).toEqual([{}, {}, {}])
    expect(counters).toMatchObject({ acked: 3, pullErrors: 0, terminated: 0 })
    expect(
      warnings.filter((w) =>
        /message 2 of stream '.*': its headers cannot be read .*not a valid character in a header name/.test(
          w,
        ),
      ),
    ).toHaveLength(1)
    const info = await admin.jsm.consumers.info(stream, 'c')
    expect([info.num_pending, info.num_ack_pending]).toEqual([0, 0])
  })

  it('messages whose headers the client cannot parse are warned of thinly (the 1st, 2nd, 4th, …), each warning naming its message: a stream full of them does not flood the log', async () => {
    // Each such message warned once: a stream of them printed one warning per message.
    const stream = await admin.stream('BADHDRS')
    for (let n = 1; n <= 5; n++) {
      await rawPublish(`${stream}.in`, 'NATS/1.0\r\nBad Key: v\r\n\r\n', `{"n":${n}}`)
    }
    const { events, warnings } = await consumeUntilAcked(stream, 5, 'unparseable headers, thinned')
    const said = warnings.filter((w) => w.includes('headers cannot be read'))
    expect(said).toHaveLength(3)
    expect(said[0]).toMatch(
      /message 1 of stream '.*': its headers cannot be read .*not a valid character in a header name/,
    )
    expect(said[1]).toMatch(
      /message 2 of stream '.*': its headers cannot be read .*2 such messages so far.*said again at 4/,
    )
    expect(said[2]).toMatch(
      /message 4 of stream '.*': its headers cannot be read .*4 such messages so far.*said again at 8/,
    )
    expect(events.map(({ _nats, ...rest }) => rest)).toEqual([
      { n: 1 },
      { n: 2 },
      { n: 3 },
      { n: 4 },
      { n: 5 },
    ])
  })

  it("a metadataField named '__proto__' holds the metadata as an own field: not set as the record's prototype, lost", async () => {
    // The metadata was assigned (record[metadataField] = …), which for '__proto__' replaced the
    // record's prototype: the event carried no metadata, and the JetStream sink no message id.
    const stream = await admin.stream('PROTO_META')
    await admin.publish(`${stream}.in`, ['{"n":0}'])
    const sink = memory()
    const source = jetstream({ servers: NATS_URL, stream, consumer: 'c', metadataField: '__proto__' })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    await topology.start()
    await until('acked', () => source.counters.acked === 1)
    await topology.stop()
    const event = sink.events[0] as Record<string, unknown>
    console.log(`the event: ${JSON.stringify(event)}`)
    expect(Object.getPrototypeOf(event)).toBe(Object.prototype)
    expect(Object.hasOwn(event, '__proto__')).toBe(true)
    expect(Object.getOwnPropertyDescriptor(event, '__proto__')?.value).toMatchObject({
      stream,
      streamSequence: 1,
    })
  })

  it('a slow sink past half the AckWait causes no redelivery: the source sends working()', async () => {
    const stream = await admin.stream('SLOW')
    await admin.publish(`${stream}.in`, ['{"n":0}', '{"n":1}'])
    const sink = memory({ beforeWrite: () => new Promise((resolve) => setTimeout(resolve, 1600)) })
    // AckWait 1 s: without working() the server would redeliver twice while the sink holds the write.
    const source = jetstream({ servers: NATS_URL, stream, consumer: 'c', ackWaitMs: 1000 })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    await topology.start()
    await until('both acked', () => source.counters.acked === 2)
    await topology.stop()
    expect(source.counters.working).toBeGreaterThanOrEqual(2)
    expect(source.counters).toMatchObject({ received: 2, redelivered: 0 })
    const info = await admin.jsm.consumers.info(stream, 'c')
    expect({ redelivered: info.num_redelivered, ackPending: info.num_ack_pending }).toEqual({
      redelivered: 0,
      ackPending: 0,
    })
  })

  it('a message that arrives while the pipeline has not accepted the batch before is covered by working(): no redelivery', async () => {
    // The loop waited for each batch to be accepted before it took the next message of the pull:
    // one that arrived meanwhile waited in the client's iterator, outside the messages working()
    // covers, and the server delivered it again each AckWait (counting against MaxDeliver, and to
    // another instance sharing the consumer: a duplicate) for as long as the pipeline was full.
    const stream = await admin.stream('GATED')
    await admin.publish(`${stream}.in`, ['{"n":0}'])
    const buffer = gateBuffer()
    const sink = memory()
    const source = jetstream({
      servers: NATS_URL,
      stream,
      consumer: 'c',
      ackWaitMs: 1000,
      // The pull stays open, so the second message comes through it while the first waits.
      fetchExpiresMs: 30_000,
    })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink, { buffer: buffer.factory })
      .build()
    await topology.start()
    try {
      await until('the first message in flight', () => source.counters.received === 1)
      await admin.publish(`${stream}.in`, ['{"n":1}'])
      await until('the second message delivered to the source', async () => {
        const info = await admin.jsm.consumers.info(stream, 'c')
        return info.num_ack_pending === 2
      })
      // Ten working() signals, each at least half the AckWait after the one before for its message:
      // the second message waited two AckWaits and more while the pipeline was full.
      const touched = source.counters.working
      await until('ten working() signals more', () => source.counters.working >= touched + 10)
      buffer.open()
      await until('both acked', () => source.counters.acked === 2)
    } finally {
      buffer.open()
      await topology.stop()
    }
    const info = await admin.jsm.consumers.info(stream, 'c')
    console.log(
      `gated: ${JSON.stringify(source.counters)}; at the server: redelivered ${info.num_redelivered}`,
    )
    expect(sink.events.map((e) => e.n)).toEqual([0, 1])
    expect(source.counters).toMatchObject({ received: 2, redelivered: 0, acked: 2, inFlight: 0 })
    expect({ redelivered: info.num_redelivered, ackPending: info.num_ack_pending }).toEqual({
      redelivered: 0,
      ackPending: 0,
    })
  })

  it('an AckWait longer than a timer holds (over 99 days) keeps the working() timer a timer, not a 1 ms loop', async () => {
    const stream = await admin.stream('LONGWAIT')
    await admin.publish(`${stream}.in`, ['{"n":0}'])
    const overflows: string[] = []
    const onProcessWarning = (warning: Error): void => {
      if (warning.name === 'TimeoutOverflowWarning') overflows.push(warning.message)
    }
    process.on('warning', onProcessWarning)
    try {
      // AckWait 10^10 ms: a quarter of it, the interval of working(), is over 2^31 - 1 ms.
      const source = jetstream({ servers: NATS_URL, stream, consumer: 'c', ackWaitMs: 1e10 })
      const events = await consume(source, 'the message acked', () => source.counters.acked === 1)
      expect(events).toEqual([{ n: 0 }])
      const info = await admin.jsm.consumers.info(stream, 'c')
      expect(info.config.ack_wait).toBe(1e16)
      // Node says so when it takes a timer's delay for 1 ms (it emits the warning on the next tick,
      // long before the message was acked).
      expect(overflows).toEqual([])
    } finally {
      process.off('warning', onProcessWarning)
    }
  })

  it('a consumer deleted under a running source is warned of once, naming it, then at 2, 4, 8… failed pulls, not at each retry; the source keeps pulling and reads it once it is made again', async () => {
    // Every pull failed once the consumer was gone ('consumer deleted', then 'heartbeats missed'),
    // and each failure warned 'a pull failed, retrying' without naming the consumer, every
    // fetchExpiresMs for as long as the process lived. Whether a deleted consumer should end the
    // run is an open question; the source keeps retrying.
    const stream = await admin.stream('DELETED_CONSUMER')
    await admin.publish(`${stream}.in`, ['{"n":0}'])
    const warnings: string[] = []
    const source = jetstream({
      servers: NATS_URL,
      stream,
      consumer: 'c',
      fetchExpiresMs: 1000,
      reconnectTimeWaitMs: 50,
      onWarning: (w) => warnings.push(w),
    })
    const sink = memory()
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    await topology.start()
    try {
      await until('the first message acked', () => source.counters.acked === 1)
      await admin.jsm.consumers.delete(stream, 'c')
      await until('five pulls failed', () => source.counters.pullErrors >= 5, 30_000)
      // Read together, in one turn: the warning is said as the failure is counted.
      const failed = source.counters.pullErrors
      const pullWarnings = warnings.filter((w) => /pull/.test(w))
      console.log(`${failed} failed pulls, warned: ${JSON.stringify(pullWarnings)}`)
      const powersOfTwo = Math.floor(Math.log2(failed)) + 1
      expect(pullWarnings).toHaveLength(powersOfTwo)
      expect(pullWarnings[0]).toContain(`consumer 'c' of stream '${stream}'`)
      expect(pullWarnings.at(-1)).toMatch(/failed \d+ times in a row/)
      // Made again from the new messages on (from the first, it would deliver n 0 again).
      await admin.jsm.consumers.add(stream, {
        durable_name: 'c',
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.New,
      })
      await admin.publish(`${stream}.in`, ['{"n":1}'])
      await until('the message after the consumer came back acked', () => source.counters.acked === 2)
      expect(warnings.at(-1)).toMatch(
        new RegExp(`pulls from consumer 'c' of stream '${stream}' succeed again after \\d+ failed`),
      )
    } finally {
      await topology.stop()
    }
    expect(sink.events.map((event) => event.n)).toEqual([0, 1])
  })

  it('refuses a consumer whose ack policy is not explicit, saying so', async () => {
    const stream = await admin.stream('POLICY')
    await admin.jsm.consumers.add(stream, { durable_name: 'all', ack_policy: 'all' })
    const source = jetstream({ servers: NATS_URL, stream, consumer: 'all' })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], memory())
      .build()
    await topology.start()
    await expect(source.ready()).rejects.toMatchObject({ code: 'ACK_POLICY', component: 'in' })
    await expect(source.ready()).rejects.toThrow(/ack policy 'all'; this source needs 'explicit'/)
    await topology.stop()
  })

  it('an unreachable server fails the run with an error naming the component and the server', async () => {
    const source = jetstream({ servers: '127.0.0.1:1', stream: 's', consumer: 'c', connectTimeoutMs: 1000 })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('orders', source)
      .sink('out', ['orders'], memory())
      .build()
    await topology.start()
    await expect(source.ready()).rejects.toThrow(
      /^orders \(servers\): cannot connect \(servers 127\.0\.0\.1:1\)/,
    )
    await topology.stop()
  })

  it('a server that refuses the credentials fails the run with AUTH_FAILED naming the server', async () => {
    const port = await freePort()
    const server = spawn(
      '/usr/sbin/nats-server',
      ['-a', '127.0.0.1', '-p', String(port), '--user', 'u', '--pass', 'right'],
      {
        stdio: 'ignore',
      },
    )
    try {
      await until('the second server listens', () => reachableAt('127.0.0.1', port), 10_000)
      const source = jetstream({
        servers: `127.0.0.1:${port}`,
        user: 'u',
        pass: 'wrong',
        stream: 's',
        consumer: 'c',
      })
      const topology = new TopologyBuilder({ acknowledgements: true })
        .source('in', source)
        .sink('out', ['in'], memory())
        .build()
      await topology.start()
      const error = await source.ready().then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(error).toMatchObject({ code: 'AUTH_FAILED', component: 'in', field: 'user' })
      expect(String((error as Error).message)).toContain(`servers 127.0.0.1:${port}`)
      await topology.stop()
    } finally {
      server.kill('SIGTERM')
    }
  })

  it("a rejection reason longer than the server's max_payload is cut in the term; the batch-mates are still settled", async () => {
    // A server from 2.10.4 reads `+TERM <reason>`, and the client refuses any message over the
    // max_payload of its INFO: a sink's long reason used to make the term throw while the batch was
    // settled, an unhandled rejection that left the rest of the batch unsettled.
    const stream = await admin.stream('LONGREASON')
    const consumer = 'ackline'
    await admin.publish(`${stream}.in`, ['{"n":0}', '{"n":1}'])
    const proxy = await infoRewritingProxy({ version: '2.10.4', max_payload: 4096 })
    const terms: string[] = []
    const acks = admin.nc.subscribe(`$JS.ACK.${stream}.${consumer}.>`, {
      callback: (_err, msg) => {
        if (msg.string().startsWith('+TERM')) terms.push(msg.string())
      },
    })
    const warnings: string[] = []
    const reason = 'the reason is long: '.padEnd(8000, 'x')
    const sink: Sink = {
      kind: 'long-reason',
      async write(events: EventArray) {
        return events.events.map((event: LogEvent) =>
          event.get('n') === 0 ? new RejectError('out', reason) : ('delivered' as const),
        )
      },
    }
    const source = jetstream({
      servers: proxy.address,
      stream,
      consumer,
      batchSize: 16,
      onWarning: (w) => warnings.push(w),
    })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink, { retry: { attempts: 1 } })
      .build()
    try {
      await topology.start()
      await until('one message acked and one terminated', () => {
        const c = source.counters
        return c.acked === 1 && c.terminated === 1
      })
      await until('the term seen on the ack subject', () => terms.length === 1, 5000)
    } finally {
      await topology.stop()
      acks.unsubscribe()
      await proxy.close()
    }
    expect(Buffer.byteLength(terms[0]!)).toBeLessThanOrEqual('+TERM '.length + 1024)
    expect(terms[0]).toMatch(/^\+TERM rejected: out REJECTED: .*the reason is long: x+…$/)
    // The warning keeps the whole reason.
    expect(warnings.some((w) => w.includes(reason))).toBe(true)
  })

  it("a term's reason fits a max_payload smaller than the 1024 bytes a reason may take; the batch-mates are still settled", async () => {
    // max_payload is a server setting (512 is a valid one): the reason was cut to 1024 bytes
    // whatever the server took, so with a smaller max_payload the client still refused the term
    // (InvalidArgumentError: max_payload size exceeded), an unhandled rejection while the batch was
    // settled that left its later messages unsettled.
    const stream = await admin.stream('SMALLPAYLOAD')
    const consumer = 'ackline'
    await admin.publish(`${stream}.in`, ['{"n":0}', '{"n":1}'])
    const proxy = await infoRewritingProxy({ version: '2.10.4', max_payload: 512 })
    const terms: string[] = []
    const acks = admin.nc.subscribe(`$JS.ACK.${stream}.${consumer}.>`, {
      callback: (_err, msg) => {
        if (msg.string().startsWith('+TERM')) terms.push(msg.string())
      },
    })
    // Multi-byte characters, so the cut must also keep them whole.
    const reason = 'the reason is long: '.padEnd(2000, 'é')
    const sink: Sink = {
      kind: 'long-reason',
      async write(events: EventArray) {
        return events.events.map((event: LogEvent) =>
          event.get('n') === 0 ? new RejectError('out', reason) : ('delivered' as const),
        )
      },
    }
    const source = jetstream({ servers: proxy.address, stream, consumer, batchSize: 16, onWarning: () => {} })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink, { retry: { attempts: 1 } })
      .build()
    try {
      await topology.start()
      await until('one message acked and one terminated', () => {
        const c = source.counters
        return c.acked === 1 && c.terminated === 1
      })
      await until('the term seen on the ack subject', () => terms.length === 1, 5000)
    } finally {
      await topology.stop()
      acks.unsubscribe()
      await proxy.close()
    }
    expect(Buffer.byteLength(terms[0]!)).toBeLessThanOrEqual(512)
    expect(terms[0]).toMatch(/^\+TERM rejected: out REJECTED: .*the reason is long: é+…$/)
  })

  it('gives up on a message that errors on every delivery at maxDeliveries: terminated, said so, not pending', async () => {
    const stream = await admin.stream('GIVEUP')
    await admin.publish(`${stream}.in`, ['{"n":0}'])
    const warnings: string[] = []
    const { sink, seen } = scriptedSink(() => 'errored')
    const source = jetstream({
      servers: NATS_URL,
      stream,
      consumer: 'c',
      maxDeliveries: 3,
      nakInitialMs: 20,
      onWarning: (w) => warnings.push(w),
    })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink, { retry: { attempts: 1 } })
      .build()
    await topology.start()
    await until('terminated', () => source.counters.terminated === 1)
    await topology.stop()
    expect(seen.map((s) => s.deliveryCount)).toEqual([1, 2, 3])
    expect(source.counters).toMatchObject({ received: 3, nacked: 2, terminated: 1, acked: 0 })
    expect(warnings.join('\n')).toMatch(/errored on each of 3 deliveries \(bound 3\)/)
    const info = await admin.jsm.consumers.info(stream, 'c')
    expect([info.num_pending, info.num_ack_pending]).toEqual([0, 0])
  })

  it("gives up at the consumer's MaxDeliver when maxDeliveries is higher: terminated, said so, never left unsettled", async () => {
    // The server stops redelivering at MaxDeliver: a nak on that delivery (the source waiting for
    // its own higher bound) left the message neither acked nor pending, without a word.
    const stream = await admin.stream('MAXDELIVER')
    await admin.publish(`${stream}.in`, ['{"n":0}'])
    const warnings: string[] = []
    const { sink, seen } = scriptedSink(() => 'errored')
    const source = jetstream({
      servers: NATS_URL,
      stream,
      consumer: 'c',
      maxDeliver: 2,
      maxDeliveries: 5,
      nakInitialMs: 20,
      onWarning: (w) => warnings.push(w),
    })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink, { retry: { attempts: 1 } })
      .build()
    await topology.start()
    try {
      await until('terminated', () => source.counters.terminated === 1)
    } finally {
      await topology.stop()
    }
    expect(seen.map((s) => s.deliveryCount)).toEqual([1, 2])
    expect(source.counters).toMatchObject({ received: 2, nacked: 1, terminated: 1, acked: 0 })
    expect(warnings.join('\n')).toMatch(/errored on each of 2 deliveries \(bound 2\)/)
  })

  it('a batch the pipeline does not accept is given back with the back-off, never in a hot loop, and terminated at maxDeliveries', async () => {
    const stream = await admin.stream('REFUSED')
    await admin.publish(`${stream}.in`, ['{"n":0}'])
    const warnings: string[] = []
    const buffer = refusingBuffer()
    const source = jetstream({
      servers: NATS_URL,
      stream,
      consumer: 'c',
      nakInitialMs: 200,
      nakMultiplier: 2,
      maxDeliveries: 4,
      onWarning: (w) => warnings.push(w),
    })
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', source)
      .sink('out', ['in'], memory(), { buffer: buffer.factory })
      .build()
    await topology.start()
    await until('four deliveries reported', () => buffer.pushes.length >= 4, 10_000)
    // Each redelivery came only after its nak's delay: 200, 400, 800 ms (a little slack for clocks).
    const gaps = buffer.pushes.slice(1, 4).map((push, i) => push.at - buffer.pushes[i]!.at)
    expect(gaps.map((gap, i) => gap >= 200 * 2 ** i - 20)).toEqual([true, true, true])
    await until('terminated at maxDeliveries', () => source.counters.terminated === 1, 5000)
    await topology.stop()
    expect(buffer.pushes.map((push) => push.deliveryCount)).toEqual([1, 2, 3, 4])
    expect(source.counters).toMatchObject({ received: 4, nacked: 3, terminated: 1, acked: 0, inFlight: 0 })
    const said = warnings.join('\n')
    expect(said).toMatch(
      /in: 1 message\(s\) from 1 not accepted: Error: refusing buffer: cannot store these events; 1 given back with a back-off of 200 ms or more/,
    )
    expect(said).toMatch(
      /errored on each of 4 deliveries \(bound 4\): not accepted by the pipeline: Error: refusing buffer/,
    )
    const info = await admin.jsm.consumers.info(stream, 'c')
    expect([info.num_pending, info.num_ack_pending]).toEqual([0, 0])
    console.log(
      `checked: deliveries ${gaps.map((gap) => `${gap} ms`).join(', ')} apart (naks of 200, 400, 800 ms), then terminated`,
    )
  })

  it('a batch not accepted because the topology stopped is given back at once, for another instance', async () => {
    const stream = await admin.stream('STOPPED')
    await admin.publish(`${stream}.in`, ['{"n":0}'])
    const warnings: string[] = []
    const buffer = refusingBuffer({ hold: true })
    // A back-off would hold the message for a minute: the next instance gets it at once only if it was not one.
    const first = jetstream({
      servers: NATS_URL,
      stream,
      consumer: 'c',
      nakInitialMs: 60_000,
      onWarning: (w) => warnings.push(w),
    })
    const stopped = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', first)
      .sink('out', ['in'], memory(), { buffer: buffer.factory })
      .build()
    await stopped.start()
    await until('the first instance sent the message', () => buffer.pushes.length === 1)
    // stop() aborts the source's signal before it returns; the held send is refused after that.
    const stopping = stopped.stop({ drainTimeoutMs: 5000 })
    buffer.release()
    await stopping
    expect(first.counters).toMatchObject({ received: 1, nacked: 1, terminated: 0 })
    expect(warnings.join('\n')).toMatch(/in: 1 message\(s\) from 1 not accepted \(stopping\), given back/)
    const sink = memory()
    const second = jetstream({ servers: NATS_URL, stream, consumer: 'c' })
    const next = new TopologyBuilder({ acknowledgements: true })
      .source('in', second)
      .sink('out', ['in'], sink)
      .build()
    await next.start()
    await until('the next instance delivered it', () => second.counters.acked === 1, 10_000)
    await next.stop()
    // (The delivery count is the server's to tell: a 2.9 server counts a given-back delivery again or not.)
    expect(sink.events.map((event) => event._nats)).toMatchObject([{ streamSequence: 1 }])
  })

  it('a stop that comes while a pull is being set up ends that pull: what it brings after the stop never enters the pipeline', async () => {
    // The pull's abort listener is added once fetch() returned; a stop in between has fired its
    // abort already, and the listener never would. Without the check after the fetch, the pull went
    // on to its expiry: the stop waited for it, and the message it brought was sent into a pipeline
    // that had stopped.
    const stream = await admin.stream('STOP_IN_FETCH')
    await admin.publish(`${stream}.in`, ['{"n":0}'])
    const controller = new AbortController()
    const signal = controller.signal
    // The stop comes just as the source adds its first abort listener: the pull's (with room and
    // the connection up it adds none before), so the abort fired before that listener was added.
    signal.addEventListener = function (
      this: AbortSignal,
      ...args: Parameters<AbortSignal['addEventListener']>
    ) {
      if (args[0] === 'abort' && !signal.aborted) controller.abort()
      return EventTarget.prototype.addEventListener.apply(this, args)
    } as AbortSignal['addEventListener']
    const sent: unknown[] = []
    const source = jetstream({ servers: NATS_URL, stream, consumer: 'c', onWarning: () => {} })
    await source.run({
      id: 'in',
      acknowledgements: true,
      signal,
      send: (records) => {
        sent.push(...records)
        return Promise.reject(new Error('the pipeline stopped'))
      },
      sendEvents: () => Promise.reject(new Error('not used')),
    })
    console.log(`after a stop during the fetch: ${JSON.stringify(source.counters)}`)
    expect(signal.aborted).toBe(true)
    expect(sent).toEqual([])
    expect(source.counters.received).toBe(0)
  })

  it("a batch not accepted because the topology stopped is not 'given back' on the consumer's last delivery (MaxDeliver): terminated, said so", async () => {
    // The server redelivers nothing past MaxDeliver: a plain nak on that delivery left the message
    // neither acked nor pending for good, while the warning said it was given back for another
    // instance, which never got it.
    const stream = await admin.stream('STOPLAST')
    await admin.publish(`${stream}.in`, ['{"n":0}'])
    const warnings: string[] = []
    const buffer = refusingBuffer({ hold: true })
    const source = jetstream({
      servers: NATS_URL,
      stream,
      consumer: 'c',
      maxDeliver: 1,
      onWarning: (w) => warnings.push(w),
    })
    const stopped = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', source)
      .sink('out', ['in'], memory(), { buffer: buffer.factory })
      .build()
    await stopped.start()
    await until('the source sent the message', () => buffer.pushes.length === 1)
    const stopping = stopped.stop({ drainTimeoutMs: 5000 })
    buffer.release()
    await stopping
    console.log(`not accepted at a stop, last delivery: ${JSON.stringify(source.counters)}`)
    expect(source.counters).toMatchObject({ received: 1, nacked: 0, terminated: 1 })
    expect(warnings.join('\n')).not.toMatch(/given back/)
    expect(warnings.join('\n')).toMatch(
      /terminated message 1 .*last delivery the consumer allows \(MaxDeliver 1\)/,
    )
    const info = await admin.jsm.consumers.info(stream, 'c')
    expect([info.num_pending, info.num_ack_pending]).toEqual([0, 0])
  })

  it('with doubleAck, every ack is confirmed by the server before it counts', async () => {
    const stream = await admin.stream('DOUBLE')
    await admin.publish(
      `${stream}.in`,
      Array.from({ length: 20 }, (_, n) => JSON.stringify({ n })),
    )
    const source = jetstream({ servers: NATS_URL, stream, consumer: 'c', doubleAck: true })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], memory())
      .build()
    await topology.start()
    await until('all acked', () => source.counters.acked === 20)
    // Confirmed acks: the server has them now, without waiting for the stop's flush.
    const info = await admin.jsm.consumers.info(stream, 'c')
    expect([info.num_pending, info.num_ack_pending, info.ack_floor.stream_seq]).toEqual([0, 0, 20])
    await topology.stop()
    expect(source.counters.ackUnconfirmed).toBe(0)
  })

  it("keeps its pulls within a bound consumer's MaxRequestBatch and MaxRequestExpires: every message is consumed", async () => {
    // The server refuses a pull over either limit (409 'exceeded maxrequestbatch of 5', 'exceeded
    // maxrequestexpires of 2s'): with batchSize 100 and fetchExpiresMs 5000 (the defaults) every
    // pull failed, and the source warned of a failed pull every reconnectTimeWaitMs for ever,
    // without ever getting a message.
    const stream = await admin.stream('REQLIMITS')
    const N = 20
    await admin.publish(
      `${stream}.in`,
      Array.from({ length: N }, (_, n) => JSON.stringify({ n })),
    )
    await admin.jsm.consumers.add(stream, {
      durable_name: 'limited',
      ack_policy: AckPolicy.Explicit,
      max_batch: 5,
      max_expires: 2000 * 1e6,
    })
    const warnings: string[] = []
    const source = jetstream({
      servers: NATS_URL,
      stream,
      consumer: 'limited',
      create: false,
      reconnectTimeWaitMs: 100,
      onWarning: (w) => warnings.push(w),
    })
    const events = await consume(
      source,
      `${N} acked`,
      () => source.counters.acked === N || source.counters.pullErrors > 2,
    )
    console.log(
      `request limits: ${JSON.stringify(source.counters)}; warnings ${JSON.stringify(warnings.slice(0, 2))}`,
    )
    expect(source.counters).toMatchObject({ acked: N, pullErrors: 0 })
    expect(events.map((e) => e.n)).toEqual(Array.from({ length: N }, (_, n) => n))
  })

  it("holds at most the consumer's MaxAckPending in the pipeline: back pressure reaches the server", async () => {
    const stream = await admin.stream('PRESSURE')
    const N = 30
    await admin.publish(
      `${stream}.in`,
      Array.from({ length: N }, (_, n) => JSON.stringify({ n })),
    )
    let open: () => void = () => {}
    const gate = new Promise<void>((resolve) => {
      open = resolve
    })
    const sink = memory({ beforeWrite: () => gate })
    const source = jetstream({ servers: NATS_URL, stream, consumer: 'c', maxAckPending: 5, batchSize: 50 })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    await topology.start()
    await until('five in the pipeline', () => source.counters.inFlight === 5)
    const held = await admin.jsm.consumers.info(stream, 'c')
    expect({
      received: source.counters.received,
      ackPending: held.num_ack_pending,
      pending: held.num_pending,
    }).toEqual({
      received: 5,
      ackPending: 5,
      pending: N - 5,
    })
    open()
    await until('all acked', () => source.counters.acked === N)
    await topology.stop()
    expect(source.counters.received).toBe(N)
  })
})

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

/**
 * A proxy to the NATS server that rewrites the server's first INFO line with `info` (a newer
 * version, a smaller max_payload), as another server would send it.
 */
async function infoRewritingProxy(
  info: Record<string, unknown>,
): Promise<{ readonly address: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>()
  const server = createServer((client) => {
    const upstream = createConnection({ host: NATS_HOST, port: NATS_PORT })
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket
        .on('error', () => undefined)
        .on('close', () => {
          sockets.delete(socket)
          client.destroy()
          upstream.destroy()
        })
    }
    client.pipe(upstream)
    let head = Buffer.alloc(0)
    const first = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk])
      const end = head.indexOf('\r\n')
      if (end < 0) return
      upstream.off('data', first)
      const line = head.subarray(0, end).toString()
      const rewritten = JSON.stringify({ ...JSON.parse(line.slice('INFO '.length)), ...info })
      client.write(`INFO ${rewritten}`)
      client.write(head.subarray(end))
      upstream.pipe(client)
    }
    upstream.on('data', first)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  return {
    address: `127.0.0.1:${port}`,
    close() {
      for (const socket of sockets) socket.destroy()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
