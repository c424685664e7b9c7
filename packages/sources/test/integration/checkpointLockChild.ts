// The child of the checkpoint-lock tests in FileSource.test.ts: tails argv[2] with checkpoints in
// argv[3], delivering every line, and prints `delivered <line>` once the sink has it, and each
// notice as `notice <text>`; a run that fails prints `failed <code>`. Stops cleanly on SIGTERM.
import { file } from '@ackline/sources'
import { TopologyBuilder } from '@ackline/topology'

const [input, checkpoints] = process.argv.slice(2) as [string, string]
const say = (line: string) => process.stdout.write(`${line.replaceAll('\n', ' ')}\n`)
const topology = new TopologyBuilder({
  acknowledgements: true,
  onWarning: () => {},
})
  .source(
    'child',
    file({
      include: [input],
      checkpoints,
      pollIntervalMs: 5,
      checkpointIntervalMs: 20,
      onNotice: (message) => say(`notice ${message}`),
    }),
  )
  .sink('out', ['child'], {
    kind: 'print',
    async write(events) {
      for (const event of events.events) say(`delivered ${String(event.get('message'))}`)
      return events.events.map(() => 'delivered' as const)
    },
  })
  .build()
await topology.start()
process.on('SIGTERM', () => {
  void topology.stop().then(
    () => process.exit(0),
    (error: unknown) => {
      say(`failed ${(error as { code?: string }).code}`)
      process.exit(1)
    },
  )
})
