// Slot batches against notifier batches over programs that open many batches, close blocks early
// and fill them, so blocks (and their tokens, RFC 0009 A′) are reused mid-program: the same
// statuses, reasons and order of resolution, and each batch told to its owner once. (The property
// of SlotBatches.test.ts opens too few batches to reuse a block.)
import {
  BatchNotifier,
  type BatchStatus,
  type BatchStatusReceiver,
  type DeliveryStatus,
  EventArray,
  EventFinalizerGroups,
  type JsonObject,
  LeakDetector,
  LogEvent,
  SlotBatches,
  type SlotBatchOwner,
  type SlotBlock,
} from '@ackline/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'

interface Told {
  readonly id: string
  readonly status: BatchStatus
  readonly reason: unknown
  readonly via: 'slot' | 'state'
}

class Owner implements SlotBatchOwner {
  readonly told: Told[] = []
  readonly opened: number[] = []
  slotResolved(status: BatchStatus, openedAt: number, _now: number, block: SlotBlock, index: number): void {
    this.told.push({ id: block.batchId(index), status, reason: undefined, via: 'slot' })
    this.opened.push(openedAt)
  }
  batchResolved(status: BatchStatus, receiver: BatchStatusReceiver): void {
    this.told.push({ id: receiver.batchId, status, reason: receiver.reason, via: 'state' })
    this.opened.push(receiver.openedAt)
  }
}

type Op =
  | { t: 'open'; size: number }
  | { t: 'close' }
  | { t: 'end'; h: number; status: number; reason: boolean; authoritative: boolean }
  | { t: 'clone'; h: number }
  | { t: 'merge'; h: number; g: number }
  | { t: 'detachEnd'; h: number; status: number; reason: boolean }
  | { t: 'detachAttach'; h: number }
  | { t: 'finalizers'; h: number }
  | { t: 'update'; h: number; status: number }
  | { t: 'join'; h: number }
  | { t: 'run'; h: number; n: number; status: number }
  | { t: 'runAll'; status: number }

const STATUSES: (DeliveryStatus | undefined)[] = [undefined, 'delivered', 'errored', 'rejected']
const W = Number(process.env.R4_RARE ?? 1)
const h = fc.nat(200)
const st = fc.nat(3)
const op: fc.Arbitrary<Op> = fc.oneof(
  {
    arbitrary: fc.record({ t: fc.constant('open' as const), size: fc.integer({ min: 1, max: 3 }) }),
    weight: 14,
  },
  { arbitrary: fc.record({ t: fc.constant('close' as const) }), weight: 2 },
  {
    arbitrary: fc
      .record({
        t: fc.constant('end' as const),
        h,
        status: st,
        reason: fc.boolean(),
        authoritative: fc.boolean(),
      })
      .map((o) => (W === 0 ? { ...o, reason: false, authoritative: false } : o)),
    weight: 6,
  },
  { arbitrary: fc.record({ t: fc.constant('clone' as const), h }), weight: 3 },
  { arbitrary: fc.record({ t: fc.constant('merge' as const), h, g: h }), weight: W },
  {
    arbitrary: fc.record({ t: fc.constant('detachEnd' as const), h, status: st, reason: fc.boolean() }),
    weight: W,
  },
  { arbitrary: fc.record({ t: fc.constant('detachAttach' as const), h }), weight: W },
  { arbitrary: fc.record({ t: fc.constant('finalizers' as const), h }), weight: W },
  {
    arbitrary: fc.record({ t: fc.constant('update' as const), h, status: fc.integer({ min: 1, max: 3 }) }),
    weight: W,
  },
  { arbitrary: fc.record({ t: fc.constant('join' as const), h }), weight: W },
  {
    arbitrary: fc.record({
      t: fc.constant('run' as const),
      h,
      n: fc.integer({ min: 1, max: 12 }),
      status: st,
    }),
    weight: 8,
  },
  { arbitrary: fc.record({ t: fc.constant('runAll' as const), status: st }), weight: 1 },
)

type Outcome = [string, BatchStatus, unknown][]

const seen = new WeakMap<object, number>() // token -> gen last seen
const tokenOf = (event: LogEvent): unknown => (event as unknown as { _ref: unknown })._ref

