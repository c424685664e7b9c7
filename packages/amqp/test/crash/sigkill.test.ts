// Crash test, on the testkit's crashLoop: a child consumes a queue into a file and is SIGKILLed
// after a number of acks it reported (drawn from a printed seed; ACKLINE_SEED replays it), again
// and again; then one last child finishes the queue. Every message must be in the
// file at least once and the queue empty; duplicates are printed.
//   ACKLINE_AMQP_CRASH_RUNS=12 ACKLINE_AMQP_CRASH_MESSAGES=20000 npx vitest run packages/amqp/test/crash
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { crashLoop } from '@ackline/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Admin, BROKER_URL, brokerAvailable } from '../integration/broker.js'

const available = await brokerAvailable()
const RUNS = Number(process.env.ACKLINE_AMQP_CRASH_RUNS ?? 3)
const MESSAGES = Number(process.env.ACKLINE_AMQP_CRASH_MESSAGES ?? 1500)
const seed = process.env.ACKLINE_SEED === undefined ? undefined : Number(process.env.ACKLINE_SEED)
const child = fileURLToPath(new URL('./consumer.ts', import.meta.url))

describe.skipIf(!available)('amqp source crash test (SIGKILL)', () => {
  let admin: Admin
  let dir: string
  beforeAll(async () => {
    admin = await Admin.open()
    dir = mkdtempSync(join(tmpdir(), 'ackline-amqp-crash-'))
  })
  afterAll(async () => {
    // (crashLoop leaves no consumer behind, even when a run fails.)
    await admin?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it(
    `loses nothing over ${RUNS} SIGKILLs and a final run: every message in the file at least once, the queue empty`,
    async () => {
      const { queue } = await admin.queueWithDeadLetters()
      await admin.publish(
        queue,
        Array.from({ length: MESSAGES }, (_, n) => ({ n })),
        (n) => `m-${n}`,
      )
      const path = join(dir, 'out.ndjson')
      // Kill points add up to at most three quarters of the messages, so every child reaches its
      // own. The last child runs until the file holds every message and the broker holds none ready
      // (what the program wrote and what the broker reports decide, not a sleep); then it is stopped
      // cleanly (SIGTERM), so its last acks reach the broker before its connection closes.
      const per = Math.max(1, Math.floor(MESSAGES / (RUNS * 2)))
      /**
       * The messages in the file, and how many lines are not whole: one a killed child was writing
       * (its message was not acked, so it comes again), or, while a child runs, the one it is
       * writing as the file is read.
       */
      const written = (): { seen: Map<number, number>; lines: number; partial: number } => {
        const lines = existsSync(path)
          ? readFileSync(path, 'utf8')
              .split('\n')
              .filter((l) => l !== '')
          : []
        const seen = new Map<number, number>()
        let partial = 0
        for (const line of lines) {
          try {
            const n = (JSON.parse(line) as { n: number }).n
            seen.set(n, (seen.get(n) ?? 0) + 1)
          } catch {
            partial++
          }
        }
        return { seen, lines: lines.length, partial }
      }
      const complete = async (): Promise<boolean> => {
        const { messageCount } = await admin.channel.checkQueue(queue)
        return messageCount === 0 && written().seen.size === MESSAGES
      }
      const report = await crashLoop({
        script: child,
        nodeArgs: ['--conditions=source', '--import', 'tsx'],
        args: [BROKER_URL, queue, path],
        rounds: RUNS,
        count: 'acked',
        killAfter: { min: per, max: per + Math.max(0, Math.floor(per / 2) - 1) },
        ...(seed === undefined ? {} : { seed }),
        last: { until: complete, timeoutMs: 60_000 },
      })
      const kills = report.rounds.filter((r) => r.ending === 'killed').map((r) => r.reportedAtKill)
      const { seen, lines, partial } = written()
      const duplicates = lines - partial - seen.size
      console.log(
        `crash test: ${RUNS} SIGKILLs after ${kills.join(', ')} reported acks; ${MESSAGES} messages, ${lines} lines, ${duplicates} duplicates, ${partial} partial lines`,
      )
      expect(partial).toBeLessThanOrEqual(RUNS) // at most the line each kill cut
      expect(report.rounds.filter((r) => r.ending === 'killed' && r.checked)).toHaveLength(RUNS)
      for (let n = 0; n < MESSAGES; n++) expect(seen.has(n), `message ${n}`).toBe(true)
      expect(seen.size).toBe(MESSAGES)
      // Unacked messages of the killed consumer are requeued once its connection is gone.
      let count = -1
      for (let i = 0; i < 100 && count !== 0; i++) {
        count = await admin.messageCount(queue)
        if (count !== 0) await new Promise((r) => setTimeout(r, 50))
      }
      expect(count).toBe(0)
    },
    60_000 + RUNS * 10_000 + MESSAGES * 10,
  )
})
