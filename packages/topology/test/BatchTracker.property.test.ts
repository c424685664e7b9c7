// Unit test of an internal module (`src/internal/BatchTracker.ts`), against a model, under fake
// timers: whatever order batches are tracked, resolved, recorded by an authoritative sink, timed
// out or given up on by a stop, each is decided exactly once, as the first of those says, and the
// tracker keeps one timer while anything is pending, none after, and a bounded timeout queue
// (fast-check prints the seed).
import {
  BatchNotifier,
  type BatchStatus,
  type BatchStatusReceiver,
  EventArray,
  type EventStatus,
  SlotBatches,
} from '@ackline/core'
import fc from 'fast-check'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { BatchTracker, type Receipt, SlotReceipt } from '../src/internal/BatchTracker.js'
import { Counters } from '../src/internal/Counters.js'
import type { LifecycleEvent } from '../src/LifecycleEvent.js'

type Step =
  | { readonly op: 'track'; readonly events: number }
  | { readonly op: 'end'; readonly at: number; readonly status: 'delivered' | 'errored' | 'rejected' }
  | { readonly op: 'record'; readonly at: number; readonly status: 'delivered' | 'errored' | 'rejected' }
  | { readonly op: 'advance'; readonly ms: number }
  | { readonly op: 'stop' }
  | { readonly op: 'watch' }

const status = fc.constantFrom('delivered' as const, 'errored' as const, 'rejected' as const)
const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({ op: fc.constant('track' as const), events: fc.integer({ min: 0, max: 3 }) }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('end' as const), at: fc.nat(), status }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('record' as const), at: fc.nat(), status }) },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('advance' as const),
      // Small steps land the clock just before or at a deadline; large ones pass several.
      ms: fc.oneof(fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: 40 })),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ op: 'stop' as const }) },
  { weight: 1, arbitrary: fc.constant({ op: 'watch' as const }) },
)

/** One tracked batch and what the model says its source was told. */
interface Tracked {
  readonly array: EventArray
  readonly receipt: Receipt | SlotReceipt
  /** The receiver an authoritative sink reports records against (a slot batch gets one then). */
  readonly receiver: () => BatchStatusReceiver
  readonly deadline: number
  ended: boolean
  recorded: boolean
  decided: BatchStatus | undefined
  cause: 'resolved' | 'recorded' | 'ACK_TIMEOUT' | 'STOPPED' | undefined
}

