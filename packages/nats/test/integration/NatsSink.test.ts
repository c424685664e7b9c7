import { natsSink } from '@ackline/nats'
import { generator } from '@ackline/sources'
import { TopologyBuilder, TopologyError } from '@ackline/topology'
import { connect } from '@nats-io/transport-node'
import { describe, expect, it } from 'vitest'
import { NATS_URL, skipWithoutNats, uniqueName, until } from './support/natsFixture.js'

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
})
