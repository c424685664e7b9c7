// The cost of writing filter and remap on `perEvent` (@ackline/topology), against the same logic
// hand-written as one loop (what both transforms were before the helper), side by side in one
// run. Each variant calls `process` directly on arrays of BATCH events with a context that only
// counts, so what is measured is the transform's own loop, not the runtime.
// Each measurement runs in a fresh process (so the variants cannot make each other's call sites
// polymorphic), round-robin over ROUNDS rounds.
// Run: pnpm bench transforms   (ACKLINE_BENCH_EVENTS and ACKLINE_BENCH_ROUNDS override the sizes)

import { fileURLToPath } from 'node:url'
import { EventArray, type LogEvent } from '@ackline/core'
import type { TransformContext } from '@ackline/topology'
import { filter, remap } from '@ackline/transforms'
import { median, roundRobin } from '../../../bench/roundRobin.js'

const EVENTS = Number(process.env.ACKLINE_BENCH_EVENTS ?? 2_000_000)
const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 5)
const BATCH = 500
const ARRAYS = 20

/** A context that counts what reaches it and ends nothing, so the same events serve every pass. */
function countingContext(): TransformContext & { count: number } {
  return {
    id: 'bench',
    acknowledgements: true,
    count: 0,
    emit() {
      this.count++
    },
    emitAll(events) {
      this.count += events.length
    },
    drop() {
      this.count++
    },
    create() {
      throw new Error('not used')
    },
  }
}

type Process = (events: EventArray, context: TransformContext) => void

const keepAll = (event: LogEvent): boolean => event.get('index') !== -1
const keepEven = (event: LogEvent): boolean => (event.get('index') as number) % 2 === 0
const setSeen = (event: LogEvent): void => {
  event.set('seen', true)
}

/** The filter loop as it was hand-written before `perEvent`. */
function handFilter(predicate: (event: LogEvent) => boolean): Process {
  return (events, context) => {
    const list = events.events
    let i = 0
    try {
      while (i < list.length && predicate(list[i]!) === true) i++
    } finally {
      if (i < list.length) for (let j = 0; j < i; j++) context.emit(list[j]!)
    }
    if (i === list.length) {
      context.emitAll(events)
      return
    }
    context.drop(list[i]!)
    for (i++; i < list.length; i++) {
      const event = list[i]!
      if (predicate(event) === true) context.emit(event)
      else context.drop(event)
    }
  }
}

/** The remap loop as it was hand-written before `perEvent`, for a function that edits in place. */
function handRemap(fn: (event: LogEvent) => void): Process {
  return (events, context) => {
    const list = events.events
    let i = 0
    let result: unknown
    try {
      for (; i < list.length; i++) {
        result = fn(list[i]!)
        if (result !== undefined && result !== list[i]) break
      }
    } finally {
      if (i < list.length) for (let j = 0; j < i; j++) context.emit(list[j]!)
    }
    if (i === list.length) {
      context.emitAll(events)
      return
    }
    throw new Error('the bench remap only edits in place')
  }
}

const variants: Record<string, () => Process> = {
  'filter keeps all, perEvent': () => filter(keepAll).process as Process,
  'filter keeps all, hand loop': () => handFilter(keepAll),
  'filter keeps half, perEvent': () => filter(keepEven).process as Process,
  'filter keeps half, hand loop': () => handFilter(keepEven),
  'remap in place, perEvent': () => remap(setSeen).process as Process,
  'remap in place, hand loop': () => handRemap(setSeen),
}

function measure(make: () => Process): number {
  const run = make()
  const arrays = Array.from({ length: ARRAYS }, (_, a) =>
    EventArray.fromRecords(
      Array.from({ length: BATCH }, (_, i) => ({ message: 'event', index: a * BATCH + i })),
    ),
  )
  const context = countingContext()
  let best = 0
  for (let pass = 0; pass < 3; pass++) {
    context.count = 0
    const start = performance.now()
    for (let done = 0; done < EVENTS; done += BATCH) run(arrays[(done / BATCH) % ARRAYS]!, context)
    const seconds = (performance.now() - start) / 1000
    if (context.count < EVENTS) throw new Error(`only ${context.count} events reached the context`)
    best = Math.max(best, EVENTS / seconds)
  }
  return best
}

function report(): void {
  console.log(
    `${EVENTS.toLocaleString('en')} events per measurement, arrays of ${BATCH}, median of ${ROUNDS} round-robin rounds, one process per measurement\n`,
  )
  const rates = roundRobin(fileURLToPath(import.meta.url), Object.keys(variants), ROUNDS)
  const medianOf = (name: string): number => median(rates.get(name)!)
  for (const name of rates.keys()) {
    console.log(`${name.padEnd(30)} ${(medianOf(name) / 1e6).toFixed(1).padStart(8)} M events/s`)
  }
  console.log('\nratios (medians), perEvent / hand loop:')
  for (const work of ['filter keeps all', 'filter keeps half', 'remap in place']) {
    const ratio = medianOf(`${work}, perEvent`) / medianOf(`${work}, hand loop`)
    console.log(`  ${work.padEnd(20)} ${(ratio * 100).toFixed(0).padStart(4)}%`)
  }
}

const variant = process.env.ACKLINE_BENCH_VARIANT
if (variant === undefined) report()
else console.log(measure(variants[variant]!))
