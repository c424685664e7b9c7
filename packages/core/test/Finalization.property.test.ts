// A property over random programs of create / attach / release / clone / merge / split / update /
// record / regroup / end steps across several batches, checked step by step against a plain
// model: every batch resolves exactly once, only after its last handle ended (and its source
// released it), with the status the model folds; and batches that keep per-record outcomes report,
// for each record in attach order, the outcome the model folds for it.
import {
  BatchNotifier,
  BatchStatus,
  type BatchStatusReceiver,
  type DeliveryStatus,
  EventArray,
  EventFinalizerGroups,
  EventStatus,
  LogEvent,
} from '@ackline/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'

type Step =
  | { op: 'create' }
  | { op: 'attach'; handle: number; batch: number }
  | { op: 'attachArray'; handles: number[]; batch: number }
  | { op: 'fromRecords'; count: number; batch: number }
  | { op: 'release'; batch: number }
  | { op: 'clone'; handle: number }
  | { op: 'merge'; into: number; from: number }
  | { op: 'split'; handle: number; n: number }
  | { op: 'update'; handle: number; status: DeliveryStatus }
  | { op: 'record'; handle: number }
  | { op: 'regroup'; handle: number }
  | { op: 'end'; handle: number; status: DeliveryStatus | undefined; authoritative: boolean }
  | { op: 'endArray'; handles: number[]; status: DeliveryStatus | undefined }

const status = fc.constantFrom<DeliveryStatus>('delivered', 'errored', 'rejected')
const index = fc.nat(7)
const step: fc.Arbitrary<Step> = fc.oneof(
  { arbitrary: fc.constant({ op: 'create' as const }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('attach' as const), handle: index, batch: index }), weight: 3 },
  {
    arbitrary: fc.record({
      op: fc.constant('attachArray' as const),
      handles: fc.array(index, { maxLength: 4 }),
      batch: index,
    }),
    weight: 2,
  },
  {
    arbitrary: fc.record({
      op: fc.constant('fromRecords' as const),
      count: fc.integer({ min: 0, max: 3 }),
      batch: index,
    }),
    weight: 1,
  },
  { arbitrary: fc.record({ op: fc.constant('release' as const), batch: index }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('clone' as const), handle: index }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('merge' as const), into: index, from: index }), weight: 2 },
  {
    arbitrary: fc.record({
      op: fc.constant('split' as const),
      handle: index,
      n: fc.integer({ min: 0, max: 3 }),
    }),
    weight: 1,
  },
  { arbitrary: fc.record({ op: fc.constant('update' as const), handle: index, status }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('record' as const), handle: index }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('regroup' as const), handle: index }), weight: 1 },
  {
    arbitrary: fc.record({
      op: fc.constant('end' as const),
      handle: index,
      status: fc.option(status, { nil: undefined }),
      authoritative: fc.boolean(),
    }),
    weight: 4,
  },
  {
    arbitrary: fc.record({
      op: fc.constant('endArray' as const),
      handles: fc.array(index, { maxLength: 5 }),
      status: fc.option(status, { nil: undefined }),
    }),
    weight: 2,
  },
)

interface ModelSlot {
  batch: number
  count: number
  status: EventStatus
  /** What the record's copies reported until it was recorded (never 'recorded'). */
  outcome: EventStatus
}
interface ModelBatch {
  receiver: BatchStatusReceiver
  notifier: BatchNotifier
  released: boolean
  status: BatchStatus
  emitted: number
}
interface ModelHandle {
  event: LogEvent
  slots: Set<number>
}

