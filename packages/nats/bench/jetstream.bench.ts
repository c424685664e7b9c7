// JetStream throughput, each figure beside a plain client doing the same work in the same run:
//   1. source: jetstream → blackhole with acknowledgements, against a plain loop that fetches
//      batches of the same size from its own durable consumer and acks each message;
//   2. sink: generator → jetstreamSink (the sink's default writes in flight, and one write at a
//      time), against a plain loop publishing the same payloads with the same number of PubAcks
//      awaited at once.
// ACKLINE_BENCH_MESSAGES messages (default 20,000) of ~40 bytes, ACKLINE_BENCH_ROUNDS interleaved
// rounds (default 3; the source's plain and ackline runs flip order each round, the sink's runs
// rotate; the summaries give the median of the per-round ratios); NATS at NATS_URL or
// 127.0.0.1:4222. Run with `pnpm bench nats`.
import { jetstream, jetstreamSink } from '@ackline/nats'
import { blackhole } from '@ackline/sinks'
import { generator } from '@ackline/sources'
import { TopologyBuilder } from '@ackline/topology'
import { AckPolicy, jetstreamManager, jetstream as jsClient } from '@nats-io/jetstream'
import { connect } from '@nats-io/transport-node'

const servers = process.env.NATS_URL ?? '127.0.0.1:4222'
const M = Number(process.env.ACKLINE_BENCH_MESSAGES ?? 20_000)
const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 3)
const BATCH = 100
const WINDOW = 256
const fmt = (n: number): string => Math.round(n).toLocaleString('en-US')
const payload = (n: number): string => JSON.stringify({ n, message: `event number ${n}` })

const nc = await connect({ servers })
const jsm = await jetstreamManager(nc)
const js = jsClient(nc)
const id = Date.now().toString(36)
const streams: string[] = []

async function newStream(prefix: string): Promise<string> {
  const name = `BENCH_${prefix}_${id}`
  await jsm.streams.add({ name, subjects: [`${name}.>`] })
  streams.push(name)
  return name
}

/** Publishes `count` payloads with at most WINDOW PubAcks awaited at once; returns msgs/s. */
async function plainPublish(subject: string, count: number): Promise<number> {
  const start = performance.now()
  const inFlight = new Set<Promise<unknown>>()
  for (let n = 0; n < count; n++) {
    const p = js.publish(subject, payload(n))
    inFlight.add(p)
    void p.then(() => inFlight.delete(p))
    if (inFlight.size >= WINDOW) await Promise.race(inFlight)
  }
  await Promise.all(inFlight)
  return count / ((performance.now() - start) / 1000)
}

async function ackedConsumer(stream: string, name: string): Promise<void> {
  await jsm.consumers.add(stream, {
    durable_name: name,
    ack_policy: AckPolicy.Explicit,
    max_ack_pending: 1000,
  })
}

/** A plain client loop: fetch BATCH at a time from its own consumer, ack each; msgs/s. */
async function plainConsume(stream: string, name: string): Promise<number> {
  await ackedConsumer(stream, name)
  const consumer = await js.consumers.get(stream, name)
  const start = performance.now()
  let acked = 0
  while (acked < M) {
    const messages = await consumer.fetch({ max_messages: BATCH, expires: 5000 })
    for await (const msg of messages) {
      msg.ack()
      acked++
    }
  }
  await nc.flush()
  return M / ((performance.now() - start) / 1000)
}

/** jetstream → blackhole with acknowledgements, from its own consumer; msgs/s. */
async function acklineConsume(stream: string, name: string): Promise<number> {
  await ackedConsumer(stream, name)
  const source = jetstream({ servers, stream, consumer: name, batchSize: BATCH, create: false })
  const topology = new TopologyBuilder({ acknowledgements: true })
    .source('in', source)
    .sink('out', ['in'], blackhole())
    .build()
  const start = performance.now()
  await topology.start()
  while (source.counters.acked < M) await new Promise((resolve) => setTimeout(resolve, 2))
  const elapsed = performance.now() - start
  await topology.stop()
  return M / (elapsed / 1000)
}

