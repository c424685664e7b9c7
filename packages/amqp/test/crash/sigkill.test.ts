// Crash test: a child consumes a queue into a file and is SIGKILLed after a number of acks it
// reported, again and again; then one last child finishes the queue. Every message must be in the
// file at least once and the queue empty; duplicates are printed.
//   ACKLINE_AMQP_CRASH_RUNS=12 ACKLINE_AMQP_CRASH_MESSAGES=20000 npx vitest run packages/amqp/test/crash
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Admin, BROKER_URL, brokerAvailable } from '../integration/broker.js'

const available = await brokerAvailable()
const RUNS = Number(process.env.ACKLINE_AMQP_CRASH_RUNS ?? 3)
const MESSAGES = Number(process.env.ACKLINE_AMQP_CRASH_MESSAGES ?? 1500)
const children = new Set<ChildProcess>()
const child = fileURLToPath(new URL('./consumer.ts', import.meta.url))

/** Spawns the consumer; resolves with it once it reported at least `acks` acks (or `until` says so). */
function runUntil(
  args: string[],
  done: (acked: number) => boolean | Promise<boolean>,
): Promise<{ proc: ChildProcess; acked: number }> {
  const proc = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', child, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  children.add(proc)
  proc.once('exit', () => children.delete(proc))
  return new Promise((resolve, reject) => {
    let buffer = ''
    let checking = false
    let settled = false
    const early = (code: number | null, signal: string | null): void => {
      settled = true
      reject(new Error(`consumer exited early (${code ?? signal})`))
    }
    proc.once('exit', early)
    proc.stdout?.on('data', async (chunk: Buffer) => {
      buffer += chunk.toString()
      const lines = buffer.split('\n')
      buffer = lines.pop() ?? ''
      const last = lines.at(-1)
      // Lines keep coming after the decision: they must not touch the exit listeners the caller
      // adds to wait for the kill.
      if (last === undefined || checking || settled) return
      const acked = Number(last.split(' ')[1])
      checking = true
      if (await done(acked)) {
        settled = true
        proc.off('exit', early)
        resolve({ proc, acked })
      }
      checking = false
    })
  })
}

async function kill(proc: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => proc.once('exit', resolve))
  proc.kill('SIGKILL')
  await exited
}

describe.skipIf(!available)('amqp source crash test (SIGKILL)', () => {
  let admin: Admin
  let dir: string
  beforeAll(async () => {
    admin = await Admin.open()
    dir = mkdtempSync(join(tmpdir(), 'ackline-amqp-crash-'))
  })
  afterAll(async () => {
    // A failed or timed-out run must not leave a consumer behind.
    for (const proc of children) proc.kill('SIGKILL')
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
      const args = [BROKER_URL, queue, path]
      // Targets add up to at most three quarters of the messages, so every child reaches its own.
      const per = Math.max(1, Math.floor(MESSAGES / (RUNS * 2)))
      const kills: number[] = []
      for (let run = 0; run < RUNS; run++) {
        // Kill it once it reported a number of acks that differs each run.
        const target = per + ((run * 37) % Math.max(1, Math.floor(per / 2)))
        const { proc, acked } = await runUntil(args, (acked) => acked >= target)
        await kill(proc)
        kills.push(acked)
      }
      // The last child runs until the file holds every message and the broker holds none ready
      // (what the program wrote and what the broker reports decide, not a sleep); then it is
      // stopped cleanly (SIGTERM), so its last acks reach the broker before its connection closes.
      const proc = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', child, ...args], {
        stdio: ['ignore', 'ignore', 'inherit'],
      })
      children.add(proc)
      const complete = async (): Promise<boolean> => {
        const { messageCount } = await admin.channel.checkQueue(queue)
        if (messageCount !== 0) return false
        const text = readFileSync(path, 'utf8').trim()
        const written = text === '' ? [] : text.split('\n')
        return new Set(written.map((l) => (JSON.parse(l) as { n: number }).n)).size === MESSAGES
      }
      while (!(await complete())) {
        if (proc.exitCode !== null) throw new Error(`the last consumer exited (${proc.exitCode})`)
        await new Promise((r) => setTimeout(r, 50))
      }
      const exited = new Promise((resolve) => proc.once('exit', resolve))
      proc.kill('SIGTERM')
      await exited
      const lines = readFileSync(path, 'utf8').trim().split('\n')
      const seen = new Map<number, number>()
      for (const line of lines) {
        const n = (JSON.parse(line) as { n: number }).n
        seen.set(n, (seen.get(n) ?? 0) + 1)
      }
      const duplicates = lines.length - seen.size
      console.log(
        `crash test: ${RUNS} SIGKILLs after ${kills.join(', ')} reported acks; ${MESSAGES} messages, ${lines.length} lines, ${duplicates} duplicates`,
      )
      expect(kills).toHaveLength(RUNS)
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
