/**
 * The mutable counters behind one component's metrics. Plain fields, bumped on the hot path
 * once per array (never per event).
 */
import type { ComponentMetrics } from '../ComponentMetrics.js'
import type { ComponentRole } from '../LifecycleEvent.js'

export class Counters {
  received = 0
  sent = 0
  discarded = 0
  errored = 0
  rejected = 0
  inFlight = 0
  latencyCount = 0
  latencySum = 0
  latencyMax = 0
  /** Events settled errored or rejected, by failure code; made on the first failure. */
  failures: Map<string, number> | undefined = undefined

  constructor(
    readonly role: ComponentRole,
    readonly kind: string,
  ) {}

  settled(status: 'delivered' | 'errored' | 'rejected' | undefined, events: number): void {
    if (status === 'errored') this.errored += events
    else if (status === 'rejected') this.rejected += events
  }

  /** Counts `events` settled errored or rejected for the failure `code` (see `BatchFailure`). */
  failed(code: string, events: number): void {
    this.failures ??= new Map()
    const failures = this.failures
    failures.set(code, (failures.get(code) ?? 0) + events)
  }

  latency(ms: number): void {
    this.latencyCount++
    this.latencySum += ms
    if (ms > this.latencyMax) this.latencyMax = ms
  }

  snapshot(): ComponentMetrics {
    return {
      role: this.role,
      kind: this.kind,
      receivedEvents: this.received,
      sentEvents: this.sent,
      discardedEvents: this.discarded,
      erroredEvents: this.errored,
      rejectedEvents: this.rejected,
      acksInFlight: this.inFlight,
      failures: this.failures === undefined ? {} : Object.fromEntries(this.failures),
      ackLatencyMs: {
        count: this.latencyCount,
        mean: this.latencyCount === 0 ? 0 : this.latencySum / this.latencyCount,
        max: this.latencyMax,
      },
    }
  }
}
