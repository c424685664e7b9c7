// Kill-and-restart, on the testkit's crashLoop: a child tails a growing file into a file sink and is
// SIGKILLed, again and again, once it reported a number of lines delivered (drawn from a printed
// seed); more lines arrive during each run. After the last run every line written must be in the
// sink at least once (none skipped), and so must every line a run reported delivered;
// duplicates are counted and printed.
// Size: ACKLINE_CRASH_KILLS kills (default 20, what issue 9 asks for), ACKLINE_CRASH_LINES lines appended per run
// (default 30); ACKLINE_SEED replays a run.
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { crashLoop } from '@ackline/testkit'
import { afterAll, describe, expect, it } from 'vitest'

const KILLS = Number(process.env.ACKLINE_CRASH_KILLS ?? 20)
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

/** How many times each line number is in the sink. */
const count = () => {
  const text = existsSync(output) ? readFileSync(output, 'utf8') : ''
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
