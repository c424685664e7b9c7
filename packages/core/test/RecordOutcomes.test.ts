import { BatchNotifier, EventArray, FinalizationError, RecordOutcomes } from '@ackline/core'
import { describe, expect, it } from 'vitest'

const batchOf = (n: number, outcomes = true) => {
  const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src', outcomes })
  const array = EventArray.fromRecords(
    Array.from({ length: n }, (_, i) => ({ i })),
    { sourceId: 'src', batch: notifier },
  )
  return { events: array.events, receiver }
}

describe('per-record outcomes', () => {
  it('reports each record in send order, with the batch as the worst of them', () => {
    const { events, receiver } = batchOf(4)
    events[0]!.end('delivered')
    events[1]!.end('errored')
    events[2]!.end('rejected')
    expect(receiver.outcomes).toBeUndefined()
    events[3]!.end()
    expect(receiver.status).toBe('rejected')
    expect(receiver.outcomes?.toArray()).toEqual(['delivered', 'errored', 'rejected', 'dropped'])
    expect(receiver.outcomes?.indexesOf('errored')).toEqual([1])
    expect(receiver.outcomes?.isFinished).toBe(false)
  })

  it('keeps nothing for a batch that did not ask', () => {
    const { events, receiver } = batchOf(2, false)
    expect(receiver.keepsOutcomes).toBe(false)
    new EventArray(events).end('delivered')
    expect(receiver.status).toBe('delivered')
    expect(receiver.outcomes).toBeUndefined()
    expect(receiver.outcomesNow()).toBeUndefined()
  })

  it('clone_events: a record expanded into several events takes the worst of them', () => {
    const { events, receiver } = batchOf(2)
    const copy = events[0]!.clone()
    events[0]!.end('delivered')
    copy.end('errored')
    events[1]!.clone().end()
    events[1]!.end('delivered')
    expect(receiver.outcomes?.toArray()).toEqual(['errored', 'delivered'])
  })

  it('multi_event_batch: a merged event folds into every record it carries', () => {
    const { events, receiver } = batchOf(3)
    events[0]!.merge(events[1]!)
    events[0]!.end('rejected')
    events[2]!.end('delivered')
    expect(receiver.outcomes?.toArray()).toEqual(['rejected', 'rejected', 'delivered'])
  })

  it('an authoritative sink fixes the records it recorded', () => {
    const { events, receiver } = batchOf(2)
    const copies = events.map((e) => e.clone())
    new EventArray(events).end('delivered', { authoritative: true })
    new EventArray(copies).end('errored')
    expect(receiver.status).toBe('delivered')
    expect(receiver.outcomes?.toArray()).toEqual(['delivered', 'delivered'])
  })

  it('whole runs ended at once fold into each record', () => {
    const { events, receiver } = batchOf(3)
    new EventArray(events.slice(0, 2)).end('errored')
    new EventArray(events.slice(2)).end('delivered')
    expect(receiver.outcomes?.toArray()).toEqual(['errored', 'errored', 'delivered'])
  })

  it('outcomesNow: recorded and rejected records stand, every other one counts as errored', () => {
    const { events, receiver } = batchOf(4)
    events[0]!.end('delivered', { authoritative: true })
    events[1]!.end('rejected')
    events[2]!.end('delivered') // not authoritative: another copy might still say otherwise
    expect(receiver.outcomesNow()?.toArray()).toEqual(['delivered', 'rejected', 'errored', 'errored'])
    events[3]!.end('delivered')
    expect(receiver.outcomesNow()?.toArray()).toEqual(['delivered', 'rejected', 'delivered', 'delivered'])
  })

  it('grows as events are attached one by one', () => {
    const { notifier, receiver } = BatchNotifier.create({ outcomes: true })
    const array = EventArray.fromRecords(
      Array.from({ length: 40 }, (_, i) => ({ i })),
      { batch: notifier, release: false },
    )
    const more = EventArray.fromRecords([{ i: 40 }], { batch: notifier })
    array.end('delivered')
    more.end('errored')
    expect(receiver.outcomes?.length).toBe(41)
    expect(receiver.outcomes?.indexesOf('errored')).toEqual([40])
  })
})

describe('RecordOutcomes', () => {
  it('all() makes a uniform batch; get() refuses an index outside it', () => {
    const all = RecordOutcomes.all('delivered', 3)
    expect([...all]).toEqual(['delivered', 'delivered', 'delivered'])
    expect(all.count('delivered')).toBe(3)
    expect(() => all.get(3)).toThrow(RangeError)
  })

  it('refuses a length that is no count, or outcomes that are no array, naming the call (not a raw typed-array error)', () => {
    expect(() => RecordOutcomes.all('delivered', -1)).toThrow(
      /^RecordOutcomes\.all: the length must be a whole number of at least 0, got -1$/,
    )
    // A fraction was truncated: a batch of 2.5 records read as 2.
    expect(() => RecordOutcomes.all('delivered', 2.5)).toThrow(RangeError)
    expect(() => RecordOutcomes.of(null as never)).toThrow(
      /^RecordOutcomes\.of: the outcomes must be an array, got null$/,
    )
    expect(RecordOutcomes.all('errored', 0).length).toBe(0)
  })

  it('refuses an outcome that is not one (from untyped code) instead of reading it as dropped', () => {
    expect(() => RecordOutcomes.all('bogus' as never, 2)).toThrow(FinalizationError)
    expect(() => RecordOutcomes.all('recorded' as never, 2)).toThrow(/unknown status 'recorded'/)
    expect(() => RecordOutcomes.all('delivered', 2).indexesOf('deliverd' as never)).toThrow(FinalizationError)
  })
})
