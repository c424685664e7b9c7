// Slot batches against notifier batches over programs that open many batches, close blocks early
// and fill them, so blocks (and their tokens, RFC 0009 A′) are reused mid-program: the same
// statuses, reasons and order of resolution, and each batch told to its owner once. (The property
// of SlotBatches.test.ts opens too few batches to reuse a block.)
import type { LogEvent, SlotBlock } from '@ackline/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { compare, programOp } from './support/slotPrograms.js'

/** What an event holds for its finalizers (internal: the public build's types omit it). */
const tokenOf = (event: LogEvent): unknown => (event as unknown as { _ref: unknown })._ref

describe('SlotBatches over reused blocks and tokens', () => {
  it('resolves as batches with notifiers do while blocks fill, close early and are reused', () => {
    const runs = Number(process.env.ACKLINE_REUSE_RUNS ?? 100)
    const via = { slot: 0, state: 0 }
    /** Each token, with the block's generation it was last seen in. */
    const seen = new WeakMap<object, number>()
    let reusedTokens = 0
    let programs = 0
    fc.assert(
      fc.property(fc.array(programOp(true), { minLength: 50, maxLength: 400 }), (ops) => {
        programs++
        const { withNotifiers, asSlots, owner, made } = compare([], ops, (array) => {
          const token = tokenOf(array.events[0]!) as { _block: SlotBlock & { gen: number } }
          const gen = token._block.gen
          const before = seen.get(token)
          if (before !== undefined && before !== gen) reusedTokens++
          seen.set(token, gen)
        })
        expect(owner.told.length).toBe(made) // each slot batch told exactly once
        expect(new Set(owner.told.map((t) => t.id)).size).toBe(made)
        expect(asSlots).toEqual(withNotifiers)
        for (const t of owner.told) via[t.via]++
      }),
      { numRuns: runs },
    )
    // The programs did reuse blocks with their tokens, and took both ways of telling.
    expect(programs).toBe(runs)
    expect(reusedTokens).toBeGreaterThan(50)
    expect(via.slot).toBeGreaterThan(0)
    expect(via.state).toBeGreaterThan(0)
  })
})
