// What holding costs: a transform that keeps events across calls must pay the same per event
// whether it holds 10 or 10,000 of them. Side by side in one run (a fresh child process per
// measurement, variants round-robin), acknowledgements on:
//   generator (batches of 10) → a sliding window holding the last N events (each call emits the
//   ones pushed out; flush emits the rest) → blackhole, for N = 10, 100, 1000, 10,000;
//   generator (batches of 100) → reduce with one group closing every G events (each event is
//   merged into the group's first one, so its finalizer set grows to G) → blackhole, for
//   G = 10, 2,500, 5,000, 10,000;
//   the peer: the same window over plain records (no event model, no runtime) in a node:stream
//   pipeline (arrays of 10 in, the records pushed out passed on as arrays), N = 10 and 10,000,
//   which says what holding costs in itself: n objects that live longer than a young
//   collection's cycle are copied by it, and are touched again far apart in memory.
// Printed: ns per event and the ratio to the smallest size (target: within 1.5x at 10,000).
// Run: pnpm bench holding   (ACKLINE_BENCH_ROUNDS and ACKLINE_BENCH_EVENTS override the sizes)

import { Readable, Transform as StreamTransform, Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { fileURLToPath } from 'node:url'
import { EventArray, type JsonObject, type LogEvent } from '@ackline/core'
import { blackhole } from '@ackline/sinks'
import { generator } from '@ackline/sources'
import { TopologyBuilder, type Transform, type TransformContext } from '@ackline/topology'
import { reduce } from '@ackline/transforms'
import { median, roundRobin } from '../../../bench/roundRobin.js'

const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 5)
const EVENTS = Number(process.env.ACKLINE_BENCH_EVENTS ?? 1_000_000)

const record = (index: number): JsonObject => ({ message: 'event', index })

/**
 * The last `size` items of what was added; `push` returns the ones it pushed out (in order, or
 * `undefined` when none), `rest` the ones still held. The window transform and its plain peer
 * both hold with this, so they do the same work.
 */
function sliding<T>(size: number): { push(items: readonly T[]): T[] | undefined; rest(): T[] | undefined } {
  const held: T[] = []
  let head = 0
  const out = (until: number): T[] | undefined => {
    const gone = until > head ? held.slice(head, until) : undefined
    head = until
    if (head > 4096 && head * 2 > held.length) {
      held.splice(0, head)
      head = 0
    }
    return gone
  }
  return {
    push(items) {
      for (const item of items) held.push(item)
      return out(Math.max(head, held.length - size))
    },
    rest: () => out(held.length),
  }
}

/** Holds the last `size` events; each call passes on the ones it pushed out, flush the rest. */
function window(size: number): Transform {
  const held = sliding<LogEvent>(size)
  const pass = (context: TransformContext, gone: LogEvent[] | undefined): void => {
    if (gone !== undefined) context.emitAll(new EventArray(gone))
  }
  return {
    kind: 'window',
    process(events, context) {
      pass(context, held.push(events.events))
    },
    flush(context) {
      pass(context, held.rest())
    },
  }
}

async function run(transform: Transform, batchSize: number): Promise<number> {
  const hole = blackhole()
  const built = new TopologyBuilder<string>({ acknowledgements: true })
    .source('gen', generator({ count: EVENTS, batchSize, record }))
    .transform('hold', ['gen'], transform)
    .sink('out', ['hold'], hole)
    .build()
  await built.start()
  await built.done
  const metrics = built.metrics()
  if (metrics.gen!.ackLatencyMs.count !== EVENTS / batchSize) throw new Error('not every batch resolved')
  if (metrics.hold!.erroredEvents !== 0 || metrics.hold!.receivedEvents !== EVENTS)
    throw new Error('the transform leaked events')
  return EVENTS
}

/** The peer: the same window over plain records, in a node:stream pipeline; returns the records moved. */
async function plainWindow(size: number): Promise<number> {
  function* batches(): Generator<JsonObject[]> {
    for (let index = 0; index < EVENTS; index += 10) {
      const list = new Array<JsonObject>(10)
      for (let i = 0; i < 10; i++) list[i] = record(index + i)
      yield list
    }
  }
  const held = sliding<JsonObject>(size)
  let count = 0
  await pipeline(
    Readable.from(batches(), { objectMode: true, highWaterMark: 1 }),
    new StreamTransform({
      objectMode: true,
      highWaterMark: 1,
      transform(list: JsonObject[], _encoding, callback) {
        callback(null, held.push(list))
      },
      flush(callback) {
        callback(null, held.rest())
      },
    }),
    new Writable({
      objectMode: true,
      highWaterMark: 1,
      write(list: JsonObject[], _encoding, callback) {
        count += list.length
        callback()
      },
    }),
  )
  if (count !== EVENTS) throw new Error(`the plain window passed on ${count} records`)
  return EVENTS
}

const WINDOWS = [10, 100, 1000, 10_000]
const PLAIN = [10, 10_000]
const GROUPS = [10, 2500, 5000, 10_000]
const variants: Record<string, () => Promise<number>> = {}
for (const n of WINDOWS) variants[`window holding ${n}`] = () => run(window(n), 10)
for (const g of GROUPS)
  variants[`reduce, one group of ${g}`] = () => run(reduce({ maxEvents: g, windowMs: 3_600_000 }), 100)
for (const n of PLAIN) variants[`peer: plain window ${n}`] = () => plainWindow(n)

async function child(name: string): Promise<void> {
  const variant = variants[name]
  if (variant === undefined) throw new Error(`no variant '${name}'`)
  for (let i = 0; i < 2; i++) await variant()
  let best = 0
  for (let i = 0; i < 3; i++) {
    const start = performance.now()
    const events = await variant()
    best = Math.max(best, events / ((performance.now() - start) / 1000))
  }
  console.log(best)
}

function report(): void {
  console.log(
    `${EVENTS.toLocaleString('en')} events per run, acks on, median of ${ROUNDS} round-robin rounds\n`,
  )
  const rates = roundRobin(fileURLToPath(import.meta.url), Object.keys(variants), ROUNDS)
  for (const family of [
    WINDOWS.map((n) => `window holding ${n}`),
    GROUPS.map((g) => `reduce, one group of ${g}`),
    PLAIN.map((n) => `peer: plain window ${n}`),
  ]) {
    const base = 1e9 / median(rates.get(family[0]!)!)
    for (const name of family) {
      const ns = 1e9 / median(rates.get(name)!)
      console.log(`${name.padEnd(30)} ${ns.toFixed(0).padStart(6)} ns/event  ${(ns / base).toFixed(2)}x`)
    }
  }
  console.log(
    "\ntarget: 10,000 held within 1.5x of 10 held ('peer': the same window over plain records in node:stream)",
  )
}

const variant = process.env.ACKLINE_BENCH_VARIANT
if (variant === undefined) report()
else await child(variant)
