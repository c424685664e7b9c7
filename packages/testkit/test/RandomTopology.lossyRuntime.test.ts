// RandomTopology.check against a runtime that loses a record on its way to the sinks, without a
// word: simulated by a builder whose sources' sends hand the runtime all but the last record of a
// batch of three or more (the ledger, wrapped around the source, has already followed it). The
// source is told `delivered`, as a runtime that ends a lost event without a status tells it.
import type { Sink, Source } from '@ackline/topology'
import fc from 'fast-check'
import { describe, expect, it, vi } from 'vitest'

const runtime = vi.hoisted(() => ({ lossy: false }))

/** `source` with each send of three records or more handed to the runtime without its last one. */
const losing = (source: Source): Source => ({
  ...source,
  run: (context) =>
    source.run({
      ...context,
      send: (records, options) => {
        const list = [...records]
        return context.send(runtime.lossy && list.length >= 3 ? list.slice(0, -1) : list, options)
      },
    }),
})

vi.mock('@ackline/topology', async (importOriginal) => {
  const topology = await importOriginal<typeof import('@ackline/topology')>()
  class LossyBuilder<Inputs extends string = never> extends topology.TopologyBuilder<Inputs> {
    override source<const Id extends string>(id: Id, source: Source) {
      return super.source(id, losing(source))
    }
  }
  return { ...topology, TopologyBuilder: LossyBuilder }
})

const { RandomTopology } = await import('@ackline/testkit')

/** A correct sink of the user's: stores nothing, reports nothing (all delivered). */
const store = (): Sink => ({ kind: 'store', write: async () => undefined })
const sinks = { store }
/** Topologies whose sinks are all the user's: no status the model predicts. */
const mine = RandomTopology.arbitrary({ sinks }).filter((spec) =>
  spec.sinks.every((k) => k.kind === 'user:store'),
)

describe('RandomTopology.check over a runtime that loses records', () => {
  it('passes the same property on the runtime as it is', async () => {
    runtime.lossy = false
    await fc.assert(
      fc.asyncProperty(mine, async (spec) => {
        await RandomTopology.check(spec, { sinks })
      }),
      { numRuns: 50, seed: 5 },
    )
  })

  it("catches it over the user's own sinks, and shrinks to a batch of three into one sink", async () => {
    runtime.lossy = true
    try {
      const result = await fc.check(
        fc.asyncProperty(mine, async (spec) => {
          await RandomTopology.check(spec, { sinks })
        }),
        { numRuns: 100, seed: 5 },
      )
      expect(result.failed).toBe(true)
      const spec = result.counterexample![0] as Parameters<typeof RandomTopology.check>[0]
      // One source whose first batch has three records, straight into one sink of the user's.
      expect(spec.sources).toHaveLength(1)
      expect(spec.sources[0]![0]).toBe(3)
      expect(RandomTopology.describe(spec)).toMatch(/^k0 = store\(.*\) ← src0$/m)
      expect(spec.transforms).toEqual([])
      expect(spec.sinks).toHaveLength(1)
      expect(fc.defaultReportMessage(result)).toContain('seed: 5')
      expect(String(result.errorInstance)).toContain(
        'sink k0 wrote 0 copies of record src0/0/2 {"n":2}, the wiring sends it 1: the runtime lost a copy (told its source \'delivered\'; copies: none)',
      )
    } finally {
      runtime.lossy = false
    }
  })
})
