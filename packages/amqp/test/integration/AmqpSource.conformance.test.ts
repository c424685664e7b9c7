// amqpSource against the testkit's source conformance suite, on the real broker: each feed
// publishes the records to a fresh queue, and the upstream's "acked" and "failed" lists are what
// the broker heard on the wire (basic.ack; basic.nack), read from the frames passing through a
// TCP proxy between the source and the broker.
import { amqpSource } from '@ackline/amqp'
import type { JsonObject } from '@ackline/core'
import { sourceConformance, type TcpProxy } from '@ackline/testkit'
import { afterAll, beforeAll, describe, it } from 'vitest'
import { AckTap } from './AckTap.js'
import { Admin, brokerAvailable, brokerProxy } from './broker.js'

const available = await brokerAvailable()

describe.skipIf(!available)('amqpSource conformance (real broker)', () => {
  let admin: Admin
  const proxies: TcpProxy[] = []
  beforeAll(async () => {
    admin = await Admin.open()
  })
  afterAll(async () => {
    for (const proxy of proxies) await proxy.close()
    await admin?.close()
  })

  sourceConformance(
    'amqp source conformance',
    async () => {
      const { queue } = await admin.queueWithDeadLetters()
      const tap = new AckTap()
      const { proxy, url } = await brokerProxy(tap.onData)
      proxies.push(proxy)
      const source = amqpSource({
        url,
        queue,
        // An errored message comes back soon, so the suite sees it re-sent within its timeout.
        retryInitialDelayMs: 20,
        // Records as published, so the suite can match what it sent with what the upstream heard.
        metadataField: false,
        onWarning: () => {},
      })
      return {
        source,
        feed: (records: readonly JsonObject[]) => admin.publish(queue, records),
        upstream: () => ({
          acked: tap.records('ack') as JsonObject[],
          failed: tap.records('requeue', 'dead-letter') as JsonObject[],
        }),
      }
    },
    { runner: { describe, it } },
  )
})
