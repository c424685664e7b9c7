// The child of the crash test: consumes a queue through a topology into a file sink and reports
// (CrashReporter) how many messages the source acked each time its ack count grows, so the parent
// decides when to SIGKILL it by what it reported.
//   node --conditions=source --import tsx consumer.ts <url> <queue> <file>
import { amqpSource } from '@ackline/amqp'
import { file } from '@ackline/sinks'
import { CrashReporter } from '@ackline/testkit'
import { TopologyBuilder } from '@ackline/topology'

const [url, queue, path] = process.argv.slice(2)
if (url === undefined || queue === undefined || path === undefined)
  throw new Error('usage: consumer.ts <url> <queue> <file>')
const source = amqpSource({ url, queue, prefetch: 50, batchSize: 20 })
const topology = new TopologyBuilder({ acknowledgements: true })
  .source('rabbit', source)
  .sink('archive', ['rabbit'], file({ path }))
  .build()
await topology.start()
// The parent ends the last run with SIGTERM: a clean stop flushes the last acks before closing.
process.once('SIGTERM', () => {
  clearInterval(report)
  void topology.stop()
})
let last = 0
const report = setInterval(() => {
  const { acked } = source.counters
  if (acked > last) CrashReporter.report('acked', acked - last)
  last = acked
}, 2)
await topology.done
