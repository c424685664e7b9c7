// The file sink at batch 1 beside hand-written loops, alternating rounds in one process:
//   generator (batches of 1) → file sink, acknowledgements on: the runtime hands the sink what
//   queued while it was syncing as one array, so it appends and fsyncs once per such array;
//   a loop that appends and fsyncs the same arrays (same sizes, same JSON lines, same open flags,
//   one appendFile + sync per array): the floor for that many fsyncs (the target's peer);
//   the file sink alone, written the same arrays one after another (no topology; its events are
//   made before the clock starts): what the sink itself costs beside that loop;
//   generator (batches of 1) → blackhole sink: the runtime at batch 1 with no disk at all, the
//   ceiling for the first line;
//   a loop that appends and fsyncs every record on its own (what batch 1 cost before coalescing;
//   on fewer records, as each costs a whole fsync).
// Every variant warms up before it is measured: a topology reaches its steady speed only after
// tens of thousands of events, a small loop much sooner (a few thousand events and one warm-up
// round measured the runtime's warm-up, not its cost).
// Printed: events/s (medians), the ratios, and fsyncs per event.
// Run: pnpm bench sinks/bench/file   (ACKLINE_BENCH_EVENTS, ACKLINE_BENCH_ROUNDS and
//      ACKLINE_BENCH_WARMUP override the sizes)

import { mkdtempSync, rmSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { EventArray, type JsonObject } from '@ackline/core'
import { blackhole, file } from '@ackline/sinks'
import { generator } from '@ackline/sources'
import { type Sink, TopologyBuilder } from '@ackline/topology'

const EVENTS = Number(process.env.ACKLINE_BENCH_EVENTS ?? 20_000)
const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 9)
const WARMUP = Number(process.env.ACKLINE_BENCH_WARMUP ?? 3)
/** Records of the loop that fsyncs every record (each one costs a whole fsync). */
const EACH = Math.min(EVENTS, 2000)
const dir = mkdtempSync(join(tmpdir(), 'ackline-file-bench-'))

const record = (index: number): JsonObject => ({ message: 'event', index })

/** Runs generator → `sink`; returns its events/s and the sizes of the arrays the sink was handed. */
async function topology(sink: Sink): Promise<{ rate: number; sizes: number[] }> {
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

/** The file sink alone, written arrays of `sizes[i]` events one after another. */
async function sinkAlone(path: string, sizes: readonly number[]): Promise<number> {
  let index = 0
  const arrays = sizes.map((size) =>
    EventArray.fromRecords(Array.from({ length: size }, () => record(index++))),
  )
  const sink = file({ path })
  const start = performance.now()
  await sink.start()
  for (const array of arrays) {
    if ((await sink.write(array)) !== undefined) throw new Error('the sink did not deliver every event')
  }
  await sink.stop()
  const rate = index / ((performance.now() - start) / 1000)
  for (const array of arrays) array.end('delivered')
  return rate
}

const median = (list: number[]): number => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)]!

const rates = {
  sink: [] as number[],
  same: [] as number[],
  alone: [] as number[],
  hole: [] as number[],
  each: [] as number[],
}
const fsyncsPerEvent: number[] = []
const ones = new Array<number>(EACH).fill(1)
for (let round = 0; round < WARMUP + ROUNDS; round++) {
  const { rate, sizes } = await topology(file({ path: join(dir, `sink-${round}.ndjson`) }))
  const same = await loop(join(dir, `same-${round}.ndjson`), sizes)
  const alone = await sinkAlone(join(dir, `alone-${round}.ndjson`), sizes)
  const hole = (await topology(blackhole())).rate
  const each = round < WARMUP - 1 ? 0 : await loop(join(dir, `each-${round}.ndjson`), ones)
  if (round < WARMUP) continue
  rates.sink.push(rate)
  rates.same.push(same)
  rates.alone.push(alone)
  rates.hole.push(hole)
  rates.each.push(each)
  fsyncsPerEvent.push(sizes.length / EVENTS)
}
rmSync(dir, { recursive: true, force: true })

const fmt = (rate: number): string => `${Math.round(rate).toLocaleString('en')} events/s`
const ratio = (a: number[], b: number[]): string => (median(a) / median(b)).toFixed(2)
console.log(
  `${EVENTS} events at batch 1 per run, medians of ${ROUNDS} alternating rounds in one process after ${WARMUP} warm-up rounds\n`,
)
console.log(
  `file sink (topology, acks on)          ${fmt(median(rates.sink)).padStart(20)}  (${median(fsyncsPerEvent).toFixed(4)} fsyncs per event)`,
)
console.log(`loop fsyncing the same arrays          ${fmt(median(rates.same)).padStart(20)}`)
console.log(`file sink alone, the same arrays       ${fmt(median(rates.alone)).padStart(20)}`)
console.log(`blackhole sink (topology, acks on)     ${fmt(median(rates.hole)).padStart(20)}`)
console.log(`loop fsyncing every record (${EACH})    ${fmt(median(rates.each)).padStart(20)}`)
console.log('\nratios (medians):')
console.log(`  sink / loop, same arrays            ${ratio(rates.sink, rates.same)}   (target >= 0.8)`)
console.log(`  sink alone / loop, same arrays      ${ratio(rates.alone, rates.same)}   (the sink's own cost)`)
console.log(
  `  blackhole topology / loop           ${ratio(rates.hole, rates.same)}   (what the runtime at batch 1 allows)`,
)
console.log(`  sink / loop, every record           ${ratio(rates.sink, rates.each)}`)
