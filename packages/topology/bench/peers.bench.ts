// The topology beside honest peers at the batch sizes real sources produce (1, 10, 100, 1000),
// side by side in one run (each measurement in a fresh child process, variants round-robin):
//   generator → remap (sets one field in place) → blackhole, acknowledgements on and off;
//   the same work on plain records (no event model at all) through a node:stream pipeline, an
//   rxjs pipeline and an async-generator chain, each moving arrays of BATCH records as the
//   runtime does.
// A source that reads every receipt's status (as an HTTP or broker source does) is measured with
// acknowledgements on and off, so the cost of acknowledgements to such a source is a ratio too.
// Beside them, the floor the event model sets: the same node:stream pipeline moving ackline events
// with batch notifiers (made with `EventArray.fromRecords`, a field set with `event.set`, ended
// `delivered`), with no runtime at all.
// The ratios say what the event model, the acknowledgements and the runtime cost over a bare
// transport at each batch size. Run: pnpm bench peers
// (ACKLINE_BENCH_ROUNDS overrides the rounds, ACKLINE_BENCH_BATCHES the sizes, e.g. "1,100").

import { Readable, Transform as StreamTransform, Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { fileURLToPath } from 'node:url'
import { BatchNotifier, type BatchResolvedListener, EventArray, type JsonObject } from '@ackline/core'
import { from, map } from 'rxjs'
import { median, roundRobin } from '../../../bench/roundRobin.js'
import { remapPipeline } from './remapPipeline.js'

const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 5)
const BATCHES = (process.env.ACKLINE_BENCH_BATCHES ?? '1,10,100,1000').split(',').map(Number)
/**
 * Fewer events at small batches, so every variant runs for a comparable time; at least 100,000
 * a run, so that the three warm-up runs bring the topology to its steady speed (it needs about
 * 100,000 events, RFC 0002) and a measured run lasts long enough to read (tens of ms at batch 1).
 */
const eventsFor = (batch: number): number => (batch <= 10 ? 100_000 : 200_000)

const record = (index: number): JsonObject => ({ message: 'event', index })

function* batches(events: number, batch: number): Generator<JsonObject[]> {
  for (let index = 0; index < events; ) {
    const size = Math.min(batch, events - index)
    const list = new Array<JsonObject>(size)
    for (let i = 0; i < size; i++) list[i] = record(index + i)
    index += size
    yield list
  }
}

const setSeen = (list: JsonObject[]): JsonObject[] => {
  for (let i = 0; i < list.length; i++) list[i]!.seen = true
  return list
}

