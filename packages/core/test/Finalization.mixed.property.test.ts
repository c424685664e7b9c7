// A model-based property over programs that mix batches with notifiers (some keeping per-record
// outcomes) and batches kept as slots (`SlotBatches`) in one run: events of either kind are
// cloned, merged across batches of both kinds, attached to more batches, detached into finalizer
// groups, updated, recorded, ended (alone, in arrays, authoritatively, with reasons). After every
// step each batch must be resolved exactly when the model says, once, with the model's status and
// reason; `forEachBatch` must tell each of an event's batches with what the model folded so far;
// a batch keeping outcomes must report the model's `outcomesNow` while in flight and its outcomes
// once resolved.
import {
  BatchNotifier,
  BatchStatus,
  type BatchStatusReceiver,
  type DeliveryStatus,
  EventArray,
  EventFinalizerGroups,
  EventStatus,
  LogEvent,
  SlotBatches,
} from '@ackline/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { Owner } from './support/slotPrograms.js'

type Status = DeliveryStatus | undefined
type Step =
  | { op: 'create' }
  | { op: 'slots'; count: number }
  | { op: 'records'; count: number; batch: number }
  | { op: 'attach'; handle: number; batch: number }
  | { op: 'release'; batch: number }
  | { op: 'clone'; handle: number }
  | { op: 'cloneArray'; handles: number[] }
  | { op: 'merge'; into: number; from: number }
  | { op: 'update'; handle: number; status: DeliveryStatus }
  | { op: 'record'; handle: number }
  | { op: 'visit'; handle: number }
  | { op: 'regroup'; handle: number }
  | { op: 'groupEnd'; handle: number; status: Status; authoritative: boolean; reason: boolean }
  | { op: 'end'; handle: number; status: Status; authoritative: boolean; reason: boolean }
  | { op: 'endArray'; handles: number[]; status: Status; authoritative: boolean; reason: boolean }

const status = fc.constantFrom<DeliveryStatus>('delivered', 'errored', 'rejected')
const optStatus = fc.option(status, { nil: undefined })
const index = fc.nat(9)
const handles = fc.array(index, { maxLength: 5 })
const ending = { status: optStatus, authoritative: fc.boolean(), reason: fc.boolean() }
const step: fc.Arbitrary<Step> = fc.oneof(
  { arbitrary: fc.constant({ op: 'create' as const }), weight: 1 },
  {
    arbitrary: fc.record({ op: fc.constant('slots' as const), count: fc.integer({ min: 1, max: 3 }) }),
    weight: 2,
  },
  {
    arbitrary: fc.record({
      op: fc.constant('records' as const),
      count: fc.integer({ min: 0, max: 3 }),
      batch: index,
    }),
    weight: 2,
  },
  { arbitrary: fc.record({ op: fc.constant('attach' as const), handle: index, batch: index }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('release' as const), batch: index }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('clone' as const), handle: index }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('cloneArray' as const), handles }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('merge' as const), into: index, from: index }), weight: 3 },
  { arbitrary: fc.record({ op: fc.constant('update' as const), handle: index, status }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('record' as const), handle: index }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('visit' as const), handle: index }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('regroup' as const), handle: index }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('groupEnd' as const), handle: index, ...ending }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('end' as const), handle: index, ...ending }), weight: 4 },
  { arbitrary: fc.record({ op: fc.constant('endArray' as const), handles, ...ending }), weight: 3 },
)

interface ModelSlot {
  batch: number
  count: number
  recorded: boolean
  /** What the record's copies reported until it was recorded. */
  outcome: EventStatus
}
interface ModelBatch {
  /** A notifier's receiver; a slot batch's id. */
  notifier: BatchNotifier | undefined
  receiver: BatchStatusReceiver | undefined
  id: string
  outcomes: boolean
  released: boolean
  /** Every report not ignored, folded as it came (what `forEachBatch` reads). */
  running: BatchStatus
  given: unknown
  reasonCode: BatchStatus | undefined
  told: number
}
interface ModelHandle {
  event: LogEvent
  slots: number[]
}

const rank = { delivered: 0, errored: 1, rejected: 2 } as const

