/**
 * `blackhole`: a sink that discards everything it is given and reports every event delivered.
 *
 * Invariant: every write resolves, so the runtime settles every event `delivered` (a blackhole
 * that forgot to settle would hold up its sources forever).
 *
 * @module
 */
import type { EventArray } from '@ackline/core'
import type { Sink, SinkResult } from '@ackline/topology'

/**
 * The sink {@link blackhole} returns: every write resolves, `count` says how many events it saw.
 *
 * @example
 * ```ts
 * const sink: BlackholeSink = blackhole()
 * ```
 */
export interface BlackholeSink extends Sink {
  readonly kind: 'blackhole'
  /** How many events it was given so far. */
  readonly count: number
}

/** What every write returns: one promise for all of them, settled already (nothing to wait for). */
const WRITTEN: Promise<SinkResult> = Promise.resolve(undefined)

class Blackhole implements BlackholeSink {
  readonly kind = 'blackhole'
  count = 0

  write(events: EventArray): Promise<SinkResult> {
    this.count += events.length
    return WRITTEN
  }
}

/**
 * A sink that drops events on the floor, each one settled `delivered`.
 *
 * @example
 * ```ts
 * const sink = blackhole()
 * builder.sink('null', ['in'], sink)
 * // … later: sink.count events went through
 * ```
 */
export function blackhole(): BlackholeSink {
  return new Blackhole()
}