async function nodeStream(batch: number): Promise<number> {
  const events = eventsFor(batch)
  let count = 0
  await pipeline(
    Readable.from(batches(events, batch), { objectMode: true, highWaterMark: 1 }),
    new StreamTransform({
      objectMode: true,
      highWaterMark: 1,
      transform(list: JsonObject[], _encoding, callback) {
        callback(null, setSeen(list))
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
  if (count !== events) throw new Error(`node:stream saw ${count} events`)
  return count
}

/**
 * node:stream moving ackline events made as a source makes them, one notifier per batch, each
 * event set and ended `delivered` as the topology's remap and blackhole do; checks every batch
 * resolved `delivered`.
 */
async function nodeStreamEvents(batch: number): Promise<number> {
  const events = eventsFor(batch)
  // One listener for every batch (no closure, and no receiver kept, which the peer would not pay).
  let delivered = 0
  const listener: BatchResolvedListener = {
    batchResolved(status) {
      if (status === 'delivered') delivered++
    },
  }
  function* arrays(): Generator<EventArray> {
    for (const records of batches(events, batch)) {
      const notifier = BatchNotifier.open('gen', false, Date.now())
      notifier.receiver.onResolved(listener)
      yield EventArray.fromRecords(records, { sourceId: 'gen', batch: notifier })
    }
  }
  let count = 0
  await pipeline(
    Readable.from(arrays(), { objectMode: true, highWaterMark: 1 }),
    new StreamTransform({
      objectMode: true,
      highWaterMark: 1,
      transform(array: EventArray, _encoding, callback) {
        const list = array.events
        for (let i = 0; i < list.length; i++) list[i]!.set('seen', true)
        callback(null, array)
      },
    }),
    new Writable({
      objectMode: true,
      highWaterMark: 1,
      write(array: EventArray, _encoding, callback) {
        count += array.length
        array.end('delivered')
        callback()
      },
    }),
  )
  if (count !== events) throw new Error(`node:stream saw ${count} events`)
  if (delivered !== Math.ceil(events / batch)) throw new Error('a batch did not resolve delivered')
  return count
}

async function rxjs(batch: number): Promise<number> {
  const events = eventsFor(batch)
  let count = 0
  await new Promise<void>((resolve, reject) => {
    from(batches(events, batch))
      .pipe(map(setSeen))
      .subscribe({
        next: (list) => {
          count += list.length
        },
        error: reject,
        complete: resolve,
      })
  })
  if (count !== events) throw new Error(`rxjs saw ${count} events`)
  return count
}

async function asyncGenerators(batch: number): Promise<number> {
  const events = eventsFor(batch)
  async function* source(): AsyncGenerator<JsonObject[]> {
    yield* batches(events, batch)
  }
  async function* stage(input: AsyncIterable<JsonObject[]>): AsyncGenerator<JsonObject[]> {
    for await (const list of input) yield setSeen(list)
  }
  let count = 0
  for await (const list of stage(source())) count += list.length
  if (count !== events) throw new Error(`the generator chain saw ${count} events`)
  return count
}

const kinds: Record<string, (batch: number) => Promise<number>> = {
  'ackline, acks on': (batch) => remapPipeline(true, eventsFor(batch), batch),
  'acks on, receipts read': (batch) => remapPipeline(true, eventsFor(batch), batch, 1, true),
  'ackline, acks off': (batch) => remapPipeline(false, eventsFor(batch), batch),
  'acks off, receipts read': (batch) => remapPipeline(false, eventsFor(batch), batch, 1, true),
  'node:stream, plain': nodeStream,
  'node:stream, events': nodeStreamEvents,
  'rxjs, plain': rxjs,
  'async generators, plain': asyncGenerators,
}

/** In a child: three warm-up runs, then the best of three measured runs; prints events/s. */
async function child(variant: string): Promise<void> {
  const at = variant.lastIndexOf('@')
  const run = kinds[variant.slice(0, at)]
  const batch = Number(variant.slice(at + 1))
  if (run === undefined || !Number.isInteger(batch)) throw new Error(`no variant '${variant}'`)
  for (let i = 0; i < 3; i++) await run(batch)
  let best = 0
  for (let i = 0; i < 3; i++) {
    const start = performance.now()
    const events = await run(batch)
    best = Math.max(best, events / ((performance.now() - start) / 1000))
  }
  console.log(best)
}

function report(): void {
  console.log(`ns per event, median of ${ROUNDS} round-robin rounds, one process per measurement\n`)
  const names = BATCHES.flatMap((batch) => Object.keys(kinds).map((kind) => `${kind}@${batch}`))
  const rates = roundRobin(fileURLToPath(import.meta.url), names, ROUNDS)
  const rate = (kind: string, batch: number): number => median(rates.get(`${kind}@${batch}`)!)
  const header = ['batch', ...Object.keys(kinds)].map((h, i) => (i === 0 ? h.padEnd(6) : h.padStart(24)))
  console.log(header.join(''))
  for (const batch of BATCHES) {
    const cells = Object.keys(kinds).map((kind) => (1e9 / rate(kind, batch)).toFixed(0).padStart(24))
    console.log(`${String(batch).padEnd(6)}${cells.join('')}`)
  }
  console.log('\nratios (throughput of acks on over the peer; higher is better):')
  console.log(
    `${'batch'.padEnd(6)}${['/ acks off', '/ node:stream', '/ rxjs', '/ async generators', 'events / node:stream', 'receipts read / off', 'read: on / off'].map((h) => h.padStart(22)).join('')}`,
  )
  for (const batch of BATCHES) {
    const on = rate('ackline, acks on', batch)
    const cells = ['ackline, acks off', 'node:stream, plain', 'rxjs, plain', 'async generators, plain'].map(
      (peer) => (on / rate(peer, batch)).toFixed(2).padStart(22),
    )
    // The floor: the event model alone (no runtime) over the plain transport.
    const floor = rate('node:stream, events', batch) / rate('node:stream, plain', batch)
    // What acknowledgements cost a source that reads its receipts and waits on their status.
    const read = rate('acks on, receipts read', batch) / rate('ackline, acks off', batch)
    // What acknowledgements alone cost such a source: both read their receipts' status.
    const readBoth = rate('acks on, receipts read', batch) / rate('acks off, receipts read', batch)
    console.log(
      `${String(batch).padEnd(6)}${cells.join('')}${floor.toFixed(2).padStart(22)}${read.toFixed(2).padStart(22)}${readBoth.toFixed(2).padStart(22)}`,
    )
  }
  console.log(
    '\ntargets: acks on / off >= 0.85 at batch 1, >= 0.90 at 10+; / node:stream >= 0.3 at 1, >= 0.5 at 100',
  )
  console.log(
    "'events / node:stream': node:stream moving ackline events with notifiers (no runtime) over the same with plain records;\n'receipts read / off': acks on with a source that reads every receipt's status (as HTTP and broker sources do) over acks off;\n'read: on / off': the same over acks off with a source that reads its receipts' status too (what acknowledgements alone cost it);\nthe 'ackline, acks on' generator asks for no receipt (send(records, { receipt: false }))",
  )
}

const variant = process.env.ACKLINE_BENCH_VARIANT
if (variant === undefined) report()
else await child(variant)
