// Crash test: a child consumes a stream through a topology into a file sink and is SIGKILLed
// after it reported a number of acks, several times; then one last child drains the consumer.
// Every message must be in the file at least once, and the consumer must end with nothing
// pending. Sizes: ACKLINE_CRASH_ROUNDS (default 3 kills) and ACKLINE_CRASH_MESSAGES (default 400).
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { NATS_URL, NatsAdmin, skipWithoutNats, until } from '../integration/support/natsFixture.js'

const skip = await skipWithoutNats('JetStreamCrash.test.ts')
const ROUNDS = Number(process.env.ACKLINE_CRASH_ROUNDS ?? 3)
const N = Number(process.env.ACKLINE_CRASH_MESSAGES ?? 400)
const root = fileURLToPath(new URL('../../../../', import.meta.url))
const child = fileURLToPath(new URL('./consumeChild.ts', import.meta.url))

/** Starts a child; `acked()` is the last count it reported. */
function startChild(
  stream: string,
  path: string,
): { proc: ChildProcess; acked: () => number; exited: Promise<void> } {
  const proc = spawn(
    process.execPath,
    ['--conditions=source', '--import', 'tsx', child, stream, 'crash', path, NATS_URL],
    {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  )
  let acked = 0
  let buffer = ''
  proc.stdout!.on('data', (chunk: Buffer) => {
    buffer += chunk.toString()
    const lines = buffer.split('\n')
    buffer = lines.pop()!
    for (const line of lines) if (line.startsWith('acked ')) acked = Number(line.slice(6))
  })
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()))
  return { proc, acked: () => acked, exited }
}

describe.skipIf(skip)('jetstream source: SIGKILL and restart', () => {
  let admin: NatsAdmin
  let dir: string
  beforeAll(async () => {
    admin = await NatsAdmin.open()
    dir = mkdtempSync(join(tmpdir(), 'ackline-nats-crash-'))
  })
  afterAll(async () => {
    await admin?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it(`every message reaches the file at least once across ${ROUNDS} kills, and nothing stays pending`, async () => {
    const stream = await admin.stream('CRASH')
    await admin.publish(
      `${stream}.in`,
      Array.from({ length: N }, (_, n) => JSON.stringify({ n })),
    )
    const path = join(dir, 'out.ndjson')
    const killedAfter: number[] = []
    for (let round = 0; round < ROUNDS; round++) {
      const c = startChild(stream, path)
      // Kill at a different point each round, decided by what the child reported.
      const target = 10 + ((round * 37) % 60)
      await until(`child ${round} reports ${target} acks`, () => c.acked() >= target, 30_000)
      c.proc.kill('SIGKILL')
      await c.exited
      killedAfter.push(c.acked())
    }
    const last = startChild(stream, path)
    await until(
      'the consumer is drained',
      async () => {
        const info = await admin.jsm.consumers.info(stream, 'crash')
        return info.num_pending === 0 && info.num_ack_pending === 0
      },
      60_000,
    )
    last.proc.kill('SIGTERM')
    await last.exited

    const lines = readFileSync(path, 'utf8')
      .split('\n')
      .filter((line) => line !== '')
    const seen = new Map<number, number>()
    let partial = 0
    for (const line of lines) {
      try {
        const n = (JSON.parse(line) as { n: number }).n
        seen.set(n, (seen.get(n) ?? 0) + 1)
      } catch {
        partial++ // a line a killed child was writing (its message was not acked, so it comes again)
      }
    }
    const missing = Array.from({ length: N }, (_, n) => n).filter((n) => !seen.has(n))
    const duplicates = [...seen.values()].reduce((sum, count) => sum + count - 1, 0)
    console.log(
      `checked: ${N} messages, ${ROUNDS} SIGKILLs after ${killedAfter.join(', ')} acks, ${lines.length} lines, ${duplicates} duplicates, ${partial} partial lines, ${missing.length} missing`,
    )
    expect(missing).toEqual([])
    expect(killedAfter).toHaveLength(ROUNDS)
  }, 180_000)
})
