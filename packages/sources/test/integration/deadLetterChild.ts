// The child of the dead-letter test in FileSource.test.ts, run under a file size limit
// (`ulimit -f`): tails argv[2] with checkpoints in argv[3] into a sink that rejects every line, so
// each line is dead-lettered. It prints each notice of the source on a line of its own, and stops
// cleanly on SIGTERM.
import { file } from '@ackline/sources'
import { TopologyBuilder } from '@ackline/topology'

const [input, checkpoints] = process.argv.slice(2) as [string, string]
const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
  .source(
    'files',
    file({
      include: [input],
      checkpoints,
      pollIntervalMs: 5,
      checkpointIntervalMs: 20,
      retry: { initialBackoffMs: 5, maxBackoffMs: 20 },
      onNotice: (message) => process.stdout.write(`${JSON.stringify(message)}\n`),
    }),
  )
  .sink('out', ['files'], {
    kind: 'reject-all',
    async write(events) {
      return events.events.map(() => 'rejected' as const)
    },
  })
  .build()
await topology.start()
process.on('SIGTERM', () => {
  void topology.stop().then(() => process.exit(0))
})
