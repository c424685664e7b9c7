// Programs on the events of batches, run twice: on batches with notifiers and on batches kept as
// slots (RFC 0009); the property tests of `SlotBatches` require the same outcome from both.
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

/** What a runtime owning slot batches is told of one batch. */
export interface Told {
  readonly id: string
  readonly status: BatchStatus
  readonly reason: unknown
  readonly via: 'slot' | 'state'
}

/** Records what a runtime owning slot batches is told, in order. */
export class Owner implements SlotBatchOwner {
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

/** One step of a program. `open`, `close` and `runAll` come only in programs that reuse blocks. */
export type Op =
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

export const STATUSES: (DeliveryStatus | undefined)[] = [undefined, 'delivered', 'errored', 'rejected']

/**
 * The steps of a program. With `reuse`, a program also opens batches as it goes (`open`), closes
 * the blocks being filled (`close`, as the leak detector's timer does) and ends every handle at
 * once (`runAll`), so that blocks fill, close early and are reused, with their tokens, mid-program.
 */
export function programOp(reuse: boolean): fc.Arbitrary<Op> {
  const h = fc.nat(reuse ? 200 : 40)
  const st = fc.nat(3)
  return fc.oneof(
    ...(reuse
      ? [
          {
            arbitrary: fc.record({ t: fc.constant('open' as const), size: fc.integer({ min: 1, max: 3 }) }),
            weight: 14,
          },
          { arbitrary: fc.record({ t: fc.constant('close' as const) }), weight: 2 },
          { arbitrary: fc.record({ t: fc.constant('runAll' as const), status: st }), weight: 1 },
        ]
      : []),
    {
      arbitrary: fc.record({
        t: fc.constant('end' as const),
        h,
        status: st,
        reason: fc.boolean(),
        authoritative: fc.boolean(),
      }),
      weight: 6,
    },
    { arbitrary: fc.record({ t: fc.constant('clone' as const), h }), weight: 3 },
    { arbitrary: fc.record({ t: fc.constant('merge' as const), h, g: h }), weight: reuse ? 1 : 2 },
    {
      arbitrary: fc.record({ t: fc.constant('detachEnd' as const), h, status: st, reason: fc.boolean() }),
      weight: 1,
    },
    { arbitrary: fc.record({ t: fc.constant('detachAttach' as const), h }), weight: 1 },
    { arbitrary: fc.record({ t: fc.constant('finalizers' as const), h }), weight: 1 },
    {
      arbitrary: fc.record({ t: fc.constant('update' as const), h, status: fc.integer({ min: 1, max: 3 }) }),
      weight: 1,
    },
    { arbitrary: fc.record({ t: fc.constant('join' as const), h }), weight: 1 },
    {
      arbitrary: fc.record({
        t: fc.constant('run' as const),
        h,
        n: fc.integer({ min: 1, max: reuse ? 12 : 6 }),
        status: st,
      }),
      weight: reuse ? 8 : 4,
    },
  )
}

/** What became of a program's batches: (batch number, status, reason) in the order they resolved. */
export type Outcome = [string, BatchStatus, unknown][]

/**
 * Runs `ops` on events of `sizes.length` batches made by `make` (and of those its `open` steps
 * make), then ends every handle left, `delivered`, in runs. `join` adds a handle to one more
 * batch, made with a notifier in both worlds (`extra<n>`).
 */
function run(
  sizes: readonly number[],
  ops: readonly Op[],
  make: (records: JsonObject[]) => EventArray,
  told: () => Outcome,
  onExtra: (name: string, receiver: BatchStatusReceiver) => void,
): Outcome {
  const handles: LogEvent[] = []
  let opened = 0
  const open = (size: number): void => {
    const b = opened++
    handles.push(...make(Array.from({ length: size }, (_, i) => ({ b, i }))).events)
  }
  for (const size of sizes) open(size)
  let extras = 0
  const reasonFor = (k: number) => ({ componentId: 'sink', code: `C${k}`, message: `reason ${k}` })
  ops.forEach((o, k) => {
    if (o.t === 'open') {
      open(o.size)
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
        event.end() // the handle itself now carries nothing
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

/** A program run both ways. */
export interface Compared {
  /** Each batch's status and reason, as its receiver resolved, on batches with notifiers. */
  readonly withNotifiers: Outcome
  /** The same, as the owner of slot batches (and the extra batches' receivers) heard it. */
  readonly asSlots: Outcome
  /** The owner of the slot batches. */
  readonly owner: Owner
  /** How many slot batches the program made. */
  readonly made: number
}

/**
 * Runs the program twice: on batches with notifiers, and as slot batches of one source. `onSlots`
 * sees every slot batch as it is made. A slot batch is named by the rank of its id (ids sort by
 * creation), a notifier batch by its number.
 */
export function compare(
  sizes: readonly number[],
  ops: readonly Op[],
  onSlots: (array: EventArray) => void = () => {},
): Compared {
  const byNotifier: Outcome = []
  let numbered = 0
  const listen = (name: string, receiver: BatchStatusReceiver) =>
    receiver.onResolved((status) => byNotifier.push([name, status, receiver.reason]))
  const withNotifiers = run(
    sizes,
    ops,
    (records) => {
      const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
      listen(`b${numbered++}`, receiver)
      return EventArray.fromRecords(records, { sourceId: 'src', batch: notifier })
    },
    () => byNotifier,
    listen,
  )
  // As slots: the owner's reports and the extra batches' in one log, in order.
  const owner = new Owner()
  const log: Outcome = []
  const ownerTold = owner.told.push.bind(owner.told)
  owner.told.push = (...told: Told[]) => {
    for (const t of told) log.push([t.id, t.status, t.reason])
    return ownerTold(...told)
  }
  const slots = new SlotBatches('src', owner)
  let made = 0
  const asSlots = run(
    sizes,
    ops,
    (records) => {
      made++
      const array = slots.fromRecords(records, Date.now())
      onSlots(array)
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
  return { withNotifiers, asSlots, owner, made }
}
