// The child of the crash test: consumes stream argv[2] through consumer argv[3] into the NDJSON
// file argv[4], and reports (CrashReporter) how many messages the source acked each time its acked
// count grows, so the parent decides when to kill it by what it reported.
import { jetstream } from '@ackline/nats'
import { file } from '@ackline/sinks'
import { CrashReporter } from '@ackline/testkit'
import { TopologyBuilder } from '@ackline/topology'

const [stream, consumer, path, servers = '127.0.0.1:4222'] = process.argv.slice(2)
if (stream === undefined || consumer === undefined || path === undefined)
  throw new Error('usage: stream consumer path [servers]')
const source = jetstream({
  servers,
  stream,
  consumer,
  batchSize: 20,
  ackWaitMs: 1000,
  fetchExpiresMs: 1000,
  onWarning: () => {},
})
const topology = new TopologyBuilder({ acknowledgements: true })
  .source('in', source)
  .sink('out', ['in'], file({ path }))
  .build()
await topology.start()
let last = 0
setInterval(() => {
  const { acked } = source.counters
  if (acked > last) CrashReporter.report('acked', acked - last)
  last = acked
}, 5)
