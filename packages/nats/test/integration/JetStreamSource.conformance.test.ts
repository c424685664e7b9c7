// The jetstream source against the testkit's source conformance suite, on the real server: each
// feed publishes the records to a fresh stream, and the upstream's "acked" and "failed" lists are
// what the server heard: the acknowledgements the source published on the consumer's ack subjects
// (`$JS.ACK.<stream>.<consumer>.…`), read by a plain subscription on them.
import type { JsonObject } from '@ackline/core'
import { jetstream } from '@ackline/nats'
import { sourceConformance } from '@ackline/testkit'
import { jetstream as jetstreamClient } from '@nats-io/jetstream'
import type { Subscription } from '@nats-io/transport-node'
import { afterAll, beforeAll, describe, it } from 'vitest'
import { NATS_URL, NatsAdmin, skipWithoutNats, uniqueName } from './support/natsFixture.js'

const skip = await skipWithoutNats('JetStreamSource.conformance.test.ts')

/** The stream sequence in an ack subject: `$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.…` (v1), or with domain and account (v2). */
function streamSequence(subject: string): number {
  const tokens = subject.split('.')
  return Number(tokens.length === 9 ? tokens[5] : tokens[7])
}

describe.skipIf(skip)('jetstream source conformance (real server)', () => {
  let admin: NatsAdmin
  const subscriptions: Subscription[] = []
  beforeAll(async () => {
    admin = await NatsAdmin.open()
  })
  afterAll(async () => {
    for (const subscription of subscriptions) subscription.unsubscribe()
    await admin?.close()
  })

  sourceConformance(
    'jetstream source conformance',
    async () => {
      const stream = await admin.stream('CONF')
      const consumer = uniqueName('conf')
      /** The record of each stream sequence, as published. */
      const bySequence = new Map<number, JsonObject>()
      /** What the server heard, in order: a message may be acked before its PubAck reached the feed. */
      const heard: { sequence: number; settled: 'acked' | 'failed' }[] = []
      const subscription = admin.nc.subscribe(`$JS.ACK.${stream}.${consumer}.>`, {
        callback: (_error, msg) => {
          const kind = msg.string().split(' ')[0]
          const sequence = streamSequence(msg.subject)
          // An empty body is the legacy ack; `+WPI` (working) and `+NXT` settle nothing.
          if (kind === '+ACK' || kind === '') heard.push({ sequence, settled: 'acked' })
          else if (kind === '-NAK' || kind === '+TERM') heard.push({ sequence, settled: 'failed' })
        },
      })
      const records = (settled: 'acked' | 'failed'): JsonObject[] =>
        heard.flatMap((h) => {
          const record = h.settled === settled ? bySequence.get(h.sequence) : undefined
          return record === undefined ? [] : [record]
        })
      subscriptions.push(subscription)
      await admin.nc.flush()
      const js = jetstreamClient(admin.nc)
      const source = jetstream({
        servers: NATS_URL,
        stream,
        consumer,
        // An errored message comes back soon, so the suite sees it re-sent within its timeout.
        nakInitialMs: 20,
        // Records as published, so the suite can match what it sent with what the upstream heard.
        metadataField: false,
        onWarning: () => {},
      })
      return {
        source,
        feed: async (records: readonly JsonObject[]) => {
          for (const record of records) {
            const ack = await js.publish(`${stream}.in`, JSON.stringify(record))
            bySequence.set(ack.seq, record)
          }
        },
        upstream: () => ({ acked: records('acked'), failed: records('failed') }),
      }
    },
    { runner: { describe, it } },
  )
})
