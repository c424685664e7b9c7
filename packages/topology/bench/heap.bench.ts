// What acknowledgements cost in memory, acks on against acks off, side by side in one run (each
// measurement in a fresh process, variants round-robin):
//   allocated per batch: bytes allocated per batch of BATCH records moved generator → remap →
//     blackhole, counted as the growth of the heap over 2,000 batches in a young generation
//     large enough that no collection runs meanwhile (checked: a run in which one ran is
//     repeated). Unlike a time, this count does not depend on the load of the machine.
//   retained per in-flight event: the heap held by IN_FLIGHT events sent by a source and queued
//     in front of a sink whose write has not returned yet, after a forced collection; with acks
//     on, also for a source that asks for no receipt (`quiet`: its batches are slots, RFC 0009).
// At batch 1 and 100. Run: pnpm bench heap   (ACKLINE_BENCH_ROUNDS overrides the rounds)
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import v8 from 'node:v8'
import type { EventArray, JsonObject } from '@ackline/core'
import { blackhole } from '@ackline/sinks'
import { generator } from '@ackline/sources'
import { type Sink, type Source, TopologyBuilder } from '@ackline/topology'
import { remap } from '@ackline/transforms'

const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 3)
const BATCHES = [1, 100]
const COUNTED_BATCHES = 2000
const IN_FLIGHT = 20_000
const record = (index: number): JsonObject => ({ message: 'event', index })

async function pipeline(acknowledgements: boolean, batch: number, batches: number): Promise<void> {
  const hole = blackhole()
  const built = new TopologyBuilder<string>({ acknowledgements })
    .source('gen', generator({ count: batch * batches, batchSize: batch, record }))
    .transform(
      'remap',
      ['gen'],
      remap((event) => {
        event.set('seen', true)
      }),
    )
    .sink('out', ['remap'], hole)
    .build()
  await built.start()
  await built.done
  if (hole.count !== batch * batches) throw new Error(`the blackhole saw ${hole.count} events`)
}

/** Bytes allocated per batch; `undefined` when a collection ran during the count. */
async function allocatedPerBatch(acknowledgements: boolean, batch: number): Promise<number | undefined> {
  for (let i = 0; i < 5; i++) await pipeline(acknowledgements, batch, COUNTED_BATCHES)
  ;(globalThis as { gc?: () => void }).gc?.()
  const before = v8.getHeapStatistics()
  const spaces = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')!
  await pipeline(acknowledgements, batch, COUNTED_BATCHES)
  const after = v8.getHeapStatistics()
  const newAfter = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')!
  // A scavenge empties the young generation: its use would have dropped below where it started.
  if (newAfter.space_used_size < spaces.space_used_size) return undefined
  return (after.used_heap_size - before.used_heap_size) / COUNTED_BATCHES
}

/** Heap retained per event while IN_FLIGHT events wait in front of a sink that does not return. */
async function retainedPerEvent(acknowledgements: boolean, batch: number, receipt = true): Promise<number> {
  const gc = (globalThis as { gc?: () => void }).gc!
  let release!: () => void
  const held = new Promise<void>((resolve) => {
    release = resolve
  })
  let sent!: () => void
  const allSent = new Promise<void>((resolve) => {
    sent = resolve
  })
  const source: Source = {
    kind: 'bench',
    canAcknowledge: true,
    async run(context) {
      for (let index = 0; index < IN_FLIGHT; index += batch) {
        const records: JsonObject[] = []
        for (let i = index; i < index + batch; i++) records.push(record(i))
        await context.send(records, receipt ? undefined : { receipt: false })
      }
      sent()
    },
  }
  const sink: Sink = {
    kind: 'holding',
    async write(_events: EventArray) {
      await held
      return undefined
    },
  }
  const built = new TopologyBuilder<string>({ acknowledgements, onWarning: () => {} })
    .source('in', source)
    .sink('out', ['in'], sink, { buffer: { maxEvents: IN_FLIGHT * 2 } })
    .build()
  await built.start()
  gc()
  gc()
  const before = process.memoryUsage().heapUsed
  await allSent
  gc()
  gc()
  const after = process.memoryUsage().heapUsed
  release()
  await built.stop()
  return (after - before) / IN_FLIGHT
}

const variants = BATCHES.flatMap((batch) => [
  ...['on', 'off'].flatMap((acks) => [`allocated ${acks}@${batch}`, `retained ${acks}@${batch}`]),
  `retained quiet@${batch}`,
])

async function child(variant: string): Promise<void> {
  const [what, rest] = variant.split(' ') as [string, string]
  const [acks, batch] = rest.split('@') as [string, string]
  if (what === 'allocated') {
    for (let attempt = 0; attempt < 5; attempt++) {
      const bytes = await allocatedPerBatch(acks === 'on', Number(batch))
      if (bytes !== undefined) {
        console.log(bytes)
        return
      }
    }
    throw new Error('a collection ran during every count')
  }
  const retained = () => retainedPerEvent(acks !== 'off', Number(batch), acks !== 'quiet')
  await retained() // warm-up
  console.log(await retained())
}

function report(): void {
  const file = fileURLToPath(import.meta.url)
  const results = new Map<string, number[]>(variants.map((v) => [v, []]))
  for (let round = 0; round < ROUNDS; round++) {
    for (const variant of variants) {
      // A young generation of 512 MB: 2,000 batches of 100 events allocate well below it.
      const args = variant.startsWith('allocated')
        ? ['--max-semi-space-size=512', '--min-semi-space-size=512']
        : []
      const run = spawnSync(process.execPath, [...args, ...process.execArgv, file], {
        env: { ...process.env, ACKLINE_BENCH_VARIANT: variant },
        encoding: 'utf8',
      })
      const value = Number(run.stdout.trim().split('\n').at(-1))
      if (run.status !== 0 || !Number.isFinite(value))
        throw new Error(`variant '${variant}' failed: ${run.stderr}`)
      results.get(variant)!.push(value)
    }
  }
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!
  const get = (name: string) => median(results.get(name)!)
  console.log(`bytes, median of ${ROUNDS} rounds, one process per measurement\n`)
  console.log(
    `${'batch'.padEnd(6)}${['allocated/batch on', 'off', 'on - off', 'retained/event on', 'off', 'on - off', 'quiet - off'].map((h) => h.padStart(19)).join('')}`,
  )
  for (const batch of BATCHES) {
    const aOn = get(`allocated on@${batch}`)
    const aOff = get(`allocated off@${batch}`)
    const rOn = get(`retained on@${batch}`)
    const rOff = get(`retained off@${batch}`)
    const rQuiet = get(`retained quiet@${batch}`)
    const cells = [aOn, aOff, aOn - aOff, rOn, rOff, rOn - rOff, rQuiet - rOff].map((v) =>
      v.toFixed(0).padStart(19),
    )
    console.log(`${String(batch).padEnd(6)}${cells.join('')}`)
  }
  console.log(
    "\ntargets: retained per in-flight event, acks on - off: <= 150 B at batch 1, <= 48 B at batch 100\n'quiet': acks on, the source asks for no receipt (its batches are slots, RFC 0009)",
  )
}

const variant = process.env.ACKLINE_BENCH_VARIANT
if (variant === undefined) report()
else await child(variant)
