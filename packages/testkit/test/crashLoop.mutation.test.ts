// crashLoop against real topologies, the mutation check: the same pipeline (a checkpointed source
// into an NDJSON file, its sink wrapped in CrashReporter.sink) once with a sink that appends before
// it reports `delivered`, once with one that reports first and appends only at stop. The crash loop
// must pass the first and catch the second losing what it reported.
// ACKLINE_CRASH_ROUNDS raises the kills per pipeline (default 2 and 1); ACKLINE_CRASH_RECORDS the input;
// ACKLINE_SEED replays the kill points the run printed.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { crashLoop } from '@ackline/testkit'
import { afterAll, describe, expect, it } from 'vitest'

const root = fileURLToPath(new URL('../../..', import.meta.url))
const ROUNDS =
  process.env.ACKLINE_CRASH_ROUNDS === undefined ? undefined : Number(process.env.ACKLINE_CRASH_ROUNDS)
const RECORDS = Number(process.env.ACKLINE_CRASH_RECORDS ?? 1000)
const dirs: string[] = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

async function pipeline(mode: 'correct' | 'broken', rounds: number) {
  const dir = mkdtempSync(join(tmpdir(), `ackline-crashloop-${mode}-`))
  dirs.push(dir)
  const report = await crashLoop({
    script: fileURLToPath(new URL('./fixtures/appendPipeline.ts', import.meta.url)),
    nodeArgs: ['--conditions=source', '--import', 'tsx'],
    cwd: root,
    args: [dir, String(RECORDS), mode],
    rounds,
    killAfter: { min: 5, max: 60 },
    ...(process.env.ACKLINE_SEED === undefined ? {} : { seed: Number(process.env.ACKLINE_SEED) }),
  })
  const stored = readFileSync(join(dir, 'out.ndjson'), 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => String((JSON.parse(l) as { id: number }).id))
  return { report, stored }
}

describe('crashLoop over a real topology', () => {
  it('passes a pipeline that writes before it reports delivered: every reported record is stored', async () => {
    const { report, stored } = await pipeline('correct', ROUNDS ?? 2)
    expect(report.rounds.filter((r) => r.ending === 'killed' && r.checked)).toHaveLength(ROUNDS ?? 2)
    report.expectNoLoss(stored)
    expect(new Set(stored).size).toBe(RECORDS)
  }, 60_000)

  it('catches a pipeline that reports delivered before it writes: what it reported is lost at the kill', async () => {
    const { report, stored } = await pipeline('broken', ROUNDS ?? 1)
    expect(report.rounds.filter((r) => r.ending === 'killed' && r.checked)).toHaveLength(ROUNDS ?? 1)
    const lost = report.lost(stored)
    // What the killed runs reported was only held in memory (a batch whose checkpoint the kill
    // cut short is sent again, and the last run stores it at its stop).
    const killedKeys = new Set(
      report.rounds.filter((r) => r.ending === 'killed').flatMap((r) => r.keys.delivered ?? []),
    )
    expect(lost.length).toBeGreaterThan(0)
    expect(lost.every((key) => killedKeys.has(key))).toBe(true)
    expect(() => report.expectNoLoss(stored)).toThrow(/LOST.*missing afterwards/s)
  }, 60_000)
})
