// Throughput of a topology, side by side in one run (each measurement in a fresh child process):
//   generator → remap (sets one field in place) → blackhole, with acknowledgements on and off;
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
import { fileURLToPath } from 'node:url'
import { BatchNotifier, type BatchStatusReceiver, EventArray, type JsonObject } from '@ackline/core'
import { median, roundRobin } from '../../../bench/roundRobin.js'
import { remapPipeline } from './remapPipeline.js'

const EVENTS = Number(process.env.ACKLINE_BENCH_EVENTS ?? 1_000_000)
const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 5)
const BATCH = 500

const record = (index: number): JsonObject => ({ message: 'event', index })

function* batches(): Generator<JsonObject[]> {
  for (let index = 0; index < EVENTS; ) {
    const size = Math.min(BATCH, EVENTS - index)
    const batch = new Array<JsonObject>(size)
    for (let i = 0; i < size; i++) batch[i] = record(index + i)
    index += size
    yield batch
  }
}

/** Batches of LogEvents with a notifier each, made as the topology's sources make them. */
function* eventBatches(receivers: BatchStatusReceiver[], acks: boolean): Generator<EventArray> {
  for (const records of batches()) {
    const batch = BatchNotifier.maybeCreate(acks, { sourceId: 'gen' })
    if (batch !== undefined) receivers.push(batch.receiver)
    yield EventArray.fromRecords(records, {
      sourceId: 'gen',
      ingestTimestamp: Date.now(),
      batch: batch?.notifier,
    })
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

const variants: Record<string, () => Promise<number>> = {
  'topology, acks on': () => remapPipeline(true, EVENTS, BATCH, 1),
  'topology, acks off': () => remapPipeline(false, EVENTS, BATCH, 1),
  'node:stream, LogEvents + acks': () => nodeStreamEvents(true),
  'node:stream, LogEvents, no acks': () => nodeStreamEvents(false),
  'async iterators, LogEvents + acks': () => asyncIteratorEvents(true),
  'node:stream, plain records': nodeStream,
  'async iterators, plain records': asyncIterators,
  'fan-out to 1': () => remapPipeline(true, EVENTS, BATCH, 1),
  'fan-out to 2': () => remapPipeline(true, EVENTS, BATCH, 2),
  'fan-out to 4': () => remapPipeline(true, EVENTS, BATCH, 4),
  'fan-out to 8': () => remapPipeline(true, EVENTS, BATCH, 8),
}

/**
 * In a child process: three warm-up runs of one variant (the JIT settles), then the best of three
 * measured runs (a neighbour's burst of load hits one run, not the figure); prints its events/s.
 * No collection is forced between runs: a forced full collection shrinks V8's young generation
 * back to its minimum, and the run after it would measure the heap regrowing (which weighs most
 * on the variants that hold the most events in flight) rather than the pipeline.
 */
async function child(name: string): Promise<void> {
  const run = variants[name]
  if (run === undefined) throw new Error(`no variant '${name}'`)
  for (let i = 0; i < 3; i++) await run()
  let best = 0
  for (let i = 0; i < 3; i++) {
    const start = performance.now()
    const events = await run()
    best = Math.max(best, events / ((performance.now() - start) / 1000))
  }
  console.log(best)
}

/**
 * Events/s of each variant, best and median over ROUNDS rounds. Each measurement runs in a fresh
 * process, so variants cannot make each other's call sites polymorphic or leave heap behind, and
 * the variants run round-robin, so a noisy neighbour weighs on all of them alike.
 */
function measureAll(names: readonly string[]): Map<string, { best: number; median: number }> {
  const results = new Map<string, { best: number; median: number }>()
  for (const [name, list] of roundRobin(fileURLToPath(import.meta.url), names, ROUNDS)) {
    results.set(name, { best: list.at(-1)!, median: median(list) })
  }
  return results
}

const fmt = (rate: number): string => `${(rate / 1e6).toFixed(2)} M events/s`
const pct = (a: number, b: number): string => `${((a / b) * 100).toFixed(0)}%`

function report(): void {
  console.log(
    `${EVENTS.toLocaleString('en')} events per run, batches of ${BATCH}, best (median) of ${ROUNDS} round-robin rounds, one process per measurement\n`,
  )
  const main = Object.keys(variants).filter((name) => !name.startsWith('fan-out'))
  const results = measureAll(main)
  for (const [name, result] of results) {
    console.log(`${name.padEnd(36)} ${fmt(result.best).padStart(18)}  (median ${fmt(result.median)})`)
  }
  const median = (name: string): number => results.get(name)!.median
  const on = median('topology, acks on')
  const line = (label: string, other: string, target = ''): void =>
    console.log(`  ${label.padEnd(44)} ${pct(on, median(other)).padStart(4)}${target}`)
  console.log('\nratios (medians):')
  line('acks on / acks off', 'topology, acks off', '   (target >= 90%)')
  line('acks on / node:stream, LogEvents + acks', 'node:stream, LogEvents + acks', '   (target >= 80%)')
  line('acks on / async iterators, LogEvents + acks', 'async iterators, LogEvents + acks')
  line('acks on / node:stream, plain records', 'node:stream, plain records')
  line('acks on / async iterators, plain records', 'async iterators, plain records')
  console.log(
    `  (the event model alone, node:stream with LogEvents, acks on / off: ${pct(median('node:stream, LogEvents + acks'), median('node:stream, LogEvents, no acks'))})`,
  )

  console.log(
    '\nfan-out, acks on (cost per event relative to one sink; linear growth would be 1x, 2x, 4x, 8x):',
  )
  const fanOut = measureAll(Object.keys(variants).filter((name) => name.startsWith('fan-out')))
  let single = 0
  for (const [name, { median: rate }] of fanOut) {
    const costNs = 1e9 / rate
    if (single === 0) single = costNs
    console.log(
      `  ${name.padEnd(14)} ${fmt(rate).padStart(18)}  ${costNs.toFixed(0).padStart(5)} ns/event  ${(costNs / single).toFixed(2)}x`,
    )
  }
}

const variant = process.env.ACKLINE_BENCH_VARIANT
if (variant === undefined) report()
else await child(variant)
