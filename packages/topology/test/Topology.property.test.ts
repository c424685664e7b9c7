// Model-based property: random DAG topologies with random sink outcomes (and, in the second
// property, scheduled write failures that retries absorb); every batch a source sends resolves
// exactly once, with the status the testkit's model computes from the paths its events took.
// The arbitrary, the model and the runner live in @ackline/testkit (RandomTopology).
import { RandomTopology, type RandomTopologySpec } from '@ackline/testkit'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'

/** Runs `spec` and checks everything the model and the ledger promise of it. */
async function check(spec: RandomTopologySpec): Promise<void> {
  const expected = RandomTopology.expected(spec)!
  const { statuses, facts, receipts, ledger } = await RandomTopology.run(spec)
  try {
    expect(statuses).toEqual(expected.statuses)
    const resolved = facts.filter((f) => f.type === 'batch_resolved')
    const batchIds = receipts.map((list) => list.map((r) => r.batchId))
    const acked = batchIds.flatMap((ids, i) => (expected.sourceAcks[i] ? ids : []))
    expect(resolved.map((f) => f.batchId).sort()).toEqual([...acked].sort())
    expect(new Set(resolved.map((f) => f.batchId)).size).toBe(resolved.length)
    for (const [i, ids] of batchIds.entries()) {
      for (const id of ids) expect(id === undefined).toBe(!expected.sourceAcks[i])
    }
    // The only errors are the scheduled ones, each reported by the sink it was scheduled on.
    const errors = facts.filter((f) => f.type === 'component_error')
    expect(errors.filter((f) => !JSON.stringify(f).includes('scheduled failure'))).toEqual([])
    // A batch says why exactly when it was not delivered, and always names who decided.
    for (const [i, list] of receipts.entries()) {
      for (const [j, receipt] of list.entries()) {
        if (statuses[i]![j] === 'delivered') expect(receipt.failure).toBeUndefined()
        else expect(receipt.failure?.componentId).toMatch(/^(k|t)\d+$/)
      }
    }
    // The ledger agrees with the model from what each copy reported, and no nack was lost.
    await ledger.expectMatchesModel()
    // A drawn run may have acknowledgements off for every source: no batch to read then.
    await ledger.expectNoAckWithoutDelivery({ allowEmpty: true })
  } catch (error) {
    // Shrunk counterexamples print as a readable topology (fast-check adds the seed and path).
    throw new Error(
      `${String(error)}\n--- topology ---\n${RandomTopology.describe(spec)}\n--- ledger ---\n${ledger.describe()}`,
    )
  }
}

describe('random topologies', () => {
  it('resolve every batch exactly once, with the status the model computes', async () => {
    await fc.assert(fc.asyncProperty(RandomTopology.arbitrary(), check), { numRuns: 300, verbose: true })
  })

  it('resolve as the model says when writes fail on a schedule and retries absorb the failures', async () => {
    await fc.assert(fc.asyncProperty(RandomTopology.arbitrary({ faults: true }), check), {
      numRuns: 100,
      verbose: true,
    })
  })
})
