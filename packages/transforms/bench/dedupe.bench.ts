// What dedupe costs in a topology, beside a peer doing the same work on plain records: a
// node:stream pipeline whose transform keeps the last CACHE keys in a Map (least recently seen
// forgotten first) and drops what it saw. generator -> dedupe -> blackhole, acknowledgements on
// and off; every key comes twice, two events apart, so half the events are dropped and the cache
// keeps evicting. Each measurement in a fresh process, variants round-robin.
// Run: pnpm bench dedupe   (ACKLINE_BENCH_ROUNDS overrides the rounds)

import { Readable, Transform as StreamTransform, Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { fileURLToPath } from 'node:url'
import type { JsonObject } from '@ackline/core'
import { blackhole } from '@ackline/sinks'
import { generator } from '@ackline/sources'
import { TopologyBuilder } from '@ackline/topology'
import { dedupe } from '@ackline/transforms'
import { median, roundRobin } from '../../../bench/roundRobin.js'

const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 5)
const EVENTS = 200_000
const BATCH = 100
const CACHE = 5000
const record = (i: number): JsonObject => ({ message: 'event', key: Math.floor(i / 2) })

async function topology(acknowledgements: boolean): Promise<number> {
  const hole = blackhole()
  const built = new TopologyBuilder<string>({ acknowledgements })
    .source('gen', generator({ count: EVENTS, batchSize: BATCH, record }))
    .transform('dedupe', ['gen'], dedupe({ fields: ['key'], cacheSize: CACHE }))
    .sink('out', ['dedupe'], hole)
    .build()
  await built.start()
  await built.done
  if (hole.count !== EVENTS / 2) throw new Error(`the blackhole saw ${hole.count} events`)
  return EVENTS
}

async function plain(): Promise<number> {
  const seen = new Map<string, true>()
  let count = 0
  await pipeline(
    Readable.from(
      (function* () {
        for (let i = 0; i < EVENTS; i += BATCH) yield Array.from({ length: BATCH }, (_, j) => record(i + j))
      })(),
    ),
    new StreamTransform({
      objectMode: true,
      transform(list: JsonObject[], _, done) {
        const kept: JsonObject[] = []
        for (const r of list) {
          const key = JSON.stringify([r.key])
          if (seen.has(key)) {
            seen.delete(key)
            seen.set(key, true)
            continue
          }
          seen.set(key, true)
          if (seen.size > CACHE) seen.delete(seen.keys().next().value!)
          kept.push(r)
        }
        done(null, kept)
      },
    }),
    new Writable({
      objectMode: true,
      write(list: JsonObject[], _, done) {
        count += list.length
        done()
      },
    }),
  )
  if (count !== EVENTS / 2) throw new Error(`the peer kept ${count} events`)
  return EVENTS
}

const variants: Record<string, () => Promise<number>> = {
  'dedupe, acks on': () => topology(true),
  'dedupe, acks off': () => topology(false),
  'node:stream + Map, plain records': plain,
}

const variant = process.env.ACKLINE_BENCH_VARIANT
if (variant !== undefined) {
  const run = variants[variant]
  if (run === undefined) throw new Error(`no variant '${variant}'`)
  for (let i = 0; i < 3; i++) await run()
  let best = 0
  for (let i = 0; i < 5; i++) {
    const start = performance.now()
    const events = await run()
    best = Math.max(best, events / ((performance.now() - start) / 1000))
  }
  console.log(best)
} else {
  const rates = roundRobin(fileURLToPath(import.meta.url), Object.keys(variants), ROUNDS)
  console.log(
    `${EVENTS} events a run (each key twice), batches of ${BATCH}, cacheSize ${CACHE}; median of ${ROUNDS} round-robin rounds, one process per measurement\n`,
  )
  for (const [name, list] of rates)
    console.log(`${name.padEnd(36)}${(1e9 / median(list)).toFixed(0).padStart(6)} ns/event`)
  const rate = (name: string): number => median(rates.get(name)!)
  console.log('\nratios (throughput, higher is better):')
  console.log(
    `  acks on / acks off          ${(rate('dedupe, acks on') / rate('dedupe, acks off')).toFixed(2)}`,
  )
  console.log(
    `  acks on / node:stream peer  ${(rate('dedupe, acks on') / rate('node:stream + Map, plain records')).toFixed(2)}`,
  )
}
