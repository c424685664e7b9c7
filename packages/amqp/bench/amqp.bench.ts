// Throughput of the RabbitMQ connector against plain amqplib doing the same work, side by side in
// one run, on the local broker (RabbitMQ at 127.0.0.1:5672, or ACKLINE_AMQP_URL):
//   source: ackline amqpSource -> blackhole (acknowledgements on, what has arrived sent as one
//           batch with per-record outcomes, each message acked by its own outcome)
//           vs a plain amqplib consumer that JSON-parses and acks each message; same prefetch.
//           Also ackline with batchSize 1 (one event array per message, what a source without
//           grouping would do) to show what grouping buys.
//   sink:   generator -> ackline amqpSink (confirms, mandatory, window 1000, ACKLINE_AMQP_BENCH_SINK_BATCH per write,
//           the sink's default writes in flight), and the same with one write at a time (concurrency 1),
//           vs plain amqplib publishing the same JSON with confirms and a window of 1000.
// Rounds interleave (the source's plain and ackline runs flip order each round; the sink's rotate);
// the table gives medians with the spread of rates, and each ratio is the median of the per-round
// ratios (plain and ackline measured back to back) with their range.
// Run: pnpm bench amqp   (ACKLINE_AMQP_BENCH_MESSAGES, ACKLINE_AMQP_BENCH_ROUNDS to change sizes;
//      ACKLINE_AMQP_BENCH_ONLY=sink or =source to run one half)
import { randomBytes, randomUUID } from 'node:crypto'
import { amqpSink, amqpSource } from '@ackline/amqp'
import { blackhole } from '@ackline/sinks'
import { generator } from '@ackline/sources'
import { TopologyBuilder } from '@ackline/topology'
import { type ConfirmChannel, connect } from 'amqplib'

const URL = process.env.ACKLINE_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672'
const MESSAGES = Number(process.env.ACKLINE_AMQP_BENCH_MESSAGES ?? 20_000)
const ROUNDS = Number(process.env.ACKLINE_AMQP_BENCH_ROUNDS ?? 3)
const PREFETCH = 200
const WINDOW = 1000
/** Events per write into the sink: with one write at a time, each write's last confirms are a stall. */
const SINK_BATCH = Number(process.env.ACKLINE_AMQP_BENCH_SINK_BATCH ?? 500)
const ONLY = process.env.ACKLINE_AMQP_BENCH_ONLY
const SOURCE = ONLY !== 'sink'
const SINK = ONLY !== 'source'

const record = (i: number) => ({
  timestamp: new Date(1_700_000_000_000 + i).toISOString(),
  level: i % 10 === 0 ? 'error' : 'info',
  message: `request ${i} served in ${i % 97} ms`,
  http: { method: 'POST', path: '/v1/items', status: 200, bytes: 1024 + i },
})

const admin = await connect(URL)
const channel = (await admin.createConfirmChannel()) as ConfirmChannel
const queue = `ackline-bench-${randomUUID().slice(0, 8)}`
await channel.assertQueue(queue, { durable: false })

/** Fills the queue with MESSAGES messages, with confirms. */
async function fill(): Promise<void> {
  for (let i = 0; i < MESSAGES; i++) {
    if (!channel.publish('', queue, Buffer.from(JSON.stringify(record(i))), { messageId: `m-${i}` })) {
      await new Promise((resolve) => channel.once('drain', resolve))
    }
    if (i % WINDOW === WINDOW - 1) await channel.waitForConfirms()
  }
  await channel.waitForConfirms()
}

async function plainConsume(): Promise<number> {
  const model = await connect(URL)
  const ch = await model.createChannel()
  await ch.prefetch(PREFETCH)
  const start = performance.now()
  let acked = 0
  let parsed = 0
  await new Promise<void>((resolve) => {
    void ch.consume(queue, (message) => {
      if (message === null) return
      parsed += Object.keys(JSON.parse(message.content.toString('utf8')) as object).length
      ch.ack(message)
      if (++acked === MESSAGES) resolve()
    })
  })
  const ms = performance.now() - start
  await model.close()
  if (parsed === 0) throw new Error('nothing parsed')
  return ms
}

async function acklineConsume(batchSize?: number): Promise<number> {
  const source = amqpSource({
    url: URL,
    queue,
    prefetch: PREFETCH,
    ...(batchSize === undefined ? {} : { batchSize }),
  })
  const topology = new TopologyBuilder({ acknowledgements: true })
    .source('in', source)
    .sink('out', ['in'], blackhole())
    .build()
  const start = performance.now()
  await topology.start()
  // Polled on a 1 ms timer, not setImmediate: a spinning poll takes CPU from the broker on a
  // small machine, which the plain consumer (awaiting one promise) does not pay.
  while (source.counters.acked < MESSAGES) await new Promise((resolve) => setTimeout(resolve, 1))
  const ms = performance.now() - start
  await topology.stop()
  return ms
}

