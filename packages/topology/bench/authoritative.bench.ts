// What an authoritative sink costs: generator → blackhole at batch 100, acknowledgements on, with
// the blackhole declared `authoritative: true` (it tells each event's batches its status at once,
// reading the event's finalizers) beside the same blackhole declared plainly. Each measurement in
// a fresh process, the two variants round-robin (bench/roundRobin.ts).
// Printed: events/s (medians) and their ratio. Each authoritative end once folded its status with
// the lattice's pattern match (about 2 µs a call; the table derived from it, about 5 ns): the
// ratio read 0.03 (336 k against 13.1 M events/s); with the table, 0.22 (2.7 M against 12.4 M);
// reading the event's batches with `forEachBatch` (no metadata, set or finalizer per event) and
// keeping recorded slots as a bitset (a `Set` grew a hash table per record), 0.48.
// Run: pnpm bench authoritative   (ACKLINE_BENCH_EVENTS, ACKLINE_BENCH_ROUNDS override the sizes)
import { fileURLToPath } from 'node:url'
import { blackhole } from '@ackline/sinks'
import { generator } from '@ackline/sources'
import { TopologyBuilder } from '@ackline/topology'
import { median, roundRobin } from '../../../bench/roundRobin.js'

const EVENTS = Number(process.env.ACKLINE_BENCH_EVENTS ?? 200_000)
const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 5)
const BATCH = 100

/** One run of generator → blackhole; returns events/s. */
async function run(authoritative: boolean): Promise<number> {
  const hole = blackhole()
  const built = new TopologyBuilder<string>({ acknowledgements: true })
    .source('gen', generator({ count: EVENTS, batchSize: BATCH }))
    .sink('out', ['gen'], hole, { authoritative })
    .build()
  const start = performance.now()
  await built.start()
  await built.done
  const rate = EVENTS / ((performance.now() - start) / 1000)
  if (hole.count !== EVENTS) throw new Error(`the blackhole saw ${hole.count} events`)
  if (built.metrics().gen!.ackLatencyMs.count !== EVENTS / BATCH) throw new Error('not every batch resolved')
  return rate
}

const variant = process.env.ACKLINE_BENCH_VARIANT
if (variant !== undefined) {
  // In a child: three warm-up runs, then the median of three measured ones.
  const authoritative = variant === 'authoritative'
  for (let i = 0; i < 3; i++) await run(authoritative)
  const rates = [await run(authoritative), await run(authoritative), await run(authoritative)]
  console.log(median(rates.sort((a, b) => a - b)))
} else {
  const rates = roundRobin(fileURLToPath(import.meta.url), ['plain', 'authoritative'], ROUNDS)
  const plain = median(rates.get('plain')!)
  const authoritative = median(rates.get('authoritative')!)
  const fmt = (rate: number): string => `${Math.round(rate).toLocaleString('en')} events/s`.padStart(20)
  console.log(`${EVENTS} events at batch ${BATCH}, acknowledgements on; medians of ${ROUNDS} rounds\n`)
  console.log(`blackhole                    ${fmt(plain)}`)
  console.log(`blackhole, authoritative     ${fmt(authoritative)}`)
  console.log(`\nratio authoritative / plain  ${(authoritative / plain).toFixed(2)}`)
}
