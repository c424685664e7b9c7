// The HTTP source beside a bare node:http server doing the same work, alternating rounds:
//   ackline:   httpServer → blackhole sink, acknowledgements on: each request is decoded (strict
//              UTF-8, JSON with the depth check), sent as one batch, and answered 200 with its
//              status once the sink settled it;
//   node:http: a server that reads the body, JSON.parses it, checks it is an array of objects and
//              answers 200 with a small JSON body: the floor for the same exchange.
// One load generator (bench/loadGenerator.ts: a child process, so its CPU is not charged to
// either server's event loop) sends the same requests to each in turn over keep-alive
// connections, CONCURRENCY at a time.
// Printed: requests/s for each (medians) and the ratio (target >= 0.9); beside them the CPU time
// this process spent per request while the load ran (the server's share, which the client's does
// not blur), as that ratio moves less with the machine's other work than throughput does.
// Warm-up: WARMUP rounds of each, alternating like the measured ones, are not counted. The source's
// path has more code for the JIT to optimize than the bare server's, and with one warm-up round
// its per-round ratio still climbed through the measured rounds (0.67, 0.84, 0.86, 0.85, 0.91,
// 0.96, 0.98 in one run): the median then measured the warm-up, not the steady state a server
// spends its life in. Both variants get the same warm-up.
// Run: pnpm bench sources/bench/http   (ACKLINE_BENCH_REQUESTS, ACKLINE_BENCH_EVENTS,
//      ACKLINE_BENCH_ROUNDS, ACKLINE_BENCH_WARMUP override the sizes)
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { blackhole } from '@ackline/sinks'
import { httpServer } from '@ackline/sources'
import { TopologyBuilder } from '@ackline/topology'
import { startLoadGenerator } from '../../../bench/loadGenerator.js'

const REQUESTS = Number(process.env.ACKLINE_BENCH_REQUESTS ?? 10_000)
const EVENTS = Number(process.env.ACKLINE_BENCH_EVENTS ?? 10) // events per request
const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 7)
const WARMUP = Number(process.env.ACKLINE_BENCH_WARMUP ?? 4)
const CONCURRENCY = 16

const body = JSON.stringify(
  Array.from({ length: EVENTS }, (_, i) => ({
    timestamp: new Date(1_700_000_000_000 + i).toISOString(),
    level: 'info',
    message: `request ${i} served`,
    http: { method: 'POST', path: '/v1/items', status: 200 },
  })),
)

const generator = startLoadGenerator({
  concurrency: CONCURRENCY,
  contentType: 'application/json',
  bodies: [body],
})

/** What one load measured: requests/s, and this process's CPU time per request in µs. */
interface Load {
  readonly rate: number
  readonly cpu: number
}

/** Has the generator load `port`. */
async function load(port: number): Promise<Load> {
  const { ms, bad, cpuMicros } = await generator.load(port, REQUESTS)
  if (bad !== 0) throw new Error(`${bad} requests were not answered 200`)
  return { rate: REQUESTS / (ms / 1000), cpu: cpuMicros / REQUESTS }
}

async function ackline(): Promise<Load> {
  const source = httpServer({ address: '127.0.0.1:0' })
  const topology = new TopologyBuilder<string>({ acknowledgements: true })
    .source('http', source)
    .sink('out', ['http'], blackhole())
    .build()
  await topology.start()
  const { port } = await source.listening()
  try {
    return await load(port)
  } finally {
    await topology.stop()
  }
}

function bare(): Promise<Server> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      let status = 200
      try {
        const value: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'))
        if (!Array.isArray(value)) status = 400
        else for (const v of value) if (typeof v !== 'object' || v === null || Array.isArray(v)) status = 400
      } catch {
        status = 400
      }
      const answer = JSON.stringify(
        status === 200 ? { status: 'delivered', events: EVENTS } : { error: 'bad' },
      )
      res.writeHead(status, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(answer),
      })
      res.end(answer)
    })
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)))
}

async function plain(): Promise<Load> {
  const server = await bare()
  try {
    return await load((server.address() as AddressInfo).port)
  } finally {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
}

const median = (list: number[]): number => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)]!
const runs = { ackline: [] as Load[], plain: [] as Load[] }
for (let round = 0; round < WARMUP + ROUNDS; round++) {
  // Alternate which goes first, so drift in the machine's load hits both alike.
  let a: Load
  let p: Load
  if (round % 2 === 0) {
    a = await ackline()
    p = await plain()
  } else {
    p = await plain()
    a = await ackline()
  }
  if (round < WARMUP) continue
  runs.ackline.push(a)
  runs.plain.push(p)
}
generator.close()

const rate = (list: Load[]): number => median(list.map((l) => l.rate))
const cpu = (list: Load[]): number => median(list.map((l) => l.cpu))
const fmt = (rate: number): string => `${Math.round(rate).toLocaleString('en')} requests/s`
const us = (cpu: number): string => `${cpu.toFixed(1)} µs CPU/request`
console.log(
  `${REQUESTS} requests of ${EVENTS} events (${body.length} bytes), ${CONCURRENCY} in flight, keep-alive; medians of ${ROUNDS} alternating rounds after ${WARMUP} of warm-up\n`,
)
console.log(
  `http source → blackhole (acks on)   ${fmt(rate(runs.ackline)).padStart(20)}   ${us(cpu(runs.ackline)).padStart(22)}`,
)
console.log(
  `bare node:http, same parse          ${fmt(rate(runs.plain)).padStart(20)}   ${us(cpu(runs.plain)).padStart(22)}`,
)
console.log(
  `\nratio ackline / node:http (median)  ${(rate(runs.ackline) / rate(runs.plain)).toFixed(2)}   (target >= 0.9)`,
)
const perRound = runs.ackline.map((a, i) => (a.rate / runs.plain[i]!.rate).toFixed(2)).join(', ')
console.log(`per round: ${perRound}`)
console.log(
  `server CPU per request, node:http / ackline (median)  ${(cpu(runs.plain) / cpu(runs.ackline)).toFixed(2)}`,
)
