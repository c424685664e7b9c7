// The file sink at batch 1 beside hand-written loops, each measurement in a fresh process
// (variants round-robin, `bench/roundRobin.ts`):
//   generator (batches of 1) → file sink, acknowledgements on: the runtime hands the sink what
//   queued while it was writing as one array, so it makes one synchronous (O_SYNC) append per
//   such array;
//   a loop that appends and fsyncs the same arrays (same sizes, same JSON lines, one appendFile +
//   sync per array): the target's peer, the way the sink itself wrote before;
//   a loop that makes one O_SYNC append per array, as the sink does now: the same durability in
//   one system call, the fairest peer for the sink's own method;
//   the file sink alone, written the same arrays one after another (no topology; its events are
//   made before the clock starts): what the sink itself costs beside the loops;
//   generator (batches of 1) → blackhole sink: the runtime at batch 1 with no disk at all, the
//   ceiling for the first line;
//   a loop that appends and fsyncs every record on its own (what batch 1 cost before coalescing;
//   on fewer records, as each costs a whole fsync).
// The loops write the array sizes the file sink was handed in the last of as many untimed runs of
// the topology as the measured variants warm up for. Every variant warms up in its own process
// before it is measured: a topology reaches its steady speed only after about 100,000 events
// (with three warm-up runs of 20,000 the file sink's topology measured about a fifth slower than
// with six). In one process, the variants slowed each other: the loops' garbage brought
// collections that aged the topology's code, which then warmed up again in every round.
// Printed: events/s (medians), the ratios, and appends per event (one synchronous write each).
// Run: pnpm bench sinks/bench/file   (ACKLINE_BENCH_EVENTS, ACKLINE_BENCH_ROUNDS and
//      ACKLINE_BENCH_WARMUP override the sizes; ACKLINE_BENCH_DIR the directory, which must be
//      on a disk: the file system is printed)

import { mkdtempSync, rmSync, statfsSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { EventArray, type JsonObject } from '@ackline/core'
import { blackhole, file } from '@ackline/sinks'
import { generator } from '@ackline/sources'
import { type Sink, TopologyBuilder } from '@ackline/topology'
import { median, roundRobin } from '../../../bench/roundRobin.js'

const EVENTS = Number(process.env.ACKLINE_BENCH_EVENTS ?? 20_000)
const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 7)
const WARMUP = Number(process.env.ACKLINE_BENCH_WARMUP ?? 6)
/** Records of the loop that fsyncs every record (each one costs a whole fsync). */
const EACH = Math.min(EVENTS, 2000)

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

/**
 * Appends one array of `sizes[i]` JSON lines per entry, each on disk before the next: with an
 * fsync after each append (`'fsync'`), or as one append to a file opened O_SYNC (`'osync'`).
 */
