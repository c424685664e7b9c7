/**
 * Fairness with the event loop: a busy source lets the loop turn at least every few milliseconds.
 *
 * A pipeline moves batches in microtasks: a send that finds room downstream resolves at once, and
 * the transforms and sinks that take the batch run in microtasks too. The event loop runs no timer,
 * no I/O callback and no other task until the microtask queue is empty. So a source that does no
 * I/O of its own (a generator, a source replaying data it holds in memory) would keep the whole
 * process in one task for as long as it has data: no `stop()` from a timer, no ack timeout, no
 * file sink's completed write could run, and an endless source would never let anything else run
 * at all. I/O-driven sources (HTTP, brokers) turn the loop by themselves and never wait here.
 *
 * Invariant: while sends keep coming in one task, the loop turns at least once per
 * {@link SLICE_MS} of sends (about one slice, plus the sends already under way): a send made once
 * a slice has passed since the runtime last asked, and before the loop turned since, is accepted
 * as usual, but the promise its source awaits resolves only after the loop turned (in
 * `setImmediate`, after pending I/O callbacks and timers). The batch itself is queued at once, so
 * back pressure and order are unchanged.
 *
 * Cost: a comparison per send, on a clock reading the send took anyway, and one `setImmediate`
 * per slice while sends keep coming.
 */

/** How long sends may keep the event loop from turning, in ms. */
export const SLICE_MS = 10

/** The process's own `setImmediate`, as it was when this module loaded: fake timers in tests must not hold a source forever. */
const realSetImmediate = globalThis.setImmediate

/** When the runtime last armed a probe (`Date.now()`); a time ahead of the clock counts as a slice passed (the clock stepped back). */
let armedAt = Number.NEGATIVE_INFINITY
/** A probe (a `setImmediate`) is armed and has not run: the loop has not turned since `armedAt`. */
let armed = false
/** Settled when the armed probe runs; made only when some send waits for it. */
let turned: Promise<void> | undefined
let wake: (() => void) | undefined

const probe = (): void => {
  armed = false
  const resolve = wake
  turned = undefined
  wake = undefined
  resolve?.()
}

/**
 * The runtime is about to accept a send at `now` (a `Date.now()` just read): `undefined` when the
 * source may go on at once, or a promise settled once the event loop has turned, when a slice has
 * passed without a turn (see the module header).
 */
export function awaitLoopTurn(now: number): Promise<void> | undefined {
  const since = now - armedAt
  if (since < SLICE_MS && since >= 0) return undefined
  if (!armed) {
    armed = true
    armedAt = now
    realSetImmediate(probe)
    return undefined
  }
  if (turned === undefined) {
    turned = new Promise<void>((resolve) => {
      wake = resolve
    })
  }
  return turned
}
