// Crash test, on the testkit's crashLoop: a child consumes a stream through a topology into a file
// sink and is SIGKILLed after it reported a number of acks, several times; then one last child
// drains the consumer.
// Every message must be in the file at least once, and the consumer must end with nothing
// pending. Sizes: ACKLINE_CRASH_ROUNDS (default 3 kills) and ACKLINE_CRASH_MESSAGES (default 400,
// published in equal parts before each run); ACKLINE_SEED replays the kill points a run printed.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { crashLoop } from '@ackline/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { NATS_URL, NatsAdmin, skipWithoutNats } from '../integration/support/natsFixture.js'

const skip = await skipWithoutNats('JetStreamCrash.test.ts')
const ROUNDS = Number(process.env.ACKLINE_CRASH_ROUNDS ?? 3)
const N = Number(process.env.ACKLINE_CRASH_MESSAGES ?? 400)
const seed = process.env.ACKLINE_SEED === undefined ? undefined : Number(process.env.ACKLINE_SEED)
// A child acks faster than the parent's SIGKILL lands (a run killed at its report of 20 acks had
// acked at least 180 when it died), so input published once can run out before a later run's
// kill point: that run then waits on a drained consumer and the loop fails with NO_PROGRESS. Each
// run gets its own part, published once the run before it is dead, so every kill point (at most
// a part) is reachable.
const PART = Math.floor(N / (ROUNDS + 1))
const KILL_MAX = Math.min(70, PART)
if (KILL_MAX < 1)
  throw new RangeError(`ACKLINE_CRASH_MESSAGES (${N}) must be at least one per run (${ROUNDS + 1})`)
const root = fileURLToPath(new URL('../../../../', import.meta.url))
const child = fileURLToPath(new URL('./consumeChild.ts', import.meta.url))

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
    let published = 0
    const publish = (count: number) =>
      admin.publish(
        `${stream}.in`,
        Array.from({ length: count }, () => JSON.stringify({ n: published++ })),
      )
    const path = join(dir, 'out.ndjson')
    // Kill at a different point each round (drawn from the printed seed), decided by what the child
    // reported; the last run (its part takes the remainder) goes until the consumer is drained,
    // then stops (SIGTERM).
    const report = await crashLoop({
      script: child,
      nodeArgs: ['--conditions=source', '--import', 'tsx'],
      cwd: root,
      args: [stream, 'crash', path, NATS_URL],
      rounds: ROUNDS,
      count: 'acked',
      killAfter: { min: Math.min(10, KILL_MAX), max: KILL_MAX },
      ...(seed === undefined ? {} : { seed }),
      beforeRound: (round) => publish(round === ROUNDS ? N - published : PART),
      last: {
        until: async () => {
          const info = await admin.jsm.consumers.info(stream, 'crash')
          return info.num_pending === 0 && info.num_ack_pending === 0
        },
        timeoutMs: 60_000,
      },
    })
    const killedAfter = report.rounds.filter((r) => r.ending === 'killed').map((r) => r.reportedAtKill)

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
    expect(report.rounds.filter((r) => r.ending === 'killed' && r.checked)).toHaveLength(ROUNDS)
  }, 180_000)
})
