/**
 * The counters a topology keeps per component.
 *
 * Invariant: counters only grow, except `acksInFlight`, which counts what is pending now. A
 * snapshot is a plain object: taking one never changes the topology.
 *
 * @module
 */
import type { ComponentRole } from './LifecycleEvent.js'

/**
 * A snapshot of one component's counters, as `topology.metrics()` returns them.
 *
 * @example
 * ```ts
 * const { receivedEvents, erroredEvents } = topology.metrics().archive!
 * ```
 */
export interface ComponentMetrics {
  /** Whether the component is a source, a transform or a sink. */
  readonly role: ComponentRole
  /** The component's kind (`'http'`, `'remap'`, `'file'`…), as the component names itself. */
  readonly kind: string
  /** Events that came in (sources: events read). */
  readonly receivedEvents: number
  /** Events passed on downstream, counting each copy of a fan-out. */
  readonly sentEvents: number
  /**
   * Events discarded: dropped by a transform (whatever its `dropStatus`), emitted on a port that
   * nothing reads, or dropped by a full `drop_newest` buffer in front of this component.
   */
  readonly discardedEvents: number
  /** Events this component settled `errored` (a sink's failed writes, a transform's leaked events). */
  readonly erroredEvents: number
  /** Events this component settled `rejected`. */
  readonly rejectedEvents: number
  /**
   * Why: the events this component settled `errored` or `rejected`, counted by the code of the
   * failure (`WRITE_FAILED`, `UNENCODABLE`, `BUFFER_FULL`, … — see `BatchFailure`). Sources count
   * their batches decided by `ACK_TIMEOUT` or `STOPPED` here.
   */
  readonly failures: Readonly<Record<string, number>>
  /** Sources: batches not resolved yet. Sinks: events handed to `write` and not settled yet. */
  readonly acksInFlight: number
  /** Sources: batches resolved so far and their latency, send to resolution. */
  readonly ackLatencyMs: { readonly count: number; readonly mean: number; readonly max: number }
}
