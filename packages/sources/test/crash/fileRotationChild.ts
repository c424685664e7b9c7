// The child of the rotation crash test in FileSource.crash.test.ts: tails the pattern argv[2] into
// the NDJSON file argv[3], with checkpoints in argv[4], `startAt: 'end'`, and no checkpoint on
// the interval (only those the source writes of its own accord, and the last one at a SIGTERM
// stop). It prints `scanned` once this run wrote its first checkpoint (the first scan is over:
// the files it found are open, at the end for those without a checkpoint), so that the parent
// makes its new file after that. It reports (CrashReporter) each line the sink wrote, by number,
// as `delivered`, and apart as `fresh` those of the file made in this round (their message starts
// with `r<round> `), at which the parent SIGKILLs it.
import { statSync } from 'node:fs'
import { join } from 'node:path'
import { file as fileSink } from '@ackline/sinks'
import { file } from '@ackline/sources'
import { CrashReporter } from '@ackline/testkit'
import { type Sink, TopologyBuilder } from '@ackline/topology'

const [include, output, checkpoints] = process.argv.slice(2) as [string, string, string]
const fresh = `r${process.env.ACKLINE_CRASH_ROUND} `
const checkpointFile = join(checkpoints, 'checkpoints.json')
const inode = (): number | undefined => {
  try {
    return statSync(checkpointFile).ino
  } catch {
    return undefined
  }
}
// A checkpoint is written to a new file renamed over the old one, which is still there when the
// new one is made: another inode means another write.
const before = inode()

const reporting = CrashReporter.sink(fileSink({ path: output }), {
  key: (event) => /L(\d{6})/.exec(String(event.get('message')))?.[1] ?? '?',
})
const sink: Sink = {
  ...reporting,
  async write(events) {
    const result = await reporting.write(events)
    const delivered = events.events.filter(
      (_, i) => result === undefined || (Array.isArray(result) && result[i] === 'delivered'),
    )
    CrashReporter.report(
      'fresh',
      delivered.map((e) => String(e.get('message'))).filter((m) => m.startsWith(fresh)),
    )
    return result
  },
}

const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
  .source(
    'tail',
    file({
      include: [include],
      checkpoints,
      startAt: 'end',
      pollIntervalMs: 5,
      checkpointIntervalMs: 600_000,
      maxBatchLines: 3,
      onNotice: () => {},
    }),
  )
  // A few lines per write: lines of the new file are still in flight when the kill lands.
  .sink('out', ['tail'], sink, { buffer: { maxEvents: 3 } })
  .build()
await topology.start()
const scanned = setInterval(() => {
  if (inode() === before) return
  clearInterval(scanned)
  console.log('scanned')
}, 2)
process.on('SIGTERM', () => {
  void topology.stop().then(() => process.exit(0))
})
