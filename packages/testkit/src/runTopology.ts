/**
 * `runTopology`: starts a topology, runs it to the end and returns every lifecycle fact, with real
 * timers or under a test runner's fake timers.
 *
 * Invariant: under fake timers, time moves only when the caller's `advanceTimers` runs; the
 * helper calls it in rounds until `topology.done` settles (each round fires the due timers and
 * lets the promise chains they start run), and fails loudly rather than spin forever, stopping
 * the topology first so nothing of it outlives the failed run.
 *
 * @module
 */
import type { LifecycleEvent, Topology } from '@ackline/topology'

/** Options of {@link runTopology}. */
export interface RunTopologyOptions {
  /**
   * Fires pending fake timers and flushes the promises they start (`() => vi.runAllTimersAsync()`,
   * `() => jest.runAllTimersAsync()`, `() => clock.runAllAsync()`). Omit with real timers.
   */
  readonly advanceTimers?: () => Promise<unknown>
  /**
   * Rounds of `advanceTimers` before giving up (default 1000); a whole number of 1 or more, else a
   * `RangeError`. Giving up stops the topology at once (timers pumped while it stops, as many
   * rounds more at most), then throws.
   */
  readonly maxRounds?: number
}

/**
 * Runs `topology` to its end and returns its lifecycle facts.
 *
 * @example
 * ```ts
 * vi.useFakeTimers()
 * const facts = await runTopology(topology, { advanceTimers: () => vi.runAllTimersAsync() })
 * ```
 */
export async function runTopology(
  topology: Topology,
  options: RunTopologyOptions = {},
): Promise<LifecycleEvent[]> {
  // Checked before the start: a bad bound would start the topology, pump it zero rounds and
  // report it "still running after NaN rounds", leaving it running.
  const maxRounds = options.maxRounds ?? 1000
  if (!Number.isSafeInteger(maxRounds) || maxRounds < 1)
    throw new RangeError(
      `runTopology: 'maxRounds' must be a whole number of 1 or more, got ${String(maxRounds)}`,
    )
  if (options.advanceTimers !== undefined && typeof options.advanceTimers !== 'function')
    throw new TypeError(
      `runTopology: 'advanceTimers' must be a function, got ${typeof options.advanceTimers}`,
    )
  const facts: LifecycleEvent[] = []
  topology.lifecycle.subscribe((fact) => facts.push(fact))
  let done = false
  const finished = topology.done.then(() => {
    done = true
  })
  const advance = options.advanceTimers
  if (advance === undefined) {
    await topology.start()
    await finished
    return facts
  }
  // start() itself may wait on timers (a sink's start), so it is pumped too. A start that fails
  // ends the pumping and is rethrown, as with real timers (held here, never an unhandled rejection).
  let started = false
  let failed: { readonly error: unknown } | undefined
  const starting = topology.start().then(
    () => {
      started = true
    },
    (error: unknown) => {
      failed = { error }
    },
  )
  try {
    for (let round = 0; round < maxRounds && !(started && done) && failed === undefined; round++)
      await advance()
  } catch (error) {
    // advanceTimers itself failed (a runner's cap on timers run at once): the run is over too.
    await stopNow(topology, advance, maxRounds)
    throw error
  }
  if (failed !== undefined) throw failed.error
  if (!(started && done)) {
    const stopped = await stopNow(topology, advance, maxRounds)
    throw new Error(
      `runTopology: the topology was still running after ${maxRounds} rounds of advanceTimers, and was stopped${stopped ? '' : ` (its stop had not settled after ${maxRounds} more rounds)`}; a component waits on something other than timers (real I/O, an external event)`,
    )
  }
  await starting
  await finished
  return facts
}

/**
 * Stops `topology` at once (a second stop forces it, settling what is in flight), pumping the
 * timers while it stops, for at most `maxRounds` rounds: a run given up on must not leave its
 * sources reading and its sinks' connections open after the test failed. Whether the stop settled.
 */
async function stopNow(
  topology: Topology,
  advance: () => Promise<unknown>,
  maxRounds: number,
): Promise<boolean> {
  let settled = false
  const stopping = topology.stop({ drainTimeoutMs: 0 })
  const forced = topology.stop()
  const all = Promise.all([stopping, forced]).then(
    () => {
      settled = true
    },
    () => {
      settled = true
    },
  )
  for (let round = 0; round < maxRounds && !settled; round++) {
    // Through a promise: an advanceTimers of untyped code may return none, or throw at once.
    await Promise.resolve()
      .then(advance)
      .catch(() => undefined)
    await Promise.resolve()
  }
  if (settled) await all
  return settled
}
