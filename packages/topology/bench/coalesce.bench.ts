// What coalescing a transform's input saves when a sink holds the pipeline back: generator
// (batches of 1) → filter → route → a sink whose every write waits for one turn of the event loop
// (as a network or fsyncing sink waits for I/O), acknowledgements on. Side by side in one run
// (a fresh child process per measurement, variants round-robin): the built-in filter and route
// as they are (`coalesce: true`: each call takes what queued for it), and the same two told
// `coalesce: false` (one call per array, as before issue 10).
// Printed: transform calls per event (from one run in this process) and CPU ns per event (each
// child reports its best of five runs in CPU time, which a busy neighbour disturbs less than
// wall time), with the ratio to the array-by-array baseline.
// Run: pnpm bench coalesce   (ACKLINE_BENCH_ROUNDS and ACKLINE_BENCH_EVENTS override the sizes)

import { fileURLToPath } from 'node:url'
import type { JsonObject } from '@ackline/core'
import { generator } from '@ackline/sources'
import { type Sink, TopologyBuilder, type Transform } from '@ackline/topology'
import { filter, route } from '@ackline/transforms'
import { median, roundRobin } from '../../../bench/roundRobin.js'

const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 5)
const EVENTS = Number(process.env.ACKLINE_BENCH_EVENTS ?? 20_000)

const record = (index: number): JsonObject => ({
  message: 'event',
  index,
  level: index % 7 === 0 ? 'debug' : 'info',
})

/** `transform` with `coalesce` set as told, counting its calls in `calls.n`. */
function counted(transform: Transform, coalesce: boolean, calls: { n: number }): Transform {
  return {
    kind: transform.kind,
    ...(transform.outputs === undefined ? {} : { outputs: transform.outputs }),
    ...(transform.dropStatus === undefined ? {} : { dropStatus: transform.dropStatus }),
    coalesce,
    process(events, context) {
      calls.n++
      return transform.process(events, context)
    },
  }
}

/** Runs the pipeline once; returns how many calls each transform took. */
async function run(coalesce: boolean): Promise<{ filter: number; route: number }> {
  const filterCalls = { n: 0 }
  const routeCalls = { n: 0 }
  const slow: Sink = {
    kind: 'slow',
    async write() {
      await new Promise((resolve) => setImmediate(resolve))
      return undefined
    },
  }
  const built = new TopologyBuilder<string>({ acknowledgements: true, onWarning: () => {} })
    .source('gen', generator({ count: EVENTS, batchSize: 1, record }))
    .transform(
      'keep',
      ['gen'],
      counted(
        filter((e) => e.get('level') !== 'debug'),
        coalesce,
        filterCalls,
      ),
    )
    .transform(
      'split',
      ['keep'],
      counted(route({ info: (e) => e.get('level') === 'info' }), coalesce, routeCalls),
    )
    .sink('out', ['split.info', 'split._unmatched'], slow)
    .build()
  await built.start()
  await built.done
  const metrics = built.metrics()
  if (metrics.gen!.ackLatencyMs.count !== EVENTS) throw new Error('not every batch resolved')
  if (
    metrics.out!.receivedEvents !== EVENTS - metrics.keep!.discardedEvents ||
    metrics.out!.erroredEvents > 0
  )
    throw new Error('the sink did not deliver what the filter kept')
  return { filter: filterCalls.n, route: routeCalls.n }
}

const variants: Record<string, boolean> = { coalescing: true, 'array by array': false }

async function child(name: string): Promise<void> {
  const coalesce = variants[name]
  if (coalesce === undefined) throw new Error(`no variant '${name}'`)
  for (let i = 0; i < 2; i++) await run(coalesce)
  let best = 0
  for (let i = 0; i < 5; i++) {
    const start = process.cpuUsage()
    await run(coalesce)
    const used = process.cpuUsage(start)
    best = Math.max(best, EVENTS / ((used.user + used.system) / 1e6))
  }
  console.log(best)
}

async function report(): Promise<void> {
  console.log(
    `${EVENTS.toLocaleString('en')} events in batches of 1, acks on, median of ${ROUNDS} round-robin rounds\n`,
  )
  const calls = new Map<string, { filter: number; route: number }>()
  for (const [name, coalesce] of Object.entries(variants)) calls.set(name, await run(coalesce))
  const rates = roundRobin(fileURLToPath(import.meta.url), Object.keys(variants), ROUNDS)
  const base = 1e9 / median(rates.get('array by array')!)
  for (const name of Object.keys(variants)) {
    const ns = 1e9 / median(rates.get(name)!)
    const { filter: f, route: r } = calls.get(name)!
    console.log(
      `${name.padEnd(16)} filter ${(f / EVENTS).toFixed(3)} calls/event, route ${(r / EVENTS).toFixed(3)}  ${ns.toFixed(0).padStart(6)} CPU ns/event  ${(ns / base).toFixed(2)}x`,
    )
  }
}

const variant = process.env.ACKLINE_BENCH_VARIANT
if (variant === undefined) await report()
else await child(variant)