function run(notifierBatches: number, steps: readonly Step[]): void {
  const slots: ModelSlot[] = []
  const batches: ModelBatch[] = []
  const live: ModelHandle[] = []
  const owner = new Owner()
  const source = new SlotBatches('slots', owner)
  const byId = new Map<string, number>()

  for (let b = 0; b < notifierBatches; b++) {
    const { notifier, receiver } = BatchNotifier.create({ sourceId: `n${b}`, outcomes: b % 2 === 0 })
    const model: ModelBatch = {
      notifier,
      receiver,
      id: receiver.batchId,
      outcomes: b % 2 === 0,
      released: false,
      running: 'delivered',
      given: undefined,
      reasonCode: undefined,
      told: 0,
    }
    receiver.onResolved(() => model.told++)
    byId.set(model.id, b)
    batches.push(model)
  }

  const notifierBatch = (i: number) => (i % notifierBatches) as number
  const pick = (i: number) => (live.length === 0 ? undefined : i % live.length)
  const distinct = (picks: number[]) => [...new Set(picks.map((i) => pick(i)).filter((h) => h !== undefined))]
  const newSlot = (batch: number) => {
    slots.push({ batch, count: 1, recorded: false, outcome: 'dropped' })
    return slots.length - 1
  }
  const explain = (ids: readonly number[], s: Status, reason: unknown) => {
    if (s === undefined || s === 'delivered' || reason === undefined) return
    for (const id of ids) {
      const slot = slots[id]!
      if (slot.recorded) continue
      const batch = batches[slot.batch]!
      if (rank[s] < rank[batch.running]) continue
      if (batch.reasonCode !== s) {
        batch.given = reason
        batch.reasonCode = s
      }
    }
  }
  const report = (id: number, s: DeliveryStatus) => {
    const slot = slots[id]!
    if (slot.recorded) return
    slot.outcome = EventStatus.update(slot.outcome, s)
    const batch = batches[slot.batch]!
    batch.running = BatchStatus.update(batch.running, s)
  }
  const endSlot = (id: number, s: Status, authoritative: boolean) => {
    if (s !== undefined) report(id, s)
    if (authoritative && s !== undefined) slots[id]!.recorded = true
    slots[id]!.count--
  }
  const resolved = (b: number) => batches[b]!.released && !slots.some((s) => s.batch === b && s.count > 0)

  const check = () => {
    const toldSlots = new Map<string, number>()
    for (const t of owner.told) toldSlots.set(t.id, (toldSlots.get(t.id) ?? 0) + 1)
    batches.forEach((batch, b) => {
      const done = resolved(b)
      const name = `batch ${b} (${batch.notifier === undefined ? 'slot' : 'notifier'})`
      if (batch.notifier === undefined) {
        expect(toldSlots.get(batch.id) ?? 0, `${name} told`).toBe(done ? 1 : 0)
        if (!done) return
        const told = owner.told.find((t) => t.id === batch.id)!
        expect(told.status, `${name} status`).toBe(batch.running)
        const reason =
          batch.reasonCode === batch.running && batch.running !== 'delivered' ? batch.given : undefined
        expect(told.reason, `${name} reason`).toBe(reason)
        return
      }
      const receiver = batch.receiver!
      expect(receiver.isResolved, `${name} resolved`).toBe(done)
      expect(batch.told, `${name} told`).toBe(done ? 1 : 0)
      const records = slots.filter((slot) => slot.batch === b)
      if (!done) {
        if (batch.outcomes) {
          const now = records.map((slot) =>
            slot.recorded || slot.outcome === 'rejected' ? slot.outcome : 'errored',
          )
          expect(receiver.outcomesNow()?.toArray(), `${name} outcomesNow`).toEqual(now)
        }
        return
      }
      expect(receiver.status, `${name} status`).toBe(batch.running)
      const reason =
        batch.reasonCode === batch.running && batch.running !== 'delivered' ? batch.given : undefined
      expect(receiver.reason, `${name} reason`).toBe(reason)
      if (batch.outcomes) {
        expect(receiver.outcomes?.toArray(), `${name} outcomes`).toEqual(records.map((slot) => slot.outcome))
      } else {
        expect(receiver.outcomes).toBeUndefined()
      }
    })
  }

  steps.forEach((s, k) => {
    const reason = 'reason' in s && s.reason ? `r${k}` : undefined
    switch (s.op) {
      case 'create':
        live.push({ event: new LogEvent({ k }), slots: [] })
        break
      case 'slots': {
        const array = source.fromRecords(
          Array.from({ length: s.count }, (_, i) => ({ k, i })),
          Date.now(),
        )
        const id = SlotBatches.idOf(source.lastIdMs, source.lastIdSeq)
        const b = batches.length
        batches.push({
          notifier: undefined,
          receiver: undefined,
          id,
          outcomes: false,
          released: true,
          running: 'delivered',
          given: undefined,
          reasonCode: undefined,
          told: 0,
        })
        byId.set(id, b)
        for (const event of array) live.push({ event, slots: [newSlot(b)] })
        break
      }
      case 'records': {
        const b = notifierBatch(s.batch)
        const batch = batches[b]!
        const make = () =>
          EventArray.fromRecords(
            Array.from({ length: s.count }, (_, i) => ({ k, i })),
            { batch: batch.notifier!, release: false },
          )
        if (batch.released) expect(make).toThrow(/released/)
        else for (const event of make()) live.push({ event, slots: [newSlot(b)] })
        break
      }
      case 'attach': {
        const h = pick(s.handle)
        if (h === undefined) break
        const b = notifierBatch(s.batch)
        const batch = batches[b]!
        if (batch.released) {
          expect(() => batch.notifier!.attach(live[h]!.event)).toThrow(/released/)
        } else {
          batch.notifier!.attach(live[h]!.event)
          live[h]!.slots.push(newSlot(b))
        }
        break
      }
      case 'release': {
        const b = notifierBatch(s.batch)
        batches[b]!.notifier!.release()
        batches[b]!.released = true
        break
      }
      case 'clone': {
        const h = pick(s.handle)
        if (h === undefined) break
        for (const id of live[h]!.slots) slots[id]!.count++
        live.push({ event: live[h]!.event.clone(), slots: [...live[h]!.slots] })
        break
      }
      case 'cloneArray': {
        const picked = distinct(s.handles)
        const copies = new EventArray(picked.map((h) => live[h]!.event)).clone()
        picked.forEach((h, i) => {
          for (const id of live[h]!.slots) slots[id]!.count++
          live.push({ event: copies.events[i]!, slots: [...live[h]!.slots] })
        })
        break
      }
      case 'merge': {
        const into = pick(s.into)
        const from = pick(s.from)
        if (into === undefined || from === undefined || into === from) break
        const target = live[into]!
        const merged = live[from]!
        target.event.merge(merged.event)
        for (const id of merged.slots) {
          if (target.slots.includes(id)) slots[id]!.count--
          else target.slots.push(id)
        }
        live.splice(from, 1)
        break
      }
      case 'update': {
        const h = pick(s.handle)
        if (h === undefined) break
        live[h]!.event.metadata.finalizers.updateStatus(s.status)
        for (const id of live[h]!.slots) report(id, s.status)
        break
      }
      case 'record': {
        const h = pick(s.handle)
        if (h === undefined) break
        live[h]!.event.metadata.finalizers.updateSources()
        for (const id of live[h]!.slots) slots[id]!.recorded = true
        break
      }
      case 'visit': {
        const h = pick(s.handle)
        if (h === undefined) break
        const seen: string[] = []
        live[h]!.event.forEachBatch((receiver, _sourceId, read) => {
          seen.push(`${byId.get(receiver.batchId)}:${read}`)
        })
        const expected = live[h]!.slots.map((id) => {
          const slot = slots[id]!
          return `${slot.batch}:${slot.recorded ? 'recorded' : batches[slot.batch]!.running}`
        })
        expect(seen.sort()).toEqual(expected.sort())
        break
      }
      case 'regroup': {
        const h = pick(s.handle)
        if (h === undefined) break
        const old = live[h]!
        const groups = EventFinalizerGroups.detach([old.event])
        old.event.end()
        const fresh = new LogEvent({ k })
        groups.attach(0, fresh)
        live[h] = { event: fresh, slots: old.slots }
        break
      }
      case 'groupEnd': {
        const h = pick(s.handle)
        if (h === undefined) break
        const [handle] = live.splice(h, 1)
        const groups = EventFinalizerGroups.detach([handle!.event])
        groups.end(0, s.status, { authoritative: s.authoritative, reason })
        handle!.event.end()
        explain(handle!.slots, s.status, reason)
        for (const id of handle!.slots) endSlot(id, s.status, s.authoritative)
        break
      }
      case 'end': {
        const h = pick(s.handle)
        if (h === undefined) break
        const [handle] = live.splice(h, 1)
        handle!.event.end(s.status, { authoritative: s.authoritative, reason })
        explain(handle!.slots, s.status, reason)
        for (const id of handle!.slots) endSlot(id, s.status, s.authoritative)
        break
      }
      case 'endArray': {
        const picked = distinct(s.handles).sort((a, b) => b - a)
        const ended = picked.map((h) => live.splice(h, 1)[0]!)
        const options =
          s.authoritative || reason !== undefined ? { authoritative: s.authoritative, reason } : undefined
        new EventArray(ended.map((h) => h.event)).end(s.status, options)
        explain(
          ended.flatMap((h) => h.slots),
          s.status,
          reason,
        )
        for (const handle of ended) for (const id of handle.slots) endSlot(id, s.status, s.authoritative)
        break
      }
    }
    check()
  })

  for (const batch of batches) {
    batch.notifier?.release()
    batch.released = true
  }
  check()
  while (live.length > 0) {
    const handle = live.shift()!
    handle.event.end('delivered')
    for (const id of handle.slots) endSlot(id, 'delivered', false)
    check()
  }
}

describe('finalization model over notifier and slot batches together', () => {
  it('resolves every batch once, when the model does, with its status, reason and outcomes', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 3 }),
        fc.array(step, { minLength: 5, maxLength: 80, size: 'max' }),
        (notifierBatches, steps) => run(notifierBatches, steps),
      ),
      { numRuns: 400, verbose: 1 },
    )
  })
})
