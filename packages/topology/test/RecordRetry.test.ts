import { type JsonObject, type RecordOutcome, RecordOutcomes } from '@ackline/core'
import { type BatchReceipt, RecordRetry, type SourceContext, TopologyBuilder } from '@ackline/topology'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { testSink } from './support/TestComponents.js'

/** A context whose n-th send answers with `script[n](records)`, recording what was sent. */
const scripted = (script: ((records: JsonObject[]) => RecordOutcome[])[]) => {
  const sent: JsonObject[][] = []
  const controller = new AbortController()
  const context: SourceContext = {
    id: 'src',
    acknowledgements: true,
    signal: controller.signal,
    async send(records) {
      const list = [...records]
      sent.push(list)
      const outcomes = script[sent.length - 1]!(list)
      const status = outcomes.includes('rejected')
        ? 'rejected'
        : outcomes.includes('errored')
          ? 'errored'
          : 'delivered'
      return {
        batchId: `b${sent.length}`,
        status: Promise.resolve(status),
        failure: undefined,
        outcomes: Promise.resolve(RecordOutcomes.of(outcomes)),
      } satisfies BatchReceipt
    },
    sendEvents: () => Promise.resolve(),
  }
  return { context, sent, controller }
}

const recs = (...ns: number[]) => ns.map((n) => ({ n }))
const byN = (f: (n: number) => RecordOutcome) => (records: JsonObject[]) =>
  records.map((r) => f(r.n as number))

afterEach(() => {
  vi.useRealTimers()
})

