/**
 * Properties of the fan-out transforms against a model: whatever the predicates and the sinks
 * say, every input handle leaves exactly once and each batch resolves with the worst status of
 * the copies its events became (a drop counts as its `dropStatus`). fast-check prints the seed
 * and the shrunk counterexample on failure.
 */
import type { BatchStatus, DeliveryStatus } from '@ackline/core'
import { remap, route } from '@ackline/transforms'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { FakeTransformContext } from './support/FakeTransformContext.js'
import { everyHandleLeft, testBatch } from './support/TestBatch.js'

const rank: Record<BatchStatus, number> = { delivered: 0, errored: 1, rejected: 2 }
const worst = (statuses: readonly BatchStatus[]): BatchStatus =>
  statuses.reduce<BatchStatus>((a, b) => (rank[b] > rank[a] ? b : a), 'delivered')
const status = fc.constantFrom<DeliveryStatus>('delivered', 'errored', 'rejected')
const PORTS = ['a', 'b', 'c'] as const

describe('fan-out transforms, against a model', () => {
  it('route: a batch resolves with the worst status over every port its events reached', async () => {
    // Per event: which routes match, and what the sink behind each port (and _unmatched) says.
    const event = fc.record({
      matches: fc.tuple(fc.boolean(), fc.boolean(), fc.boolean()),
      outcome: fc.record({ a: status, b: status, c: status, _unmatched: status }),
    })
    await fc.assert(
      fc.asyncProperty(fc.array(event, { minLength: 1, maxLength: 8 }), async (plans) => {
        const t = route({
          a: (e) => (e.get('m') as boolean[])[0] === true,
          b: (e) => (e.get('m') as boolean[])[1] === true,
          c: (e) => (e.get('m') as boolean[])[2] === true,
        })
        const { events, receiver } = testBatch(plans.map((p, i) => ({ i, m: [...p.matches] })))
        const ctx = new FakeTransformContext()
        t.process(events, ctx)
        expect(everyHandleLeft(events, ctx.emitted)).toBe(true)
        for (const { event, port } of ctx.emitted) {
          const plan = plans[event.get('i') as number]!
          event.end(plan.outcome[port as keyof typeof plan.outcome])
        }
        const expected = worst(
          plans.map((p) => {
            const hit = PORTS.filter((_, r) => p.matches[r])
            return worst(hit.length === 0 ? [p.outcome._unmatched] : hit.map((port) => p.outcome[port]))
          }),
        )
        expect(await receiver).toBe(expected)
      }),
      { numRuns: 200 },
    )
  })

  it('remap: outputs share the input; an input with none resolves as its dropStatus', async () => {
    const event = fc.record({ outputs: fc.array(status, { maxLength: 3 }), keepInput: fc.boolean() })
    await fc.assert(
      fc.asyncProperty(
        fc.array(event, { minLength: 1, maxLength: 6 }),
        fc.constantFrom<'delivered' | 'rejected'>('delivered', 'rejected'),
        async (plans, dropStatus) => {
          // Each output carries the status its sink will report; the input itself may be one of them.
          const t = remap(
            (e) => {
              const plan = plans[e.get('i') as number]!
              return plan.outputs.map((s, k) =>
                k === 0 && plan.keepInput ? e.set('status', s) : { i: e.get('i') as number, status: s },
              )
            },
            { dropStatus },
          )
          const { events, receiver } = testBatch(plans.map((_, i) => ({ i })))
          const ctx = FakeTransformContext.for(t)
          t.process(events, ctx)
          expect(everyHandleLeft(events, ctx.emitted)).toBe(true)
          expect(ctx.emitted).toHaveLength(plans.reduce((n, p) => n + p.outputs.length, 0))
          for (const { event } of ctx.emitted) event.end(event.get('status') as DeliveryStatus)
          const expected = worst(plans.map((p) => (p.outputs.length === 0 ? dropStatus : worst(p.outputs))))
          expect(await receiver).toBe(expected)
        },
      ),
      { numRuns: 200 },
    )
  })
})
