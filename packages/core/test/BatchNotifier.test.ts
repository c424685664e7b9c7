import {
  BatchNotifier,
  type BatchResolvedListener,
  EventArray,
  FinalizationError,
  LogEvent,
} from '@ackline/core'
import { firstValueFrom, toArray } from 'rxjs'
import { validate, version } from 'uuid'
import { describe, expect, it, vi } from 'vitest'

const events = (n: number) => Array.from({ length: n }, (_, i) => new LogEvent({ i }, { sourceId: 'src' }))

describe('BatchNotifier', () => {
  it('sends_notification: resolves delivered once every event of the batch ended', async () => {
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
    const batch = events(3)
    for (const event of batch) notifier.attach(event)
    notifier.release()
    batch[0]!.end('delivered')
    batch[1]!.end('delivered')
    expect(receiver.status).toBeUndefined()
    batch[2]!.end('delivered')
    expect(receiver.status).toBe('delivered')
    expect(await receiver).toBe('delivered')
  })

  it('takes null options (untyped code) as none, as LogEvent.end and EventArray.fromRecords do', () => {
    const { notifier, receiver } = BatchNotifier.create(null as never)
    notifier.release()
    expect(receiver.status).toBe('delivered')
  })

  it('waits for the source to release its own reference', () => {
    const { notifier, receiver } = BatchNotifier.create()
    const [event] = events(1)
    notifier.attach(event!)
    event!.end('delivered')
    expect(receiver.isResolved).toBe(false)
    notifier.release()
    expect(receiver.status).toBe('delivered')
  })

  it('an empty batch resolves delivered on release', () => {
    const { notifier, receiver } = BatchNotifier.create()
    notifier.release()
    expect(receiver.status).toBe('delivered')
  })

  it('releasing twice is harmless and notifies once', async () => {
    const { notifier, receiver } = BatchNotifier.create()
    const all = firstValueFrom(receiver.asObservable().pipe(toArray()))
    notifier.release()
    notifier.release()
    expect(await all).toEqual(['delivered'])
  })

  it('attaching after release throws, naming the source and the batch', () => {
    const { notifier } = BatchNotifier.create({ sourceId: 'http-in' })
    notifier.release()
    const attach = () => notifier.attach(new LogEvent({}))
    expect(attach).toThrow(FinalizationError)
    expect(attach).toThrow(/http-in/)
    expect(attach).toThrow(notifier.id)
  })

  it('multi_event_batch: the worst status of any event wins', () => {
    const { notifier, receiver } = BatchNotifier.create()
    const batch = EventArray.from(events(4)).attach(notifier)
    const [a, b, c, d] = batch.events
    a!.end('delivered')
    b!.end('rejected')
    c!.end('errored')
    d!.end()
    expect(receiver.status).toBe('rejected')
  })

  it('an event that ends without any status counts as delivered', () => {
    const { notifier, receiver } = BatchNotifier.create()
    EventArray.from(events(2)).attach(notifier).end()
    expect(receiver.status).toBe('delivered')
  })

  it('carries a UUID v7 id, also on its receiver', () => {
    const { notifier, receiver } = BatchNotifier.create()
    expect(validate(notifier.id)).toBe(true)
    expect(version(notifier.id)).toBe(7)
    expect(receiver.batchId).toBe(notifier.id)
  })

  it('ids sort by creation order, whichever id is read first, and stay the same once read', () => {
    // Many batches within a few milliseconds: the counter within a millisecond keeps the order.
    const notifiers = Array.from({ length: 5000 }, () => BatchNotifier.create().notifier)
    const ids = [...notifiers].reverse().map((notifier) => notifier.id)
    ids.reverse()
    expect(new Set(ids).size).toBe(ids.length)
    expect(ids.every((id, i) => i === 0 || ids[i - 1]! < id)).toBe(true)
    expect(notifiers.map((notifier) => notifier.id)).toEqual(ids)
    for (const notifier of notifiers) notifier.release()
  })

  it('open stamps the id with the time its creator passes, and ids still never go backwards', () => {
    const msOf = (id: string): number => Number.parseInt(id.replaceAll('-', '').slice(0, 12), 16)
    const later = Date.now() + 50 // a little ahead, so that it is surely past the last stamp
    const a = BatchNotifier.open('src', false, later)
    expect(msOf(a.id)).toBe(later)
    // A clock that stepped back (or a caller that read it earlier): the id borrows the last stamp's
    // millisecond and counts on, so it still sorts after the earlier one.
    const b = BatchNotifier.open('src', false, later - 5_000)
    expect(msOf(b.id)).toBe(later)
    expect(a.id < b.id).toBe(true)
    // The time it was opened stays the clock reading passed: latency is measured from it.
    expect(a.receiver.openedAt).toBe(later)
    expect(b.receiver.openedAt).toBe(later - 5_000)
    expect(b.id).toBe(b.receiver.batchId) // the same id on every read
    // Not a time in milliseconds: the clock is read instead.
    const others = [Number.NaN, 1.5, -1, 2 ** 48, Date.now() * 1000].map((now) =>
      BatchNotifier.open('src', false, now),
    )
    for (const notifier of others) {
      // The clock's millisecond, or `later`'s while the clock is still behind it; never the value passed.
      expect(msOf(notifier.id)).toBeGreaterThanOrEqual(later)
      expect(msOf(notifier.id)).toBeLessThanOrEqual(Math.max(later, Date.now()))
    }
    expect([b, ...others].every((n, i, all) => i === 0 || all[i - 1]!.id < n.id)).toBe(true)
    for (const notifier of [a, b, ...others]) notifier.release()
  })

  it('openedAt keeps times far from the process start exactly (a clock set years ahead or back)', () => {
    for (const now of [Date.now() + 3 * 365 * 86_400_000, 86_400_000]) {
      const notifier = BatchNotifier.open('src', false, now)
      expect(notifier.receiver.openedAt).toBe(now)
      notifier.release()
    }
  })

  it('onResolved refuses a listener it could not call, at once rather than when the batch resolves', () => {
    // Called at the resolution, inside someone else's end, it threw an uncaught exception.
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
    for (const listener of [undefined, null, {}, { batchResolved: 'no' }, 'f']) {
      expect(() => receiver.onResolved(listener as never)).toThrow(
        /^onResolved: the listener must be a function or have a batchResolved method, got /,
      )
    }
    const told: string[] = []
    receiver.onResolved((status) => told.push(status))
    notifier.release()
    expect(told).toEqual(['delivered'])
  })

  it('hasListener tells whether a listener will be told, until the batch resolves', () => {
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
    const mine = { batchResolved: () => {} }
    const other = { batchResolved: () => {} }
    expect(receiver.hasListener(mine)).toBe(false)
    receiver.onResolved(mine)
    expect(receiver.hasListener(mine)).toBe(true)
    expect(receiver.hasListener(other)).toBe(false)
    receiver.onResolved(() => {}) // a second listener: both are kept
    receiver.onResolved(other)
    expect(receiver.hasListener(mine) && receiver.hasListener(other)).toBe(true)
    notifier.release()
    expect(receiver.hasListener(mine)).toBe(false) // told, and forgotten
  })

  it("a listener object is told the clock reading, one for all the batches one array's end resolves", () => {
    let clock = 1_000
    const reads = vi.spyOn(Date, 'now').mockImplementation(() => ++clock)
    try {
      const told: [string, number][] = []
      const names = new Map<object, string>()
      const listener: BatchResolvedListener = {
        batchResolved: (_status, receiver, now) => {
          told.push([names.get(receiver)!, now])
        },
      }
      const batch = (sourceId: string, size: number) => {
        const notifier = BatchNotifier.open(sourceId, false, 0)
        names.set(notifier.receiver, sourceId)
        notifier.receiver.onResolved(listener)
        return EventArray.fromRecords(
          Array.from({ length: size }, () => ({})),
          { sourceId, batch: notifier },
        )
      }
      const merged = [batch('a', 2), batch('b', 1), batch('c', 3)].flatMap((array) => array.events)
      const before = reads.mock.calls.length
      new EventArray(merged).end('delivered')
      expect(reads.mock.calls.length - before).toBe(1) // one reading for three batches
      expect(told).toEqual([
        ['a', clock],
        ['b', clock],
        ['c', clock],
      ])
      // The reading is forgotten once the call is over: the next end reads the clock again,
      // and so does an end outside an array's (one event's own handle).
      new EventArray(batch('d', 2).events).end('delivered')
      const dAt = clock
      const single = batch('e', 1).events[0]!
      single.end('delivered')
      expect(told.slice(3)).toEqual([
        ['d', dAt],
        ['e', clock],
      ])
      expect(clock).toBeGreaterThan(dAt)
    } finally {
      reads.mockRestore()
    }
  })

  it("the shared reading is never earlier than a batch's opening, and is forgotten after an end that throws", () => {
    let clock = 1_000
    const reads = vi.spyOn(Date, 'now').mockImplementation(() => ++clock)
    try {
      const told: { opened: number; now: number }[] = []
      const listener: BatchResolvedListener = {
        batchResolved: (_status, receiver, now) => {
          told.push({ opened: receiver.openedAt, now })
        },
      }
      const single = (openedAt = Date.now()): LogEvent => {
        const notifier = BatchNotifier.open('in', false, openedAt) // opened now, as the runtime does
        notifier.receiver.onResolved(listener)
        return EventArray.fromRecords([{}], { sourceId: 'in', ingestTimestamp: 0, batch: notifier })
          .events[0]!
      }
      // A function listener that, inside the end, opens a batch and ends it: that batch was opened
      // after the reading the end shares.
      const outer = BatchNotifier.open('in', false, Date.now())
      outer.receiver.onResolved(listener)
      outer.receiver.onResolved(() => single().end('delivered'))
      const event = EventArray.fromRecords([{}], { sourceId: 'in', ingestTimestamp: 0, batch: outer }).events
      new EventArray(event).end('delivered')
      expect(told).toHaveLength(2)
      for (const { opened, now } of told) expect(now).toBeGreaterThanOrEqual(opened)

      // An end that throws (an ended handle in the array) still forgets its reading.
      const ended = single()
      ended.end('delivered')
      const before = single()
      expect(() => new EventArray([before, ended]).end('delivered')).toThrow()
      const shared = told.at(-1)!.now
      single(0).end('delivered') // opened long before: a stale reading would not be read again
      expect(told.at(-1)!.now).toBeGreaterThan(shared)
    } finally {
      reads.mockRestore()
    }
  })

  it('tracking keeps one value for the runtime, beside listeners, the reason and the promise', async () => {
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
    const told: string[] = []
    receiver.onResolved((status) => told.push(`first ${status}`))
    expect(receiver.tracking).toBeUndefined()
    const kept = { decided: undefined }
    receiver.tracking = kept // made after a listener: the listener is kept
    receiver.onResolved((status) => told.push(`second ${status}`))
    const awaited = receiver.promise
    const event = new LogEvent({})
    notifier.attach(event)
    notifier.release()
    event.end('rejected', { reason: 'bad' })
    expect(told).toEqual(['first rejected', 'second rejected'])
    expect(await awaited).toBe('rejected')
    expect(receiver.reason).toBe('bad')
    expect(receiver.tracking).toBe(kept)
  })

  it('maybeCreate creates nothing when acknowledgements are off, and events then carry no finalizer', () => {
    expect(BatchNotifier.maybeCreate(false)).toBeUndefined()
    const event = new LogEvent({})
    expect(event.metadata.hasFinalizers).toBe(false)
    expect(event.metadata.finalizers.size).toBe(0)
    event.end('delivered')
    const created = BatchNotifier.maybeCreate(true, { sourceId: 'x' })
    expect(created?.notifier.sourceId).toBe('x')
  })

  it('the receiver observable emits the status once, then completes', async () => {
    const { notifier, receiver } = BatchNotifier.create()
    const [event] = events(1)
    notifier.attach(event!)
    notifier.release()
    const seen = firstValueFrom(receiver.asObservable().pipe(toArray()))
    event!.end('errored')
    expect(await seen).toEqual(['errored'])
    // Subscribing after resolution still sees the one status.
    expect(await firstValueFrom(receiver.asObservable().pipe(toArray()))).toEqual(['errored'])
  })

  it('onResolved calls each listener once, synchronously inside the resolving end, or at once when late', async () => {
    const { notifier, receiver } = BatchNotifier.create()
    const [a, b] = events(2)
    EventArray.of(a!, b!).attach(notifier)
    const seen: string[] = []
    receiver.onResolved((status) => seen.push(`first ${status}`))
    receiver.onResolved((status) => seen.push(`second ${status}`))
    a!.end('delivered')
    expect(seen).toEqual([])
    b!.end('rejected')
    expect(seen).toEqual(['first rejected', 'second rejected'])
    receiver.onResolved((status) => seen.push(`late ${status}`))
    expect(seen).toEqual(['first rejected', 'second rejected', 'late rejected'])
  })

  it('a listener that throws does not break the end that resolved the batch; the error surfaces later', async () => {
    const { notifier, receiver } = BatchNotifier.create()
    const [event] = events(1)
    notifier.attach(event!)
    notifier.release()
    const thrown = new Error('listener failed')
    const seen: string[] = []
    receiver.onResolved(() => {
      throw thrown
    })
    receiver.onResolved((status) => seen.push(status))
    // vitest's own handler would fail the test on the rethrown error: take it off while we wait.
    const listeners = process.listeners('uncaughtException')
    process.removeAllListeners('uncaughtException')
    const uncaught = new Promise<unknown>((resolve) => process.once('uncaughtException', resolve))
    try {
      expect(() => event!.end('delivered')).not.toThrow()
      expect(receiver.status).toBe('delivered')
      expect(seen).toEqual(['delivered'])
      expect(await uncaught).toBe(thrown)
    } finally {
      process.removeAllListeners('uncaughtException')
      for (const listener of listeners) process.on('uncaughtException', listener)
    }
  })

  it('an event may belong to several batches; each resolves with its own events', () => {
    const first = BatchNotifier.create()
    const second = BatchNotifier.create()
    const shared = new LogEvent({})
    const own = new LogEvent({})
    first.notifier.attach(shared)
    second.notifier.attach(shared)
    second.notifier.attach(own)
    first.notifier.release()
    second.notifier.release()
    own.end('rejected')
    expect(second.receiver.status).toBeUndefined()
    shared.end('delivered')
    expect(first.receiver.status).toBe('delivered')
    expect(second.receiver.status).toBe('rejected')
  })
})
