import { BatchNotifier, type DeliveryStatus, EventArray, type JsonObject, type LogEvent } from '@ackline/core'
import { DeliveryLedger, DeliveryViolation } from '@ackline/testkit'
import {
  NO_RECEIPT,
  type Sink,
  type Source,
  type SourceContext,
  TopologyBuilder,
  type Transform,
} from '@ackline/topology'
import { describe, expect, it } from 'vitest'

const source = (batches: JsonObject[][]): Source => ({
  kind: 'list',
  canAcknowledge: true,
  async run(context) {
    for (const batch of batches) await context.send(batch)
  },
})
const sink = (outcome: (e: LogEvent) => DeliveryStatus = () => 'delivered'): Sink & { got: JsonObject[] } => {
  const got: JsonObject[] = []
  return {
    kind: 'list',
    got,
    async write(events) {
      return events.events.map((e) => {
        got.push({ ...e.fields })
        return outcome(e)
      })
    },
  }
}
const n = (e: LogEvent) => e.get('n') as number
const fanOut = (): Transform<'odd'> => ({
  kind: 'fan',
  outputs: ['odd'],
  process(events, context) {
    for (const e of events) {
      context.emit(e)
      if (n(e) % 2 === 1) context.emit(e, 'odd')
    }
  },
})

async function runWith(ledger: DeliveryLedger, a: Sink, b: Sink, transform: Transform<'odd'> = fanOut()) {
  const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
    .source('in', ledger.source('in', source([[{ n: 0 }, { n: 1 }], [{ n: 2 }]])))
    .transform('t', ['in'], ledger.transform('t', transform))
    .sink('all', ['t'], ledger.sink('all', a))
    .sink('odd', ['t.odd'], ledger.sink('odd', b))
    .build()
  await topology.start()
  await topology.done
  await ledger.settled()
}

