// The disk buffer in front of a sink, end to end, beside the buffer's own append rate (issue 10,
// "the disk edge's read path"). Each variant runs in a fresh child process, the variants in
// round-robin rounds; medians are printed with their spread. Every variant moves the same events
// (REQUEST events a batch, CLIENTS batches in flight at once) with sync 'always':
//   append       DiskBuffer.append of the events' records, CLIENTS appenders at once (the peer:
//                the store's own rate, no event model, nothing read back);
//   edge         openDiskBuffer push (source batches with notifiers) + pull + deliver every array
//                read back, each batch awaited as a source awaits it (no HTTP);
//   http-disk    HTTP source → sink (blackhole) with a disk buffer ('on-delivery'): each request
//                is answered once its events were read back from disk and delivered. The
//                requests come from a load generator in a child process (bench/loadGenerator.ts,
//                as in the HTTP source's benchmark), so the client's CPU is not the server's;
//   http-disk-write  the same with the disk buffer acknowledging on write ('on-write'): each
//                request is answered once its events are durable, not read back (what the wait
//                for the read path costs);
//   http-memory  the same with the in-memory buffer;
//   store-read   the read path alone, on a buffer that already holds every record: DiskBuffer
//                read + ack of them all (the peer of edge-read);
//   edge-read    the same on the edge: pull, deliver each array read back, until every source
//                batch (pushed before the clock starts) is settled.
// Beside each rate, the CPU time the process spent per event over the same timed span (all its
// threads: the main one, the file system's, the collector's; for the HTTP variants the server's
// process alone), which a shared machine disturbs far less than the rate: what a variant costs,
// where the rate says what it got.
// Run: pnpm bench edge   (ACKLINE_BENCH_EVENTS, ACKLINE_BENCH_ROUNDS, ACKLINE_BENCH_REQUEST,
//                         ACKLINE_BENCH_CLIENTS, ACKLINE_BENCH_WARMUP override the sizes;
//                         ACKLINE_BENCH_ONLY picks variants)
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { DiskBuffer, diskBuffer, openDiskBuffer } from '@ackline/buffers'
import { BatchNotifier, EventArray, LogEvent } from '@ackline/core'
import { blackhole } from '@ackline/sinks'
import { httpServer } from '@ackline/sources'
import { TopologyBuilder } from '@ackline/topology'
import { type LoadGenerator, startLoadGenerator } from '../../../bench/loadGenerator.js'
import { median, roundRobin } from '../../../bench/roundRobin.js'

const EVENTS = Number(process.env.ACKLINE_BENCH_EVENTS ?? 20_000)
const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 5)
const REQUEST = Number(process.env.ACKLINE_BENCH_REQUEST ?? 20)
const CLIENTS = Number(process.env.ACKLINE_BENCH_CLIENTS ?? 16)
/**
 * Runs of the variant before the measured one, in the same process. The topologies reach their
 * steady speed only after about 100,000 events: with one warm-up run, HTTP with the memory buffer
 * measured 0.56 of the store's append rate, with five 0.75 (the store itself warms up too).
 */
const WARMUP = Number(process.env.ACKLINE_BENCH_WARMUP ?? 5)
const BATCHES = Math.ceil(EVENTS / REQUEST)

/** CPU time (µs, every thread) at the start of the timed span; read by {@link rateSince}. */
let cpuAtStart = process.cpuUsage()
/** ns of CPU per event over the last timed span. */
let cpuPerEvent = Number.NaN

/** Starts a timed span: returns its start, and notes the CPU time. */
function startClock(): number {
  cpuAtStart = process.cpuUsage()
  return performance.now()
}

/** Ends the span begun at `start`: events/s, and the CPU per event kept for the report. */
function rateSince(start: number, events: number): number {
  const seconds = (performance.now() - start) / 1000
  const cpu = process.cpuUsage(cpuAtStart)
  cpuPerEvent = ((cpu.user + cpu.system) * 1000) / events
  return events / seconds
}

const fields = (n: number) => ({ message: 'a request from a client', host: 'web-1', status: 200, n })
/** One request's body, as NDJSON. */
const body = (first: number): string =>
  Array.from({ length: REQUEST }, (_, k) => JSON.stringify(fields(first + k))).join('\n')

/** Runs `batch(i)` for every batch, CLIENTS at a time; events/s. */
async function clients(batch: (i: number) => Promise<void>): Promise<number> {
  let next = 0
  const start = startClock()
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      for (let i = next++; i < BATCHES; i = next++) await batch(i)
    }),
  )
  return rateSince(start, BATCHES * REQUEST)
}

