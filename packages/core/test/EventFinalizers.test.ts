import {
  BatchNotifier,
  EventArray,
  EventFinalizers,
  type EventStatus,
  FinalizationError,
  LogEvent,
  SlotBatches,
} from '@ackline/core'
import { describe, expect, it } from 'vitest'
import { Owner } from './support/slotPrograms.js'

const batch = (n: number, sourceId = 'src') => {
  const { notifier, receiver } = BatchNotifier.create({ sourceId })
  const array = EventArray.from(Array.from({ length: n }, (_, i) => new LogEvent({ i }, { sourceId })))
  array.attach(notifier)
  return { events: [...array.events], receiver, notifier }
}

describe('EventFinalizers', () => {
  it('is empty on an event without acknowledgements', () => {
    expect(new LogEvent({}).metadata.finalizers).toBe(EventFinalizers.EMPTY)
  })

  it('lists one finalizer per batch, with the status folded so far', () => {
    const { events, notifier } = batch(1)
    const event = events[0]!
    const copy = event.clone()
    copy.end('errored')
    const finalizers = [...event.metadata.finalizers]
    expect(finalizers).toHaveLength(1)
    expect(finalizers[0]!.batchId).toBe(notifier.id)
    expect(finalizers[0]!.sourceId).toBe('src')
    expect(finalizers[0]!.status).toBe('errored')
    event.end()
  })

  it('updateStatus folds into the status every copy shares without ending a handle', () => {
    const { events, receiver } = batch(1)
    const event = events[0]!
    const copy = event.clone()
    event.metadata.finalizers.updateStatus('rejected')
    event.end('delivered')
    expect(receiver.isResolved).toBe(false)
    copy.end()
    expect(receiver.status).toBe('rejected')
  })

  it('updateSources settles the batch status at once and ignores later updates from other copies', () => {
    const { events, receiver } = batch(1)
    const event = events[0]!
    const other = event.clone()
    event.metadata.finalizers.updateStatus('delivered')
    event.metadata.finalizers.updateSources()
    expect([...event.metadata.finalizers][0]!.status).toBe('recorded')
    event.end()
    other.end('rejected') // ignored: the event was recorded
    expect(receiver.status).toBe('delivered')
  })

  it('an authoritative end is updateStatus + updateSources + end', () => {
    const { events, receiver } = batch(2)
    const [a, b] = events
    const aCopy = a!.clone()
    a!.end('delivered', { authoritative: true })
    aCopy.end('errored') // ignored
    expect(receiver.isResolved).toBe(false) // never before every handle ended
    b!.end('delivered')
    expect(receiver.status).toBe('delivered')
  })

  it('an authoritative errored status is not hidden by a later delivered copy', () => {
    const { events, receiver } = batch(1)
    const copy = events[0]!.clone()
    events[0]!.end('errored', { authoritative: true })
    copy.end('delivered')
    expect(receiver.status).toBe('errored')
  })

  it('updating after the batch resolved throws USE_AFTER_END', () => {
    const { events, receiver } = batch(2)
    const finalizers = events[0]!.metadata.finalizers
    events[0]!.end()
    events[1]!.end()
    expect(receiver.status).toBe('delivered')
    expect(() => finalizers.updateStatus('errored')).toThrow(
      expect.objectContaining({ code: 'USE_AFTER_END' }),
    )
    expect(() => finalizers.updateSources()).toThrow(expect.objectContaining({ code: 'USE_AFTER_END' }))
  })

  it('a finalizer reads recorded once an authoritative sink recorded the event, the batch status before', () => {
    const { events } = batch(2)
    const [a, b] = events
    const copy = a!.clone()
    b!.end('errored')
    const finalizer = () => [...copy.metadata.finalizers][0]!
    expect(finalizer().status).toBe('errored')
    a!.end('delivered', { authoritative: true })
    expect(finalizer().status).toBe('recorded')
    copy.end()
  })
})

