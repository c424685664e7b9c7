// The real crash test: a child process writes through the disk buffer and acknowledges its
// source once the records are durable, while the test SIGKILLs it at random moments. After each
// restart, and after a final drain, every record the child reported acknowledged must have been
// delivered to the sink; the duplicates (delivered more than once) are counted and reported.
// Run with sync 'always' and with group commit (whose write-behind a kill can cut short).
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

interface Round {
  readonly acked: string[]
  readonly delivered: string[]
  readonly killedAfterMs: number
}

type Mode = 'always' | 'group'

/** Runs the child until `ready`, lets it work for a random while, then SIGKILLs it. */
function runAndKill(dir: string, round: number, mode: Mode): Promise<Round> {
  return new Promise((resolve, reject) => {
    const args = ['--conditions=source', '--import', 'tsx', child, dir, String(round), mode]
    const proc = spawn(process.execPath, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] })
    const acked: string[] = []
    const delivered: string[] = []
    let pending = ''
    let stderr = ''
    const killedAfterMs = 100 + Math.floor(Math.random() * 400)
    proc.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    proc.stdout.on('data', (chunk: Buffer) => {
      const lines = (pending + chunk.toString()).split('\n')
      pending = lines.pop()! // an incomplete line: the kill may have cut it
      for (const line of lines) {
        if (line === 'ready') setTimeout(() => proc.kill('SIGKILL'), killedAfterMs)
        else if (line.startsWith('A ')) acked.push(...line.slice(2).split(' '))
        else if (line.startsWith('D ')) delivered.push(...line.slice(2).split(' '))
      }
    })
    proc.on('error', reject)
    proc.on('exit', (code, signal) => {
      if (signal !== 'SIGKILL') reject(new Error(`child exited with ${code}: ${stderr}`))
      else resolve({ acked, delivered, killedAfterMs })
    })
  })
}

describe('DiskBuffer under SIGKILL', () => {
  it.each([
    ['always', 6],
    ['group', 4],
  ] as const)(
    'sync %s: delivers every record acknowledged to its source despite %i random kills, and reports the duplicates',
    async (mode, rounds) => {
      const dir = mkdtempSync(join(tmpdir(), 'ackline-crash-'))
      dirs.push(dir)
      const acked = new Set<string>()
      const deliveries = new Map<string, number>()
      const deliver = (id: string): void => {
        deliveries.set(id, (deliveries.get(id) ?? 0) + 1)
      }
      for (let round = 0; round < rounds; round++) {
        const r = await runAndKill(dir, round, mode)
        for (const id of r.acked) acked.add(id)
        for (const id of r.delivered) deliver(id)
        console.log(
          `sync ${mode}, round ${round}: killed after ${r.killedAfterMs} ms; ${r.acked.length} acknowledged, ${r.delivered.length} delivered`,
        )
      }
      // The last restart: drain what is left (the lock of the killed child is stale and taken over).
      const buffer = await openDiskBuffer({ path: dir, sinkId: 'crash', log: () => {} })
      await buffer.close()
      for (;;) {
        const events = await buffer.pull()
        if (events === undefined) break
        for (const event of events) deliver(event.get('id') as string)
        events.end('delivered')
      }
      const lost = [...acked].filter((id) => !deliveries.has(id))
      const duplicates = [...deliveries.values()].reduce((n, count) => n + count - 1, 0)
      console.log(
        `crash test (sync ${mode}): ${rounds} SIGKILLs, ${acked.size} records acknowledged to the source, ${deliveries.size} delivered, ${lost.length} lost, ${duplicates} duplicate deliveries`,
      )
      expect(acked.size).toBeGreaterThan(0)
      expect(lost).toEqual([])
    },
    60_000,
  )
})
