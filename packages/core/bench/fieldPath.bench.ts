// What `event.set(path, value)` costs on top of making the event, in a program that sets one
// path and in one that sets eight (the keyed store that adds the property then sees more than
// one key and goes megamorphic, as in any pipeline that sets a few fields), beside a plain
// object's `record.seen = true`:
//   make:              EventArray.fromRecords of batches of 100 records, nothing set
//   set, one path:     the same, then `event.set('seen', true)` on each
//   set, eight paths:  the same, after seven other paths were set on other events
//   plain store:       the same records, `record.seen = true` on each, no events
// Each variant in a fresh process (the stores' inline caches are the process's), round-robin.
// Run: pnpm bench fieldPath
import { fileURLToPath } from 'node:url'
import { EventArray, type JsonObject } from '@ackline/core'
import { median, roundRobin } from '../../../bench/roundRobin.js'

const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 5)
const BATCH = 100
const EVENTS = 200_000

const record = (index: number): JsonObject => ({ message: 'event', index })
const records = (first: number): JsonObject[] => {
  const list = new Array<JsonObject>(BATCH)
  for (let i = 0; i < BATCH; i++) list[i] = record(first + i)
  return list
}

let sink = 0
const runs: Record<string, () => void> = {
  make() {
    for (let k = 0; k < EVENTS; k += BATCH) sink += EventArray.fromRecords(records(k)).length
  },
  'set, one path'() {
    for (let k = 0; k < EVENTS; k += BATCH) {
      const list = EventArray.fromRecords(records(k)).events
      for (let i = 0; i < list.length; i++) list[i]!.set('seen', true)
      sink += list.length
    }
  },
  'plain store'() {
    for (let k = 0; k < EVENTS; k += BATCH) {
      const list = records(k)
      for (let i = 0; i < list.length; i++) list[i]!.seen = true
      sink += list.length
    }
  },
}
runs['set, eight paths'] = () => runs['set, one path']!()

/** In a child: warm-up, then the best of several runs; prints events/s. */
function child(variant: string): void {
  const run = runs[variant]
  if (run === undefined) throw new Error(`no variant '${variant}'`)
  if (variant === 'set, eight paths') {
    for (const path of ['host', 'level', 'status', 'user', 'region', 'tag', 'ok'])
      for (let i = 0; i < 1000; i++) EventArray.fromRecords([record(i)]).events[0]!.set(path, i)
  }
  for (let i = 0; i < 20; i++) run()
  let best = 0
  for (let i = 0; i < 15; i++) {
    const start = performance.now()
    run()
    best = Math.max(best, EVENTS / ((performance.now() - start) / 1000))
  }
  console.log(best)
}

function report(): void {
  const names = ['make', 'set, one path', 'set, eight paths', 'plain store']
  const rates = roundRobin(fileURLToPath(import.meta.url), names, ROUNDS)
  const ns = (name: string): number => 1e9 / median(rates.get(name)!)
  console.log(`ns per event, batches of ${BATCH}, median of ${ROUNDS} rounds, one process per measurement\n`)
  for (const name of names) console.log(`${name.padEnd(20)} ${ns(name).toFixed(1).padStart(7)}`)
  console.log()
  console.log(
    `event.set, one path:    ${(ns('set, one path') - ns('make')).toFixed(1)} ns over making the event`,
  )
  console.log(
    `event.set, eight paths: ${(ns('set, eight paths') - ns('make')).toFixed(1)} ns over making the event`,
  )
  if (sink < 0) console.log(sink)
}

const variant = process.env.ACKLINE_BENCH_VARIANT
if (variant === undefined) report()
else child(variant)