/** A sink written as a class: `start`, `stop` and `validate` live on its prototype, not on the instance. */
class ClassSink implements Sink {
  readonly kind = 'class'
  readonly concurrency = 2
  readonly calls: string[] = []
  #started = false
  validate() {
    this.calls.push('validate')
    return []
  }
  async start() {
    this.#started = true
    this.calls.push('start')
  }
  async write() {
    if (!this.#started) throw new Error('write before start')
    this.calls.push('write')
    return undefined
  }
  async stop() {
    this.calls.push('stop')
  }
}

describe('DeliveryLedger', () => {
  it('keeps the members a class sink has on its prototype (start, stop, validate) and its own concurrency', async () => {
    const ledger = new DeliveryLedger({ acknowledgements: true })
    const inner = new ClassSink()
    const wrapped = ledger.sink('out', inner)
    expect(wrapped.concurrency).toBe(2)
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', ledger.source('in', source([[{ n: 1 }]])))
      .sink('out', ['in'], wrapped)
      .build()
    await topology.start()
    await topology.done
    expect(inner.calls).toEqual(['validate', 'start', 'write', 'stop'])
    await ledger.expectNoLoss()
  })

  it("passes a source's send options through, keeps a receipt for itself, and answers the source as the runtime does", async () => {
    const ledger = new DeliveryLedger({ acknowledgements: true })
    const told: unknown[] = []
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source(
        'in',
        ledger.source('in', {
          kind: 'list',
          canAcknowledge: true,
          async run(context) {
            const receipt = await context.send([{ n: 1 }, { n: 2 }], { outcomes: true })
            told.push((await receipt.outcomes)?.toArray())
            // As the runtime does: no receipt for a source that wants none, and no outcomes without one.
            told.push(await context.send([{ n: 3 }], { receipt: false }))
            await context
              .send([{ n: 4 }], { receipt: false, outcomes: true })
              .catch((e: Error) => told.push(e.message))
          },
        }),
      )
      .sink(
        'out',
        ['in'],
        ledger.sink(
          'out',
          sink((e) => (n(e) === 2 ? 'rejected' : 'delivered')),
        ),
      )
      .build()
    await topology.start()
    await topology.done
    await ledger.settled()
    expect(told).toEqual([
      ['delivered', 'rejected'],
      NO_RECEIPT,
      "source 'in': a send with outcomes: true needs its receipt (it was sent with receipt: false)",
    ])
    expect(ledger.batches.map((b) => b.told)).toEqual(['rejected', 'delivered']) // the refused one is not recorded
  })

  it('records every copy with its path and what the source was told, and hides its tag from sinks', async () => {
    const ledger = new DeliveryLedger({ acknowledgements: true })
    const all = sink()
    await runWith(
      ledger,
      all,
      sink((e) => (n(e) === 1 ? 'errored' : 'delivered')),
    )
    expect(all.got).toEqual([{ n: 0 }, { n: 1 }, { n: 2 }])
    expect(ledger.batches.map((b) => b.told)).toEqual(['errored', 'delivered'])
    const one = ledger.records.find((r) => r.tag === 'in/0/1')!
    expect(one.fates.map((f) => [f.component, f.path, f.status]).sort()).toEqual([
      ['all', ['t', 't.odd'], 'delivered'],
      ['odd', ['t', 't.odd'], 'errored'],
    ])
    await ledger.expectMatchesModel()
    await ledger.expectNoAckWithoutDelivery()
    await ledger.expectNoLoss()
    await expect(ledger.expectAtLeastOnce()).resolves.toBeUndefined()
  })

  it('names the record, the path and the sink when a source hears delivered for a failed copy', async () => {
    const ledger = new DeliveryLedger({ acknowledgements: true })
    // The 'odd' sink acknowledges in the topology, but the ledger is told it does not: the model
    // then disagrees with what the source heard.
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', ledger.source('in', source([[{ n: 1 }]])))
      .sink(
        'odd',
        ['in'],
        ledger.sink(
          'odd',
          sink(() => 'rejected'),
          { acknowledgements: true },
        ),
      )
      .build()
    await topology.start()
    await topology.done
    // Forge what the source heard, as a runtime that loses a nack would.
    ledger.batches[0]!.told = 'delivered'
    const error = await ledger.expectNoAckWithoutDelivery().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(DeliveryViolation)
    expect((error as DeliveryViolation).code).toBe('NACK_LOST')
    expect((error as Error).message).toContain('in/0/0 {"n":1}: in → odd: rejected')
    expect((error as Error).message).toContain("'odd' reports its failure")
  })

  it("keeps each copy's report when two copies of a record reach one sink by two paths, and only the last attempt's of a retried write", async () => {
    const ledger = new DeliveryLedger({ acknowledgements: true })
    const identity: Transform = {
      kind: 'identity',
      process(events, context) {
        for (const e of events) context.emit(e)
      },
    }
    // Emits its copies a turn later, so the sink writes them after the other path's.
    const later: Transform = {
      kind: 'later',
      async process(events, context) {
        await new Promise((resolve) => setImmediate(resolve))
        for (const e of events) context.emit(e.set('via', 'later'))
      },
    }
    const attempts = new Map<string, number>()
    const out: Sink = {
      kind: 'out',
      async write(events) {
        const key = events.events.map((e) => e.get('via') ?? 'identity').join()
        attempts.set(key, (attempts.get(key) ?? 0) + 1)
        // The copy by 'later' fails once as a whole write, then is delivered; the other errors.
        if (key === 'later' && attempts.get(key) === 1) throw new Error('first attempt fails')
        return events.events.map((e) => (e.get('via') === 'later' ? 'delivered' : 'errored'))
      },
    }
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', ledger.source('in', source([[{ n: 0 }]])))
      .transform('a', ['in'], ledger.transform('a', identity))
      .transform('b', ['in'], ledger.transform('b', later))
      .sink('out', ['a', 'b'], ledger.sink('out', out), { retry: { attempts: 2, initialBackoffMs: 0 } })
      .build()
    await topology.start()
    await topology.done
    expect(attempts).toEqual(
      new Map([
        ['identity', 1],
        ['later', 2],
      ]),
    )
    // One copy errored: the source hears errored, and the model must say so too.
    expect(ledger.records[0]!.fates.map((f) => f.status)).toEqual(['errored', 'delivered'])
    expect(ledger.verdict(ledger.records[0]!)).toBe('errored')
    expect(ledger.batches[0]!.told).toBe('errored')
    await ledger.expectMatchesModel()
  })

  it("keeps only the last attempt's report at each sink when a harness writes one event to two sinks and retries one", async () => {
    // A harness of one's own, no runtime: each send becomes one EventArray written to both sinks
    // (the runtime would clone it for each), and the first sink's failed write is retried after the
    // second sink's. The retry must replace the first sink's failed report, not the other sink's.
    const ledger = new DeliveryLedger({ acknowledgements: true })
    let attempts = 0
    const flaky = ledger.sink('flaky', {
      kind: 'flaky',
      async write() {
        if (++attempts === 1) throw new Error('first attempt fails')
        return undefined
      },
    })
    const steady = ledger.sink('steady', sink())
    const harness: SourceContext = {
      id: 'in',
      acknowledgements: true,
      signal: new AbortController().signal,
      async send(records) {
        const { notifier, receiver } = BatchNotifier.create({ sourceId: 'in' })
        const events = EventArray.fromRecords([...records], { sourceId: 'in', batch: notifier })
        const written = await flaky.write(events).then(
          () => true,
          () => false,
        )
        await steady.write(events)
        if (!written) await flaky.write(events)
        events.end('delivered')
        return { batchId: 'harness', status: receiver.promise, failure: undefined }
      },
      sendEvents: async () => {},
    }
    await ledger.source('in', source([[{ n: 0 }]])).run(harness)
    expect(attempts).toBe(2)
    expect(ledger.records[0]!.fates.map((f) => [f.component, f.status])).toEqual([
      ['steady', 'delivered'],
      ['flaky', 'delivered'],
    ])
    await ledger.expectMatchesModel()
    await ledger.expectNoAckWithoutDelivery()
  })

  it('reports a record lost when a transform forgets it yet its batch is delivered', async () => {
    const ledger = new DeliveryLedger({ acknowledgements: true })
    await runWith(ledger, sink(), sink(), {
      kind: 'forgetful',
      outputs: ['odd'],
      process(events, context) {
        for (const e of events) if (n(e) !== 2) context.emit(e)
      },
    })
    // The runtime settles the forgotten event errored (and reports the bug), so nothing is lost…
    await ledger.expectNoLoss()
    expect(ledger.batches[1]!.told).toBe('errored')
    // …but at least once fails for it, naming where it vanished.
    const error = await ledger.expectAtLeastOnce({ by: (r) => String(r.n) }).catch((e: unknown) => e)
    expect((error as DeliveryViolation).code).toBe('NOT_DELIVERED')
    expect((error as Error).message).toContain('in/1/0 {"n":2}: absorbed by t')
  })

  it("refuses a 'by' key that is no string instead of grouping every such record under one key", async () => {
    // A key of a field the records lack (undefined for all) put every record in one group, and
    // at least once passed as soon as any one record was delivered: the forgotten record went
    // unreported. A 'by' that is no function threw "options.by is not a function".
    const ledger = new DeliveryLedger({ acknowledgements: true })
    await runWith(ledger, sink(), sink(), {
      kind: 'forgetful',
      outputs: ['odd'],
      process(events, context) {
        for (const e of events) if (n(e) !== 2) context.emit(e)
      },
    })
    for (const by of [(r: JsonObject) => r.missing as string, (r: JsonObject) => r.n as unknown as string]) {
      const error = await ledger.expectAtLeastOnce({ by }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(TypeError)
      expect((error as Error).message).toMatch(
        /^DeliveryLedger: 'by' must return a string, got (undefined|number) for record in\/0\/0/,
      )
    }
    await expect(ledger.expectExactlyOnce({ by: 'n' as never })).rejects.toThrow(
      "DeliveryLedger: 'by' must be a function, got string",
    )
  })

  it('checks exactly-once by key: duplicates must carry the same fields', async () => {
    const ledger = new DeliveryLedger({ acknowledgements: true })
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', ledger.source('in', source([[{ id: 'a', v: 1 }], [{ id: 'a', v: 2 }]])))
      .sink('db', ['in'], ledger.sink('db', sink()))
      .build()
    await topology.start()
    await topology.done
    await ledger.expectExactlyOnce({ by: (r) => String(r.v) })
    const error = await ledger.expectExactlyOnce({ by: (r) => String(r.id) }).catch((e: unknown) => e)
    expect((error as DeliveryViolation).code).toBe('DIVERGENT_DUPLICATE')
  })

  it('takes records and fields with the same members in another key order for the same: no false NOT_DELIVERED or DIVERGENT_DUPLICATE', async () => {
    const ledger = new DeliveryLedger({ acknowledgements: true })
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      // The same record twice, its keys written in another order the second time (a re-send
      // rebuilt from a store that orders keys otherwise); the sink rejects the first copy.
      .source('in', ledger.source('in', source([[{ id: 'a', v: 1 }], [{ v: 1, id: 'a' }]])))
      .sink(
        'db',
        ['in'],
        ledger.sink('db', {
          kind: 'picky',
          write: async (events) =>
            events.events.map((e) =>
              Object.keys(e.fields)[0] === 'id' ? ('rejected' as const) : ('delivered' as const),
            ),
        }),
      )
      .build()
    await topology.start()
    await topology.done
    expect(ledger.batches.map((b) => b.told)).toEqual(['rejected', 'delivered'])
    await ledger.expectAtLeastOnce()

    const twice = new DeliveryLedger({ acknowledgements: true })
    const both = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', twice.source('in', source([[{ id: 'a', v: 1 }], [{ v: 1, id: 'a' }]])))
      .sink('db', ['in'], twice.sink('db', sink()))
      .build()
    await both.start()
    await both.done
    await twice.expectExactlyOnce({ by: (r) => String(r.id) })
  })

  it('tells boxed numbers and booleans apart as JSON writes them: a re-send whose fields differ only there is a DIVERGENT_DUPLICATE', async () => {
    // A transform may set a boxed value (new Number(n)); JSON writes it as the number it holds.
    let count = 0
    const boxing = (box: (n: number) => unknown): Transform => ({
      kind: 'box',
      process(events, context) {
        for (const e of events) {
          e.set('v', box(count++) as never)
          context.emit(e)
        }
      },
    })
    for (const box of [(n: number) => new Number(n), (n: number) => new Boolean(n % 2)]) {
      count = 0
      const ledger = new DeliveryLedger({ acknowledgements: true })
      const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
        .source('in', ledger.source('in', source([[{ id: 'a' }], [{ id: 'a' }]])))
        .transform('t', ['in'], boxing(box))
        .sink('db', ['t'], ledger.sink('db', sink()))
        .build()
      await topology.start()
      await topology.done
      const error = await ledger.expectExactlyOnce({ by: (r) => String(r.id) }).catch((e: unknown) => e)
      expect((error as DeliveryViolation).code).toBe('DIVERGENT_DUPLICATE')
    }
  })

  it('keys records holding boxed values by the JSON they write: two records that differ only there are two', async () => {
    const ledger = new DeliveryLedger({ acknowledgements: true })
    const records = [{ v: new Number(1) }, { v: new Number(2) }] as unknown as JsonObject[]
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', ledger.source('in', source([records])))
      .sink(
        'db',
        ['in'],
        ledger.sink(
          'db',
          sink((e) => (Number(e.get('v')) === 2 ? 'rejected' : 'delivered')),
        ),
      )
      .build()
    await topology.start()
    await topology.done
    const error = await ledger.expectAtLeastOnce().catch((e: unknown) => e)
    expect((error as DeliveryViolation).code).toBe('NOT_DELIVERED')
  })

  it('numbers batches a source sends concurrently apart, so neither overwrites the other', async () => {
    const ledger = new DeliveryLedger({ acknowledgements: true })
    const told: string[] = []
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source(
        'in',
        ledger.source('in', {
          kind: 'parallel',
          canAcknowledge: true,
          async run(context) {
            const receipts = await Promise.all([context.send([{ n: 0 }, { n: 1 }]), context.send([{ n: 2 }])])
            for (const receipt of receipts) told.push(await receipt.status)
          },
        }),
      )
      .sink(
        'out',
        ['in'],
        ledger.sink(
          'out',
          sink((e) => (n(e) === 2 ? 'errored' : 'delivered')),
        ),
      )
      .build()
    await topology.start()
    await topology.done
    expect(told).toEqual(['delivered', 'errored'])
    expect(ledger.records.map((r) => [r.tag, r.record.n, r.told])).toEqual([
      ['in/0/0', 0, 'delivered'],
      ['in/0/1', 1, 'delivered'],
      ['in/1/0', 2, 'errored'],
    ])
    await ledger.expectMatchesModel()
    await ledger.expectNoLoss()
  })

  it("passes a source's non-records on as they are, so the runtime refuses them as it does without the ledger", async () => {
    const bad: Source = {
      kind: 'bad',
      canAcknowledge: true,
      async run(context) {
        await context.send([null, 'text', [1]] as unknown as JsonObject[])
      },
    }
    const ledger = new DeliveryLedger({ acknowledgements: true })
    const out = sink()
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', ledger.source('in', bad))
      .sink('out', ['in'], ledger.sink('out', out))
      .build()
    const errors: string[] = []
    topology.lifecycle.subscribe((f) => {
      if (f.type === 'component_error') errors.push(`${f.component}: ${f.code}: ${f.message}`)
    })
    await topology.start()
    await topology.done
    expect(errors).toEqual([
      "in: RUN_FAILED: source 'in' (bad) failed: TypeError: source 'in': record 0 of a send is null; a record must be a JSON object",
    ])
    expect(out.got).toEqual([])
    expect(ledger.records).toEqual([])
  })

  it('refuses expectNoLoss and expectNoAckWithoutDelivery when no batch had an id (acknowledgements off), unless allowEmpty', async () => {
    // With acknowledgements off no batch carries an id, so both checks skipped every batch and
    // passed: a green property that checked nothing.
    const ledger = new DeliveryLedger()
    const out = sink(() => 'errored')
    const topology = new TopologyBuilder({ onWarning: () => {} })
      .source('in', ledger.source('in', source([[{ n: 0 }, { n: 1 }], [{ n: 2 }]])))
      .sink('out', ['in'], ledger.sink('out', out))
      .build()
    await topology.start()
    await topology.done
    expect(ledger.batches.map((b) => b.receipt.batchId)).toEqual([undefined, undefined])
    for (const check of ['expectNoLoss', 'expectNoAckWithoutDelivery'] as const) {
      const error = await ledger[check]().catch((e: unknown) => e)
      expect(error).toBeInstanceOf(DeliveryViolation)
      expect((error as DeliveryViolation).code).toBe('NOTHING_CHECKED')
      expect((error as Error).message).toContain(
        `NOTHING_CHECKED: ${check} checked nothing: no batch had an id (acknowledgements off for every wrapped source?)`,
      )
      expect((error as DeliveryViolation).counterexample).toEqual([
        "source 'in': 2 batch(es) sent, 0 with an id, 3 record(s)",
      ])
      await expect(ledger[check]({ allowEmpty: true })).resolves.toBeUndefined()
    }
  })
  /** Every check, by name, as a user calls it (`allowEmpty` passed through). */
  const checks = (ledger: DeliveryLedger, allowEmpty?: boolean) => {
    const options = allowEmpty === undefined ? {} : { allowEmpty }
    return {
      expectMatchesModel: () => ledger.expectMatchesModel(options),
      expectNoAckWithoutDelivery: () => ledger.expectNoAckWithoutDelivery(options),
      expectNoLoss: () => ledger.expectNoLoss(options),
      expectAtLeastOnce: () => ledger.expectAtLeastOnce(options),
      expectExactlyOnce: () => ledger.expectExactlyOnce({ by: (r) => String(r.n), ...options }),
    }
  }

  it('refuses every check, allowEmpty or not, when no source was wrapped by the ledger', async () => {
    // Only the sink wrapped: no record was tagged, so every check read nothing and passed.
    const ledger = new DeliveryLedger({ acknowledgements: true })
    const out = sink()
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', source([[{ n: 0 }, { n: 1 }]]))
      .sink('out', ['in'], ledger.sink('out', out))
      .build()
    await topology.start()
    await topology.done
    expect(out.got).toEqual([{ n: 0 }, { n: 1 }])
    for (const allowEmpty of [undefined, true]) {
      for (const [name, check] of Object.entries(checks(ledger, allowEmpty))) {
        const error = await check().catch((e: unknown) => e)
        expect(error).toBeInstanceOf(DeliveryViolation)
        expect((error as DeliveryViolation).code).toBe('NO_SOURCE')
        expect((error as Error).message).toContain(
          `NO_SOURCE: ${name} checked nothing: no source was wrapped by this ledger (ledger.source(id, source)), so no record was followed`,
        )
      }
    }
  })

  it('refuses every check, allowEmpty or not, when no sink was wrapped by the ledger', async () => {
    // Only the source wrapped: no copy's fate was recorded, so expectNoAckWithoutDelivery and
    // expectNoLoss passed a run whose sink failed every record (its batch was told errored).
    const ledger = new DeliveryLedger({ acknowledgements: true })
    const out = sink(() => 'errored')
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', ledger.source('in', source([[{ n: 0 }, { n: 1 }]])))
      .sink('out', ['in'], out)
      .build()
    await topology.start()
    await topology.done
    // The unwrapped sink even saw the ledger's tag.
    expect(out.got).toEqual([
      { n: 0, _ledger: 'in/0/0' },
      { n: 1, _ledger: 'in/0/1' },
    ])
    for (const allowEmpty of [undefined, true]) {
      for (const [name, check] of Object.entries(checks(ledger, allowEmpty))) {
        const error = await check().catch((e: unknown) => e)
        expect(error).toBeInstanceOf(DeliveryViolation)
        expect((error as DeliveryViolation).code).toBe('NO_SINK')
        expect((error as Error).message).toContain(
          `NO_SINK: ${name} checked nothing: no sink was wrapped by this ledger (ledger.sink(id, sink)), so no copy's fate was recorded`,
        )
      }
    }
  })

  it('refuses every check, allowEmpty or not, when the wrapped sinks were never started nor written to', async () => {
    // ledger.sink was called, but the builder got the sink itself: no copy's fate was recorded, so
    // expectMatchesModel and expectNoAckWithoutDelivery passed a run they never saw a sink of.
    const ledger = new DeliveryLedger({ acknowledgements: true })
    const out = sink()
    ledger.sink('out', out)
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', ledger.source('in', source([[{ n: 0 }, { n: 1 }]])))
      .sink('out', ['in'], out)
      .build()
    await topology.start()
    await topology.done
    expect(out.got).toHaveLength(2)
    for (const allowEmpty of [undefined, true]) {
      for (const [name, check] of Object.entries(checks(ledger, allowEmpty))) {
        const error = await check().catch((e: unknown) => e)
        expect(error).toBeInstanceOf(DeliveryViolation)
        expect((error as DeliveryViolation).code).toBe('NO_SINK')
        expect((error as Error).message).toContain(
          `NO_SINK: ${name} checked nothing: no sink wrapped by this ledger was started or written to ('out' wrapped), so no copy's fate was recorded`,
        )
      }
    }
  })

  it('counts a wrapped sink without start() as used once a topology writes to it, even with no record for it', async () => {
    // The sink reads a port no record takes: it was never written to, yet it was in the topology.
    const ledger = new DeliveryLedger({ acknowledgements: true })
    const none: Transform<'odd'> = {
      kind: 'evens',
      outputs: ['odd'],
      process(events, context) {
        for (const e of events) context.emit(e)
      },
    }
    const topology = new TopologyBuilder<string>({ acknowledgements: true, onWarning: () => {} })
      .source('in', ledger.source('in', source([[{ n: 0 }]])))
      .transform('t', ['in'], ledger.transform('t', none))
      .sink('a', ['t'], ledger.sink('a', sink()))
      .sink('b', ['t.odd'], ledger.sink('b', sink()))
      .build()
    await topology.start()
    await topology.done
    for (const check of Object.values(checks(ledger))) await expect(check()).resolves.toBeUndefined()
  })

  it('refuses every check when the wrapped sources sent no batch, unless allowEmpty', async () => {
    // The wrapped source was made but the builder got the original: nothing went through the ledger.
    const ledger = new DeliveryLedger({ acknowledgements: true })
    const original = source([[{ n: 0 }]])
    ledger.source('in', original)
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', original)
      .sink('out', ['in'], ledger.sink('out', sink()))
      .build()
    await topology.start()
    await topology.done
    for (const [name, check] of Object.entries(checks(ledger))) {
      const error = await check().catch((e: unknown) => e)
      expect(error).toBeInstanceOf(DeliveryViolation)
      expect((error as DeliveryViolation).code).toBe('NOTHING_CHECKED')
      expect((error as Error).message).toContain(
        `NOTHING_CHECKED: ${name} checked nothing: the wrapped sources sent no batch through the ledger`,
      )
      expect((error as DeliveryViolation).counterexample).toEqual([
        "source 'in': 0 batch(es) sent, 0 with an id, 0 record(s)",
      ])
    }
    for (const check of Object.values(checks(ledger, true))) await expect(check()).resolves.toBeUndefined()
  })

  it('passes every check on wrapped sources that sent only empty batches (a poll that found nothing)', async () => {
    const ledger = new DeliveryLedger({ acknowledgements: true })
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source('in', ledger.source('in', source([[], []])))
      .sink('out', ['in'], ledger.sink('out', sink()))
      .build()
    await topology.start()
    await topology.done
    expect(ledger.batches).toHaveLength(2)
    for (const check of Object.values(checks(ledger))) await expect(check()).resolves.toBeUndefined()
  })
})