describe('merge', () => {
  it('a merged event carries the finalizers of events from many batches; each resolves when it ends', () => {
    const batches = [batch(2, 'a'), batch(1, 'b'), batch(3, 'c')]
    const all = batches.flatMap((b) => b.events)
    const merged = all.shift()!
    for (const event of all) merged.merge(event)
    expect(merged.metadata.finalizers.size).toBe(6)
    expect(new Set(merged.metadata.finalizers.batchIds).size).toBe(3)
    for (const b of batches) expect(b.receiver.isResolved).toBe(false)
    merged.end('errored')
    for (const b of batches) expect(b.receiver.status).toBe('errored')
  })

  it('merging a clone back into its original notifies once', async () => {
    const { events, receiver } = batch(1)
    const original = events[0]!
    const copy = original.clone()
    original.merge(copy)
    expect(original.metadata.finalizers.size).toBe(1)
    const statuses: string[] = []
    receiver.asObservable().subscribe((s) => statuses.push(s))
    original.end('delivered')
    expect(receiver.status).toBe('delivered')
    await receiver
    expect(statuses).toEqual(['delivered'])
  })

  it('the merged batch does not resolve while a clone of a merged-away event lives', () => {
    const { events, receiver } = batch(1)
    const into = new LogEvent({})
    const clone = events[0]!.clone()
    into.merge(events[0]!)
    into.end('delivered')
    expect(receiver.isResolved).toBe(false)
    clone.end('errored')
    expect(receiver.status).toBe('errored')
  })

  it('a set handed out or shared by a clone never changes when its event merges more', () => {
    const { events } = batch(4)
    const [a, b, c, d] = events as [LogEvent, LogEvent, LogEvent, LogEvent]
    a.merge(b)
    const seen = a.metadata.finalizers
    a.merge(c)
    expect(seen.size).toBe(2)
    expect(a.metadata.finalizers.size).toBe(3)
    const clone = a.clone()
    a.merge(d)
    expect(clone.metadata.finalizers.size).toBe(3)
    expect(a.metadata.finalizers.size).toBe(4)
    clone.end()
    a.end()
  })

  it('merging thousands of events keeps each pair once, and a duplicate pair still notifies once', () => {
    const { events, receiver } = batch(3000)
    const into = events[0]!
    const copies = events.slice(1, 1500).map((event) => event.clone())
    for (const event of events.slice(1)) into.merge(event)
    for (const copy of copies) into.merge(copy) // each pair is already there: given up at once
    expect(into.metadata.finalizers.size).toBe(3000)
    into.end('delivered')
    expect(receiver.status).toBe('delivered')
  })

  describe('LogEvent.forEachBatch', () => {
    type Seen = [unknown, string | undefined, EventStatus]
    const visited = (event: LogEvent): Seen[] => {
      const seen: Seen[] = []
      event.forEachBatch((receiver, sourceId, status) => seen.push([receiver, sourceId, status]))
      return seen
    }
    /** What the finalizers read, through a copy (reading them hands out a set), dropped after. */
    const viaFinalizers = (event: LogEvent): Seen[] => {
      const copy = event.clone()
      const seen: Seen[] = [...copy.metadata.finalizers].map((f) => [f.receiver, f.sourceId, f.status])
      copy.end()
      return seen
    }

    it('tells what the finalizers tell, batch by batch: one batch, a merged event, a recorded one', () => {
      const a = batch(2, 'a')
      const b = batch(1, 'b')
      const merged = a.events[0]!
      merged.merge(b.events[0]!)
      a.events[1]!.clone().end('errored')
      expect(visited(merged)).toEqual([
        [a.receiver, 'a', 'errored'],
        [b.receiver, 'b', 'delivered'],
      ])
      expect(visited(merged)).toEqual(viaFinalizers(merged))
      // An authoritative end of a copy records the event in both batches.
      merged.clone().end('rejected', { authoritative: true })
      expect(visited(merged).map(([, , status]) => status)).toEqual(['recorded', 'recorded'])
      for (const event of [merged, a.events[1]!]) event.end('delivered')
      expect(a.receiver.status).toBe('rejected')
    })

    it('reads a slot batch as its finalizers would, and the batch resolves as before', () => {
      const owner = new Owner()
      const slots = new SlotBatches('slot', owner)
      const array = slots.fromRecords([{ n: 0 }, { n: 1 }], Date.now())
      const [first, second] = array.events
      const seen = visited(first!)
      expect(seen).toHaveLength(1)
      expect(seen[0]!.slice(1)).toEqual(['slot', 'delivered'])
      expect(seen).toEqual(viaFinalizers(first!))
      first!.end('errored')
      expect(visited(second!)[0]![2]).toBe('errored')
      second!.end('delivered')
      expect(owner.told.map((t) => t.status)).toEqual(['errored'])
    })

    it('visits nothing without finalizers, and throws once the handle has ended', () => {
      expect(visited(new LogEvent({}))).toEqual([])
      const { events } = batch(1)
      events[0]!.end('delivered')
      expect(() => visited(events[0]!)).toThrow(FinalizationError)
    })

    it('keeps which events were recorded past 32 of them, and in slots added after the first record', () => {
      const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
      const first = EventArray.from(Array.from({ length: 40 }, (_, i) => new LogEvent({ i })))
      first.attach(notifier, { release: false })
      const events = [...first.events]
      for (const i of [0, 31, 32, 33]) events[i]!.clone().end('delivered', { authoritative: true })
      // Slots made after the first record: the record of slot 70 grows what keeps them.
      const later = EventArray.from(Array.from({ length: 40 }, (_, i) => new LogEvent({ i: 40 + i })))
      later.attach(notifier)
      events.push(...later.events)
      events[70]!.clone().end('delivered', { authoritative: true })
      const recorded = events.flatMap((event, i) => (visited(event)[0]![2] === 'recorded' ? [i] : []))
      expect(recorded).toEqual([0, 31, 32, 33, 70])
      // What recorded events report later is ignored; the others fold in.
      for (const [i, event] of events.entries()) event.end(i === 32 || i === 70 ? 'rejected' : 'delivered')
      expect(receiver.status).toBe('delivered')
    })
  })
})
