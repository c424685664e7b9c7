import {
  BatchNotifier,
  EventArray,
  FinalizationError,
  type JsonValue as Json,
  type JsonObject,
  LogEvent,
} from '@ackline/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'

const tracked = (n: number, sourceId = 'src') => {
  const { notifier, receiver } = BatchNotifier.create({ sourceId })
  const array = EventArray.from(Array.from({ length: n }, (_, i) => new LogEvent({ i }, { sourceId })))
  array.attach(notifier)
  return { events: array.events, receiver, notifier }
}

describe('LogEvent fields', () => {
  it('gets and sets values by dotted path, creating objects on the way', () => {
    const event = new LogEvent({ http: { status: 200 }, tags: ['a', 'b'] })
    expect(event.get('http.status')).toBe(200)
    expect(event.get('tags.1')).toBe('b')
    expect(event.get('http.missing.deeper')).toBeUndefined()
    event.set('http.headers.host', 'example')
    expect(event.fields).toEqual({ http: { status: 200, headers: { host: 'example' } }, tags: ['a', 'b'] })
    expect(event.remove('http.status')).toBe(200)
    expect(event.get('http.status')).toBeUndefined()
  })

  it('refuses to set through a value that is not a container, naming the path', () => {
    const event = new LogEvent({ message: 'text' }, { sourceId: 'in' })
    expect(() => event.set('message.length', 4)).toThrow(/message\.length.*in/)
  })

  it('keeps its metadata: source id and ingest timestamp', () => {
    const event = new LogEvent({}, { sourceId: 'in', ingestTimestamp: 1234 })
    expect(event.metadata.sourceId).toBe('in')
    expect(event.metadata.ingestTimestamp).toBe(1234)
    const now = new LogEvent({})
    expect(Math.abs(now.metadata.ingestTimestamp - Date.now())).toBeLessThan(60_000)
  })

  it('metadata is one object per handle, made on first read, showing the handle as it is now', () => {
    const { events, receiver } = tracked(1, 'in')
    const event = events[0]!
    const metadata = event.metadata
    expect(event.metadata).toBe(metadata) // the same object on every read
    expect(metadata.sourceId).toBe('in')
    expect(metadata.hasFinalizers).toBe(true)
    const copy = event.clone()
    expect(copy.metadata).not.toBe(metadata) // a handle of its own
    expect(copy.metadata.finalizers.batchIds).toEqual([receiver.batchId])
    expect(copy.metadata.ingestTimestamp).toBe(metadata.ingestTimestamp)
    event.end('delivered')
    expect(metadata.isEnded).toBe(true)
    expect(copy.metadata.isEnded).toBe(false)
    expect(() => metadata.finalizers).toThrow(FinalizationError)
    copy.end('delivered')
    expect(receiver.status).toBe('delivered')
  })

  it('metadata reads, spreads and serializes as its values, never as the event', () => {
    const event = new LogEvent({ secret: 'pw' }, { sourceId: 'in', ingestTimestamp: 1234 })
    expect(JSON.parse(JSON.stringify(event.metadata))).toEqual({ sourceId: 'in', ingestTimestamp: 1234 })
    expect({ ...event.metadata }).toEqual({ sourceId: 'in', ingestTimestamp: 1234 })
  })

  it('refuses a path that is no string (from untyped code) with a TypeError naming the call and the path, changing nothing', () => {
    const event = new LogEvent({ 0: 'zero', a: 1 }, { sourceId: 'in' })
    const path = (p: unknown) => p as string
    expect(() => event.get(path(0))).toThrow(
      /^LogEvent\.get: the path must be a dotted string such as "http\.status", got 0$/,
    )
    expect(() => event.get(path(undefined))).toThrow(/^LogEvent\.get: the path .* got undefined/)
    expect(() => event.set(path(['a']), 2)).toThrow(/^LogEvent\.set: the path .* got an array$/)
    expect(() => event.remove(path(null))).toThrow(/^LogEvent\.remove: the path .* got null/)
    expect(() => event.remove(path(null))).toThrow(TypeError)
    expect(event.fields).toEqual({ 0: 'zero', a: 1 })
  })

  it('sets a plain key on an object, refuses one on an array, and keeps __proto__ as data', () => {
    expect(() => new LogEvent([] as unknown as JsonObject).set('x', 1)).toThrow(TypeError)
    const array = new LogEvent([1, 2] as unknown as JsonObject)
    array.set('1', 5)
    expect(array.fields).toEqual([1, 5])
    const event = new LogEvent({ a: {} })
    event.set('__proto__', 'value')
    event.set('a.__proto__', 'nested')
    expect(event.get('__proto__')).toBe('value')
    expect(event.get('a.__proto__')).toBe('nested')
    expect(JSON.stringify(event)).toBe('{"a":{"__proto__":"nested"},"__proto__":"value"}')
    expect(Object.getPrototypeOf(event.fields)).toBe(Object.prototype)
  })

  it("copies a parsed __proto__ key on write as the data it is, never as the copy's prototype", () => {
    // What any HTTP body or stdin line can carry: JSON.parse makes `__proto__` an own key.
    const event = new LogEvent(JSON.parse('{"__proto__":{"admin":true},"user":"x","a":{"__proto__":[1]}}'))
    const copy = event.clone()
    copy.set('seen', true) // the clone's first write copies the fields
    for (const fields of [copy.fields, event.fields]) {
      expect(Object.getPrototypeOf(fields)).toBe(Object.prototype)
      expect('admin' in fields).toBe(false)
      expect(Object.hasOwn(fields, '__proto__')).toBe(true)
    }
    expect(Object.getPrototypeOf(copy.get('a'))).toBe(Object.prototype)
    expect(copy.get('__proto__')).toEqual({ admin: true })
    expect(copy.get('a.__proto__')).toEqual([1])
    expect(JSON.stringify(copy)).toBe(
      '{"__proto__":{"admin":true},"user":"x","a":{"__proto__":[1]},"seen":true}',
    )
    copy.end()
    event.end()
  })

  // Paths are read and set faster when they repeat (FieldPath keeps the last plain key): what came
  // before must never change what a path means.
  it('treats a path the same whatever paths were set or read before it', () => {
    const event = new LogEvent({})
    event.set('x', 1)
    event.set('__proto__', 1)
    event.set('__proto__', 2)
    event.set('x', 3)
    expect(event.get('x')).toBe(3)
    event.set(['__', 'proto', '__'].join(''), 4) // built at run time: not the constant's string
    event.set('n', {})
    event.set('n.m', 5)
    expect(event.get('n.m')).toBe(5)
    event.set('n', { m: 6 })
    expect(event.get('n.m')).toBe(6)
    expect(event.get('__proto__')).toBe(4)
    expect(event.get('x.y')).toBeUndefined()
    expect(JSON.stringify(event)).toBe('{"x":3,"__proto__":4,"n":{"m":6}}')
    expect(Object.getPrototypeOf(event.fields)).toBe(Object.prototype)
  })

  it('refuses an index no array can hold (2^32 - 1 and up), which JSON would never write', () => {
    // Set as a key of the array, such a value read back from the event but was left out by every
    // sink (JSON writes an array's elements only); 9007199254740993 even named another key.
    const event = new LogEvent({ tags: ['a'] }, { sourceId: 'in' })
    for (const index of ['4294967295', '9007199254740993', '1'.repeat(400)]) {
      expect(() => event.set(`tags.${index}`, 'x')).toThrow(new RegExp(`cannot set 'tags\\.${index}'.*in`))
      expect(() => event.set(`tags.${index}.deeper`, 'x')).toThrow(TypeError)
      expect(event.get(`tags.${index}`)).toBeUndefined()
    }
    expect(JSON.stringify(event)).toBe('{"tags":["a"]}')
    // The largest index an array holds is still one, and a leading zero names the same element.
    event.set('tags.01', 'b')
    expect(event.get('tags.1')).toBe('b')
    expect(JSON.stringify(event)).toBe('{"tags":["a","b"]}')
  })

  it('sets any path JSON keeps as set, through odd keys, and changes no prototype (property)', () => {
    const seed = Number(process.env.ACKLINE_SEED ?? Date.now() % 2 ** 31)
    console.log(`LogEvent path property seed: ${seed}`)
    const segment = fc.constantFrom(
      'a',
      'b',
      '0',
      '1',
      '01',
      '',
      '__proto__',
      'constructor',
      'prototype',
      'toString',
      'length',
      '4294967295',
      '99999999999999999999',
    )
    const path = fc.array(segment, { minLength: 1, maxLength: 4 }).map((segments) => segments.join('.'))
    const step = fc.oneof(
      fc.record({ op: fc.constant('set' as const), path, value: fc.jsonValue({ maxDepth: 2 }) }),
      fc.record({ op: fc.constant('remove' as const), path }),
    )
    const names = (o: object) => Object.getOwnPropertyNames(o).join()
    const objectNames = names(Object.prototype)
    const arrayNames = names(Array.prototype)
    /** Every container in `value` is a plain object or an array, as JSON.parse makes them. */
    const plain = (value: unknown): boolean => {
      if (typeof value !== 'object' || value === null) return true
      const proto = Object.getPrototypeOf(value)
      if (proto !== (Array.isArray(value) ? Array.prototype : Object.prototype)) return false
      return Object.values(value).every(plain)
    }
    fc.assert(
      fc.property(fc.array(step, { maxLength: 25 }), (steps) => {
        const event = new LogEvent({ a: [], b: ['x', { a: [] }], c: {} })
        for (const s of steps) {
          if (s.op === 'remove') {
            const before = JSON.stringify(event.get(s.path))
            expect(JSON.stringify(event.remove(s.path))).toBe(before)
          } else {
            // A copy: the event may later be written through it, and fast-check keeps its values.
            const value = JSON.parse(JSON.stringify(s.value)) as Json
            let set = true
            try {
              event.set(s.path, value)
            } catch (error) {
              expect(error).toBeInstanceOf(TypeError)
              set = false
            }
            if (set) {
              // What the event reads is what any sink writes: the path read back from its JSON.
              const written = JSON.stringify(value)
              expect(JSON.stringify(event.get(s.path))).toBe(written)
              const reread = new LogEvent(JSON.parse(JSON.stringify(event)) as JsonObject)
              expect(JSON.stringify(reread.get(s.path))).toBe(written)
            }
          }
          expect(plain(event.fields)).toBe(true)
          expect(names(Object.prototype)).toBe(objectNames)
          expect(names(Array.prototype)).toBe(arrayNames)
        }
      }),
      { seed, numRuns: 400 },
    )
  })

  // Whatever FieldPath remembers of the paths a program used, every key lands where it was set.
  it('sets every key where it was asked, however many paths the program uses', () => {
    const keys = Array.from({ length: 1100 }, (_, i) => `k${i}`)
    const one = new LogEvent({})
    const other = new LogEvent({})
    for (const [i, key] of keys.entries()) {
      one.set(key, i)
      other.set(key, -i)
    }
    expect(Object.keys(one.fields)).toEqual(keys)
    expect(keys.every((key, i) => one.get(key) === i && other.get(key) === -i)).toBe(true)
  })

  it('keeps every ingest timestamp exactly, near now or not, whole or not, through arrays and clones', () => {
    // Times near the process start are kept unboxed, others as they are: the value never changes.
    const base = Date.now()
    const times = [
      ...[base, base - 1, base + 86_400_000, 0, 1234.5, base + 0.25, -5, 2 ** 47, base - 2 ** 31],
      // Fractions a difference from the process's epoch would round.
      ...[0.1, 1.1, 1234.567, base + 0.1, base - 2 ** 31 + 0.3],
    ]
    for (const time of times) {
      const event = new LogEvent({}, { ingestTimestamp: time })
      expect(event.metadata.ingestTimestamp).toBe(time)
      expect(event.clone().metadata.ingestTimestamp).toBe(time)
      const [fromRecords] = EventArray.fromRecords([{}], { ingestTimestamp: time }).events
      expect(fromRecords!.metadata.ingestTimestamp).toBe(time)
    }
  })

  it('clone_events: a clone shares finalizers but its fields are copied on write', () => {
    const { events, receiver } = tracked(1)
    const original = events[0]!
    original.set('nested', { a: 1 })
    const copy = original.clone()
    copy.set('nested.a', 2)
    original.set('other', true)
    expect(original.get('nested.a')).toBe(1)
    expect(copy.get('nested.a')).toBe(2)
    expect(copy.get('other')).toBeUndefined()
    expect(copy.metadata.sourceId).toBe('src')
    original.end('delivered')
    expect(receiver.status).toBeUndefined()
    copy.end('errored')
    expect(receiver.status).toBe('errored')
  })

  it('serializes its fields with JSON.stringify', () => {
    expect(JSON.stringify(new LogEvent({ a: [1, null] }))).toBe('{"a":[1,null]}')
  })
})

