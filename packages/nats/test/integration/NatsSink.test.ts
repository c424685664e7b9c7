import { EventArray, LogEvent } from '@ackline/core'
import { natsSink } from '@ackline/nats'
import { generator } from '@ackline/sources'
import { tcpProxy } from '@ackline/testkit'
import { TopologyBuilder, TopologyError } from '@ackline/topology'
import { connect } from '@nats-io/transport-node'
import { describe, expect, it } from 'vitest'
import { NATS_HOST, NATS_PORT, NATS_URL, skipWithoutNats, uniqueName, until } from './support/natsFixture.js'

const skip = await skipWithoutNats('NatsSink.test.ts')

describe('core NATS sink: allowed only with acknowledgements off', () => {
  it('build() refuses it unless declared with acknowledgements: false, naming the sink and the field', () => {
    for (const declared of [{}, { acknowledgements: true }]) {
      const builder = new TopologyBuilder({ acknowledgements: false })
        .source('gen', generator({ count: 1 }))
        .sink('live', ['gen'], natsSink({ servers: NATS_URL, subject: 'x' }), declared)
      let error: unknown
      try {
        builder.build()
      } catch (caught) {
        error = caught
      }
      expect(error).toBeInstanceOf(TopologyError)
      expect((error as TopologyError).problems).toEqual([
        expect.objectContaining({
          code: 'ACK_UNSUPPORTED',
          component: 'live',
          field: 'acknowledgements',
          message: expect.stringMatching(/sink 'live' \(nats\) cannot confirm a delivery/),
        }),
      ])
    }
  })
})

describe.skipIf(skip)('core NATS sink against a NATS server', () => {
  it('publishes every event to a subscriber when declared without acknowledgements', async () => {
    const subject = uniqueName('live')
    const nc = await connect({ servers: NATS_URL })
    const got: number[] = []
    nc.subscribe(subject, {
      callback: (_err, msg) => {
        got.push((msg.json() as { n: number }).n)
      },
    })
    await nc.flush()
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('gen', generator({ count: 30, batchSize: 10, record: (n) => ({ n }) }))
      .sink('live', ['gen'], natsSink({ servers: NATS_URL, subject }), {
        acknowledgements: false,
      })
      .build()
    await topology.start()
    await topology.done
    await until('the subscriber got all 30', () => got.length === 30, 5000)
    expect(got).toEqual(Array.from({ length: 30 }, (_, n) => n))
    await nc.close()
  })

  it('a write while the connection is down is not delivered: nats.js drops what it buffered at the reconnect, and the write fails', async () => {
    // What `delivered` means here: the server read the messages (a flush answered on the
    // connection they went out on). The client buffers publishes while disconnected and discards
    // them when it dials again, failing the flush, so none of them may count as delivered.
    const subject = uniqueName('down')
    const nc = await connect({ servers: NATS_URL })
    const got: number[] = []
    nc.subscribe(subject, {
      callback: (_err, msg) => {
        got.push((msg.json() as { n: number }).n)
      },
    })
    await nc.flush()
    const proxy = await tcpProxy({ target: { host: NATS_HOST, port: NATS_PORT } })
    const sink = natsSink({ servers: proxy.address, subject, reconnectTimeWaitMs: 50 })
    await sink.start()
    try {
      proxy.cut()
      await expect(
        sink.write(EventArray.of(new LogEvent({ n: 1 }), new LogEvent({ n: 2 }))),
      ).rejects.toMatchObject({ name: 'RetryableError', message: expect.stringMatching(/flush failed/) })
      expect(await sink.write(EventArray.of(new LogEvent({ n: 3 })))).toEqual(['delivered'])
      await until('the subscriber got the write after the reconnect', () => got.includes(3), 5000)
      expect(got).toEqual([3])
    } finally {
      await sink.stop()
      await proxy.close()
      await nc.close()
    }
  })

  it('an event over the server max_payload is rejected alone, naming the size and the limit; its batch-mates are published', async () => {
    const subject = uniqueName('big')
    const nc = await connect({ servers: NATS_URL })
    const got: number[] = []
    nc.subscribe(subject, {
      callback: (_err, msg) => {
        got.push((msg.json() as { n: number }).n)
      },
    })
    await nc.flush()
    const max = nc.info?.max_payload
    expect(max).toBeGreaterThan(0)
    const sink = natsSink({ servers: NATS_URL, subject })
    await sink.start()
    const big = new LogEvent({ n: 2, pad: 'x'.repeat(max!) })
    const bytes = JSON.stringify(big.fields).length
    const result = await sink.write(EventArray.of(new LogEvent({ n: 1 }), big, new LogEvent({ n: 3 })))
    expect(result?.map((entry) => (entry instanceof Error ? entry.name : entry))).toEqual([
      'delivered',
      'RejectError',
      'delivered',
    ])
    expect(result?.[1]).toMatchObject({
      code: 'REJECTED',
      component: 'nats',
      message: `nats: the event's message is ${bytes} bytes, over the server's max_payload of ${max} bytes: not published to '${subject}'`,
    })
    await until('the subscriber got the other two', () => got.length === 2, 5000)
    expect(got).toEqual([1, 3])
    await sink.stop()
    await nc.close()
  })
})
