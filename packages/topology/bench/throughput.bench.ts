// Throughput of a topology, side by side in one process:
//   generator → remap-like transform → blackhole, with acknowledgements on and off;
//   the same work through a node:stream pipeline and through a plain async-iterator chain, each
//   twice: with the same LogEvents and batch notifiers the topology uses (the like-for-like
//   baseline: create, attach, set a field, end delivered), and with plain records (the transport
//   floor: no event model at all);
//   fan-out from the transform to 1, 2, 4 and 8 blackholes with acknowledgements on.
// Every variant moves batches of BATCH records (the baselines move arrays too, as the runtime does)
// and sets one field on each in the middle stage.
// Run: pnpm bench topology   (ACKLINE_BENCH_EVENTS and ACKLINE_BENCH_ROUNDS override the sizes)

import { Readable, Transform as StreamTransform, Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { BatchNotifier, type BatchStatusReceiver, EventArray, type JsonObject, LogEvent } from '@ackline/core'
import { blackhole } from '@ackline/sinks'
import { generator } from '@ackline/sources'
import { TopologyBuilder, type Transform } from '@ackline/topology'

const EVENTS = Number(process.env.ACKLINE_BENCH_EVENTS ?? 1_000_000)
const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 7)
const BATCH = 500
const gc = (globalThis as { gc?: () => void }).gc

const record = (index: number): JsonObject => ({ message: 'event', index })

/** The remap-like transform: set one field on every event, pass it on. */
const remapLike: Transform = {
  kind: 'remap_like',
  process(events, context) {
    const list = events.events
    for (let i = 0; i < list.length; i++) context.emit(list[i]!.set('seen', true))
  },
}

async function topology(acknowledgements: boolean, sinks: number): Promise<number> {
  const builder = new TopologyBuilder<string>({ acknowledgements })
    .source('gen', generator({ count: EVENTS, batchSize: BATCH, record }))
    .transform('remap', ['gen'], remapLike)
  const holes = Array.from({ length: sinks }, () => blackhole())
  holes.forEach((hole, i) => {
    builder.sink(`out${i}`, ['remap'], hole)
  })
  const built = builder.build()
  await built.start()
  await built.done
  for (const hole of holes) if (hole.count !== EVENTS) throw new Error(`a blackhole saw ${hole.count} events`)
  const metrics = built.metrics()
  if (acknowledgements && metrics.gen!.ackLatencyMs.count !== EVENTS / BATCH)
    throw new Error('not every batch resolved')
  return EVENTS
}

function* batches(): Generator<JsonObject[]> {
  for (let index = 0; index < EVENTS; ) {
    const size = Math.min(BATCH, EVENTS - index)
    const batch = new Array<JsonObject>(size)
    for (let i = 0; i < size; i++) batch[i] = record(index + i)
    index += size
    yield batch
  }
}

/** Batches of LogEvents with a notifier each, as a source with acknowledgements on makes them. */
function* eventBatches(receivers: BatchStatusReceiver[], acks: boolean): Generator<EventArray> {
  for (const records of batches()) {
    const options = { sourceId: 'gen', ingestTimestamp: Date.now() }
    const events = new Array<LogEvent>(records.length)
    for (let i = 0; i < records.length; i++) events[i] = new LogEvent(records[i]!, options)
    const array = new EventArray(events)
    const batch = BatchNotifier.maybeCreate(acks, { sourceId: 'gen' })
    if (batch !== undefined) {
      receivers.push(batch.receiver)
      array.attach(batch.notifier)
    }
    yield array
  }
}

const allDelivered = (receivers: BatchStatusReceiver[], acks: boolean): void => {
  if (!acks) return
  if (receivers.length !== EVENTS / BATCH || receivers.some((r) => r.status !== 'delivered')) {
    throw new Error('not every batch resolved delivered')
  }
}

async function nodeStreamEvents(acks: boolean): Promise<number> {
  const receivers: BatchStatusReceiver[] = []
  let count = 0
  await pipeline(
    Readable.from(eventBatches(receivers, acks), { objectMode: true, highWaterMark: 1 }),
    new StreamTransform({
      objectMode: true,
      highWaterMark: 1,
      transform(batch: EventArray, _encoding, callback) {
        const list = batch.events
        for (let i = 0; i < list.length; i++) list[i]!.set('seen', true)
        callback(null, batch)
      },
    }),
    new Writable({
      objectMode: true,
      highWaterMark: 1,
      write(batch: EventArray, _encoding, callback) {
        count += batch.length
        batch.end('delivered')
        callback()
      },
    }),
  )
  if (count !== EVENTS) throw new Error(`node:stream saw ${count} events`)
  allDelivered(receivers, acks)
  return count
}

