// A batch with per-record outcomes against the same batch without, side by side in one process:
// a source makes BATCH events from records into one batch (EventArray.fromRecords), each is
// cloned once (fan-out to a second sink), both arrays end as a sink runner ends them (one status
// for the whole array; the second sink errors one event in 100 one by one), and the source reads
// what it is told (with outcomes: the errored indexes too). Time per record, median of ROUNDS
// interleaved rounds, the order alternating.
// Run: pnpm bench outcomes
import { BatchNotifier, EventArray, type JsonObject } from '@ackline/core'

const BATCH = Number(process.env.ACKLINE_BENCH_BATCH ?? 1000)
const BATCHES = 100
const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 30)

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

const variants: Record<string, () => void> = {
  without: () => once(false),
  'with outcomes': () => once(true),
}
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!
for (let i = 0; i < 20; i++) for (const f of Object.values(variants)) f()
const samples: Record<string, number[]> = { without: [], 'with outcomes': [] }
// The variant that runs second in a round pays for the garbage of the first, so the order
// alternates from round to round, and each sample starts after a collection.
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {})
for (let r = 0; r < ROUNDS; r++) {
  const order = Object.entries(variants)
  if (r % 2 === 1) order.reverse()
  for (const [name, f] of order) {
    gc()
    const start = process.hrtime.bigint()
    f()
    samples[name]!.push(Number(process.hrtime.bigint() - start) / (BATCH * BATCHES))
  }
}
const without = median(samples.without!)
const withOutcomes = median(samples['with outcomes']!)
console.log(`time per record (batches of ${BATCH}, cloned once, ended; median of ${ROUNDS} rounds)`)
console.log(`  without outcomes  ${without.toFixed(1).padStart(7)} ns`)
console.log(`  with outcomes     ${withOutcomes.toFixed(1).padStart(7)} ns`)
console.log(`  throughput with / without: ${(without / withOutcomes).toFixed(2)}   (target: >= 0.9)`)
if (sink === -1) console.log(sink)