async function plainPublish(): Promise<number> {
  // Ids of the form the sink makes for events without one (its own random prefix, a count in base
  // 36): the broker's confirm rate depends on the id's length, so both publish the same messages.
  const idPrefix = `${randomBytes(8).toString('base64url')}/`
  // Timed from before the connection opens to after it closed, as the topology's run is (its
  // start() connects, its done includes the sink's stop()).
  const start = performance.now()
  const model = await connect(URL)
  const ch = await model.createConfirmChannel()
  let inFlight = 0
  let wake: (() => void) | undefined
  const confirms: Promise<void>[] = []
  for (let i = 0; i < MESSAGES; i++) {
    while (inFlight >= WINDOW) await new Promise<void>((resolve) => (wake = resolve))
    inFlight++
    const body = Buffer.from(JSON.stringify({ message: `event ${i}`, index: i }))
    confirms.push(
      new Promise<void>((resolve, reject) => {
        const ok = ch.publish(
          '',
          queue,
          body,
          {
            persistent: true,
            mandatory: true,
            messageId: `${idPrefix}${i.toString(36)}`,
            contentType: 'application/json',
          },
          (error) => {
            inFlight--
            wake?.()
            if (error) reject(error)
            else resolve()
          },
        )
        if (!ok) confirms.push(new Promise<void>((drained) => ch.once('drain', () => drained())))
      }),
    )
  }
  await Promise.all(confirms)
  await model.close()
  return performance.now() - start
}

async function acklinePublish(concurrency?: number): Promise<number> {
  const sink = amqpSink({ url: URL, routingKey: queue, maxInFlight: WINDOW })
  const topology = new TopologyBuilder({ acknowledgements: true })
    .source('gen', generator({ count: MESSAGES, batchSize: SINK_BATCH }))
    .sink('out', ['gen'], sink, concurrency === undefined ? {} : { concurrency })
    .build()
  const start = performance.now()
  await topology.start()
  await topology.done
  const ms = performance.now() - start
  if (sink.counters.confirmed !== MESSAGES) throw new Error(`confirmed ${sink.counters.confirmed}`)
  return ms
}

const median = (xs: readonly number[]) => {
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}
const rate = (ms: number) => Math.round((MESSAGES / ms) * 1000)
/** The median of per-round ratios plain time / ackline time (ackline throughput over plain's). */
const ratio = (plain: readonly number[], ours: readonly number[]) => median(plain.map((p, i) => p / ours[i]!))
/** The range of the per-round ratios, to show the noise. */
const ratioRange = (plain: readonly number[], ours: readonly number[]) => {
  const rs = plain.map((p, i) => p / ours[i]!)
  return `${Math.min(...rs).toFixed(2)}–${Math.max(...rs).toFixed(2)}`
}
/** The rates of the rounds, slowest to fastest. */
const spread = (xs: readonly number[]) => `${rate(Math.max(...xs))}–${rate(Math.min(...xs))}`

try {
  const results = {
    plainConsume: [] as number[],
    acklineConsume: [] as number[],
    acklineConsume1: [] as number[],
    plainPublish: [] as number[],
    acklinePublish: [] as number[],
    acklinePublish1: [] as number[],
  }
  for (let round = 0; round < ROUNDS; round++) {
    if (SOURCE) {
      const plainFirst = round % 2 === 0
      if (plainFirst) {
        await fill()
        results.plainConsume.push(await plainConsume())
      }
      await fill()
      results.acklineConsume.push(await acklineConsume())
      if (!plainFirst) {
        await fill()
        results.plainConsume.push(await plainConsume())
      }
      await fill()
      results.acklineConsume1.push(await acklineConsume(1))
    }
    if (SINK) {
      // The order rotates each round, so no variant always runs first after a purge.
      const runs: (() => Promise<void>)[] = [
        async () => void results.plainPublish.push(await plainPublish()),
        async () => void results.acklinePublish.push(await acklinePublish()),
        async () => void results.acklinePublish1.push(await acklinePublish(1)),
      ]
      for (let i = 0; i < runs.length; i++) {
        await channel.purgeQueue(queue)
        await runs[(i + round) % runs.length]!()
      }
      await channel.purgeQueue(queue)
    }
  }
  console.log(
    `${MESSAGES} messages per run, prefetch ${PREFETCH}, confirm window ${WINDOW}, ${SINK_BATCH} events per sink write, medians of ${ROUNDS} interleaved rounds (min–max msg/s in brackets)\n`,
  )
  console.log(
    '| what | plain amqplib msg/s | ackline msg/s | ackline / plain (median of rounds) | per-round range |',
  )
  console.log(
    '| ---- | ------------------- | ------------- | ---------------------------------- | --------------- |',
  )
  const row = (what: string, plain: number[], ours: number[]) =>
    console.log(
      `| ${what} | ${rate(median(plain))} (${spread(plain)}) | ${rate(median(ours))} (${spread(ours)}) | ${ratio(plain, ours).toFixed(2)} | ${ratioRange(plain, ours)} |`,
    )
  if (SOURCE) {
    row(
      'consume + ack (source -> blackhole, arrays of up to prefetch)',
      results.plainConsume,
      results.acklineConsume,
    )
    row(
      'consume + ack (source -> blackhole, one array per message)',
      results.plainConsume,
      results.acklineConsume1,
    )
  }
  if (SINK) {
    row(
      'publish with confirms (generator -> sink, default writes in flight)',
      results.plainPublish,
      results.acklinePublish,
    )
    row(
      'publish with confirms (generator -> sink, concurrency 1)',
      results.plainPublish,
      results.acklinePublish1,
    )
  }
} finally {
  await channel.deleteQueue(queue)
  await admin.close()
}