async function asyncIteratorEvents(acks: boolean): Promise<number> {
  const receivers: BatchStatusReceiver[] = []
  async function* source(): AsyncGenerator<EventArray> {
    yield* eventBatches(receivers, acks)
  }
  async function* remap(input: AsyncIterable<EventArray>): AsyncGenerator<EventArray> {
    for await (const batch of input) {
      const list = batch.events
      for (let i = 0; i < list.length; i++) list[i]!.set('seen', true)
      yield batch
    }
  }
  let count = 0
  for await (const batch of remap(source())) {
    count += batch.length
    batch.end('delivered')
  }
  if (count !== EVENTS) throw new Error(`the iterator chain saw ${count} events`)
  allDelivered(receivers, acks)
  return count
}

async function nodeStream(): Promise<number> {
  let count = 0
  await pipeline(
    Readable.from(batches(), { objectMode: true, highWaterMark: 1 }),
    new StreamTransform({
      objectMode: true,
      highWaterMark: 1,
      transform(batch: JsonObject[], _encoding, callback) {
        for (let i = 0; i < batch.length; i++) batch[i]!.seen = true
        callback(null, batch)
      },
    }),
    new Writable({
      objectMode: true,
      highWaterMark: 1,
      write(batch: JsonObject[], _encoding, callback) {
        count += batch.length
        callback()
      },
    }),
  )
  if (count !== EVENTS) throw new Error(`node:stream saw ${count} events`)
  return count
}

async function asyncIterators(): Promise<number> {
  async function* source(): AsyncGenerator<JsonObject[]> {
    yield* batches()
  }
  async function* remap(input: AsyncIterable<JsonObject[]>): AsyncGenerator<JsonObject[]> {
    for await (const batch of input) {
      for (let i = 0; i < batch.length; i++) batch[i]!.seen = true
      yield batch
    }
  }
  let count = 0
  for await (const batch of remap(source())) count += batch.length
  if (count !== EVENTS) throw new Error(`the iterator chain saw ${count} events`)
  return count
}

/** Best events/s over ROUNDS runs (after two warm-up runs, so the JIT has settled), and the median. */
async function measure(run: () => Promise<number>): Promise<{ best: number; median: number }> {
  await run()
  await run()
  const rates: number[] = []
  for (let r = 0; r < ROUNDS; r++) {
    gc?.()
    const start = performance.now()
    const events = await run()
    rates.push(events / ((performance.now() - start) / 1000))
  }
  rates.sort((a, b) => a - b)
  return { best: rates.at(-1)!, median: rates[Math.floor(rates.length / 2)]! }
}

const fmt = (rate: number): string => `${(rate / 1e6).toFixed(2)} M events/s`
const pct = (a: number, b: number): string => `${((a / b) * 100).toFixed(0)}%`

console.log(
  `${EVENTS.toLocaleString('en')} events per run, batches of ${BATCH}, best (median) of ${ROUNDS} runs\n`,
)
const variants: [string, () => Promise<number>][] = [
  ['topology, acks on', () => topology(true, 1)],
  ['topology, acks off', () => topology(false, 1)],
  ['node:stream, LogEvents + acks', () => nodeStreamEvents(true)],
  ['node:stream, LogEvents, no acks', () => nodeStreamEvents(false)],
  ['async iterators, LogEvents + acks', () => asyncIteratorEvents(true)],
  ['node:stream, plain records', nodeStream],
  ['async iterators, plain records', asyncIterators],
]
const results = new Map<string, { best: number; median: number }>()
for (const [name, run] of variants) {
  const result = await measure(run)
  results.set(name, result)
  console.log(`${name.padEnd(36)} ${fmt(result.best).padStart(18)}  (median ${fmt(result.median)})`)
}
const median = (name: string): number => results.get(name)!.median
const on = median('topology, acks on')
console.log(`\nratios (medians):`)
console.log(
  `  acks on / acks off                         ${pct(on, median('topology, acks off'))}   (target >= 90%)`,
)
console.log(
  `  acks on / node:stream, LogEvents + acks    ${pct(on, median('node:stream, LogEvents + acks'))}   (target >= 80%)`,
)
console.log(
  `  acks on / async iterators, LogEvents + acks ${pct(on, median('async iterators, LogEvents + acks'))}`,
)
console.log(`  acks on / node:stream, plain records       ${pct(on, median('node:stream, plain records'))}`)
console.log(
  `  acks on / async iterators, plain records   ${pct(on, median('async iterators, plain records'))}`,
)

console.log(
  `\nfan-out, acks on (cost per event relative to one sink; linear growth would be 1x, 2x, 4x, 8x):`,
)
let single = 0
for (const sinks of [1, 2, 4, 8]) {
  const { median } = await measure(() => topology(true, sinks))
  const costNs = 1e9 / median
  if (sinks === 1) single = costNs
  console.log(
    `  ${String(sinks).padStart(2)} sink(s)  ${fmt(median).padStart(18)}  ${costNs.toFixed(0).padStart(5)} ns/event  ${(costNs / single).toFixed(2)}x`,
  )
}
