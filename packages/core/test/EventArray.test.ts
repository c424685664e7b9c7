import {
  BatchNotifier,
  type BatchStatus,
  EventArray,
  FinalizationError,
  LogEvent,
  SlotBatches,
} from '@ackline/core'
import { describe, expect, it } from 'vitest'

const events = (n: number) => Array.from({ length: n }, (_, i) => new LogEvent({ i }, { sourceId: 'src' }))

describe('EventArray', () => {
  it('attach puts every event in the batch and releases the source reference', () => {
    const { notifier, receiver } = BatchNotifier.create()
    const array = EventArray.from(events(3)).attach(notifier)
    expect(notifier.isReleased).toBe(true)
    expect(array.events.every((e) => e.metadata.finalizers.batchIds[0] === notifier.id)).toBe(true)
    array.events[0]!.end('delivered')
    array.events[1]!.end('delivered')
    expect(receiver.isResolved).toBe(false)
    array.events[2]!.end('errored')
    expect(receiver.status).toBe('errored')
  })

  it('fromRecords makes one event per record, already in the batch, and releases it', () => {
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
    const records = [{ n: 1 }, { n: 2 }]
    const array = EventArray.fromRecords(records, { sourceId: 'src', ingestTimestamp: 42, batch: notifier })
    expect(notifier.isReleased).toBe(true)
    expect(array.events.map((e) => e.get('n'))).toEqual([1, 2])
    expect(
      array.events.every((e) => e.metadata.sourceId === 'src' && e.metadata.ingestTimestamp === 42),
    ).toBe(true)
    expect(array.events.every((e) => e.metadata.finalizers.batchIds[0] === notifier.id)).toBe(true)
    array.events[0]!.end('delivered')
    expect(receiver.isResolved).toBe(false)
    array.events[1]!.end('rejected')
    expect(receiver.status).toBe('rejected')
  })

  it('fromRecords refuses records that are no array (a Set from untyped code), before it takes any slot', () => {
    // A Set has no length: it made an array holding one undefined, and a batch counting NaN events.
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
    expect(() =>
      EventArray.fromRecords(new Set([{ n: 1 }]) as never, { batch: notifier, release: false }),
    ).toThrow('EventArray.fromRecords: records must be an array, got a length of undefined')
    expect(() => EventArray.fromRecords({ length: 1.5 } as never)).toThrow(TypeError)
    const array = EventArray.fromRecords([{ n: 1 }], { batch: notifier })
    array.end('delivered')
    expect(receiver.status).toBe('delivered')
  })

  it('refuses events that are no array (a Set from untyped code), so no batch counts them as NaN', () => {
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
    const event = new LogEvent({ n: 1 })
    const make = () => new EventArray(new Set([event]) as never)
    expect(() => make().attach(notifier)).toThrow(/events must be an array, got a length of undefined/)
    expect(() => make().end('delivered')).toThrow(TypeError)
    expect(receiver.eventCount).toBe(0)
    EventArray.of(event).attach(notifier)
    event.end('delivered')
    expect(receiver.status).toBe('delivered')
  })

  it('refuses null or undefined events or records with a TypeError naming the call, not a raw null read', () => {
    expect(() => new EventArray(null as never)).toThrow(/^EventArray: events must be an array, got null$/)
    expect(() => EventArray.from(null as never)).toThrow(
      /^EventArray\.from: events must be an iterable of LogEvent, got null$/,
    )
    expect(() => EventArray.from(undefined as never)).toThrow(/^EventArray\.from: .* got undefined$/)
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
    expect(() => EventArray.fromRecords(undefined as never, { batch: notifier, release: false })).toThrow(
      /^EventArray\.fromRecords: records must be an array, got undefined$/,
    )
    expect(receiver.eventCount).toBe(0)
  })

  it('fromRecords without a batch makes events with no finalizer; with release: false the batch stays open', () => {
    const before = Date.now()
    const plain = EventArray.fromRecords([{ a: 1 }])
    expect(plain.events[0]!.metadata.hasFinalizers).toBe(false)
    expect(plain.events[0]!.metadata.ingestTimestamp).toBeGreaterThanOrEqual(before)
    plain.end('delivered')

    const { notifier, receiver } = BatchNotifier.create()
    const first = EventArray.fromRecords([{ a: 1 }], { batch: notifier, release: false })
    expect(notifier.isReleased).toBe(false)
    first.end('delivered')
    expect(receiver.isResolved).toBe(false)
    EventArray.fromRecords([{ a: 2 }], { batch: notifier }).end('errored')
    expect(receiver.status).toBe('errored')
    expect(() => EventArray.fromRecords([{ a: 3 }], { batch: notifier })).toThrow(FinalizationError)
  })

  it('attach with release: false lets the source add more events to the batch', () => {
    const { notifier, receiver } = BatchNotifier.create()
    const first = EventArray.from(events(1)).attach(notifier, { release: false })
    const second = EventArray.from(events(1)).attach(notifier)
    first.end('delivered')
    expect(receiver.isResolved).toBe(false)
    second.end('rejected')
    expect(receiver.status).toBe('rejected')
  })

  it('attach keeps the batches an event already belongs to', () => {
    const earlier = BatchNotifier.create()
    const later = BatchNotifier.create()
    const array = EventArray.from(events(2))
    array.attach(earlier.notifier)
    array.attach(later.notifier)
    expect(array.events[0]!.metadata.finalizers.size).toBe(2)
    array.end('errored')
    expect(earlier.receiver.status).toBe('errored')
    expect(later.receiver.status).toBe('errored')
  })

  it('attaching an array with an ended event throws before touching the batch', () => {
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
    const list = events(3)
    list[1]!.end()
    expect(() => EventArray.from(list).attach(notifier)).toThrow(FinalizationError)
    // No slot was added for the two live events: releasing resolves the empty batch at once.
    notifier.release()
    expect(receiver.status).toBe('delivered')
    list[0]!.end()
    list[2]!.end()
  })

  it('attaching after release throws and leaves the events without finalizers', () => {
    const { notifier } = BatchNotifier.create()
    notifier.release()
    const array = EventArray.from(events(2))
    expect(() => array.attach(notifier)).toThrow(expect.objectContaining({ code: 'NOTIFIER_RELEASED' }))
    expect(array.events.some((e) => e.metadata.hasFinalizers)).toBe(false)
  })

  it('attach given options it cannot read (null, from untyped code) throws before any event joins the batch', () => {
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
    const event = new LogEvent({ n: 1 })
    expect(() => EventArray.of(event).attach(notifier, null as never)).toThrow(TypeError)
    expect(receiver.eventCount).toBe(0)
    expect(event.metadata.hasFinalizers).toBe(false)
    notifier.release()
    expect(receiver.status).toBe('delivered')
  })

  it('clone of an array with an ended event throws and leaves no clone holding the batch', () => {
    const { notifier, receiver } = BatchNotifier.create()
    const array = EventArray.from(events(3)).attach(notifier)
    array.events[2]!.end('delivered')
    expect(() => array.clone()).toThrow(expect.objectContaining({ code: 'USE_AFTER_END' }))
    array.events[0]!.end('delivered')
    array.events[1]!.end('delivered')
    // The clones of the first two events, made before the throw, no longer keep it waiting.
    expect(receiver.status).toBe('delivered')
  })

  it('clone of an array of a slot batch with an ended event throws and leaves the batch to resolve', () => {
    const told: BatchStatus[] = []
    const slots = new SlotBatches('src', {
      slotResolved: (status) => told.push(status),
      batchResolved: (status) => told.push(status),
    })
    const array = slots.fromRecords([{ i: 0 }, { i: 1 }, { i: 2 }], Date.now())
    array.events[1]!.end('errored')
    expect(() => array.clone()).toThrow(expect.objectContaining({ code: 'USE_AFTER_END' }))
    array.events[0]!.end('delivered')
    array.events[2]!.end('delivered')
    expect(told).toEqual(['errored'])
  })

  it('end settles every event with one status, and twice throws', () => {
    const { notifier, receiver } = BatchNotifier.create()
    const array = EventArray.from(events(2)).attach(notifier)
    const copies = array.clone()
    array.end('delivered')
    expect(() => array.end('delivered')).toThrow(expect.objectContaining({ code: 'ALREADY_ENDED' }))
    copies.end('rejected', { authoritative: true })
    expect(receiver.status).toBe('rejected')
  })

  it('end over mixed batches settles each batch; an ended handle throws after those before it ended', () => {
    const first = BatchNotifier.create()
    const second = BatchNotifier.create()
    const a = EventArray.from(events(2)).attach(first.notifier)
    const b = EventArray.from(events(2)).attach(second.notifier)
    const loose = new LogEvent({})
    const ended = new LogEvent({}, { sourceId: 'src' })
    ended.end()
    const mixed = new EventArray([a.events[0]!, b.events[0]!, loose, a.events[1]!, ended, b.events[1]!])
    expect(() => mixed.end('errored')).toThrow(expect.objectContaining({ code: 'ALREADY_ENDED' }))
    expect(first.receiver.status).toBe('errored')
    expect(second.receiver.isResolved).toBe(false)
    expect(loose.isEnded).toBe(true)
    expect(b.events[1]!.isEnded).toBe(false)
    b.events[1]!.end('delivered')
    expect(second.receiver.status).toBe('errored')
  })

  it('end folds the status of a run of events of one batch once, and resolves it', () => {
    for (const status of ['delivered', 'errored', 'rejected'] as const) {
      const { notifier, receiver } = BatchNotifier.create()
      const array = EventArray.from(events(3)).attach(notifier)
      array.end(status)
      expect(receiver.status).toBe(status)
    }
    const { notifier, receiver } = BatchNotifier.create()
    const array = EventArray.from(events(4)).attach(notifier)
    const copies = array.clone()
    array.end('errored')
    expect(receiver.isResolved).toBe(false)
    copies.end()
    expect(receiver.status).toBe('errored')
  })

  it('end after an authoritative record ignores the recorded event, whole runs included', () => {
    const { notifier, receiver } = BatchNotifier.create()
    const array = EventArray.from(events(3)).attach(notifier)
    const copies = array.clone()
    copies.end('delivered', { authoritative: true })
    array.end('rejected')
    expect(receiver.status).toBe('delivered')
  })
})

describe('EventArray null options (untyped code)', () => {
  it('fromRecords, end and LogEvent.end take null options as none', async () => {
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'in' })
    const array = EventArray.fromRecords([{ n: 1 }, { n: 2 }, { n: 3 }], null as never)
    expect(array.events.map((event) => event.metadata.sourceId)).toEqual([undefined, undefined, undefined])
    array.attach(notifier)
    const [first, ...rest] = array.events
    first!.end('delivered', null as never)
    new EventArray(rest).end('delivered', null as never)
    expect(await receiver.status).toBe('delivered')
  })
})
