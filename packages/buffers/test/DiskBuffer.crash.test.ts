// The real crash test: a child process writes through the disk buffer and acknowledges its
// source once the records are durable, while the test SIGKILLs it. Each kill comes once the child
// reported N records acknowledged to its source (N drawn from a printed seed), so every round
// checks something whatever the machine's speed. After each restart, and after a final drain,
// every record the child reported acknowledged must have been delivered to the sink; the
// duplicates (records delivered again after a kill) are counted per kill and printed, against
// the documented bound: the acknowledgements not yet checkpointed plus the in-flight window.
// Run with sync 'always' and with group commit (whose write-behind a kill can cut short). The
// rounds run on the testkit's crashLoop (kill on 'acked' reports, no last run: the drain runs here).
// CRASH_ROUNDS raises the number of kills (default 3 per mode); CRASH_SEED replays a run.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openDiskBuffer } from '@ackline/buffers'
import { crashLoop } from '@ackline/testkit'
import { afterAll, describe, expect, it } from 'vitest'

const child = new URL('./fixtures/crashChild.ts', import.meta.url).pathname
const root = new URL('../../..', import.meta.url).pathname
const dirs: string[] = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

const rounds = Number(process.env.CRASH_ROUNDS ?? 3)
const seed = Number(process.env.CRASH_SEED ?? Date.now() % 2 ** 31)

describe('DiskBuffer under SIGKILL', () => {
  it.each(['always', 'group'] as const)(
    'sync %s: delivers every record acknowledged to its source despite kills under load, and reports the duplicates per kill',
    async (mode) => {
      console.log(`crash test (sync ${mode}): rerun with CRASH_SEED=${seed}`)
      const dir = mkdtempSync(join(tmpdir(), 'ackline-crash-'))
      dirs.push(dir)
      // Each kill comes once the child reported 200..2000 records acknowledged (drawn from the seed).
      const report = await crashLoop({
        script: child,
        nodeArgs: ['--conditions=source', '--import', 'tsx'],
        cwd: root,
        args: (round) => [dir, String(round), mode],
        rounds,
        count: 'acked',
        killAfter: { min: 200, max: 1999 },
        seed: seed + (mode === 'always' ? 0 : 1),
        last: false,
      })
      const acked = report.keys('acked')
      const deliveries = new Map<string, number>()
      const deliver = (id: string): boolean => {
        const before = deliveries.get(id) ?? 0
        deliveries.set(id, before + 1)
        return before > 0
      }
      const duplicatesPerKill: number[] = []
      for (const r of report.rounds) {
        // Records delivered in this run that an earlier run delivered: what the previous kill cost.
        let again = 0
        for (const id of r.keys.delivered ?? []) if (deliver(id)) again++
        if (r.round > 0) duplicatesPerKill.push(again)
        console.log(
          `sync ${mode}, round ${r.round}: killed once ${r.killAfter} records were acknowledged; ${r.counts.acked} acknowledged, ${r.counts.delivered ?? 0} delivered, ${again} of them again`,
        )
      }
      // Every round checked something: the kill came after acknowledgements, not before.
      expect(report.rounds.filter((r) => r.ending === 'killed' && r.checked)).toHaveLength(rounds)
      for (const r of report.rounds) expect(r.counts.acked).toBeGreaterThanOrEqual(r.killAfter!)
      // The last restart: drain what is left (the lock of the killed child is stale and taken over).
      const buffer = await openDiskBuffer({ path: dir, sinkId: 'crash', log: () => {} })
      await buffer.close()
      let again = 0
      for (;;) {
        const events = await buffer.pull()
        if (events === undefined) break
        for (const event of events) if (deliver(event.get('id') as string)) again++
        events.end('delivered')
      }
      duplicatesPerKill.push(again)
      const lost = [...acked].filter((id) => !deliveries.has(id))
      const duplicates = [...deliveries.values()].reduce((n, count) => n + count - 1, 0)
      const mean = duplicatesPerKill.reduce((n, d) => n + d, 0) / duplicatesPerKill.length
      console.log(
        `crash test (sync ${mode}): ${rounds} SIGKILLs, ${acked.size} records acknowledged to the source, ${deliveries.size} delivered, ${lost.length} lost, ${duplicates} duplicate deliveries; per kill: ${duplicatesPerKill.join(', ')} (mean ${mean.toFixed(0)}; bound: the acknowledgements not yet checkpointed, under ledgerEveryAcks 1000 plus those made while a checkpoint waits its turn, plus the in-flight window)`,
      )
      expect(duplicatesPerKill).toHaveLength(rounds)
      expect(acked.size).toBeGreaterThan(0)
      expect(lost).toEqual([])
    },
    120_000,
  )
})
