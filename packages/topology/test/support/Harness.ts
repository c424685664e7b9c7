// The setup every topology test shares: builder options, record makers, and a runner that
// collects the lifecycle facts of one run.
import type { JsonObject, LogEvent } from '@ackline/core'
import type { LifecycleEvent, Topology } from '@ackline/topology'

/** Builder options that keep warnings out of the test output. */
export const quiet = { onWarning: () => {} }
/** `quiet`, with acknowledgements on. */
export const on = { ...quiet, acknowledgements: true }
/** The `n` field of an event. */
export const n = (event: LogEvent): number => event.get('n') as number
/** One record `{ n }` per number. */
export const records = (...ns: number[]): JsonObject[] => ns.map((value) => ({ n: value }))

/** Starts `topology`, waits until it is done, and returns every fact it reported. */
export const run = async (topology: Topology): Promise<LifecycleEvent[]> => {
  const facts: LifecycleEvent[] = []
  topology.lifecycle.subscribe((fact) => facts.push(fact))
  await topology.start()
  await topology.done
  return facts
}
