// The child of FileSource.crash.test.ts: tails argv[2] into the NDJSON file argv[3], with
// checkpoints in argv[4], and prints `delivered <n>` each time the sink finished a write (n: the
// lines this process delivered so far). The parent SIGKILLs it at a point chosen by those reports.
import { file as fileSink } from '@ackline/sinks'
import { file } from '@ackline/sources'
import { TopologyBuilder } from '@ackline/topology'

const [input, output, checkpoints] = process.argv.slice(2) as [string, string, string]
const inner = fileSink({ path: output })
let delivered = 0
const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
  .source(
    'tail',
    file({
      include: [input],
      checkpoints,
      pollIntervalMs: 5,
      checkpointIntervalMs: 20,
      maxBatchLines: 7,
      onNotice: () => {},
    }),
  )
  .sink('out', ['tail'], {
    kind: 'counting_file',
    start: () => inner.start(),
    stop: () => inner.stop(),
    async write(events) {
      const n = events.length
      const result = await inner.write(events)
      delivered += n
      process.stdout.write(`delivered ${delivered}\n`)
      return result
    },
  })
  .build()
await topology.start()
process.stdout.write('started\n')
process.on('SIGTERM', () => {
  void topology.stop().then(() => process.exit(0))
})
