import type { DeliveryStatus, EventArray, LogEvent } from '@ackline/core'
import { jetstream } from '@ackline/nats'
import { type Sink, TopologyBuilder } from '@ackline/topology'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { NATS_URL, NatsAdmin, skipWithoutNats, until } from './support/natsFixture.js'

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
    await topology.stop()
    advisories.unsubscribe()

    const c = source.counters
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
      `checked: ${N} messages, ${retried.length} redelivered then acked, ${rejected.length} terminated`,
    )
  })
})
