// Cost of acknowledgements per event, side by side in one process:
//   acks on:  create, attach to the batch's notifier, clone once (the copy goes to a second
//             consumer, as in fan-out), end both handles
//   acks off: the same loop with no notifier (events carry no finalizer)
//   floor:    a bare loop that allocates the same plain objects and does nothing else
// and the heap retained by 1,000,000 in-flight events in each form, after a forced collection.
// Run: pnpm bench core   (node --expose-gc is set by the runner)
import { BatchNotifier, type BatchStatusReceiver, EventArray, LogEvent } from '@ackline/core'

const BATCH = 10_000
const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 40)
const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error('run with --expose-gc (pnpm bench does)')

interface PlainEvent {
  fields: { n: number }
  metadata: { sourceId: string; ingestTimestamp: number; ended: boolean }
}

let sink = 0 // keeps results observable so no loop is optimised away

function floor(): void {
  const ts = Date.now()
  const events = new Array<PlainEvent>(BATCH)
  const copies = new Array<PlainEvent>(BATCH)
  for (let i = 0; i < BATCH; i++)
    events[i] = { fields: { n: i }, metadata: { sourceId: 'bench', ingestTimestamp: ts, ended: false } }
  for (let i = 0; i < BATCH; i++) {
    const e = events[i]!
    copies[i] = {
      fields: e.fields,
      metadata: { sourceId: e.metadata.sourceId, ingestTimestamp: ts, ended: false },
    }
  }
  for (let i = 0; i < BATCH; i++) events[i]!.metadata.ended = true
  for (let i = 0; i < BATCH; i++) {
    copies[i]!.metadata.ended = true
    sink += copies[i]!.fields.n
  }
}

function withAcks(enabled: boolean): BatchStatusReceiver | undefined {
  // The way sources and sinks do it: a source attaches the whole array and releases the notifier,
  // a sink's runner ends a whole array with one status.
  const options = { sourceId: 'bench', ingestTimestamp: Date.now() }
  const batch = BatchNotifier.maybeCreate(enabled, options)
  const events = new Array<LogEvent>(BATCH)
  for (let i = 0; i < BATCH; i++) events[i] = new LogEvent({ n: i }, options)
  const array = new EventArray(events)
  if (batch !== undefined) array.attach(batch.notifier)
  // The copies go to a second consumer (fan-out), so they live as long as the originals do.
  const copies = new Array<LogEvent>(BATCH)
  for (let i = 0; i < BATCH; i++) copies[i] = events[i]!.clone()
  array.end('delivered')
  new EventArray(copies).end('delivered')
  if (batch !== undefined && batch.receiver.status !== 'delivered')
    throw new Error('batch did not resolve delivered')
  return batch?.receiver
}

const variants: Record<string, () => unknown> = {
  floor,
  'acks off': () => withAcks(false),
  'acks on': () => withAcks(true),
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

// Warm up every variant, then interleave rounds so machine noise hits all of them alike.
const WARMUP = Number(process.env.ACKLINE_BENCH_WARMUP ?? 300)
for (let i = 0; i < WARMUP; i++) for (const run of Object.values(variants)) run()
const samples: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((k) => [k, []]))
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, run] of Object.entries(variants)) {
    const start = process.hrtime.bigint()
    run()
    samples[name]!.push(Number(process.hrtime.bigint() - start) / BATCH)
  }
}

const ns = Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, median(v)])) as Record<
  string,
  number
>
console.log(
  `time per event (create, attach, clone once, end both; batches of ${BATCH}; median of ${ROUNDS} rounds)`,
)
for (const [name, value] of Object.entries(ns)) {
  console.log(
    `  ${name.padEnd(9)} ${value.toFixed(1).padStart(7)} ns   ${(value / ns.floor!).toFixed(2)}x floor`,
  )
}
console.log(
  `  acks on / acks off: ${(ns['acks on']! / ns['acks off']!).toFixed(2)}x   (target: acks on <= 2x floor)`,
)

// Retained heap of 1,000,000 in-flight events (created and attached, none ended yet).
const HELD = Number(process.env.ACKLINE_BENCH_HELD ?? 1_000_000)
function heldHeap(make: () => unknown): number {
  gc!()
  gc!()
  const before = process.memoryUsage().heapUsed
  const held = make()
  gc!()
  gc!()
  const after = process.memoryUsage().heapUsed
  sink += (held as unknown[]).length
  return (after - before) / HELD
}

const holdPlain = () => {
  const ts = Date.now()
  const out: PlainEvent[] = []
  for (let i = 0; i < HELD; i++)
    out.push({ fields: { n: i }, metadata: { sourceId: 'bench', ingestTimestamp: ts, ended: false } })
  return out
}
const holdEvents = (enabled: boolean) => () => {
  const options = { sourceId: 'bench', ingestTimestamp: Date.now() }
  const out: unknown[] = []
  for (let b = 0; b < HELD / BATCH; b++) {
    const batch = BatchNotifier.maybeCreate(enabled, options)
    const events = new Array<LogEvent>(BATCH)
    for (let i = 0; i < BATCH; i++) events[i] = new LogEvent({ n: i }, options)
    if (batch !== undefined) new EventArray(events).attach(batch.notifier)
    out.push(...events)
    if (batch !== undefined) out.push(batch.receiver)
  }
  return out
}

const plain = heldHeap(holdPlain)
const off = heldHeap(holdEvents(false))
const on = heldHeap(holdEvents(true))
console.log(
  `\nretained heap per in-flight event (${HELD.toLocaleString()} events held, batches of ${BATCH}, after gc)`,
)
console.log(`  plain objects (floor)  ${plain.toFixed(1).padStart(6)} bytes`)
console.log(`  LogEvent, acks off     ${off.toFixed(1).padStart(6)} bytes`)
console.log(`  LogEvent, acks on      ${on.toFixed(1).padStart(6)} bytes`)
console.log(
  `  tracking cost (acks on - acks off): ${(on - off).toFixed(1)} bytes; above the plain floor: ${(on - plain).toFixed(1)} bytes   (target: <= 48)`,
)
if (sink === -1) console.log(sink)
