/**
 * `runTopology`: starts a topology, runs it to the end and returns every lifecycle fact, with real
 * timers or under a test runner's fake timers.
 *
 * Invariant: under fake timers, time moves only when the caller's `advanceTimers` runs; the
 * helper calls it in rounds until `topology.done` settles (each round fires the due timers and
 * lets the promise chains they start run), and fails loudly rather than spin forever.
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
  /** Rounds of `advanceTimers` before giving up (default 1000); a whole number of 1 or more, else a `RangeError`. */
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
  for (let round = 0; round < maxRounds && !(started && done) && failed === undefined; round++)
    await advance()
  if (failed !== undefined) throw failed.error
  if (!(started && done)) {
    throw new Error(
      `runTopology: the topology was still running after ${maxRounds} rounds of advanceTimers; a component waits on something other than timers (real I/O, an external event)`,
    )
  }
  await starting
  await finished
  return facts
}
