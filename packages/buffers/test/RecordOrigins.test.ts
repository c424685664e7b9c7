// A unit test of an internal module (src/internal/RecordOrigins.ts), so it imports it by path:
// where the disk edge keeps the original finalizer groups is not part of the package's API.
import {
  BatchNotifier,
  type BatchStatusReceiver,
  EventArray,
  EventFinalizerGroups,
  LogEvent,
} from '@ackline/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { RecordOrigins } from '../src/internal/RecordOrigins.js'

/** A push of `n` events, each in a batch of its own, so every group's end shows on its receiver. */
function pushOf(n: number): { groups: EventFinalizerGroups; receivers: BatchStatusReceiver[] } {
  const receivers: BatchStatusReceiver[] = []
  const events = Array.from({ length: n }, (_, i) => {
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
    receivers.push(receiver)
    const event = new LogEvent({ i })
    EventArray.of(event).attach(notifier)
    return event
  })
  const groups = EventFinalizerGroups.detach(events)
  for (const event of events) event.end()
  return { groups, receivers }
}

const STATUSES = ['delivered', 'rejected', 'errored'] as const

describe('RecordOrigins', () => {
  it('ends the group of each record once, with the first status given, whatever the order; endAll ends the rest', () => {
    fc.assert(
      fc.property(
        // Pushes: how many events, and which of them were stored (the others were left out).
        fc.array(fc.array(fc.boolean(), { minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 8 }),
        fc.array(fc.tuple(fc.nat(60), fc.constantFrom(...STATUSES)), { maxLength: 80 }),
        fc.boolean(),
        (pushes, ends, reverse) => {
          const origins = new RecordOrigins()
          /** By sequence number: the receiver of its event's batch. */
          const bySeq: BatchStatusReceiver[] = []
          const added: { first: number; groups: EventFinalizerGroups; index: number[] | undefined }[] = []
          const untouched: { groups: EventFinalizerGroups; i: number; receiver: BatchStatusReceiver }[] = []
          for (const stored of pushes) {
            const { groups, receivers } = pushOf(stored.length)
            const index: number[] = []
            stored.forEach((keep, i) => {
              if (keep) index.push(i)
              else untouched.push({ groups, i, receiver: receivers[i]! })
            })
            const first = bySeq.length
            for (const i of index) bySeq.push(receivers[i]!)
            added.push({ first, groups, index: index.length === stored.length ? undefined : index })
          }
          // Pushes may be noted out of sequence order (their writes resolved out of order).
          for (const push of reverse ? [...added].reverse() : added) {
            const count = push.index?.length ?? push.groups.size
            origins.add(push.first, count, push.groups, push.index)
          }
          const expected = new Map<number, string>()
          for (const [seq, status] of ends) {
            origins.end(seq, status)
            if (seq < bySeq.length && !expected.has(seq)) expected.set(seq, status)
          }
          expect(origins.size).toBe(bySeq.length - expected.size)
          bySeq.forEach((receiver, seq) => {
            expect(receiver.status).toBe(expected.get(seq))
          })
          origins.endAll('errored')
          expect(origins.size).toBe(0)
          bySeq.forEach((receiver, seq) => {
            expect(receiver.status).toBe(expected.get(seq) ?? 'errored')
          })
          // Events left out of a push are none of its business.
          for (const { groups, i, receiver } of untouched) {
            expect(receiver.status).toBeUndefined()
            groups.end(i, 'rejected') // as the edge does with an event it could not store
          }
        },
      ),
    )
  })

  it('ends a push whose write failed as that push, not by its numbers, once later pushes hold them again', () => {
    const origins = new RecordOrigins()
    const failed = pushOf(2)
    const again = pushOf(2)
    const next = pushOf(2)
    // Group commit answered `failed`'s push at numbers 10 and 11; its write failed, the numbers
    // were given back and taken by `again` (and `next` took 12, 13) before its failure was heard.
    const handle = origins.add(10, 2, failed.groups, undefined)
    origins.add(10, 2, again.groups, undefined)
    origins.add(12, 2, next.groups, undefined)
    expect(origins.size).toBe(6)
    origins.endPush(handle, 'errored')
    expect(failed.receivers.map((r) => r.status)).toEqual(['errored', 'errored'])
    expect(again.receivers.map((r) => r.status)).toEqual([undefined, undefined])
    for (let seq = 10; seq < 14; seq++) origins.end(seq, 'delivered')
    expect(again.receivers.map((r) => r.status)).toEqual(['delivered', 'delivered'])
    expect(next.receivers.map((r) => r.status)).toEqual(['delivered', 'delivered'])
    expect(origins.size).toBe(0)
  })

  it('ends at shutdown the groups of a push whose numbers were given again before its failure was heard', () => {
    const origins = new RecordOrigins()
    const failed = pushOf(2)
    const again = pushOf(2)
    origins.add(10, 2, failed.groups, undefined)
    origins.add(10, 2, again.groups, undefined)
    origins.endAll('errored')
    expect([...failed.receivers, ...again.receivers].map((r) => r.status)).toEqual(Array(4).fill('errored'))
    expect(origins.size).toBe(0)
  })

  it('keeps one entry per push, not one per record, and lets go of pushes once every record ended', () => {
    const origins = new RecordOrigins()
    const { groups, receivers } = pushOf(1000)
    origins.add(0, 1000, groups, undefined)
    for (let seq = 999; seq >= 0; seq--) origins.end(seq, 'delivered')
    expect(origins.size).toBe(0)
    expect(receivers.every((r) => r.status === 'delivered')).toBe(true)
    // A record of a push already let go of is unknown: ending it again does nothing.
    origins.end(0, 'errored')
    expect(receivers[0]!.status).toBe('delivered')
  })
})
