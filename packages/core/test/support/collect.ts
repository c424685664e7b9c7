// Forced collections for the leak tests (run with --expose-gc): decided by what the program
// reports, never by elapsed time.
import { LeakDetector } from '@ackline/core'
import { expect } from 'vitest'

/** `globalThis.gc`, present when the tests run with --expose-gc (vitest.config.ts). */
export const gc = (globalThis as { gc?: () => void }).gc

// One turn of the event loop: FinalizationRegistry callbacks run as tasks of their own after a
// collection, never within the `gc()` call.
export const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

/** How many collections a test may run before it gives up: far more than a leak ever needs. */
const MAX_COLLECTIONS = 200

/**
 * Collects garbage, turn after turn, until `done()` or MAX_COLLECTIONS; decides by what the program
 * reports, never by elapsed time. Returns how many collections ran.
 */
export async function collectUntil(done: () => boolean): Promise<number> {
  let collections = 0
  while (!done() && collections < MAX_COLLECTIONS) {
    // The group being filled (and every source's block of slot batches) is held until it closes
    // (when full, or 20 ms after it opened): closed here so that no test depends on the clock.
    LeakDetector.closeGroup()
    gc!()
    collections++
    await nextTurn()
  }
  return collections
}

/**
 * Runs collections until one provably happened and its finalization callbacks were delivered: a
 * sentinel object, unreachable from here on, was collected and its registry called back. A
 * negative assertion made after this cannot pass merely because no collection ran.
 */
export async function collectProvably(): Promise<void> {
  let collected = false
  const sentinel = new FinalizationRegistry<string>(() => {
    collected = true
  })
  ;(() => sentinel.register({}, 'sentinel'))()
  const collections = await collectUntil(() => collected)
  expect(collected, `no collection observed after ${collections} gc() calls`).toBe(true)
  // The detector's callbacks from the same collection may run in a task of their own.
  await nextTurn()
}
