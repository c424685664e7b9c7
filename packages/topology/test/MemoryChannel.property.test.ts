// The memory channel under any interleaving of what can happen to it: pushes (in the test's own
// microtask or from a `nextTick` callback), a consumer taking its input as the runtime does
// (`pullNow`, else `pull`, with or without a signal, coalescing up to a bound), aborts, a close, a
// forced stop, and microtask and loop-turn boundaries between them. Every event pushed is handed
// out once or settled once, in push order; no pull and no producer is left waiting; the queue stays
// within its bound; nothing is thrown uncaught. (Written from a review of the deferred wake.)
import { EventArray, type LogEvent } from '@ackline/core'
import fc from 'fast-check'
import { expect, it } from 'vitest'
import { EMPTY, MemoryChannel } from '../src/internal/MemoryChannel.js'

const failure = { componentId: 'out', code: 'X', message: 'x' }
const loopTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

type Op =
  | { kind: 'push' | 'pushInTick'; size: number }
  | { kind: 'consume'; signal: boolean; upTo: number }
  | { kind: 'abort' | 'close' | 'force' | 'microtask' | 'loopTurn' }

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('push' as const),
      size: fc.oneof(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 120, max: 140 })),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('pushInTick' as const), size: fc.integer({ min: 1, max: 6 }) }),
  },
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('consume' as const),
      signal: fc.boolean(),
      upTo: fc.integer({ min: 1, max: 1000 }),
    }),
  },
  { weight: 2, arbitrary: fc.constant({ kind: 'abort' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'close' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'force' as const }) },
  { weight: 3, arbitrary: fc.constant({ kind: 'microtask' as const }) },
  { weight: 2, arbitrary: fc.constant({ kind: 'loopTurn' as const }) },
)

/** Runs `ops` against a channel; returns what went wrong (empty when nothing did). */
async function scenario(maxEvents: number, dropNewest: boolean, ops: readonly Op[]): Promise<string[]> {
  const problems: string[] = []
  const uncaught = (error: unknown): void => void problems.push(`uncaught: ${String(error)}`)
  process.on('uncaughtException', uncaught)
  try {
    let dropped = 0
    const c = new MemoryChannel({
      maxEvents,
      whenFull: dropNewest ? 'drop_newest' : 'block',
      droppedStatus: 'rejected',
      droppedFailure: failure,
      stoppedFailure: failure,
      onDrop: (events) => {
        dropped += events
      },
    })
    let next = 0
    const pushed: LogEvent[] = []
    const pushes: Promise<void>[] = []
    const delivered: number[] = []
    let settledByForce = 0
    let settledLate = 0 // pushed after the close: errored at the push
    let closed = false
    let ended = false
    let waiting: { controller: AbortController | undefined } | undefined

    const push = (size: number): void => {
      const array = EventArray.fromRecords(Array.from({ length: size }, (_, i) => ({ n: next + i })))
      next += size
      pushed.push(...array.events)
      if (closed) settledLate += size
      pushes.push(c.push(array))
    }
    const deliver = (array: EventArray, upTo: number): void => {
      for (const event of c.coalesce(array, upTo).events) {
        if (event.isEnded) problems.push(`event ${String(event.fields)} handed out after it ended`)
        else {
          delivered.push(event.fields.n as number)
          event.end('delivered')
        }
      }
    }
    const consume = (signal: boolean, upTo: number): void => {
      if (waiting !== undefined || ended) return
      const now = c.pullNow()
      if (now === undefined) ended = true
      else if (now !== EMPTY) deliver(now, upTo)
      else {
        const controller = signal ? new AbortController() : undefined
        const wait = { controller }
        waiting = wait
        void c.pull(controller?.signal).then((array) => {
          if (waiting === wait) waiting = undefined
          if (array !== undefined) deliver(array, upTo)
          else if (controller?.signal.aborted !== true) ended = true
        })
      }
    }

    for (const o of ops) {
      if (o.kind === 'push') push(o.size)
      else if (o.kind === 'pushInTick') process.nextTick(() => push(o.size))
      else if (o.kind === 'consume') consume(o.signal, o.upTo)
      else if (o.kind === 'abort') waiting?.controller?.abort()
      else if (o.kind === 'close') {
        await c.close()
        closed = true
      } else if (o.kind === 'force') {
        settledByForce += c.force('errored')
        closed = true
      } else if (o.kind === 'microtask') await Promise.resolve()
      else await loopTurn()
      // One array larger than the bound is let into an empty queue (an oversized batch).
      if (c.queuedEvents > Math.max(maxEvents, 140))
        problems.push(`${c.queuedEvents} queued over ${maxEvents}`)
    }
    await loopTurn() // pushes from `nextTick` callbacks have run
    await c.close()
    closed = true
    for (let turns = 0; !ended; ) {
      if (waiting === undefined) consume(false, 1000)
      else if (++turns > 20) {
        problems.push(`a pull still waits with ${c.queuedEvents} events queued`)
        break
      } else await loopTurn()
    }
    let producersDone = false
    void Promise.all(pushes).then(() => (producersDone = true))
    await loopTurn()
    if (!producersDone) problems.push('a producer is still blocked')
    const unsettled = pushed.filter((event) => !event.isEnded).length
    if (unsettled > 0) problems.push(`${unsettled} events neither handed out nor settled`)
    if (delivered.some((n, i) => i > 0 && n <= delivered[i - 1]!)) problems.push(`out of order: ${delivered}`)
    const accounted = delivered.length + settledByForce + settledLate + dropped
    if (accounted !== pushed.length) problems.push(`${accounted} events accounted for of ${pushed.length}`)
  } finally {
    process.off('uncaughtException', uncaught)
  }
  return problems
}

it('hands out or settles every event once, in order, and leaves nothing waiting (property)', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(1, 2, 4, 8, 130, 500),
      fc.boolean(),
      fc.array(op, { maxLength: 60 }),
      async (maxEvents, dropNewest, ops) => {
        expect(await scenario(maxEvents, dropNewest, ops)).toEqual([])
      },
    ),
    // ACKLINE_CHANNEL_RUNS=30000 for a longer search (the review that wrote it ran 30,000).
    { numRuns: Number(process.env.ACKLINE_CHANNEL_RUNS ?? 300) },
  )
}, 120_000)