function run(
  ops: Op[],
  make: (records: JsonObject[]) => EventArray,
  told: () => Outcome,
  onExtra: (name: string, receiver: BatchStatusReceiver) => void,
): Outcome {
  const handles: LogEvent[] = []
  let extras = 0
  let opened = 0
  const reasonFor = (k: number) => ({ componentId: 'sink', code: `C${k}`, message: `reason ${k}` })
  ops.forEach((o, k) => {
    if (o.t === 'open') {
      const b = opened++
      handles.push(...make(Array.from({ length: o.size }, (_, i) => ({ b, i }))).events)
      return
    }
    if (o.t === 'close') {
      LeakDetector.closeGroup()
      return
    }
    if (o.t === 'runAll') {
      new EventArray(handles.splice(0)).end(STATUSES[o.status])
      return
    }
    if (handles.length === 0) return
    const at = o.h % handles.length
    const event = handles[at]!
    switch (o.t) {
      case 'end': {
        const status = STATUSES[o.status]
        const options = {
          ...(o.reason ? { reason: reasonFor(k) } : {}),
          ...(o.authoritative ? { authoritative: true } : {}),
        }
        event.end(status, o.reason || o.authoritative ? options : undefined)
        handles.splice(at, 1)
        break
      }
      case 'clone':
        handles.push(event.clone())
        break
      case 'merge': {
        const from = o.g % handles.length
        if (from === at) break
        event.merge(handles[from]!)
        handles.splice(from, 1)
        break
      }
      case 'detachEnd': {
        const groups = EventFinalizerGroups.detach([event])
        groups.end(0, STATUSES[o.status], o.reason ? { reason: reasonFor(k) } : {})
        event.end()
        handles.splice(at, 1)
        break
      }
      case 'detachAttach': {
        const groups = EventFinalizerGroups.detach([event])
        const moved = new LogEvent({ moved: k })
        groups.attach(0, moved)
        event.end()
        handles[at] = moved
        break
      }
      case 'finalizers':
        event.metadata.finalizers.size
        break
      case 'update':
        event.metadata.finalizers.updateStatus(STATUSES[o.status]!)
        break
      case 'join': {
        const { notifier, receiver } = BatchNotifier.create({ sourceId: 'extra' })
        onExtra(`extra${extras++}`, receiver)
        notifier.attach(event)
        notifier.release()
        break
      }
      case 'run': {
        const list = handles.splice(at, Math.min(o.n, handles.length - at))
        new EventArray(list).end(STATUSES[o.status])
        break
      }
    }
  })
  new EventArray(handles.splice(0)).end('delivered')
  return told()
}

describe('SlotBatches over reused blocks and tokens', () => {
  it('resolves as batches with notifiers do while blocks fill, close early and are reused', () => {
    const via = { slot: 0, state: 0 }
    let reusedTokens = 0
    let programs = 0
    fc.assert(
      fc.property(fc.array(op, { minLength: 50, maxLength: 400 }), (ops) => {
        programs++
        const byNotifier: Outcome = []
        let made = 0
        const listen = (name: string, receiver: BatchStatusReceiver) =>
          receiver.onResolved((status) => byNotifier.push([name, status, receiver.reason]))
        const withNotifiers = run(
          ops,
          (records) => {
            const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
            listen(`b${made++}`, receiver)
            return EventArray.fromRecords(records, { sourceId: 'src', batch: notifier })
          },
          () => byNotifier,
          listen,
        )

        const owner = new Owner()
        const log: [string, BatchStatus, unknown][] = []
        const ownerTold = owner.told.push.bind(owner.told)
        owner.told.push = (...told: Told[]) => {
          for (const t of told) log.push([t.id, t.status, t.reason])
          return ownerTold(...told)
        }
        const slots = new SlotBatches('src', owner)
        let count = 0
        const asSlots = run(
          ops,
          (records) => {
            count++
            const array = slots.fromRecords(records, Date.now())
            const token = tokenOf(array.events[0]!) as { _block: SlotBlock & { gen: number } } & object
            const gen = token._block.gen
            const first = seen.get(token)
            if (first === undefined) seen.set(token, gen)
            else if (first !== gen) {
              reusedTokens++
              seen.set(token, gen)
            }
            return array
          },
          () => {
            const ids = owner.told.map((t) => t.id).sort()
            return log.map(([key, status, reason]) => [
              key.startsWith('extra') ? key : `b${ids.indexOf(key)}`,
              status,
              reason,
            ])
          },
          (name, receiver) => receiver.onResolved((status) => log.push([name, status, receiver.reason])),
        )
        expect(owner.told.length).toBe(count)
        expect(new Set(owner.told.map((t) => t.id)).size).toBe(count)
        expect(asSlots).toEqual(withNotifiers)
        for (const t of owner.told) via[t.via]++
      }),
      { numRuns: Number(process.env.ACKLINE_REUSE_RUNS ?? 100) },
    )
    // The programs did reuse blocks with their tokens, and took both ways of telling.
    expect(reusedTokens).toBeGreaterThan(50)
    expect(via.slot).toBeGreaterThan(0)
    expect(via.state).toBeGreaterThan(0)
    expect(programs).toBe(Number(process.env.ACKLINE_REUSE_RUNS ?? 100))
  })
})
