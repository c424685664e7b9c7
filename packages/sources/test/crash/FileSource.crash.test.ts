// Kill-and-restart, on the testkit's crashLoop: a child tails a growing file into a file sink and is
// SIGKILLed, again and again, once it reported a number of lines delivered (drawn from a printed
// seed); more lines arrive during each run. After the last run every line written must be in the
// sink at least once (none skipped), and so must every line a run reported delivered;
// duplicates are counted and printed.
// A second loop rotates the file once each run has scanned, with startAt 'end' and no checkpoint on
// the interval, and kills the run once it reported lines of the new file delivered: each restart
// must read on every file a run began to read, though no checkpoint of the interval named it.
// Size: ACKLINE_CRASH_KILLS kills (default 20, what issue 9 asks for), ACKLINE_CRASH_ROTATIONS
// rotations (default 6), ACKLINE_CRASH_LINES lines appended per run (default 30); ACKLINE_SEED
// replays a run.
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { crashLoop } from '@ackline/testkit'
import { afterAll, describe, expect, it } from 'vitest'

const KILLS = Number(process.env.ACKLINE_CRASH_KILLS ?? 20)
const ROTATIONS = Number(process.env.ACKLINE_CRASH_ROTATIONS ?? 6)
const PER_RUN = Number(process.env.ACKLINE_CRASH_LINES ?? 30)
const seed = process.env.ACKLINE_SEED === undefined ? undefined : Number(process.env.ACKLINE_SEED)

const dir = mkdtempSync(join(tmpdir(), 'ackline-file-crash-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const input = join(dir, 'input.log')
const output = join(dir, 'output.ndjson')
const checkpoints = join(dir, 'cp')

let written = 0
const append = (n: number) => {
  let text = ''
  for (let i = 0; i < n; i++) text += `line L${String(written++).padStart(6, '0')}\n`
  appendFileSync(input, text)
}

/** How many times each line number is in the sink (`output`, or another file). */
const count = (sink = output) => {
  const text = existsSync(sink) ? readFileSync(sink, 'utf8') : ''
  const seen = new Map<string, number>()
  for (const m of text.matchAll(/L(\d{6})/g)) seen.set(m[1]!, (seen.get(m[1]!) ?? 0) + 1)
  return seen
}

describe('file source under SIGKILL', () => {
  it(`never skips a line across ${KILLS} kills at reported delivery points`, async () => {
    writeFileSync(input, '')
    const report = await crashLoop({
      script: fileURLToPath(new URL('./fileTailChild.ts', import.meta.url)),
      nodeArgs: ['--conditions=source', '--import', 'tsx'],
      args: [input, output, checkpoints],
      rounds: KILLS,
      // Kill after 1..PER_RUN lines this run reported delivered.
      killAfter: { min: 1, max: PER_RUN },
      ...(seed === undefined ? {} : { seed }),
      beforeRound: (round, random) => {
        if (round === KILLS) return
        append(PER_RUN)
        // More lines arrive while the child runs (a seeded count, after a seeded delay).
        setTimeout(() => append(Math.floor(random() * 5)), Math.floor(random() * 20))
      },
      // The last run goes until every line written is in the sink, then stops cleanly (SIGTERM).
      last: { until: () => count().size === written, timeoutMs: 20_000 },
    })
    const seen = count()
    const missing: number[] = []
    for (let i = 0; i < written; i++) if (!seen.has(String(i).padStart(6, '0'))) missing.push(i)
    let duplicates = 0
    for (const n of seen.values()) duplicates += n - 1
    const killed = report.rounds.filter((r) => r.ending === 'killed')
    console.log(
      `file source crash test: ${written} lines written, ${KILLS} kills (after ${killed.map((r) => r.reportedAtKill).join(', ')} delivered), ` +
        `${seen.size} distinct lines in the sink, ${duplicates} duplicates, ${missing.length} missing`,
    )
    expect(killed.filter((r) => r.checked)).toHaveLength(KILLS)
    report.expectNoLoss(seen.keys())
    expect(missing).toEqual([])
    expect(seen.size).toBe(written)
  }, 600_000)
})

describe('file source with startAt end under SIGKILL, its file rotated in each run', () => {
  it(`never skips a line of a file a run began to read, across ${ROTATIONS} kills after lines of a new file were delivered`, async () => {
    const logs = join(dir, 'rotation')
    mkdirSync(logs)
    const log = join(logs, 'app.log')
    const sink = join(dir, 'rotation.ndjson')
    // There at the first start, without a checkpoint: not read (startAt 'end').
    writeFileSync(log, 'before the first start\n'.repeat(5))
    let written = 0
    const rotated = new Set<number>()
    // Once the run has scanned: the file is renamed away (its lines sent, or not yet finished),
    // and a new one made under its name, which no checkpoint of the interval will name.
    const rotate = (round: number) => {
      if (rotated.has(round)) return
      rotated.add(round)
      renameSync(log, `${log}.${round}`)
      let text = ''
      for (let i = 0; i < PER_RUN; i++) text += `r${round} line L${String(written++).padStart(6, '0')}\n`
      writeFileSync(log, text)
    }
    const report = await crashLoop({
      script: fileURLToPath(new URL('./fileRotationChild.ts', import.meta.url)),
      nodeArgs: ['--conditions=source', '--import', 'tsx'],
      args: [join(logs, 'app.log*'), sink, join(dir, 'rotation-cp')],
      rounds: ROTATIONS,
      // Killed once 1..PER_RUN lines of this run's new file were reported delivered.
      count: 'fresh',
      killAfter: { min: 1, max: PER_RUN },
      ...(seed === undefined ? {} : { seed }),
      onOutput: (line, stream, round) => {
        if (stream === 'stdout' && line === 'scanned') rotate(round)
      },
      last: { until: () => rotated.has(ROTATIONS) && count(sink).size === written, timeoutMs: 20_000 },
    })
    const seen = count(sink)
    const missing: number[] = []
    for (let i = 0; i < written; i++) if (!seen.has(String(i).padStart(6, '0'))) missing.push(i)
    let duplicates = 0
    for (const n of seen.values()) duplicates += n - 1
    const killed = report.rounds.filter((r) => r.ending === 'killed')
    console.log(
      `file source rotation crash test: ${written} lines written in ${rotated.size} files, ${ROTATIONS} kills (after ${killed.map((r) => r.reportedAtKill).join(', ')} lines of the new file delivered), ` +
        `${seen.size} distinct lines in the sink, ${duplicates} duplicates, ${missing.length} missing`,
    )
    expect(killed.filter((r) => r.checked)).toHaveLength(ROTATIONS)
    report.expectNoLoss(seen.keys(), 'delivered')
    expect(missing).toEqual([])
    expect(readFileSync(sink, 'utf8')).not.toContain('before the first start')
  }, 600_000)
})
