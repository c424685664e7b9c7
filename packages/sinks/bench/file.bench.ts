// The file sink at batch 1 beside hand-written loops, alternating rounds in one process:
//   generator (batches of 1) → file sink, acknowledgements on: the runtime hands the sink what
//   queued while it was syncing as one array, so it appends and fsyncs once per such array;
//   a loop that appends and fsyncs the same arrays (same sizes, same JSON lines): the floor for
//   that many fsyncs;
//   a loop that appends and fsyncs every record on its own (what batch 1 cost before coalescing).
// Printed: events/s (medians), the ratio of the sink to each loop, and fsyncs per event.
// Run: pnpm bench sinks/bench/file   (ACKLINE_BENCH_EVENTS and ACKLINE_BENCH_ROUNDS override the sizes)

import { mkdtempSync, rmSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { EventArray, JsonObject } from '@ackline/core'
import { file } from '@ackline/sinks'
import { generator } from '@ackline/sources'
import { TopologyBuilder } from '@ackline/topology'

const EVENTS = Number(process.env.ACKLINE_BENCH_EVENTS ?? 3000)
const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 5)
const dir = mkdtempSync(join(tmpdir(), 'ackline-file-bench-'))

const record = (index: number): JsonObject => ({ message: 'event', index })

/** Runs the topology; returns its events/s and the sizes of the arrays the sink was handed. */
async function topology(path: string): Promise<{ rate: number; sizes: number[] }> {
  const sink = file({ path })
  const write = sink.write.bind(sink)
  const sizes: number[] = []
  sink.write = (events: EventArray) => {
    sizes.push(events.length)
    return write(events)
  }
  const built = new TopologyBuilder<string>({ acknowledgements: true })
    .source('gen', generator({ count: EVENTS, batchSize: 1, record }))
    .sink('out', ['gen'], sink)
    .build()
  const start = performance.now()
  await built.start()
  await built.done
  const rate = EVENTS / ((performance.now() - start) / 1000)
  if (built.metrics().gen!.ackLatencyMs.count !== EVENTS) throw new Error('not every batch resolved')
  return { rate, sizes }
}

/** Appends and fsyncs one array of `sizes[i]` JSON lines per entry. */
async function loop(path: string, sizes: readonly number[]): Promise<number> {
  const start = performance.now()
  const handle = await open(path, 'a+')
  let index = 0
  for (const size of sizes) {
    let text = ''
    for (let i = 0; i < size; i++) text += `${JSON.stringify(record(index++))}\n`
    await handle.appendFile(text, 'utf8')
    await handle.sync()
  }
  await handle.close()
  return index / ((performance.now() - start) / 1000)
}

const median = (list: number[]): number => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)]!

const rates = { sink: [] as number[], same: [] as number[], each: [] as number[] }
const fsyncsPerEvent: number[] = []
const ones = new Array<number>(EVENTS).fill(1)
for (let round = 0; round <= ROUNDS; round++) {
  const { rate, sizes } = await topology(join(dir, `sink-${round}.ndjson`))
  const same = await loop(join(dir, `same-${round}.ndjson`), sizes)
  const each = await loop(join(dir, `each-${round}.ndjson`), ones)
  if (round === 0) continue // warm-up
  rates.sink.push(rate)
  rates.same.push(same)
  rates.each.push(each)
  fsyncsPerEvent.push(sizes.length / EVENTS)
}
rmSync(dir, { recursive: true, force: true })

const fmt = (rate: number): string => `${Math.round(rate).toLocaleString('en')} events/s`
console.log(`${EVENTS} events at batch 1 per run, medians of ${ROUNDS} alternating rounds in one process\n`)
console.log(
  `file sink (topology, acks on)          ${fmt(median(rates.sink)).padStart(20)}  (${median(fsyncsPerEvent).toFixed(3)} fsyncs per event)`,
)
console.log(`loop fsyncing the same arrays          ${fmt(median(rates.same)).padStart(20)}`)
console.log(`loop fsyncing every record             ${fmt(median(rates.each)).padStart(20)}`)
console.log('\nratios (medians):')
console.log(
  `  sink / loop, same arrays     ${(median(rates.sink) / median(rates.same)).toFixed(2)}   (target >= 0.8)`,
)
console.log(`  sink / loop, every record    ${(median(rates.sink) / median(rates.each)).toFixed(2)}`)
