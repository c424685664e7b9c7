/**
 * The contract of a buffer that stands in front of a sink: the in-memory channel of the runtime
 * and the disk buffer of `@ackline/buffers` both implement it.
 *
 * Invariant: a buffer never settles an event as delivered on its own (except a disk buffer in
 * `acknowledgements: 'on-write'` mode, once the write is durable). Whatever it accepts it either
 * hands to the sink through `pull`, or settles with a status (`rejected` when full and dropping,
 * `errored` when it cannot store it).
 *
 * @module
 */
import type { EventArray } from '@ackline/core'

/** A buffer between a component's output and a sink. */
export interface EdgeBuffer {
  /**
   * Accepts an array of events; ownership of the handles moves into the buffer. Resolves once
   * accepted: when the buffer is full it waits (back pressure) or settles them, per its policy.
   */
  push(events: EventArray): Promise<void>
  /**
   * The next array for the sink, waiting until one is available. Resolves `undefined` once the
   * buffer is closed and nothing is left to hand out (or `signal` aborted).
   */
  pull(signal?: AbortSignal): Promise<EventArray | undefined>
  /** No more pushes: `pull` drains what is left, then returns `undefined`. */
  close(): Promise<void>
}