/** generator → jetstreamSink with acknowledgements; msgs/s. */
async function acklinePublish(subject: string, batchSize: number, concurrency?: number): Promise<number> {
  const sink = jetstreamSink({ servers, subject, maxInFlight: WINDOW })
  const topology = new TopologyBuilder({ acknowledgements: true })
    .source('gen', generator({ count: M, batchSize, record: (n) => ({ n, message: `event number ${n}` }) }))
    .sink('out', ['gen'], sink, concurrency === undefined ? {} : { concurrency })
    .build()
  const start = performance.now()
  await topology.start()
  await topology.done
  return M / ((performance.now() - start) / 1000)
}

try {
  console.log(`${fmt(M)} messages per run; fetch batches of ${BATCH}; ${WINDOW} PubAcks in flight\n`)
  const source = await newStream('SRC')
  await plainPublish(`${source}.in`, M)
  const sinkRows: [string, number, number][] = []
  const sourceRows: [string, number, number][] = []
  const ratios = { default: [] as number[], big: [] as number[], one: [] as number[] }
  for (let round = 1; round <= ROUNDS; round++) {
    const plainFirst = round % 2 === 1
    const plain = plainFirst ? await plainConsume(source, `plain${round}`) : 0
    const ours = await acklineConsume(source, `ackline${round}`)
    const plainAfter = plainFirst ? plain : await plainConsume(source, `plain${round}`)
    sourceRows.push([`round ${round} (${plainFirst ? 'plain first' : 'ackline first'})`, ours, plainAfter])
    // The four sink runs go in a rotating order, so the plain client is not always the first.
    let p = 0
    let o = 0
    let big = 0
    let one = 0
    const runs: (() => Promise<void>)[] = [
      async () => {
        p = await plainPublish(`${await newStream(`PLAIN${round}`)}.out`, M)
      },
      async () => {
        o = await acklinePublish(`${await newStream(`OURS${round}`)}.out`, BATCH)
      },
      async () => {
        big = await acklinePublish(`${await newStream(`BIG${round}`)}.out`, 1000)
      },
      // One write at a time (what the runtime did before writes in flight): a write's PubAcks bound the window.
      async () => {
        one = await acklinePublish(`${await newStream(`ONE${round}`)}.out`, BATCH, 1)
      },
    ]
    for (let i = 0; i < runs.length; i++) await runs[(i + round) % runs.length]!()
    sinkRows.push([`round ${round}, writes of ${BATCH}, default writes in flight`, o, p])
    sinkRows.push([`round ${round}, writes of 1000, default writes in flight`, big, p])
    sinkRows.push([`round ${round}, writes of ${BATCH}, concurrency 1`, one, p])
    ratios.default.push(o / p)
    ratios.big.push(big / p)
    ratios.one.push(one / p)
  }
  const table = (title: string, rows: [string, number, number][]): void => {
    console.log(`| ${title} | ackline msgs/s | plain client msgs/s | ratio |`)
    console.log('| --- | ---: | ---: | ---: |')
    for (const [label, ours, plain] of rows)
      console.log(`| ${label} | ${fmt(ours)} | ${fmt(plain)} | ${(ours / plain).toFixed(2)} |`)
    console.log()
  }
  table('source → blackhole, acks (batches of what a pull brought)', sourceRows)
  table('generator → jetstreamSink, PubAcks', sinkRows)
  const median = (xs: number[]): number => {
    const sorted = [...xs].sort((a, b) => a - b)
    const mid = sorted.length >> 1
    return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
  }
  const line = (what: string, xs: number[]): string =>
    `| ${what} | ${median(xs).toFixed(2)} | ${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)} |`
  console.log(`| sink ratio over ${ROUNDS} rounds | median | min–max |`)
  console.log('| --- | ---: | ---: |')
  console.log(line(`writes of ${BATCH}, default writes in flight`, ratios.default))
  console.log(line('writes of 1000, default writes in flight', ratios.big))
  console.log(line(`writes of ${BATCH}, concurrency 1`, ratios.one))
  const sourceRatios = sourceRows.map(([, ours, plain]) => ours / plain)
  console.log(
    `\nsource median ratio ${median(sourceRatios).toFixed(2)} (range ${Math.min(...sourceRatios).toFixed(2)}–${Math.max(...sourceRatios).toFixed(2)}) over ${ROUNDS} rounds; medians ackline ${fmt(median(sourceRows.map((r) => r[1])))} msgs/s, plain ${fmt(median(sourceRows.map((r) => r[2])))} msgs/s`,
  )
} finally {
  for (const stream of streams) await jsm.streams.delete(stream).catch(() => undefined)
  await nc.close()
}