async function append(dir: string): Promise<number> {
  const buffer = await DiskBuffer.open({ path: dir, sync: 'always', log: () => {} })
  // The records the edge stores: the fields, source id and ingest timestamp as one JSON array.
  const records = (i: number): Buffer[] =>
    Array.from({ length: REQUEST }, (_, k) =>
      Buffer.from(JSON.stringify([fields(i * REQUEST + k), 'http', Date.now()])),
    )
  const rate = await clients(async (i) => {
    const written = await buffer.append(records(i))
    if (written.status !== 'written') throw new Error(`append ${written.status}`)
  })
  await buffer.close()
  return rate
}

async function edge(dir: string): Promise<number> {
  const buffer = await openDiskBuffer({ path: dir, sinkId: 'out', sync: 'always', log: () => {} })
  let delivered = 0
  const sink = (async () => {
    while (delivered < BATCHES * REQUEST) {
      const events = (await buffer.pull())!
      delivered += events.events.length
      events.end('delivered')
    }
  })()
  const rate = await clients(async (i) => {
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'http' })
    const events = Array.from(
      { length: REQUEST },
      (_, k) => new LogEvent(fields(i * REQUEST + k), { sourceId: 'http' }),
    )
    await buffer.push(new EventArray(events).attach(notifier))
    if ((await receiver) !== 'delivered') throw new Error('a batch was not delivered')
  })
  await sink
  await buffer.dispose()
  return rate
}

/** Fills `store` with every batch's records (not timed). */
async function fill(push: (i: number) => Promise<void>): Promise<void> {
  for (let i = 0; i < BATCHES; i++) await push(i)
}

/**
 * The read variants checkpoint by time only (and not within the run), so the ledger's fsyncs do
 * not hide the CPU the read path costs; ACKLINE_BENCH_CHECKPOINTS=1 keeps the defaults.
 */
const readOptions =
  process.env.ACKLINE_BENCH_CHECKPOINTS === '1'
    ? {}
    : { ledgerEveryAcks: Number.MAX_SAFE_INTEGER, ledgerIntervalMs: 600_000 }

async function storeRead(dir: string): Promise<number> {
  const buffer = await DiskBuffer.open({ path: dir, sync: 'always', log: () => {}, ...readOptions })
  await fill(async (i) => {
    await buffer.append(
      Array.from({ length: REQUEST }, (_, k) =>
        Buffer.from(JSON.stringify([fields(i * REQUEST + k), 'http', 0])),
      ),
    )
  })
  const start = startClock()
  let read = 0
  while (read < BATCHES * REQUEST) {
    const records = (await buffer.read(1000))!
    for (const record of records) buffer.ack(record.seq)
    read += records.length
  }
  const rate = rateSince(start, read)
  await buffer.close()
  return rate
}

async function edgeRead(dir: string): Promise<number> {
  const buffer = await openDiskBuffer({
    path: dir,
    sinkId: 'out',
    sync: 'always',
    log: () => {},
    ...readOptions,
  })
  const receivers: Promise<unknown>[] = []
  await fill(async (i) => {
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'http' })
    const events = Array.from(
      { length: REQUEST },
      (_, k) => new LogEvent(fields(i * REQUEST + k), { sourceId: 'http' }),
    )
    await buffer.push(new EventArray(events).attach(notifier))
    receivers.push(receiver.promise)
  })
  const start = startClock()
  let delivered = 0
  while (delivered < BATCHES * REQUEST) {
    const events = (await buffer.pull())!
    delivered += events.events.length
    events.end('delivered')
  }
  await Promise.all(receivers)
  const rate = rateSince(start, delivered)
  await buffer.dispose()
  return rate
}

/** The HTTP variants' load generator (a child process), started by the first run. */
let generator: LoadGenerator | undefined

