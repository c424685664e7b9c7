// A batch with per-record outcomes against the same batch without, side by side in one run:
// a source makes BATCH events from records into one batch (EventArray.fromRecords), each is
// cloned once (fan-out to a second sink), both arrays end as a sink runner ends them (one status
// for the whole array; the second sink errors one event in 100 one by one), and the source reads
// what it is told (with outcomes: the errored indexes too).
// Each measurement runs in a fresh process (bench/roundRobin.ts), the two variants alternating,
// so neither variant's call sites are made polymorphic by the other, nor does one pay for the
// other's garbage; each process times its loop in CPU time (process.cpuUsage), which a busy
// neighbour on a shared machine disturbs less than wall time. Time per record, median of ROUNDS.
// Run: pnpm bench outcomes
import { fileURLToPath } from 'node:url'
import { BatchNotifier, EventArray, type JsonObject } from '@ackline/core'
import { median, roundRobin } from '../../../bench/roundRobin.js'

const BATCH = Number(process.env.ACKLINE_BENCH_BATCH ?? 1000)
const BATCHES = 100
const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 9)

let sink = 0
const records: JsonObject[] = Array.from({ length: BATCH }, (_, i) => ({ n: i }))

function once(outcomes: boolean): void {
  for (let b = 0; b < BATCHES; b++) {
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'bench', outcomes })
    const array = EventArray.fromRecords(records, { sourceId: 'bench', batch: notifier })
    const copies = array.clone()
    array.end('delivered')
    const kept = []
    for (let i = 0; i < copies.events.length; i++) {
      if (i % 100 === 0) copies.events[i]!.end('errored')
      else kept.push(copies.events[i]!)
    }
    new EventArray(kept).end('delivered')
    if (receiver.status !== 'errored') throw new Error('batch did not resolve errored')
    sink += outcomes ? receiver.outcomes!.indexesOf('errored').length : 1
  }
}

/** In a child: warm up, then the median of 15 timed loops in CPU time; prints records/s. */
function child(variant: string): void {
  const outcomes = variant === 'with outcomes'
  const gc = (globalThis as { gc?: () => void }).gc ?? (() => {})
  for (let i = 0; i < 20; i++) once(outcomes)
  const rates: number[] = []
  for (let i = 0; i < 15; i++) {
    gc()
    const start = process.cpuUsage()
    once(outcomes)
    const used = process.cpuUsage(start)
    rates.push((BATCH * BATCHES) / ((used.user + used.system) / 1e6))
  }
  rates.sort((a, b) => a - b)
  if (sink === -1) console.log(sink)
  console.log(median(rates))
}

const variant = process.env.ACKLINE_BENCH_VARIANT
if (variant !== undefined) child(variant)
else {
  const rates = roundRobin(fileURLToPath(import.meta.url), ['without', 'with outcomes'], ROUNDS)
  const without = median(rates.get('without')!)
  const withOutcomes = median(rates.get('with outcomes')!)
  const spread = (v: number[]) => `${((v.at(-1)! / v[0]! - 1) * 100).toFixed(0)} %`
  console.log(
    `CPU time per record (batches of ${BATCH}, cloned once, ended; median of ${ROUNDS} rounds, one process each)`,
  )
  console.log(
    `  without outcomes  ${(1e9 / without).toFixed(1).padStart(7)} ns   (spread ${spread(rates.get('without')!)})`,
  )
  console.log(
    `  with outcomes     ${(1e9 / withOutcomes).toFixed(1).padStart(7)} ns   (spread ${spread(rates.get('with outcomes')!)})`,
  )
  console.log(`  throughput with / without: ${(withOutcomes / without).toFixed(2)}   (target: >= 0.9)`)
}
