import { BatchNotifier, EventArray, EventFinalizerGroups, LogEvent } from '@ackline/core'
import { describe, expect, it } from 'vitest'

const batch = (n: number) => {
  const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
  const array = EventArray.from(Array.from({ length: n }, (_, i) => new LogEvent({ i }, { sourceId: 'src' })))
  array.attach(notifier)
  return { array, receiver }
}

describe('EventFinalizerGroups', () => {
  it('refuses to attach a group to what is no event (the record, null), naming the call, and keeps the group', () => {
    const { array, receiver } = batch(1)
    const groups = EventFinalizerGroups.detach(array)
    array.events[0]!.end()
    expect(() => groups.attach(0, { i: 0 } as never)).toThrow(
      /^EventFinalizerGroups\.attach: the event must be a LogEvent, got an object$/,
    )
    expect(() => groups.attachAll(null as never)).toThrow(
      /^EventFinalizerGroups\.attachAll: the events must be an array of LogEvent, got null$/,
    )
    expect(groups.isConsumed(0)).toBe(false)
    const event = new LogEvent({ i: 0 })
    groups.attach(0, event)
    event.end('delivered')
    expect(receiver.status).toBe('delivered')
  })

  it('detaches one group per event and re-attaches each to its own event', () => {
    const first = batch(1)
    const second = batch(1)
    const array = EventArray.of(first.array.events[0]!, second.array.events[0]!)
    const groups = EventFinalizerGroups.detach(array)
    expect(groups.size).toBe(2)
    for (const event of array) {
      expect(event.metadata.hasFinalizers).toBe(false)
      event.end()
    }
    // Nothing resolves while the groups are stored.
    expect(first.receiver.isResolved).toBe(false)
    const restored = EventArray.of(new LogEvent({ i: 0 }), new LogEvent({ i: 0 }))
    groups.attachAll(restored)
    restored.events[0]!.end('delivered')
    expect(first.receiver.status).toBe('delivered')
    expect(second.receiver.isResolved).toBe(false)
    restored.events[1]!.end('rejected')
    expect(second.receiver.status).toBe('rejected')
  })

  it('detaching an array with an ended event throws and gives the events before it their finalizers back', () => {
    const { array, receiver } = batch(3)
    array.events[1]!.end('delivered')
    expect(() => EventFinalizerGroups.detach(array)).toThrow(
      expect.objectContaining({ code: 'USE_AFTER_END' }),
    )
    expect(array.events[0]!.metadata.finalizers.size).toBe(1)
    array.events[0]!.end('errored')
    array.events[2]!.end('delivered')
    expect(receiver.status).toBe('errored')
  })

  it('attaching to an ended event throws and leaves the group to attach elsewhere', () => {
    const { array, receiver } = batch(1)
    const groups = EventFinalizerGroups.detach(array)
    array.end()
    const ended = new LogEvent({})
    ended.end()
    expect(() => groups.attach(0, ended)).toThrow(expect.objectContaining({ code: 'USE_AFTER_END' }))
    expect(groups.isConsumed(0)).toBe(false)
    const live = new LogEvent({})
    groups.attach(0, live)
    live.end('delivered')
    expect(receiver.status).toBe('delivered')
  })

  it('ends groups directly with a status (what a buffer does on a durable write)', () => {
    const { array, receiver } = batch(3)
    const groups = EventFinalizerGroups.detach(array)
    array.end()
    groups.end(0, 'delivered')
    expect(groups.remaining).toBe(2)
    groups.endAll('errored')
    expect(receiver.status).toBe('errored')
  })

  it('takes null options (from untyped code) as none, as LogEvent.end does', () => {
    const { array, receiver } = batch(3)
    const groups = EventFinalizerGroups.detach(array)
    array.end()
    groups.end(0, 'delivered', null as never)
    expect(groups.remaining).toBe(2)
    groups.endAll('errored', null as never)
    expect(groups.remaining).toBe(0)
    expect(receiver.status).toBe('errored')
  })

  it('consuming a group twice throws GROUP_CONSUMED naming the source', () => {
    const { array } = batch(1)
    const groups = EventFinalizerGroups.detach(array)
    groups.end(0)
    expect(groups.isConsumed(0)).toBe(true)
    expect(() => groups.attach(0, new LogEvent({}))).toThrow(
      expect.objectContaining({ code: 'GROUP_CONSUMED', sourceId: 'src' }),
    )
  })

  it('refuses an index that is not a whole number, instead of silently consuming nothing', () => {
    const { array, receiver } = batch(1)
    const groups = EventFinalizerGroups.detach(array)
    array.end()
    for (const index of [0.5, Number.NaN, -1, 1]) {
      expect(() => groups.end(index, 'delivered')).toThrow(RangeError)
      expect(() => groups.attach(index, new LogEvent({}))).toThrow(RangeError)
    }
    expect(groups.remaining).toBe(1)
    expect(receiver.status).toBeUndefined()
    groups.end(0, 'delivered')
    expect(receiver.status).toBe('delivered')
  })

  it('refuses to attach to a different number of events', () => {
    const { array } = batch(2)
    const groups = EventFinalizerGroups.detach(array)
    expect(() => groups.attachAll([new LogEvent({})])).toThrow(RangeError)
    groups.endAll()
  })

  it('keeps clones apart: a detached group holds only its own handle', () => {
    const { array, receiver } = batch(1)
    const clone = array.events[0]!.clone()
    const groups = EventFinalizerGroups.detach(array)
    groups.end(0, 'delivered')
    expect(receiver.isResolved).toBe(false)
    clone.end('errored')
    expect(receiver.status).toBe('errored')
  })
})
