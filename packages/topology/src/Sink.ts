/**
 * The contract between the runtime and a sink.
 *
 * Invariant: a sink only writes; it never ends events. The runtime ends every event it handed
 * to `write` exactly once, with the status the write reported: resolve for `delivered`, throw a
 * `RetryableError` for `errored` (after the retry policy gives up), throw a `RejectError` for
 * `rejected`, or return one status per event.
 *
 * @module
 */
import type { DeliveryStatus, EventArray } from '@ackline/core'
import type { ConfigIssue } from './ConfigIssue.js'

/** What a write reports: nothing (all delivered), or one status per event, in order. */
export type SinkResult = undefined | readonly DeliveryStatus[]

/** A sink of events. */
export interface Sink {
  /** The kind of component (`"file"`, `"memory"`). */
  readonly kind: string
  /** Problems in the sink's own configuration; the builder reports them with everything else. */
  validate?(): readonly ConfigIssue[]
  /** Opens connections or files before the first write. */
  start?(): Promise<void>
  /**
   * Writes one array of events. Resolving with nothing means every event was delivered; throwing
   * a `RetryableError` means try again later; a `RejectError` means never retry; any other throw
   * counts as retryable. Returning an array gives one status per event.
   */
  write(events: EventArray): Promise<SinkResult>
  /** Flushes and closes, after the last write. */
  stop?(): Promise<void>
}