function run(batchCount: number, steps: readonly Step[]): ModelBatch[] {
  const slots: ModelSlot[] = []
  const batches: ModelBatch[] = []
  const handles: ModelHandle[] = [] // live handles only

  for (let b = 0; b < batchCount; b++) {
    const { notifier, receiver } = BatchNotifier.create({ sourceId: `s${b}`, outcomes: b % 2 === 0 })
    const model: ModelBatch = { notifier, receiver, released: false, status: 'delivered', emitted: 0 }
    receiver.asObservable().subscribe(() => model.emitted++)
    batches.push(model)
  }

  const resolvedInModel = (b: number) =>
    batches[b]!.released && !slots.some((s) => s.batch === b && s.count > 0)
  const report = (id: number, next: EventStatus) => {
    const slot = slots[id]!
    if (slot.status !== 'recorded') slot.outcome = EventStatus.update(slot.outcome, next)
    slot.status = EventStatus.update(slot.status, next)
  }
  const releaseSlot = (id: number, next: EventStatus | undefined) => {
    const slot = slots[id]!
    if (next !== undefined) report(id, next)
    slot.count--
    if (slot.count === 0)
      batches[slot.batch]!.status = BatchStatus.update(batches[slot.batch]!.status, slot.status)
  }
  const record = (id: number) => {
    const slot = slots[id]!
    if (slot.status === 'recorded') return
    batches[slot.batch]!.status = BatchStatus.update(batches[slot.batch]!.status, slot.status)
    slot.status = 'recorded'
  }
  const pick = (i: number) => (handles.length === 0 ? undefined : i % handles.length)
  const removeHandle = (i: number) => handles.splice(i, 1)[0]!

  const check = () => {
    batches.forEach((batch, b) => {
      const resolved = resolvedInModel(b)
      expect(batch.receiver.isResolved, `batch ${b} resolved`).toBe(resolved)
      if (resolved) expect(batch.receiver.status, `batch ${b} status`).toBe(batch.status)
      if (resolved && b % 2 === 0) {
        const expected = slots.filter((slot) => slot.batch === b).map((slot) => slot.outcome)
        expect(batch.receiver.outcomes?.toArray(), `batch ${b} outcomes`).toEqual(expected)
        // The batch's status is the worst outcome of its records.
        const worst = expected.reduce<BatchStatus>((acc, o) => BatchStatus.update(acc, o), 'delivered')
        expect(batch.receiver.status).toBe(worst)
      } else if (b % 2 === 1) {
        expect(batch.receiver.outcomes).toBeUndefined()
      }
    })
  }

  for (const s of steps) {
    switch (s.op) {
      case 'create':
        handles.push({ event: new LogEvent({ n: handles.length }), slots: new Set() })
        break
      case 'attach': {
        const h = pick(s.handle)
        if (h === undefined) break
        const b = s.batch % batchCount
        const batch = batches[b]!
        if (batch.released) {
          expect(() => batch.notifier.attach(handles[h]!.event)).toThrow(/released/)
        } else {
          batch.notifier.attach(handles[h]!.event)
          slots.push({ batch: b, count: 1, status: 'dropped', outcome: 'dropped' })
          handles[h]!.slots.add(slots.length - 1)
        }
        break
      }
      case 'attachArray': {
        // EventArray.attach, what sources use: every distinct live handle picked joins the batch.
        const picked = [...new Set(s.handles.map((i) => pick(i)).filter((h) => h !== undefined))]
        const b = s.batch % batchCount
        const batch = batches[b]!
        const array = new EventArray(picked.map((h) => handles[h]!.event))
        if (batch.released) {
          expect(() => array.attach(batch.notifier, { release: false })).toThrow(/released/)
        } else {
          array.attach(batch.notifier, { release: false })
          for (const h of picked) {
            slots.push({ batch: b, count: 1, status: 'dropped', outcome: 'dropped' })
            handles[h]!.slots.add(slots.length - 1)
          }
        }
        break
      }
      case 'fromRecords': {
        // EventArray.fromRecords, what the topology's sources use: new events already in the batch.
        const b = s.batch % batchCount
        const batch = batches[b]!
        const records = Array.from({ length: s.count }, (_, i) => ({ n: i }))
        const make = () => EventArray.fromRecords(records, { batch: batch.notifier, release: false })
        if (batch.released) {
          expect(make).toThrow(/released/)
        } else {
          for (const event of make()) {
            slots.push({ batch: b, count: 1, status: 'dropped', outcome: 'dropped' })
            handles.push({ event, slots: new Set([slots.length - 1]) })
          }
        }
        break
      }
      case 'release': {
        const b = s.batch % batchCount
        batches[b]!.notifier.release()
        batches[b]!.released = true
        break
      }
      case 'clone': {
        const h = pick(s.handle)
        if (h === undefined) break
        const source = handles[h]!
        for (const id of source.slots) slots[id]!.count++
        handles.push({ event: source.event.clone(), slots: new Set(source.slots) })
        break
      }
      case 'merge': {
        const into = pick(s.into)
        const from = pick(s.from)
        if (into === undefined || from === undefined || into === from) break
        const target = handles[into]!
        const source = handles[from]!
        target.event.merge(source.event)
        for (const id of source.slots) {
          if (target.slots.has(id)) slots[id]!.count--
          else target.slots.add(id)
        }
        removeHandle(from)
        break
      }
      case 'split': {
        const h = pick(s.handle)
        if (h === undefined) break
        const source = removeHandle(h)
        for (let i = 0; i < s.n; i++) {
          for (const id of source.slots) slots[id]!.count++
          handles.push({ event: source.event.clone(), slots: new Set(source.slots) })
        }
        source.event.end()
        for (const id of source.slots) releaseSlot(id, undefined)
        break
      }
      case 'update': {
        const h = pick(s.handle)
        if (h === undefined) break
        handles[h]!.event.metadata.finalizers.updateStatus(s.status)
        for (const id of handles[h]!.slots) report(id, s.status)
        break
      }
      case 'record': {
        const h = pick(s.handle)
        if (h === undefined) break
        handles[h]!.event.metadata.finalizers.updateSources()
        for (const id of handles[h]!.slots) record(id)
        break
      }
      case 'regroup': {
        // What a buffer does: detach, store, end the stored handle, re-attach to a fresh event.
        const h = pick(s.handle)
        if (h === undefined) break
        const old = handles[h]!
        const stored = JSON.stringify(old.event)
        const groups = EventFinalizerGroups.detach([old.event])
        old.event.end()
        const fresh = new LogEvent(JSON.parse(stored))
        groups.attach(0, fresh)
        handles[h] = { event: fresh, slots: old.slots }
        break
      }
      case 'end': {
        const h = pick(s.handle)
        if (h === undefined) break
        const handle = removeHandle(h)
        handle.event.end(s.status, { authoritative: s.authoritative })
        for (const id of handle.slots) {
          if (s.authoritative && s.status !== undefined) {
            report(id, s.status)
            record(id)
            releaseSlot(id, undefined)
          } else {
            releaseSlot(id, s.status)
          }
        }
        break
      }
      case 'endArray': {
        // EventArray.end, what sink runners use: distinct live handles, ended in one call.
        const picked = [...new Set(s.handles.map((i) => pick(i)).filter((h) => h !== undefined))].sort(
          (a, b) => b - a,
        )
        const ended = picked.map((h) => removeHandle(h))
        new EventArray(ended.map((h) => h.event)).end(s.status)
        for (const handle of ended) for (const id of handle.slots) releaseSlot(id, s.status)
        break
      }
    }
    check()
  }

  // Wind down: every source releases, every live handle ends; then every batch has resolved once.
  for (const batch of batches) {
    batch.notifier.release()
    batch.released = true
  }
  check()
  while (handles.length > 0) {
    const handle = removeHandle(0)
    handle.event.end('delivered')
    for (const id of handle.slots) releaseSlot(id, 'delivered')
    check()
  }
  return batches
}

describe('finalization model', () => {
  it('every batch resolves exactly once, only after its last handle ended, with the folded status', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.array(step, { minLength: 10, maxLength: 120, size: 'max' }),
        async (batchCount, steps) => {
          const batches = run(batchCount, steps)
          // Let the observables deliver: each must have emitted exactly once.
          await new Promise((resolve) => setImmediate(resolve))
          expect(batches.map((b) => b.emitted)).toEqual(batches.map(() => 1))
        },
      ),
      { numRuns: 300, verbose: 1 },
    )
  })
})
