// The real crash test: a child process writes through the disk buffer and acknowledges its
// source once the records are durable, while the test SIGKILLs it. Each kill comes once the child
// reported N records acknowledged to its source (N drawn from a printed seed), so every round
// checks something whatever the machine's speed. After each restart, and after a final drain,
// every record the child reported acknowledged must have been delivered to the sink; the
// duplicates (records delivered again after a kill) are counted per kill and printed, against
// the documented bound: the acknowledgements not yet checkpointed plus the in-flight window.
// Run with sync 'always' and with group commit (whose write-behind a kill can cut short).
// CRASH_ROUNDS raises the number of kills (default 3 per mode); CRASH_SEED replays a run.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openDiskBuffer } from '@ackline/buffers'
import { afterAll, describe, expect, it } from 'vitest'

const child = new URL('./fixtures/crashChild.ts', import.meta.url).pathname
const root = new URL('../../..', import.meta.url).pathname
const dirs: string[] = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

const rounds = Number(process.env.CRASH_ROUNDS ?? 3)
const seed = Number(process.env.CRASH_SEED ?? Date.now() % 2 ** 31)

/** A small seeded generator (mulberry32), so a run's kill points can be replayed. */
function random(s: number): () => number {
  let a = s >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32
  }
}

interface Round {
  readonly acked: string[]
  readonly delivered: string[]
}

type Mode = 'always' | 'group'

/** Runs the child until it reported `killAfter` records acknowledged, then SIGKILLs it. */
function runAndKill(dir: string, round: number, mode: Mode, killAfter: number): Promise<Round> {
  return new Promise((resolve, reject) => {
    const args = ['--conditions=source', '--import', 'tsx', child, dir, String(round), mode]
    const proc = spawn(process.execPath, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] })
    const acked: string[] = []
    const delivered: string[] = []
    let pending = ''
    let stderr = ''
    let killed = false
    proc.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    proc.stdout.on('data', (chunk: Buffer) => {
      const lines = (pending + chunk.toString()).split('\n')
      pending = lines.pop()! // an incomplete line: the kill may have cut it
      for (const line of lines) {
        if (line.startsWith('A ')) acked.push(...line.slice(2).split(' '))
        else if (line.startsWith('D ')) delivered.push(...line.slice(2).split(' '))
      }
      if (!killed && acked.length >= killAfter) {
        killed = true
        proc.kill('SIGKILL')
      }
    })
    proc.on('error', reject)
    proc.on('exit', (code, signal) => {
      if (signal !== 'SIGKILL') reject(new Error(`child exited with ${code}: ${stderr}`))
      else resolve({ acked, delivered })
    })
  })
}

describe('DiskBuffer under SIGKILL', () => {
  it.each(['always', 'group'] as const)(
    'sync %s: delivers every record acknowledged to its source despite kills under load, and reports the duplicates per kill',
    async (mode) => {
      const next = random(seed + (mode === 'always' ? 0 : 1))
      console.log(`crash test (sync ${mode}) seed: ${seed} (rerun with CRASH_SEED=${seed}), ${rounds} kills`)
      const dir = mkdtempSync(join(tmpdir(), 'ackline-crash-'))
      dirs.push(dir)
      const acked = new Set<string>()
      const deliveries = new Map<string, number>()
      const deliver = (id: string): boolean => {
        const before = deliveries.get(id) ?? 0
        deliveries.set(id, before + 1)
        return before > 0
      }
      const duplicatesPerKill: number[] = []
      for (let round = 0; round < rounds; round++) {
        const killAfter = 200 + Math.floor(next() * 1800)
        const r = await runAndKill(dir, round, mode, killAfter)
        for (const id of r.acked) acked.add(id)
        // Records delivered in this run that an earlier run delivered: what the previous kill cost.
        let again = 0
        for (const id of r.delivered) if (deliver(id)) again++
        if (round > 0) duplicatesPerKill.push(again)
        console.log(
          `sync ${mode}, round ${round}: killed once ${killAfter} records were acknowledged; ${r.acked.length} acknowledged, ${r.delivered.length} delivered, ${again} of them again`,
        )
        // Every round checked something: the kill came after acknowledgements, not before.
        expect(r.acked.length).toBeGreaterThanOrEqual(killAfter)
      }
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
        `crash test (sync ${mode}): ${rounds} SIGKILLs, ${acked.size} records acknowledged to the source, ${deliveries.size} delivered, ${lost.length} lost, ${duplicates} duplicate deliveries; per kill: ${duplicatesPerKill.join(', ')} (mean ${mean.toFixed(0)}; bound: the acknowledgements not yet checkpointed, under ledgerEveryAcks 1000 plus those made while a checkpoint waits on the write lane, plus the in-flight window)`,
      )
      expect(duplicatesPerKill).toHaveLength(rounds)
      expect(acked.size).toBeGreaterThan(0)
      expect(lost).toEqual([])
    },
    120_000,
  )
})
