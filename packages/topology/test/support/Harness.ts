// The setup every topology test shares: builder options, record makers, and a runner that
// collects the lifecycle facts of one run.
import type { JsonObject, LogEvent } from '@ackline/core'
import {
  type LifecycleEvent,
  type Sink,
  type SinkOptions,
  type Source,
  type Topology,
  TopologyBuilder,
  type Transform,
} from '@ackline/topology'

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

/** The shortest topology, acknowledgements on: source `in` → sink `out`. */
export const linear = (source: Source, sink: Sink, sinkOptions?: SinkOptions): Topology =>
  new TopologyBuilder(on).source('in', source).sink('out', ['in'], sink, sinkOptions).build()

/** `in` → transform `t` → `out`, acknowledgements on. */
export const through = (
  source: Source,
  transform: Transform,
  sink: Sink,
  sinkOptions?: SinkOptions,
): Topology =>
  new TopologyBuilder(on)
    .source('in', source)
    .transform('t', ['in'], transform)
    .sink('out', ['t'], sink, sinkOptions)
    .build()
