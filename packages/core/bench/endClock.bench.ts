// What one clock reading per `end` call saves a runtime that times its batches (the topology's
// ack latency): a sink ending one coalesced array of 128 single-event batches (batch 1 through a
// coalescing consumer), each batch's listener computing its latency
//   own clock:     from `Date.now()` read in the listener, once per batch (as before)
//   shared clock:  from the `now` core passes, read once for the whole `end` call
// in ns per batch, medians of interleaved rounds in one process. Run: pnpm bench endClock
import { BatchNotifier, type BatchResolvedListener, EventArray, type LogEvent } from '@ackline/core'

const BATCHES = 128
const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 2_000)
const WARMUP = Number(process.env.ACKLINE_BENCH_WARMUP ?? 500)

let sink = 0 // keeps the latencies observable, so no listener is optimised away
const listeners: Record<string, BatchResolvedListener> = {
  'own clock': {
    batchResolved: (_status, receiver) => {
      sink += Date.now() - receiver.openedAt
    },
  },
  'shared clock': {
    batchResolved: (_status, receiver, now) => {
      sink += now - receiver.openedAt
    },
  },
}

/** Makes BATCHES single-event batches listened to by `listener`, ends them in one array; ns per batch. */
function round(listener: BatchResolvedListener): number {
  const opened = Date.now()
  const events: LogEvent[] = []
  for (let i = 0; i < BATCHES; i++) {
    const notifier = BatchNotifier.open('bench', false, opened)
    notifier.receiver.onResolved(listener)
    events.push(
      EventArray.fromRecords([{ i }], { sourceId: 'bench', ingestTimestamp: opened, batch: notifier })
        .events[0]!,
    )
  }
  const array = new EventArray(events)
  const start = process.hrtime.bigint()
  array.end('delivered')
  return Number(process.hrtime.bigint() - start) / BATCHES
}

for (let i = 0; i < WARMUP; i++) for (const listener of Object.values(listeners)) round(listener)
const samples: Record<string, number[]> = { 'own clock': [], 'shared clock': [] }
for (let i = 0; i < ROUNDS; i++)
  for (const [name, listener] of Object.entries(listeners)) samples[name]!.push(round(listener))
const median = (list: number[]): number => list.sort((a, b) => a - b)[Math.floor(list.length / 2)]!
const own = median(samples['own clock']!)
const shared = median(samples['shared clock']!)
console.log(`ending ${BATCHES} single-event batches in one array, ns per batch (median of ${ROUNDS} rounds):`)
console.log(`  own clock     ${own.toFixed(1)}`)
console.log(`  shared clock  ${shared.toFixed(1)}   (${(shared / own).toFixed(2)} of own)`)
if (sink === 0) console.log('(no latency was summed)')
