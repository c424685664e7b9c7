// Crash-testing your own pipeline with @ackline/testkit. This file is both the pipeline (run as
// `testkit-crash.ts child <dir>`: a checkpointed source copying records into an NDJSON file) and
// the test: crashLoop runs the pipeline in a child, SIGKILLs it once it reported a number of
// records delivered (drawn from a printed seed), restarts it, lets a last run finish the input,
// and checks that every record a run reported delivered is in the file.
// Run it: npx tsx --conditions=source examples/testkit-crash.ts
import {
  appendFileSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { CrashReporter, crashLoop } from '@ackline/testkit'
import { type Sink, type Source, TopologyBuilder } from '@ackline/topology'

// Far more than the kill points (5 to 100 delivered), so every round has something to crash on.
// Were a child to finish the whole input before its kill landed (a loaded machine, where the
// parent reads the reports late), the next round's child would find nothing left and exit before
// its kill point: it says so (CrashReporter.finished), and that round ends `exited`, not failed.
const RECORDS = 3000

/** The pipeline under test: records 0..RECORDS-1 into `<dir>/out.ndjson`, resuming from a checkpoint. */
export async function pipeline(dir: string): Promise<void> {
  const checkpoint = join(dir, 'checkpoint')
  const source: Source = {
    kind: 'numbers',
    canAcknowledge: true,
    async run(context) {
      let next = existsSync(checkpoint) ? Number(readFileSync(checkpoint, 'utf8')) : 0
      while (next < RECORDS) {
        const end = Math.min(RECORDS, next + 10)
        const receipt = await context.send(Array.from({ length: end - next }, (_, i) => ({ id: next + i })))
        if ((await receipt.status) !== 'delivered') continue // send it again
        // Move the checkpoint only past what was delivered (atomically: write, then rename).
        writeFileSync(`${checkpoint}.tmp`, String(end))
        renameSync(`${checkpoint}.tmp`, checkpoint)
        next = end
      }
      // Every record is delivered and checkpointed: the input ran out. Said here, where that is
      // known, not after topology.done, which resolves when a source failed too.
      CrashReporter.finished()
    },
  }
  const sink: Sink = {
    kind: 'ndjson',
    async write(events) {
      appendFileSync(
        join(dir, 'out.ndjson'),
        events.events.map((e) => `${JSON.stringify(e.fields)}\n`).join(''),
      )
      return undefined // delivered: the lines are written
    },
  }
  const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
    .source('numbers', source)
    // The one line a pipeline needs for the crash loop: report what the sink delivered, by key.
    .sink('out', ['numbers'], CrashReporter.sink(sink, { key: (e) => e.get('id') as number }))
    .build()
  await topology.start()
  await topology.done
}

export async function main(): Promise<{ kills: number; reported: number; stored: number; lost: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'ackline-example-crash-'))
  try {
    const report = await crashLoop({
      script: fileURLToPath(import.meta.url),
      nodeArgs: ['--conditions=source', '--import', 'tsx'],
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      args: ['child', dir],
      rounds: 2,
      killAfter: { min: 5, max: 100 },
      log: (line) => console.error(line), // the seed, and a line per round
    })
    const stored = readFileSync(join(dir, 'out.ndjson'), 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => String((JSON.parse(line) as { id: number }).id))
    report.expectNoLoss(stored) // throws, naming the lost keys and the seed, if the pipeline lost any
    return {
      kills: report.rounds.filter((r) => r.ending === 'killed' && r.checked).length,
      reported: report.keys().size,
      stored: new Set(stored).size,
      lost: report.lost(stored),
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  if (process.argv[2] === 'child') await pipeline(process.argv[3]!)
  else console.log(JSON.stringify(await main()))
}