describe('RecordRetry.send', () => {
  it('re-sends only the errored records, after a back-off, until they are delivered', async () => {
    vi.useFakeTimers()
    const { context, sent } = scripted([
      byN((n) => (n === 2 || n === 4 ? 'errored' : 'delivered')),
      byN((n) => (n === 4 ? 'errored' : 'delivered')),
      byN(() => 'delivered'),
    ])
    const done = RecordRetry.send(context, recs(1, 2, 3, 4), { initialBackoffMs: 100, jitter: 0 })
    await vi.advanceTimersByTimeAsync(99)
    expect(sent).toHaveLength(1)
    await vi.advanceTimersByTimeAsync(1)
    expect(sent[1]).toEqual(recs(2, 4))
    await vi.advanceTimersByTimeAsync(199)
    expect(sent).toHaveLength(2)
    await vi.advanceTimersByTimeAsync(1)
    const result = await done
    expect(sent[2]).toEqual(recs(4))
    expect(result).toEqual({
      outcomes: ['delivered', 'delivered', 'delivered', 'delivered'],
      attempts: 3,
      decision: undefined,
    })
  })

  it('reports rejected records once and never re-sends them', async () => {
    vi.useFakeTimers()
    const onRejected = vi.fn()
    const { context, sent } = scripted([
      byN((n) => (n === 1 ? 'rejected' : n === 2 ? 'errored' : 'delivered')),
      byN(() => 'rejected'),
    ])
    const done = RecordRetry.send(context, recs(1, 2, 3), { jitter: 0, onRejected })
    await vi.runAllTimersAsync()
    const result = await done
    expect(sent).toEqual([recs(1, 2, 3), recs(2)])
    expect(onRejected).toHaveBeenCalledTimes(1)
    expect(onRejected).toHaveBeenCalledWith([
      { index: 0, record: { n: 1 } },
      { index: 1, record: { n: 2 } },
    ])
    expect(result.outcomes).toEqual(['rejected', 'rejected', 'delivered'])
  })

  it('hands what is still errored after the last attempt to the decision, and returns it', async () => {
    vi.useFakeTimers()
    const onExhausted = vi.fn(() => 'dead_letter' as const)
    const { context, sent } = scripted([byN(() => 'errored'), byN(() => 'errored'), byN(() => 'errored')])
    const done = RecordRetry.send(context, recs(1, 2), { attempts: 3, jitter: 0, onExhausted })
    await vi.runAllTimersAsync()
    const result = await done
    expect(sent).toHaveLength(3)
    expect(onExhausted).toHaveBeenCalledWith(
      [
        { index: 0, record: { n: 1 } },
        { index: 1, record: { n: 2 } },
      ],
      'attempts',
    )
    expect(result.decision).toBe('dead_letter')
    expect(result.outcomes).toEqual(['errored', 'errored'])
  })

  it('defaults the decision to nack, and stops waiting when the signal aborts', async () => {
    vi.useFakeTimers()
    const { context, sent, controller } = scripted([byN(() => 'errored'), byN(() => 'delivered')])
    const onExhausted = vi.fn(() => 'nack' as const)
    const done = RecordRetry.send(context, recs(1), { initialBackoffMs: 10_000, onExhausted })
    await vi.advanceTimersByTimeAsync(0)
    controller.abort()
    const result = await done
    expect(sent).toHaveLength(1)
    expect(onExhausted).toHaveBeenCalledWith([{ index: 0, record: { n: 1 } }], 'stopped')
    expect(result.decision).toBe('nack')
  })

  it.each([
    [{ attempts: Number.NaN }, 'attempts'],
    [{ attempts: '3' }, 'attempts'],
    [{ initialBackoffMs: -1 }, 'initialBackoffMs'],
    [{ multiplier: 0.5 }, 'multiplier'],
    [{ jitter: Number.NaN }, 'jitter'],
    [{ jitter: 2 }, 'jitter'],
    // Not a whole number of attempts: 2.5 was taken as 2, without a word.
    [{ attempts: 2.5 }, 'attempts'],
    // The decision itself where its callback is due (untyped code): it threw once records were exhausted.
    [{ attempts: 1, onExhausted: 'dead_letter' }, 'onExhausted'],
    [{ onRejected: true }, 'onRejected'],
    [{ random: 0.5 }, 'random'],
  ])('rejects %o naming the source and the field, before sending anything', async (options, field) => {
    const { context, sent } = scripted([byN(() => 'errored')])
    await expect(RecordRetry.send(context, recs(1), options as never)).rejects.toMatchObject({
      name: 'ComponentError',
      code: 'INVALID_OPTION',
      component: 'src',
      field,
    })
    expect(sent).toEqual([])
  })

  it.each([['ack'], ['nak'], [true]])(
    'refuses a decision %o that is neither dead_letter nor nack, naming the source and onExhausted (a caller acking on anything but nack lost the records)',
    async (decision) => {
      const { context, sent } = scripted([byN(() => 'errored')])
      const onExhausted = vi.fn(() => decision as never)
      await expect(RecordRetry.send(context, recs(1), { attempts: 1, onExhausted })).rejects.toMatchObject({
        name: 'ComponentError',
        code: 'BAD_RESULT',
        component: 'src',
        field: 'onExhausted',
      })
      expect(onExhausted).toHaveBeenCalledOnce()
      expect(sent).toEqual([recs(1)])
    },
  )

  it('takes options given as undefined for their defaults, and Infinity attempts', async () => {
    const { context, sent } = scripted([byN(() => 'delivered'), byN(() => 'delivered')])
    // As untyped code (or a config with unset keys) gives them.
    const unset = { attempts: undefined, jitter: undefined } as never
    const result = await RecordRetry.send(context, recs(1), unset)
    expect(result.outcomes).toEqual(['delivered'])
    const forever = await RecordRetry.send(context, recs(2), { attempts: Number.POSITIVE_INFINITY })
    expect(forever.outcomes).toEqual(['delivered'])
    expect(sent).toEqual([recs(1), recs(2)])
  })

  it('never waits longer than a timer can (a longer delay would fire after 1 ms)', () => {
    const options = { initialBackoffMs: 1000, multiplier: 10, maxBackoffMs: Number.MAX_VALUE, jitter: 0 }
    expect(RecordRetry.delayMs(options, 20, 0)).toBe(2_147_483_647)
  })

  it('spreads the back-off by the jitter', () => {
    const options = { initialBackoffMs: 100, multiplier: 2, maxBackoffMs: 300, jitter: 0.5 }
    expect(RecordRetry.delayMs(options, 1, 0)).toBe(50)
    expect(RecordRetry.delayMs(options, 1, 1)).toBe(100)
    expect(RecordRetry.delayMs(options, 2, 0.5)).toBe(150)
    expect(RecordRetry.delayMs(options, 5, 1)).toBe(300)
  })

  it('re-sends each record as first given, though the last attempt changed it in place, and hands callbacks that record', async () => {
    vi.useFakeTimers()
    // As a transform does to the fields an event was made of: each attempt changes what it got.
    const seen: JsonObject[][] = []
    const { context, sent } = scripted([
      byN(() => 'errored'),
      byN(() => 'errored'),
      // By position: the change below removed `n`.
      () => ['rejected', 'errored'],
    ])
    const send = context.send
    context.send = (records, options) => {
      seen.push(structuredClone([...records]))
      for (const r of records) {
        r.count = (r.count as number) + 1
        ;(r.tags as string[]).push('seen')
        delete r.n
      }
      return send(records, options)
    }
    const onRejected = vi.fn()
    const onExhausted = vi.fn(() => 'nack' as const)
    const given = [
      { n: 1, count: 0, tags: [] },
      { n: 2, count: 0, tags: [] },
    ]
    const done = RecordRetry.send(context, given, { attempts: 3, jitter: 0, onRejected, onExhausted })
    await vi.runAllTimersAsync()
    await done
    const first = [
      { n: 1, count: 0, tags: [] },
      { n: 2, count: 0, tags: [] },
    ]
    expect(seen).toEqual([first, first, first])
    expect(sent).toHaveLength(3)
    expect(onRejected).toHaveBeenCalledWith([{ index: 0, record: first[0], failure: undefined }])
    expect(onExhausted).toHaveBeenCalledWith([{ index: 1, record: first[1] }], 'attempts')
  })

  it("sends the caller's own records on the first attempt, and fresh copies keeping non-JSON values on a retry", async () => {
    vi.useFakeTimers()
    class Point {
      constructor(readonly x: number) {}
    }
    const when = new Date(0)
    const proto = JSON.parse('{"__proto__": {"a": 1}}') as JsonObject
    const record = {
      when,
      big: 10n,
      boxed: new Number(2),
      point: new Point(1),
      map: new Map([[1, 2]]),
      proto,
      nested: { list: [{ a: 1 }] },
    } as unknown as JsonObject
    const throwing = {
      n: 3,
      get field(): number {
        throw new Error('no field')
      },
    } as unknown as JsonObject
    const { context, sent } = scripted([byN(() => 'errored'), byN(() => 'delivered')])
    await Promise.all([RecordRetry.send(context, [record, throwing], { jitter: 0 }), vi.runAllTimersAsync()])
    expect(sent[0]![0]).toBe(record)
    const copy = sent[1]![0]! as Record<string, unknown>
    expect(copy).not.toBe(record)
    expect(copy.nested).not.toBe(record.nested)
    expect(copy.nested).toEqual(record.nested)
    // Values JSON cannot carry (RFC 0010) are kept as they are, not as JSON writes them.
    expect(copy.when).toBe(when)
    expect(copy.big).toBe(10n)
    expect(copy.boxed).toBe((record as Record<string, unknown>).boxed)
    expect(copy.point).toBeInstanceOf(Point)
    expect(copy.map).toBeInstanceOf(Map)
    expect(Object.hasOwn(copy.proto as object, '__proto__')).toBe(true)
    expect(copy.proto).not.toBe(proto)
    expect(Object.getPrototypeOf(copy.proto)).toBe(Object.prototype)
    // A record that cannot be copied (a getter that throws, not JSON) is sent again as the object itself.
    expect(sent[1]![1]).toBe(throwing)
  })

  it('copies an object shared within a record once, so shared nodes stay shared and 40 levels of them copy at all', async () => {
    vi.useFakeTimers()
    // Each level holds the one below twice: 41 objects, 2^40 paths (a copy per path never ends).
    type Node = { level: number; left?: Node; right?: Node }
    let node: Node = { level: 0 }
    for (let level = 1; level <= 40; level++) node = { level, left: node, right: node }
    const record = { top: node } as unknown as JsonObject
    const { context, sent } = scripted([byN(() => 'errored'), byN(() => 'delivered')])
    await Promise.all([RecordRetry.send(context, [record], { jitter: 0 }), vi.runAllTimersAsync()])
    const copy = sent[1]![0]! as unknown as { top: Node }
    // Compared as booleans: a failing matcher would print, or diff, every path.
    expect(copy === (record as unknown)).toBe(false)
    const originals = new Set<Node>()
    for (let n: Node | undefined = node; n !== undefined; n = n.left) originals.add(n)
    const copies = new Set<Node>()
    let level = 40
    for (let n: Node | undefined = copy.top; n !== undefined; n = n.left, level--) {
      expect(n.level).toBe(level)
      expect(n.right === n.left).toBe(true)
      expect(originals.has(n)).toBe(false)
      copies.add(n)
    }
    expect(level).toBe(-1)
    expect(copies.size).toBe(41)
  })

  it('copies a cyclic record with its cycle, and a record deeper than the stack keeping its values', async () => {
    vi.useFakeTimers()
    const cyclic = { n: 1, list: [] as unknown[] } as Record<string, unknown>
    cyclic.self = cyclic
    ;(cyclic.list as unknown[]).push(cyclic, { back: cyclic })
    const when = new Date(0)
    const shared = { when }
    let deep: Record<string, unknown> = { shared, again: shared }
    for (let i = 0; i < 100_000; i++) deep = { next: deep }
    const { context, sent } = scripted([byN(() => 'errored'), byN(() => 'delivered')])
    const records = [cyclic, deep] as unknown as JsonObject[]
    await Promise.all([RecordRetry.send(context, records, { jitter: 0 }), vi.runAllTimersAsync()])
    const copy = sent[1]![0]! as Record<string, unknown>
    expect(copy).not.toBe(cyclic)
    expect(copy.self).toBe(copy)
    const list = copy.list as unknown[]
    expect(list).not.toBe(cyclic.list)
    expect(list[0]).toBe(copy)
    expect((list[1] as Record<string, unknown>).back).toBe(copy)
    let bottom = sent[1]![1]! as Record<string, unknown>
    expect(bottom === deep).toBe(false)
    for (let i = 0; i < 100_000; i++) bottom = bottom.next as Record<string, unknown>
    expect(bottom.shared).not.toBe(shared)
    expect(bottom.again).toBe(bottom.shared)
    // Not what JSON writes (its ISO string), as for a shallow record.
    expect((bottom.shared as { when: unknown }).when).toBe(when)
  })

  it('copies a record deeper than the stack holding an array with a key of its own named keys, as a shallow one', async () => {
    vi.useFakeTimers()
    // Code may set any key on an array (or a subclass may define `keys()`): the copy reads an
    // array by its indices at any depth. Asked for its `keys()`, the deep copy threw at it and the
    // retries were sent the record itself, as the first attempt's transforms left it.
    const make = (): Record<string, unknown> => {
      const list: unknown[] = [1, { n: 2 }]
      Object.assign(list, { keys: 'not a method' })
      return { list }
    }
    const inner = make()
    let deep: Record<string, unknown> = inner
    for (let i = 0; i < 100_000; i++) deep = { next: deep }
    const records = [make(), deep] as unknown as JsonObject[]
    const { context, sent } = scripted([byN(() => 'errored'), byN(() => 'delivered')])
    await Promise.all([RecordRetry.send(context, records, { jitter: 0 }), vi.runAllTimersAsync()])
    const shallow = sent[1]![0]! as { list: unknown[] }
    expect(shallow.list).toEqual([1, { n: 2 }])
    let bottom = sent[1]![1]! as Record<string, unknown>
    // Compared as booleans: a failing matcher would print 100 000 levels.
    expect(bottom === deep).toBe(false)
    for (let i = 0; i < 100_000; i++) bottom = bottom.next as Record<string, unknown>
    const list = (bottom as { list: unknown[] }).list
    expect(list).not.toBe(inner.list)
    expect(list[1]).not.toBe((inner.list as unknown[])[1])
    expect(list).toEqual(shallow.list)
    expect(Object.hasOwn(list, 'keys')).toBe(Object.hasOwn(shallow.list, 'keys'))
  })

  it('with remake, sends on a retry and hands the callbacks what it makes, and makes nothing else', async () => {
    vi.useFakeTimers()
    const { context, sent } = scripted([
      byN((n) => (n === 1 ? 'delivered' : 'errored')),
      byN((n) => (n === 2 ? 'rejected' : 'errored')),
    ])
    const made: { index: number; record: JsonObject }[] = []
    const remake = (index: number): JsonObject => {
      const record = { n: index + 1, remade: true }
      made.push({ index, record })
      return record
    }
    const onRejected = vi.fn()
    const onExhausted = vi.fn(() => 'nack' as const)
    const given = recs(1, 2, 3)
    await Promise.all([
      RecordRetry.send(context, given, { attempts: 2, jitter: 0, remake, onRejected, onExhausted }),
      vi.runAllTimersAsync(),
    ])
    // The first attempt sends what was given; the retry exactly what remake made, for the errored.
    expect(sent[0]).toEqual(given)
    expect(sent[0]![0]).toBe(given[0])
    expect(sent[1]).toHaveLength(2)
    expect(sent[1]![0]).toBe(made[0]!.record)
    expect(sent[1]![1]).toBe(made[1]!.record)
    // Each callback's record is made anew too (the retry's own may have been changed in place).
    expect(made.map((m) => m.index)).toEqual([1, 2, 1, 2])
    expect(onRejected).toHaveBeenCalledWith([{ index: 1, record: made[2]!.record, failure: undefined }])
    expect(onExhausted).toHaveBeenCalledWith([{ index: 2, record: made[3]!.record }], 'attempts')
  })

  it('refuses a remake that is no function, before anything is sent', async () => {
    const { context, sent } = scripted([byN(() => 'delivered')])
    const error = await RecordRetry.send(context, recs(1), { remake: 'yes' as never }).catch(
      (e: unknown) => e,
    )
    expect(error).toMatchObject({ code: 'INVALID_OPTION', component: 'src', field: 'remake' })
    expect(sent).toHaveLength(0)
  })

  it('copies nothing when one attempt is allowed and no callback will read the records', async () => {
    const { context, sent } = scripted([byN(() => 'errored')])
    const given = recs(1)
    await RecordRetry.send(context, given, { attempts: 1 })
    expect(sent[0]![0]).toBe(given[0])
  })

  it('through a real topology: a retry reaches the sink transformed once, and onRejected gets the record as sent', async () => {
    let writes = 0
    const sink = testSink({
      outcome: (e) => (writes === 0 ? 'errored' : e.get('n') === 2 ? 'rejected' : 'delivered'),
    })
    const write = sink.write.bind(sink)
    sink.write = async (events) => {
      const statuses = await write(events)
      writes++
      return statuses
    }
    let rejected: unknown
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', {
        kind: 'retrying',
        canAcknowledge: true,
        async run(context) {
          const records = [
            { n: 1, count: 0 },
            { n: 2, count: 0 },
          ]
          await RecordRetry.send(context, records, {
            initialBackoffMs: 1,
            onRejected: (r) => {
              rejected = r.map(({ index, record }) => ({ index, record }))
            },
          })
        },
      })
      .transform('bump', ['in'], {
        kind: 'bump',
        process(events, context) {
          for (const event of events) {
            event.set('count', (event.get('count') as number) + 1)
            context.emit(event)
          }
        },
      })
      .sink('out', ['bump'], sink)
      .build()
    await topology.start()
    await topology.done
    expect(sink.received.map((r) => r.count)).toEqual([1, 1, 1, 1])
    expect(rejected).toEqual([{ index: 1, record: { n: 2, count: 0 } }])
  })

  it('through a real topology: a sink that errors a record once sees only that record again', async () => {
    let failedOnce = false
    const sink = testSink({
      outcome: (e) => {
        if (e.get('n') === 2 && !failedOnce) {
          failedOnce = true
          return 'errored'
        }
        return 'delivered'
      },
    })
    let result: Awaited<ReturnType<typeof RecordRetry.send>> | undefined
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', {
        kind: 'retrying',
        canAcknowledge: true,
        async run(context) {
          result = await RecordRetry.send(context, recs(1, 2, 3), { initialBackoffMs: 1 })
        },
      })
      .sink('out', ['in'], sink)
      .build()
    await topology.start()
    await topology.done
    expect(sink.received).toEqual(recs(1, 2, 3, 2))
    expect(result?.outcomes).toEqual(['delivered', 'delivered', 'delivered'])
    expect(result?.attempts).toBe(2)
  })
})