describe('LogEvent ownership', () => {
  it('ending a handle twice throws ALREADY_ENDED naming the source', () => {
    const { events } = tracked(1, 'kafka-in')
    events[0]!.end('delivered')
    expect(() => events[0]!.end('delivered')).toThrow(
      expect.objectContaining({ code: 'ALREADY_ENDED', sourceId: 'kafka-in' }),
    )
  })

  it('ending twice throws even without finalizers', () => {
    const event = new LogEvent({}, { sourceId: 'stdin' })
    event.end()
    expect(() => event.end()).toThrow(FinalizationError)
  })

  it.each([
    ['get', (e: LogEvent) => e.get('a')],
    ['set', (e: LogEvent) => e.set('a', 1)],
    ['clone', (e: LogEvent) => e.clone()],
    ['merge', (e: LogEvent) => e.merge(new LogEvent({}))],
    ['read finalizers', (e: LogEvent) => e.metadata.finalizers],
    ['remove', (e: LogEvent) => e.remove('a')],
    ['read fields', (e: LogEvent) => e.fields],
    ['toJSON', (e: LogEvent) => JSON.stringify(e)],
    ['replaceFields', (e: LogEvent) => e.replaceFields({})],
    ['hasFinalizers', (e: LogEvent) => e.metadata.hasFinalizers],
  ])('using an ended handle (%s) throws USE_AFTER_END naming the source', (_name, use) => {
    const event = new LogEvent({ a: 0 }, { sourceId: 'files' })
    event.end()
    expect(() => use(event)).toThrow(expect.objectContaining({ code: 'USE_AFTER_END', sourceId: 'files' }))
  })

  it('a double end does not change the batch status', () => {
    const { events, receiver } = tracked(2)
    events[0]!.end('delivered')
    expect(() => events[0]!.end('rejected')).toThrow(FinalizationError)
    events[1]!.end('delivered')
    expect(receiver.status).toBe('delivered')
  })

  it('merging consumes the merged-away handle and moves its finalizers', () => {
    const a = tracked(1, 'a')
    const b = tracked(1, 'b')
    const into = a.events[0]!
    const from = b.events[0]!
    into.merge(from)
    expect(from.isEnded).toBe(true)
    expect(() => from.end()).toThrow(expect.objectContaining({ code: 'ALREADY_ENDED' }))
    expect(into.metadata.finalizers.size).toBe(2)
    expect(b.receiver.isResolved).toBe(false)
    into.end('rejected')
    expect(a.receiver.status).toBe('rejected')
    expect(b.receiver.status).toBe('rejected')
  })

  it('merging an event into itself throws SELF_MERGE', () => {
    const event = new LogEvent({})
    expect(() => event.merge(event)).toThrow(expect.objectContaining({ code: 'SELF_MERGE' }))
  })

  it('refuses to merge what is no event (fields, null) with a TypeError naming merge, leaving the event as it was', () => {
    const { events, receiver } = tracked(1)
    const into = events[0]!
    const other = (value: unknown) => value as LogEvent
    expect(() => into.merge(other({ message: 'fields, not an event' }))).toThrow(
      /^LogEvent\.merge: 'other' must be a LogEvent, got an object$/,
    )
    expect(() => into.merge(other(null))).toThrow(/^LogEvent\.merge: 'other' must be a LogEvent, got null$/)
    expect(() => into.merge(other(undefined))).toThrow(TypeError)
    expect(into.metadata.finalizers.size).toBe(1)
    into.end('delivered')
    expect(receiver.status).toBe('delivered')
  })

  it('a finalizer set once handed out never changes, and a handle consumed by a merge shows it', () => {
    const a = tracked(1, 'a')
    const b = tracked(1, 'b')
    const into = a.events[0]!
    const handedOut = into.metadata.finalizers
    const other = b.events[0]!
    const otherMetadata = other.metadata
    into.merge(other)
    expect(handedOut.batchIds).toEqual([a.receiver.batchId]) // unchanged by the merge
    expect(into.metadata.finalizers.batchIds).toEqual([a.receiver.batchId, b.receiver.batchId])
    expect(otherMetadata.isEnded).toBe(true)
    expect(() => otherMetadata.finalizers).toThrow(
      expect.objectContaining({ code: 'USE_AFTER_END', sourceId: 'b' }),
    )
    into.end('delivered')
    expect([a.receiver.status, b.receiver.status]).toEqual(['delivered', 'delivered'])
  })

  it('an event without finalizers takes over the finalizers of what is merged into it', () => {
    const { events, receiver } = tracked(1)
    const summary = new LogEvent({ count: 1 })
    summary.merge(events[0]!)
    expect(summary.metadata.hasFinalizers).toBe(true)
    summary.end('errored')
    expect(receiver.status).toBe('errored')
  })
})