describe('BatchTracker against a model', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  // With an ack timeout the runtime keeps each batch's notifier; without one, its batches are
  // slots (RFC 0009) with a `SlotReceipt`, and nothing times out.
  it.each(['notifiers, with an ack timeout', 'slots, without one'])(
    'decides each batch once, as the first of resolution, records, timeout or stop says; one timer while pending (%s)',
    async (mode) => {
      const slotted = mode.startsWith('slots')
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 5, max: 50 }),
          fc.array(step, { minLength: 10, maxLength: 120, size: 'max' }),
          async (timeoutMs, steps) => {
            vi.useFakeTimers()
            try {
              const ackTimeoutMs = slotted ? Number.POSITIVE_INFINITY : timeoutMs
              let watching = false
              const facts: LifecycleEvent[] = []
              const counters = new Counters('source', 'test')
              const tracker = new BatchTracker('src', counters, slotted ? undefined : ackTimeoutMs, {
                emit: (fact) => facts.push(fact),
                watching: () => watching,
              })
              const slots = new SlotBatches('src', tracker)
              const batches: Tracked[] = []
              const undecided = (): Tracked[] => batches.filter((b) => b.decided === undefined)
              const pick = (at: number): Tracked | undefined =>
                batches.length === 0 ? undefined : batches[at % batches.length]

              for (const s of steps) {
                switch (s.op) {
                  case 'track': {
                    if (slotted) {
                      // A slot batch has at least one event (the runtime sends an empty one with a notifier).
                      const receipt = new SlotReceipt()
                      const array = slots.fromRecords(
                        Array.from({ length: Math.max(1, s.events) }, (_, i) => ({ i })),
                        Date.now(),
                        receipt,
                      )
                      receipt.idMs = slots.lastIdMs
                      receipt.idSeq = slots.lastIdSeq
                      tracker.followSlot()
                      // The receiver an authoritative sink would find through an event's finalizers.
                      let receiver: BatchStatusReceiver | undefined
                      batches.push({
                        array,
                        receipt,
                        receiver: () => {
                          receiver ??= [...array.events[0]!.metadata.finalizers][0]!.receiver
                          return receiver
                        },
                        deadline: ackTimeoutMs,
                        ended: false,
                        recorded: false,
                        decided: undefined,
                        cause: undefined,
                      })
                      break
                    }
                    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
                    const array = EventArray.fromRecords(
                      Array.from({ length: s.events }, (_, i) => ({ i })),
                      { sourceId: 'src', batch: notifier },
                    )
                    const receipt = tracker.track(receiver)
                    const empty = s.events === 0
                    batches.push({
                      array,
                      receipt,
                      receiver: () => receiver,
                      deadline: performance.now() + ackTimeoutMs,
                      ended: empty,
                      recorded: false,
                      decided: empty ? 'delivered' : undefined,
                      cause: empty ? 'resolved' : undefined,
                    })
                    break
                  }
                  case 'end': {
                    const b = pick(s.at)
                    if (b === undefined || b.ended) break
                    b.array.end(s.status)
                    b.ended = true
                    if (b.decided === undefined) {
                      b.decided = s.status
                      b.cause = 'resolved'
                    }
                    break
                  }
                  case 'record': {
                    // An authoritative sink records every event of the batch with one status.
                    const b = pick(s.at)
                    if (b === undefined || b.ended || b.recorded) break
                    b.recorded = true
                    const receiver = b.receiver()
                    for (let i = 0; i < b.array.length; i++) {
                      tracker.recorded(receiver, s.status as EventStatus, undefined)
                    }
                    if (b.decided === undefined) {
                      b.decided = s.status
                      b.cause = 'recorded'
                    }
                    break
                  }
                  case 'advance': {
                    vi.advanceTimersByTime(s.ms)
                    const now = performance.now()
                    for (const b of undecided()) {
                      if (b.deadline <= now) {
                        b.decided = 'errored'
                        b.cause = 'ACK_TIMEOUT'
                      }
                    }
                    break
                  }
                  case 'stop': {
                    tracker.forceAll()
                    for (const b of undecided()) {
                      b.decided = 'errored'
                      b.cause = 'STOPPED'
                    }
                    break
                  }
                  case 'watch':
                    watching = !watching
                    break
                }
                // What the source was told, and the tracker's own accounting, agree with the model.
                for (const b of batches) expect(b.receipt.decided).toBe(b.decided)
                const pending = undecided().length
                expect(tracker.pending).toBe(pending)
                expect(counters.inFlight).toBe(pending)
                expect(counters.latencyCount).toBe(batches.length - pending)
                expect(vi.getTimerCount()).toBe(pending > 0 && !slotted ? 1 : 0)
                expect(tracker.timeoutQueueLength).toBeLessThanOrEqual(2 * pending + 32)
              }

              for (const b of batches) {
                if (b.cause === 'ACK_TIMEOUT' || b.cause === 'STOPPED')
                  expect(b.receipt.failure?.code).toBe(b.cause)
                if (b.decided === 'delivered') expect(b.receipt.failure).toBeUndefined()
              }
              await vi.advanceTimersByTimeAsync(0) // queued facts are flushed
              const perBatch = new Map<string, number>()
              for (const f of facts) {
                if (f.type === 'batch_resolved') perBatch.set(f.batchId, (perBatch.get(f.batchId) ?? 0) + 1)
              }
              for (const count of perBatch.values()) expect(count).toBe(1)
              for (const b of batches) if (!b.ended) b.array.end('delivered')
            } finally {
              vi.useRealTimers()
            }
          },
        ),
        { numRuns: 200 },
      )
    },
  )
})
