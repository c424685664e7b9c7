import { BatchNotifier, EventArray, EventFinalizerGroups, FinalizationError, LogEvent } from '@ackline/core'
import { describe, expect, it } from 'vitest'

const batchOf = (n: number) => {
  const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
  const array = EventArray.fromRecords(
    Array.from({ length: n }, (_, i) => ({ i })),
    { sourceId: 'src', batch: notifier },
  )
  return { array, receiver, events: array.events }
}

describe('the reason a batch is not delivered', () => {
  it('a delivered batch has no reason, even when an end offered one', () => {
    const { events, receiver } = batchOf(2)
    events[0]!.end('delivered', { reason: 'ignored' })
    events[1]!.end('delivered')
    expect(receiver.status).toBe('delivered')
    expect(receiver.reason).toBeUndefined()
  })

  it('keeps the reason of the first end that made the batch errored', () => {
    const { events, receiver } = batchOf(3)
    events[0]!.end('delivered')
    events[1]!.end('errored', { reason: 'first' })
    events[2]!.end('errored', { reason: 'second' })
    expect(receiver.status).toBe('errored')
    expect(receiver.reason).toBe('first')
  })

  it('a rejection after an error explains the rejected status with its own reason', () => {
    const { events, receiver } = batchOf(3)
    events[0]!.end('errored', { reason: 'network' })
    events[1]!.end('rejected', { reason: 'poison' })
    events[2]!.end('rejected', { reason: 'later' })
    expect(receiver.status).toBe('rejected')
    expect(receiver.reason).toBe('poison')
  })

  it('a status raised without a reason is not explained by the reason of a lower one', () => {
    const { events, receiver } = batchOf(2)
    events[0]!.end('errored', { reason: 'network' })
    events[1]!.end('rejected')
    expect(receiver.status).toBe('rejected')
    expect(receiver.reason).toBeUndefined()
  })

  it('a lower status ended with a reason does not explain a status raised without one', () => {
    const { events, receiver } = batchOf(3)
    events[0]!.end('rejected')
    events[1]!.end('errored', { reason: 'network' })
    events[2]!.end('delivered')
    expect(receiver.status).toBe('rejected')
    expect(receiver.reason).toBeUndefined()
  })

  it('a lower status ended with a reason leaves the reason of the higher one as it was', () => {
    const { array, receiver } = batchOf(3)
    const [first, second, third] = array.events
    first!.end('rejected', { reason: 'poison' })
    EventArray.of(second!, third!).end('errored', { reason: 'network' })
    expect(receiver.status).toBe('rejected')
    expect(receiver.reason).toBe('poison')
  })

  it('a later end at the same status explains it when the first one gave no reason', () => {
    const { events, receiver } = batchOf(2)
    events[0]!.end('errored')
    events[1]!.end('errored', { reason: 'explained' })
    expect(receiver.reason).toBe('explained')
  })

  it('an array ended with a reason explains the batch, also authoritatively', () => {
    const plain = batchOf(3)
    plain.array.end('rejected', { reason: 'bad' })
    expect(plain.receiver.status).toBe('rejected')
    expect(plain.receiver.reason).toBe('bad')
    const authoritative = batchOf(2)
    const copy = authoritative.array.clone()
    authoritative.array.end('errored', { authoritative: true, reason: 'sink down' })
    copy.end('rejected', { reason: 'ignored: recorded already' })
    expect(authoritative.receiver.status).toBe('errored')
    expect(authoritative.receiver.reason).toBe('sink down')
  })

  it('finalizer groups ended with a reason explain their batches', () => {
    const { events, receiver } = batchOf(2)
    const groups = EventFinalizerGroups.detach(events)
    for (const event of events) event.end()
    groups.endAll('rejected', { reason: 'buffer full' })
    expect(receiver.status).toBe('rejected')
    expect(receiver.reason).toBe('buffer full')
  })
})

describe('an array end that throws', () => {
  it('gives its reason to no batch, and ends nothing, when one of its handles had ended already', () => {
    // The reason was offered to every batch before any end: a batch whose event the call never
    // reached (it threw at the ended handle first) showed it for a later end of its own.
    const a = BatchNotifier.open('a')
    const b = BatchNotifier.open('b')
    const [a0, done] = EventArray.fromRecords([{ n: 0 }, { n: 1 }], { sourceId: 'a', batch: a }).events
    const [b0] = EventArray.fromRecords([{ n: 2 }], { sourceId: 'b', batch: b }).events
    done!.end('delivered')
    expect(() =>
      EventArray.of(a0!, done!, b0!).end('errored', { reason: 'from the call that threw' }),
    ).toThrow(expect.objectContaining({ name: 'FinalizationError', code: 'ALREADY_ENDED' }))
    expect(a0!.isEnded).toBe(false)
    a0!.end('delivered')
    b0!.end('errored')
    expect(a.receiver.status).toBe('delivered')
    expect(b.receiver.status).toBe('errored')
    expect(b.receiver.reason).toBeUndefined()
  })
})

describe('statuses from untyped code', () => {
  const bad: unknown[] = ['deliverd', 'DELIVERED', 'dropped', 'recorded', null, 1, {}]

  it.each(bad)('ending an event with %j throws INVALID_STATUS and leaves the handle live', (status) => {
    const { events, receiver } = batchOf(1)
    const event = events[0]!
    expect(() => event.end(status as 'delivered')).toThrow(FinalizationError)
    try {
      event.end(status as 'delivered')
    } catch (error) {
      expect((error as FinalizationError).code).toBe('INVALID_STATUS')
    }
    expect(event.isEnded).toBe(false)
    expect(receiver.isResolved).toBe(false)
    event.end('errored')
    expect(receiver.status).toBe('errored')
  })

  it.each(bad)('ending an array with %j throws and ends nothing', (status) => {
    const { array, receiver } = batchOf(3)
    expect(() => array.end(status as 'delivered')).toThrow(/unknown status/)
    expect(array.events.every((e) => !e.isEnded)).toBe(true)
    expect(receiver.isResolved).toBe(false)
    array.end('delivered')
    expect(receiver.status).toBe('delivered')
  })

  it('an unknown status passed to a finalizer update throws and changes nothing', () => {
    const { events, receiver } = batchOf(1)
    const finalizers = events[0]!.metadata.finalizers
    expect(() => finalizers.updateStatus('fine' as 'delivered')).toThrow(/INVALID_STATUS|unknown status/)
    events[0]!.end('delivered')
    expect(receiver.status).toBe('delivered')
  })

  it('an unknown status given to a finalizer group throws and leaves the group unconsumed', () => {
    const { events, receiver } = batchOf(1)
    const groups = EventFinalizerGroups.detach(events)
    events[0]!.end()
    expect(() => groups.end(0, 'ok' as 'delivered')).toThrow(FinalizationError)
    expect(groups.isConsumed(0)).toBe(false)
    groups.end(0, 'rejected')
    expect(receiver.status).toBe('rejected')
  })

  it('a standalone event rejects an unknown status too', () => {
    const event = new LogEvent({})
    expect(() => event.end(undefined)).not.toThrow()
    expect(() => new LogEvent({}).end('x' as 'delivered')).toThrow(FinalizationError)
  })
})
