// Random topologies: the model and the real run agree, a user's own transforms and sinks mix in
// (checked by the ledger), and a failing property shrinks to a small topology printed readably.
import type { DeliveryStatus, LogEvent } from '@ackline/core'
import { Arbitraries, faultySink, NO_FAULTS, RandomTopology, type RandomTopologySpec } from '@ackline/testkit'
import type { Sink, Transform } from '@ackline/topology'
import fc from 'fast-check'
import { describe, expect, it, vi } from 'vitest'

const upper = (): Transform => ({
  kind: 'upper',
  process(events, context) {
    for (const e of events) context.emit(e.set('seen', true))
  },
})
/** A transform with a bug: it forgets every event whose `n` is 2. */
const forgetsTwo = (): Transform => ({
  kind: 'forgets_two',
  process(events, context) {
    for (const e of events) if ((e.get('n') as number) !== 2) context.emit(e)
  },
})

describe('RandomTopology', () => {
  it('runs as its model predicts', async () => {
    await fc.assert(
      fc.asyncProperty(RandomTopology.arbitrary(), async (spec) => {
        const run = await RandomTopology.run(spec)
        expect(run.statuses).toEqual(RandomTopology.expected(spec)!.statuses)
        // Each sink wrote as many copies of each record as the wiring predicts.
        const copies = RandomTopology.expectedCopies(spec)!
        for (const record of run.ledger.records) {
          const written = spec.sinks.map(
            (_, k) => record.fates.filter((f) => f.via === 'sink' && f.component === `k${k}`).length,
          )
          expect(written).toEqual(copies[record.record.n as number])
        }
      }),
      { numRuns: 40 },
    )
  })

  it('draws an empty batch now and then, and runs it as its model predicts', async () => {
    const specs = fc.sample(RandomTopology.arbitrary({ faults: true }), { numRuns: 300, seed: 5 })
    const withEmpty = specs.filter((spec) => spec.sources.some((sizes) => sizes.includes(0)))
    expect(withEmpty.length).toBeGreaterThan(0)
    for (const spec of withEmpty.slice(0, 8)) {
      const run = await RandomTopology.check(spec)
      expect(run.statuses).toEqual(RandomTopology.expected(spec)!.statuses)
    }
  })

  it("mixes in the user's own transforms, checked by the ledger against the model", async () => {
    const transforms = { upper }
    let used = 0
    await fc.assert(
      fc.asyncProperty(RandomTopology.arbitrary({ transforms }), async (spec) => {
        if (spec.transforms.some((t) => t.kind === 'user:upper')) used++
        const { ledger, facts } = await RandomTopology.run(spec, { transforms })
        expect(facts.filter((f) => f.type === 'component_error')).toEqual([])
        await ledger.expectMatchesModel()
        // A drawn run may have acknowledgements off for every source: no batch to read then.
        await ledger.expectNoAckWithoutDelivery({ allowEmpty: true })
      }),
      { numRuns: 40, seed: 7 },
    )
    expect(used).toBeGreaterThan(0)
  })

  it('shrinks a failing property to a small topology, printed readably with its seed', async () => {
    const transforms = { forgets_two: forgetsTwo }
    const result = await fc.check(
      fc.asyncProperty(RandomTopology.arbitrary({ transforms }), async (spec) => {
        const { facts } = await RandomTopology.run(spec, { transforms })
        return facts.every((f) => f.type !== 'component_error')
      }),
      { numRuns: 200, seed: 42 },
    )
    expect(result.failed).toBe(true)
    const spec = result.counterexample![0] as RandomTopologySpec
    // The smallest topology that shows the bug: the forgetful transform fed by one source whose
    // records reach n = 2 (three records), and one sink.
    expect(spec.transforms.map((t) => t.kind)).toEqual(['user:forgets_two'])
    expect(spec.sinks).toHaveLength(1)
    expect(spec.sources.flat().reduce((a, b) => a + b, 0)).toBe(3)
    const printed = RandomTopology.describe(spec)
    expect(printed).toContain('t0 = forgets_two() ← src0')
    expect(fc.defaultReportMessage(result)).toContain('seed: 42')
  })
})

/** A correct sink of the user's: stores every event in a map by `n`, reports nothing (all delivered). */
const stored: Map<number, unknown>[] = []
const store = (): Sink => {
  const map = new Map<number, unknown>()
  stored.push(map)
  return {
    kind: 'store',
    async write(events) {
      for (const e of events) map.set(e.get('n') as number, { ...e.fields })
      return undefined
    },
  }
}
/** A sink with a bug: it acknowledges every event itself before its write, which then fails the odd ones. */
const acksEarly = (): Sink => ({
  kind: 'acks_early',
  async write(events) {
    const statuses = events.events.map(
      (e): DeliveryStatus => ((e.get('n') as number) % 2 === 1 ? 'errored' : 'delivered'),
    )
    events.end('delivered')
    return statuses
  },
})

