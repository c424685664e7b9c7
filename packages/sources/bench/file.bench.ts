// The file source's read rate against readline over the same file, side by side in one process:
//   readline:               createReadStream + readline, one { message } record per line (the floor)
//   readline -> topology:   the same lines sent in batches of 1000 by a plain source through a
//                           topology with acknowledgements into a counting sink
//   file source:            file({ include }) through the same topology, checkpoints on
// LINES lines of ~100 bytes; lines per second, median of ROUNDS rounds (order alternating).
// Run: pnpm bench file
import { createReadStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import type { JsonObject } from '@ackline/core'
import { file } from '@ackline/sources'
import { type Sink, type Source, TopologyBuilder } from '@ackline/topology'

const LINES = Number(process.env.ACKLINE_BENCH_LINES ?? 200_000)
const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 5)
const dir = mkdtempSync(join(tmpdir(), 'ackline-file-bench-'))
const input = join(dir, 'input.log')
{
  const parts: string[] = []
  for (let i = 0; i < LINES; i++)
    parts.push(`${new Date(0).toISOString()} INFO request ${i} served in 12ms path=/api/v1/items/${i}`)
  writeFileSync(input, `${parts.join('\n')}\n`)
}

let sink = 0

async function readlineOnly(): Promise<void> {
  const rl = createInterface({ input: createReadStream(input), crlfDelay: Number.POSITIVE_INFINITY })
  let n = 0
  for await (const line of rl) {
    const record: JsonObject = { message: line }
    n += record.message === undefined ? 0 : 1
  }
  sink += n
}

function countingSink(done: () => void): Sink {
  let n = 0
  return {
    kind: 'count',
    async write(events) {
      n += events.length
      if (n >= LINES) done()
      return undefined
    },
  }
}

async function throughTopology(source: Source): Promise<void> {
  let finish!: () => void
  const finished = new Promise<void>((resolve) => {
    finish = resolve
  })
  const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
    .source('in', source)
    .sink(
      'out',
      ['in'],
      countingSink(() => finish()),
    )
    .build()
  await topology.start()
  await finished
  await topology.stop()
}

const readlineSource = (): Source => ({
  kind: 'readline',
  canAcknowledge: true,
  async run(context) {
    const rl = createInterface({ input: createReadStream(input), crlfDelay: Number.POSITIVE_INFINITY })
    let batch: JsonObject[] = []
    for await (const line of rl) {
      batch.push({ message: line })
      if (batch.length === 1000) {
        await context.send(batch)
        batch = []
      }
    }
    if (batch.length > 0) await context.send(batch)
  },
})

let round = 0
const fileSource = () => {
  const checkpoints = join(dir, `cp-${round++}`)
  return file({ include: [input], checkpoints, pollIntervalMs: 50, onNotice: () => {} })
}

const variants: Record<string, () => Promise<void>> = {
  readline: readlineOnly,
  'readline -> topology': () => throughTopology(readlineSource()),
  'file source': () => throughTopology(fileSource()),
}
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!
for (const f of Object.values(variants)) await f()
const samples: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((k) => [k, []]))
for (let r = 0; r < ROUNDS; r++) {
  const order = Object.entries(variants)
  if (r % 2 === 1) order.reverse()
  for (const [name, f] of order) {
    const start = process.hrtime.bigint()
    await f()
    samples[name]!.push(LINES / (Number(process.hrtime.bigint() - start) / 1e9))
  }
}
rmSync(dir, { recursive: true, force: true })
const rate = Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, median(v)])) as Record<
  string,
  number
>
console.log(`lines per second (${LINES.toLocaleString()} lines; median of ${ROUNDS} rounds)`)
for (const [name, value] of Object.entries(rate))
  console.log(`  ${name.padEnd(22)} ${Math.round(value).toLocaleString().padStart(12)}`)
console.log(
  `  file source / readline:             ${(rate['file source']! / rate.readline!).toFixed(2)}   (target: >= 0.7)`,
)
console.log(
  `  file source / readline -> topology: ${(rate['file source']! / rate['readline -> topology']!).toFixed(2)}`,
)
if (sink === -1) console.log(sink)