describe('LogEvent isLocal (the mark runtimes keep of who owns a handle)', () => {
  it('is set on an event made with new LogEvent and on every clone, not on one a source made from records', () => {
    const made = new LogEvent({ n: 1 })
    expect(made.isLocal).toBe(true)
    const [read] = EventArray.fromRecords([{ n: 2 }], { sourceId: 'src' }).events
    expect(read!.isLocal).toBe(false)
    const copy = read!.clone()
    expect(copy.isLocal).toBe(true)
    expect(read!.isLocal).toBe(false) // cloning does not change the original's mark
  })

  it('markPassedOn clears it and markKept sets it, each idempotent', () => {
    const event = new LogEvent({ n: 1 })
    event.markPassedOn()
    event.markPassedOn()
    expect(event.isLocal).toBe(false)
    event.markKept()
    event.markKept()
    expect(event.isLocal).toBe(true)
  })

  it('is independent of copy on write: marking a clone never lets a write reach the fields it shares', () => {
    const original = new LogEvent({ n: 1 })
    const copy = original.clone()
    copy.markPassedOn()
    original.markPassedOn()
    copy.markKept()
    copy.set('n', 2)
    original.set('m', 3)
    expect(copy.fields).toEqual({ n: 2 })
    expect(original.fields).toEqual({ n: 1, m: 3 })
    expect(copy.isLocal).toBe(true)
    expect(original.isLocal).toBe(false)
  })

  it('isLocalTo: a handle kept for one holder is not the own of another; made or passed on, as isLocal says', () => {
    const event = new LogEvent({ n: 1 })
    expect([event.isLocalTo(1), event.isLocalTo(2)]).toEqual([true, true]) // made by whoever holds it
    event.markPassedOn()
    expect(event.isLocalTo(1)).toBe(false)
    event.markKept(2)
    expect([event.isLocal, event.isLocalTo(1), event.isLocalTo(2)]).toEqual([true, false, true])
    const copy = event.clone() // shares the fields: marking either must keep copy on write
    event.markKept(0x07ffffff) // the largest holder
    expect([event.isLocalTo(2), event.isLocalTo(0x07ffffff)]).toEqual([false, true])
    event.set('m', 3)
    copy.markPassedOn()
    copy.markKept(3)
    copy.set('n', 2)
    expect(copy.fields).toEqual({ n: 2 })
    expect(event.fields).toEqual({ n: 1, m: 3 })
    expect([copy.isLocalTo(1), copy.isLocalTo(3)]).toEqual([false, true])
    event.markPassedOn()
    expect([event.isLocal, event.isLocalTo(0x07ffffff)]).toEqual([false, false])
  })

  it('isSent: set for a whole array by EventArray.markSent, kept by every later mark, never by a clone', () => {
    const a = new LogEvent({ n: 1 })
    const b = new LogEvent({ n: 2 })
    const shared = b.clone() // b's fields are shared: the marks must keep copy on write
    expect(EventArray.of(a, b).markSent()).toBe(-1)
    expect([a.isSent, b.isSent, a.isLocal, b.isLocal]).toEqual([true, true, false, false])
    b.markKept(0x07ffffff) // a holder at its largest does not reach the bits below it
    expect([b.isSent, b.isLocalTo(0x07ffffff), b.isLocalTo(1)]).toEqual([true, true, false])
    b.markPassedOn()
    expect([b.isSent, b.isLocal]).toEqual([true, false])
    b.set('n', 3)
    expect(shared.fields).toEqual({ n: 2 })
    const copy = a.clone()
    expect([copy.isSent, copy.isLocal, a.isSent]).toEqual([false, true, true])
    expect(EventArray.of(copy).markSent()).toBe(-1) // a clone is a handle of its own
  })

  it('meetAsInput: true once per pass for a handle that is not local, false for a local one; the marks overwrite it', () => {
    const [a, b] = EventArray.fromRecords([{ n: 1 }, { n: 2 }]).events as [LogEvent, LogEvent]
    const shared = a.clone() // a's fields are shared: the pass number must keep copy on write
    expect([a.meetAsInput(1), b.meetAsInput(1), a.meetAsInput(1)]).toEqual([true, true, false])
    expect([a.meetAsInput(2), a.meetAsInput(0x07ffffff), a.meetAsInput(0x07ffffff)]).toEqual([
      true,
      true,
      false,
    ])
    // A number at its largest does not reach the bits below it, nor makes the handle local.
    expect([a.isLocal, a.isLocalTo(0x07ffffff), a.isSent]).toEqual([false, false, false])
    a.set('n', 3)
    expect(shared.fields).toEqual({ n: 1 })
    expect(shared.meetAsInput(3)).toBe(false) // a clone is local: never an input a runtime gave
    a.markKept(5)
    expect([a.meetAsInput(5), a.isLocalTo(5)]).toEqual([false, true]) // held: local, not a pass
    a.markPassedOn()
    expect([a.meetAsInput(0x07ffffff), a.isLocal]).toEqual([true, false])
    const sent = new LogEvent({ n: 4 })
    expect(EventArray.of(sent).markSent()).toBe(-1)
    expect([sent.meetAsInput(7), sent.isSent, sent.meetAsInput(7)]).toEqual([true, true, false])
    expect(EventArray.of(sent).markSent()).toBe(0) // still sent: the pass number keeps the bit
  })

  it('EventArray.markSent refuses an array with a handle sent before, twice in it, or ended: its index, nothing marked', () => {
    const sent = new LogEvent({ n: 0 })
    expect(EventArray.of(sent).markSent()).toBe(-1)
    const fresh = () => [new LogEvent({ n: 1 }), new LogEvent({ n: 2 })] as const
    const [a, b] = fresh()
    expect(new EventArray([a, b, sent]).markSent()).toBe(2)
    const [c, d] = fresh()
    expect(new EventArray([c, d, c]).markSent()).toBe(2)
    const [e, f] = fresh()
    f.end()
    expect(new EventArray([e, f]).markSent()).toBe(1)
    // From untyped code, an element that is no event: its index, not a throw leaving `e` marked.
    expect(new EventArray([e, null, { n: 3 }] as unknown as LogEvent[]).markSent()).toBe(1)
    expect(new EventArray([e, 'text'] as unknown as LogEvent[]).markSent()).toBe(1)
    for (const event of [a, b, c, d, e]) expect([event.isSent, event.isLocal]).toEqual([false, true])
    expect(new EventArray([a, b, c, d, e]).markSent()).toBe(-1) // refused, they may still be sent
  })

  it('replaceFields keeps the mark', () => {
    const event = new LogEvent({ n: 1 })
    event.replaceFields({ n: 2 })
    expect(event.isLocal).toBe(true)
    event.markPassedOn()
    event.replaceFields({ n: 3 })
    expect(event.isLocal).toBe(false)
  })
})
