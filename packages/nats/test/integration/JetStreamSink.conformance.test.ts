// The jetstream sink against the testkit's sink conformance suite, on the local NATS server: each
// sink publishes to a stream of its own (deleted at the end), which the suite reads back. Under
// CI=true an unreachable server fails the file instead of skipping it.
import type { JsonObject } from '@ackline/core'
import { type JetStreamSink, jetstreamSink } from '@ackline/nats'
import { sinkConformance } from '@ackline/testkit'
import { afterAll, describe, it } from 'vitest'
import { NATS_URL, NatsAdmin, skipWithoutNats } from './support/natsFixture.js'

const skip = await skipWithoutNats('JetStreamSink.conformance.test.ts')
const admin = skip ? undefined : await NatsAdmin.open()
afterAll(async () => {
  await admin?.close()
})

const streams = new WeakMap<JetStreamSink, string>()

sinkConformance(
  'jetstream sink conformance',
  async () => {
    const stream = await admin!.stream('CONFORMANCE')
    const sink = jetstreamSink({ servers: NATS_URL, subject: `${stream}.out` })
    streams.set(sink, stream)
    return sink
  },
  {
    read: async (sink) =>
      (await admin!.contents(streams.get(sink)!)).map((m) => JSON.parse(m.data) as JsonObject),
    runner: { describe: describe.skipIf(skip) as typeof describe, it },
  },
)