describe("RandomTopology over the user's own sinks", () => {
  it('mixes them in, and the delivery properties hold over a correct one', async () => {
    const sinks = { store }
    let used = 0
    await fc.assert(
      fc.asyncProperty(RandomTopology.arbitrary({ sinks, faults: true }), async (spec) => {
        const mine = spec.sinks.filter((k) => k.kind === 'user:store').length
        if (mine > 0) used++
        stored.length = 0
        expect(RandomTopology.expected(spec) === undefined).toBe(mine > 0)
        const run = await RandomTopology.check(spec, { sinks })
        // One fresh sink per user sink of the spec, and every record it reported delivered is stored.
        expect(stored).toHaveLength(mine)
        for (const record of run.ledger.records)
          for (const fate of record.fates)
            if (
              fate.via === 'sink' &&
              fate.status === 'delivered' &&
              spec.sinks[Number(fate.component.slice(1))]!.kind === 'user:store'
            )
              expect(stored.some((m) => m.has(fate.fields!.n as number))).toBe(true)
      }),
      { numRuns: 40, seed: 11 },
    )
    expect(used).toBeGreaterThan(5)
  })

  it('catches a sink that acknowledges before it writes, and shrinks to a small topology printed with its seed', async () => {
    const sinks = { acks_early: acksEarly }
    const result = await fc.check(
      fc.asyncProperty(RandomTopology.arbitrary({ sinks }), async (spec) => {
        await RandomTopology.check(spec, { sinks })
      }),
      { numRuns: 200, seed: 42 },
    )
    expect(result.failed).toBe(true)
    const spec = result.counterexample![0] as RandomTopologySpec
    // The smallest topology that shows the bug: the user's sink, acknowledging, fed two records
    // (an odd one among them) straight from a source.
    expect(spec.transforms).toEqual([])
    expect(spec.sinks.map((k) => k.kind)).toEqual(['user:acks_early'])
    expect(spec.sources.flat().reduce((a, b) => a + b, 0)).toBe(2)
    const printed = RandomTopology.describe(spec)
    expect(printed).toMatch(
      /^k0 = acks_early\(acks (on|default); \d write\(s\) in flight; no faults\) ← src\d$/m,
    )
    const report = fc.defaultReportMessage(result)!
    expect(report).toContain('seed: 42')
    expect(String(result.errorInstance)).toContain('k0 = acks_early(')
    expect(String(result.errorInstance)).toMatch(/NACK_LOST|MODEL_MISMATCH/)
  })

  it('names a user sink the options do not provide', async () => {
    const [spec] = fc
      .sample(RandomTopology.arbitrary({ sinks: { store } }), { numRuns: 50, seed: 3 })
      .filter((s) => s.sinks.some((k) => k.kind === 'user:store'))
    await expect(RandomTopology.run(spec!)).rejects.toThrow(
      /sink kind 'user:store', but options.sinks has no factory 'store'/,
    )
  })
})

describe('RandomTopology given factories that fail', () => {
  const spec = (kinds: { transform?: `user:${string}`; sink?: `user:${string}` }): RandomTopologySpec =>
    ({
      global: true,
      sources: [[1]],
      transforms:
        kinds.transform === undefined
          ? []
          : [
              {
                kind: kinds.transform,
                inputs: [{ from: 0, port: 0 }],
                rest: 0,
                rejectDrops: false,
                maxEvents: 4,
              },
            ],
      sinks: [
        {
          kind: kinds.sink ?? 'outcome',
          inputs: [{ from: 0, port: 0 }],
          outcomes: ['delivered'],
          acks: undefined,
          maxEvents: 4,
          faults: NO_FAULTS,
        },
      ],
    }) as RandomTopologySpec

  it('names a sink factory that throws, with what it threw as the cause', async () => {
    const boom = new Error('no connection')
    const failed = await RandomTopology.run(spec({ sink: 'user:db' }), {
      sinks: {
        db: () => {
          throw boom
        },
      },
    }).then(
      () => new Error('ran'),
      (error: unknown) => error as Error,
    )
    expect(failed.message).toBe('RandomTopology.run: options.sinks.db() threw: no connection')
    expect(failed.cause).toBe(boom)
  })

  it('names a user transform the options do not provide, and one whose factory throws', async () => {
    await expect(RandomTopology.run(spec({ transform: 'user:clean' }))).rejects.toThrow(
      "RandomTopology.run: the spec has transform kind 'user:clean', but options.transforms has no factory 'clean'",
    )
    await expect(
      RandomTopology.run(spec({ transform: 'user:clean' }), {
        transforms: {
          clean: () => {
            throw new Error('bad config')
          },
        },
      }),
    ).rejects.toThrow('RandomTopology.run: options.transforms.clean() threw: bad config')
  })
})