async function http(
  dir: string,
  disk: boolean,
  acknowledgements: 'on-delivery' | 'on-write' = 'on-delivery',
): Promise<number> {
  const source = httpServer({ address: '127.0.0.1:0' })
  const hole = blackhole()
  const topology = new TopologyBuilder({ acknowledgements: true, dataDir: dir })
    .source('http', source)
    .sink('out', ['http'], hole, disk ? { buffer: diskBuffer({ sync: 'always', acknowledgements }) } : {})
    .build()
  await topology.start()
  const { port } = await source.listening()
  // One generator for the process: it warms up with the server, over the warm-up runs.
  generator ??= startLoadGenerator({
    concurrency: CLIENTS,
    contentType: 'application/x-ndjson',
    bodies: Array.from({ length: BATCHES }, (_, i) => body(i * REQUEST)),
  })
  const { ms, bad, cpuMicros } = await generator.load(port, BATCHES)
  if (bad !== 0) throw new Error(`${bad} requests were not answered 200`)
  const rate = (BATCHES * REQUEST) / (ms / 1000)
  cpuPerEvent = (cpuMicros * 1000) / (BATCHES * REQUEST)
  await topology.stop()
  if (hole.count !== BATCHES * REQUEST) throw new Error(`the blackhole saw ${hole.count} events`)
  return rate
}

const VARIANTS = {
  append,
  edge,
  'http-disk': (dir: string) => http(dir, true),
  'http-disk-write': (dir: string) => http(dir, true, 'on-write'),
  'http-memory': (dir: string) => http(dir, false),
  'store-read': storeRead,
  'edge-read': edgeRead,
} as const
type Variant = keyof typeof VARIANTS

const variant = process.env.ACKLINE_BENCH_VARIANT as Variant | undefined
if (variant !== undefined) {
  // Warm-up runs first, in this process, each on a directory of its own: a fresh process would
  // otherwise measure the compiler warming up the code more than the code.
  for (let i = 0; i < WARMUP; i++) {
    const warm = mkdtempSync(join(tmpdir(), 'ackline-bench-edge-'))
    try {
      await VARIANTS[variant](warm)
    } finally {
      rmSync(warm, { recursive: true, force: true })
    }
  }
  const dir = mkdtempSync(join(tmpdir(), 'ackline-bench-edge-'))
  try {
    const rate = await VARIANTS[variant](dir)
    const cpuFile = process.env.ACKLINE_BENCH_CPU_FILE
    if (cpuFile !== undefined) appendFileSync(cpuFile, `${variant} ${cpuPerEvent}\n`)
    console.log(rate)
  } finally {
    generator?.close()
    rmSync(dir, { recursive: true, force: true })
  }
} else {
  // ACKLINE_BENCH_ONLY=append,edge-read runs only those (append, the peer, always runs).
  const only = process.env.ACKLINE_BENCH_ONLY?.split(',')
  const names = (Object.keys(VARIANTS) as Variant[]).filter(
    (name) => only === undefined || name === 'append' || only.includes(name),
  )
  console.log(
    `${EVENTS} events, ${REQUEST} a batch (request), ${CLIENTS} batches in flight, sync 'always'; each variant in a fresh process after ${WARMUP} warm-up run(s) there; median of ${ROUNDS} interleaved rounds (min–max)\n`,
  )
  const cpuFile = join(mkdtempSync(join(tmpdir(), 'ackline-bench-cpu-')), 'cpu')
  process.env.ACKLINE_BENCH_CPU_FILE = cpuFile
  const rates = roundRobin(fileURLToPath(import.meta.url), names, ROUNDS)
  const cpus = new Map<string, number[]>()
  for (const line of readFileSync(cpuFile, 'utf8').trim().split('\n')) {
    const [name, ns] = line.split(' ')
    cpus.set(
      name!,
      [...(cpus.get(name!) ?? []), Number(ns)].sort((a, b) => a - b),
    )
  }
  rmSync(join(cpuFile, '..'), { recursive: true, force: true })
  const cpu = (name: string): number => median(cpus.get(name)!)
  const fmt = (n: number): string => Math.round(n).toLocaleString('en-US')
  const peer = median(rates.get('append')!)
  for (const name of names) {
    const list = rates.get(name)!
    const m = median(list)
    console.log(
      `${name.padEnd(12)} ${fmt(m).padStart(10)} events/s  (${fmt(list[0]!)}–${fmt(list.at(-1)!)})  ${(m / peer).toFixed(2)} of append   ${fmt(cpu(name)).padStart(6)} ns CPU per event`,
    )
  }
  const ratio = (a: Variant, b: Variant): void => {
    if (rates.has(a) && rates.has(b)) {
      const byRate = median(rates.get(a)!) / median(rates.get(b)!)
      console.log(`${a} / ${b} ${byRate.toFixed(2)}   by CPU per event ${(cpu(b) / cpu(a)).toFixed(2)}`)
    }
  }
  console.log()
  ratio('edge', 'append')
  ratio('http-disk', 'append')
  ratio('http-disk', 'http-memory')
  ratio('edge-read', 'store-read')
}