async function loop(
  path: string,
  sizes: readonly number[],
  how: 'fsync' | 'osync' = 'fsync',
): Promise<number> {
  const start = performance.now()
  const handle = await open(path, how === 'osync' ? 'as+' : 'a+')
  let index = 0
  for (const size of sizes) {
    let text = ''
    for (let i = 0; i < size; i++) text += `${JSON.stringify(record(index++))}\n`
    await handle.appendFile(text, 'utf8')
    if (how === 'fsync') await handle.sync()
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

/**
 * The sizes of the arrays the file sink is handed at batch 1 once warm: those of its last run
 * after as many warm-up runs as the measured variants get (untimed). A cold runtime coalesces
 * differently, which would hand the loops other arrays than the measured sink writes.
 */
async function sinkSizes(dir: string): Promise<number[]> {
  let sizes: number[] = []
  for (let i = 0; i <= WARMUP; i++)
    sizes = (await topology(file({ path: join(dir, `sizes-${i}.ndjson`) }))).sizes
  return sizes
}

/** Where the files go: `ACKLINE_BENCH_DIR`, or the system's temporary directory. */
const BASE = process.env.ACKLINE_BENCH_DIR ?? tmpdir()
/** The file system type under {@link BASE}: tmpfs would make every sync free (and the figures meaningless). */
function fileSystem(): string {
  const type = statfsSync(BASE).type
  const known: Record<number, string> = {
    61267: 'ext2/3/4',
    16914836: 'tmpfs',
    1481003842: 'xfs',
    2435016766: 'btrfs',
  }
  return known[type] ?? `type 0x${type.toString(16)}`
}

const variants: Record<string, (dir: string, run: number) => Promise<number>> = {
  sink: async (dir, run) => (await topology(file({ path: join(dir, `sink-${run}.ndjson`) }))).rate,
  same: async (dir, run) => loop(join(dir, `same-${run}.ndjson`), await cachedSizes(dir)),
  osync: async (dir, run) => loop(join(dir, `osync-${run}.ndjson`), await cachedSizes(dir), 'osync'),
  alone: async (dir, run) => sinkAlone(join(dir, `alone-${run}.ndjson`), await cachedSizes(dir)),
  hole: async () => (await topology(blackhole())).rate,
  each: (dir, run) => loop(join(dir, `each-${run}.ndjson`), new Array<number>(EACH).fill(1)),
}
let sizesOnce: Promise<number[]> | undefined
const cachedSizes = (dir: string): Promise<number[]> => {
  sizesOnce ??= sinkSizes(dir)
  return sizesOnce
}

/** In a child: warm-up runs, then the median of three measured runs; prints events/s. */
async function child(name: string): Promise<void> {
  const run = variants[name]
  if (run === undefined) throw new Error(`no variant '${name}'`)
  const dir = mkdtempSync(join(BASE, 'ackline-file-bench-'))
  try {
    // The loop that fsyncs every record warms up on one run: each of its runs takes a second or so.
    const warmups = name === 'each' ? 1 : WARMUP
    for (let i = 0; i < warmups; i++) await run(dir, -1 - i)
    const rates: number[] = []
    for (let i = 0; i < 3; i++) rates.push(await run(dir, i))
    console.log(median(rates.sort((a, b) => a - b)))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

async function report(): Promise<void> {
  const names = Object.keys(variants)
  const rates = roundRobin(fileURLToPath(import.meta.url), names, ROUNDS)
  const rate = (name: string): number => median(rates.get(name)!)
  const dir = mkdtempSync(join(BASE, 'ackline-file-bench-'))
  const sizes = await sinkSizes(dir)
  rmSync(dir, { recursive: true, force: true })
  const fmt = (name: string): string => `${Math.round(rate(name)).toLocaleString('en')} events/s`.padStart(20)
  const ratio = (a: string, b: string): string => (rate(a) / rate(b)).toFixed(2)
  console.log(
    `${EVENTS} events at batch 1 per run; medians of ${ROUNDS} rounds, each measurement in a fresh process after ${WARMUP} warm-up runs; files on ${fileSystem()} (${BASE})\n`,
  )
  console.log(
    `file sink (topology, acks on)          ${fmt('sink')}  (${(sizes.length / EVENTS).toFixed(4)} synchronous appends per event)`,
  )
  console.log(`loop fsyncing the same arrays          ${fmt('same')}`)
  console.log(`loop, O_SYNC appends, same arrays     ${fmt('osync')}`)
  console.log(`file sink alone, the same arrays       ${fmt('alone')}`)
  console.log(`blackhole sink (topology, acks on)     ${fmt('hole')}`)
  console.log(`loop fsyncing every record (${EACH})    ${fmt('each')}`)
  console.log('\nratios (medians):')
  console.log(`  sink / loop, same arrays            ${ratio('sink', 'same')}   (target >= 0.8)`)
  console.log(`  sink / O_SYNC loop, same arrays     ${ratio('sink', 'osync')}   (the sink's own method)`)
  console.log(`  sink alone / loop, same arrays      ${ratio('alone', 'same')}`)
  console.log(`  sink alone / O_SYNC loop            ${ratio('alone', 'osync')}   (the sink's own cost)`)
  console.log(
    `  blackhole topology / loop           ${ratio('hole', 'same')}   (what the runtime at batch 1 allows)`,
  )
  console.log(`  sink / loop, every record           ${ratio('sink', 'each')}`)
}

const variant = process.env.ACKLINE_BENCH_VARIANT
if (variant === undefined) await report()
else await child(variant)