describe('Arbitraries and faultySink', () => {
  it('number records across batches and shrink towards no faults', () => {
    fc.assert(
      fc.property(Arbitraries.batches(), (batches) => {
        expect(batches.flat().map((r) => r.n)).toEqual(batches.flat().map((_, i) => i))
      }),
    )
    const [smallest] = fc.sample(Arbitraries.failureSchedule(), { numRuns: 1, seed: 1 })
    expect(smallest).toHaveProperty('errorOnCalls')
  })

  it('a faulty sink throws on its scheduled calls, rejects its scheduled records, and never ends events', async () => {
    const sink = faultySink(
      { kind: 'inner', write: async () => undefined },
      { errorOnCalls: [2], rejectWhen: { field: 'n', modulo: 2 }, hangMs: 0 },
    )
    const { EventArray } = await import('@ackline/core')
    const events = EventArray.fromRecords([{ n: 1 }, { n: 2 }])
    const first = await sink.write(events)
    expect((first as unknown[]).map((r) => (r instanceof Error ? r.name : r))).toEqual([
      'delivered',
      'RejectError',
    ])
    await expect(sink.write(events)).rejects.toThrow(/scheduled failure on write call 2/)
    expect(events.events.every((e: LogEvent) => !e.isEnded)).toBe(true)
    events.end()
  })
})

describe('RandomTopology.run bounded in time', () => {
  const spec = {
    global: true,
    sources: [[2, 1]],
    transforms: [],
    sinks: [
      {
        kind: 'user:stuck',
        inputs: [{ from: 0, port: 0 }],
        outcomes: ['delivered'],
        acks: undefined,
        maxEvents: 4,
        faults: NO_FAULTS,
      },
    ],
  } as RandomTopologySpec
  const stuck = (): Sink => ({ kind: 'stuck', write: () => new Promise<undefined>(() => {}) })

  it('stops a run whose sink never settles a write, and names the counts and the topology', async () => {
    const failed = await RandomTopology.run(spec, { sinks: { stuck }, timeoutMs: 200 }).then(
      () => new Error('ran'),
      (error: unknown) => error as Error,
    )
    expect(failed.message).toContain('the run did not finish within 200 ms (options.timeoutMs)')
    expect(failed.message).toContain('k0 = stuck(')
    expect(failed.message).toMatch(/k0 \(sink stuck\): received [1-3],/)
    expect(failed.message).toMatch(/src0 \(source list\): received 3, sent 3,/)
  })

  it('is bounded in real time under fake timers too', async () => {
    vi.useFakeTimers()
    try {
      const failed = await RandomTopology.run(spec, { sinks: { stuck }, timeoutMs: 200 }).then(
        () => new Error('ran'),
        (error: unknown) => error as Error,
      )
      expect(failed.message).toContain('did not finish within 200 ms')
    } finally {
      vi.useRealTimers()
    }
  })

  it('refuses a timeout of 0 ms, naming the field, instead of stopping every run at once', async () => {
    // 0 was taken: each run was stopped before its first batch and failed "did not finish within
    // 0 ms", a failure of the options blamed on the components.
    const sinks = { stuck: (): Sink => ({ kind: 'ok', write: async () => undefined }) }
    for (const timeoutMs of [0, -0, 0.5]) {
      const failed = await RandomTopology.run(spec, { sinks, timeoutMs }).then(
        () => new Error('ran'),
        (error: unknown) => error as Error,
      )
      expect(failed).toBeInstanceOf(RangeError)
      expect(failed.message).toContain("'timeoutMs' must be")
    }
  })

  it('refuses a timeout no timer can hold', async () => {
    for (const timeoutMs of [-1, Number.NaN, 2 ** 31])
      await expect(RandomTopology.run(spec, { sinks: { stuck }, timeoutMs })).rejects.toThrow(RangeError)
  })
})

describe('RandomTopology.arbitrary options', () => {
  it('refuses maxTransforms or maxSinks no topology can follow, naming the option, instead of a fast-check error', () => {
    // They reached fast-check: "fc.integer maximum value should be equal or greater than the
    // minimum one" (maxSinks 0, maxTransforms -1), "should be an integer" (NaN), naming no option.
    const bad = [
      [{ maxSinks: 0 }, 'maxSinks'],
      [{ maxSinks: Number.NaN }, 'maxSinks'],
      [{ maxSinks: 1.5 }, 'maxSinks'],
      [{ maxTransforms: -1 }, 'maxTransforms'],
      [{ maxTransforms: '3' as unknown as number }, 'maxTransforms'],
    ] as const
    for (const [options, field] of bad) {
      expect(() => RandomTopology.arbitrary(options)).toThrow(RangeError)
      expect(() => RandomTopology.arbitrary(options)).toThrow(`RandomTopology.arbitrary: '${field}' must be`)
    }
    fc.assert(
      fc.property(
        RandomTopology.arbitrary({ maxTransforms: 0, maxSinks: 1 }),
        (spec) => spec.transforms.length === 0 && spec.sinks.length === 1,
      ),
    )
  })
})
