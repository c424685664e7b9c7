// The child of FileSource.crash.test.ts: tails argv[2] into the NDJSON file argv[3], with
// checkpoints in argv[4], and reports (CrashReporter) each line the sink wrote, by its number, once
// the write resolved. The parent SIGKILLs it at a point chosen by those reports, or stops it with
// SIGTERM on the last run.
import { file as fileSink } from '@ackline/sinks'
import { file } from '@ackline/sources'
import { CrashReporter } from '@ackline/testkit'
import { TopologyBuilder } from '@ackline/topology'

const [input, output, checkpoints] = process.argv.slice(2) as [string, string, string]
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
  .sink(
    'out',
    ['tail'],
    CrashReporter.sink(fileSink({ path: output }), {
      key: (event) => /L(\d{6})/.exec(String(event.get('message')))?.[1] ?? '?',
    }),
  )
  .build()
await topology.start()
process.on('SIGTERM', () => {
  void topology.stop().then(() => process.exit(0))
})
