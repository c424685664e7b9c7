/**
 * The contract between the runtime and a sink.
 *
 * Invariant: a sink only writes; it never ends events. The runtime ends every event it handed
 * to `write` exactly once, with the status the write reported, read in one place (the sink
 * runner) by this table:
 *
 * | the write…                                   | the events are                                  |
 * | -------------------------------------------- | ----------------------------------------------- |
 * | resolves with nothing                        | `delivered`                                     |
 * | throws a `RetryableError`                    | retried under the retry policy, then `errored`  |
 * | throws a `RejectError`                       | `rejected` at once (`REJECTED`)                 |
 * | throws a `TypeError` or `RangeError`         | `rejected` at once (`UNENCODABLE`)              |
 * | throws anything else                         | retried under the retry policy, then `errored`  |
 * | returns one entry per event                  | each event as its entry says (below)            |
 * | returns anything else (wrong length, holes)  | `errored` where it says nothing valid (`BAD_RESULT`) |
 *
 * A `TypeError` or `RangeError` is what encoding throws for a value the sink's format cannot
 * represent (`JSON.stringify` of a `BigInt`, of a cycle, of a value nested deeper than the stack
 * allows). It recurs for the same event on every retry, so retrying would turn the event into a
 * poison message that is `errored` forever; it is `rejected` instead. A sink whose `TypeError` has
 * nothing to do with the events (a bug in its own connection code) should wrap it in a
 * `RetryableError` if it wants it retried.
 *
 * The entries of a per-event result are `'delivered'`, `'errored'`, `'rejected'`, or an `Error`
 * for that event alone, read as the table reads a throw (a per-event error is not retried: a
 * `RejectError`, `TypeError` or `RangeError` is `rejected`, any other error `errored`). An entry
 * that is none of these (a typo, `null`, a hole) is the sink's bug: it is reported and the event is
 * settled `errored`, never `delivered`. Every failure is told to the events' batches, so a source
 * learns which sink failed and why (`BatchReceipt.failure`).
 *
 * Writes in flight: by default the runtime calls `write` again only once the previous write has
 * ended. A sink that can overlap writes (a broker client with a window of confirms) says so with
 * `concurrency`, and a user can override it per declaration (`SinkOptions.concurrency`); the
 * runtime then keeps up to that many writes pending, each with its own array, retried and settled
 * on its own by the table above. With more than one, writes may complete out of order, so a sink
 * whose target needs order keeps the default of 1. A stop waits for every pending write; at its
 * deadline every pending write is settled `errored` (`STOPPED`) and what it reports later is
 * ignored.
 *
 * A sink that can confirm nothing (a fire-and-forget protocol) says `canAcknowledge: false`; the
 * builder then refuses it unless its declaration says `acknowledgements: false`, so it never
 * stands where a source waits for a confirmation (`ACK_UNSUPPORTED`).
 *
 * @module
 */
import type { DeliveryStatus, EventArray } from '@ackline/core'
import type { ConfigIssue } from './ConfigIssue.js'

/**
 * What a write reports: nothing (all delivered), or one entry per event, in order: its status, or
 * the error that event alone failed with (see the table above).
 *
 * @example
 * ```ts
 * async write(events) {
 *   return events.events.map((event) => (fits(event) ? 'delivered' : new RejectError('s3', 'too large')))
 * }
 * ```
 */
export type SinkResult = undefined | readonly (DeliveryStatus | Error)[]

/** A sink of events. */
export interface Sink {
  /** The kind of component (`"file"`, `"memory"`). */
  readonly kind: string
  /**
   * How many writes the runtime may have pending at once on this sink, when its declaration does
   * not say (`SinkOptions.concurrency` wins). A positive integer; absent means 1. More than 1 only
   * when `write` may be called again before an earlier call has ended, and the order in which
   * writes complete does not matter to the sink's target.
   *
   * @example
   * ```ts
   * const sink: Sink = { kind: 'bus', concurrency: 4, async write(events) { await publishAll(events) } }
   * ```
   */
  readonly concurrency?: number
  /**
   * `false` when this sink cannot confirm a delivery (it sends and forgets): the builder refuses
   * it unless it is declared with `acknowledgements: false` (`ACK_UNSUPPORTED`, naming the sink
   * and the field). Absent means `true`.
   *
   * @example
   * ```ts
   * builder.sink('live', ['in'], natsSink({ servers, subject: 'live' }), { acknowledgements: false })
   * ```
   */
  readonly canAcknowledge?: boolean
  /** Problems in the sink's own configuration; the builder reports them with everything else. */
  validate?(): readonly ConfigIssue[]
  /**
   * Opens connections or files before the first write. If it throws, `topology.start()` rejects
   * with a `TopologyError` (`SINK_START_FAILED`) naming this sink, its kind and the cause.
   */
  start?(): Promise<void>
  /**
   * Writes one array of events. Resolving with nothing means every event was delivered; throwing
   * a `RetryableError` means try again later; a `RejectError`, `TypeError` or `RangeError` means
   * never retry (`rejected`); any other throw counts as retryable. Returning an array gives one
   * status (or error) per event. See the table in this module's header.
   */
  write(events: EventArray): Promise<SinkResult>
  /** Flushes and closes, after the last write. */
  stop?(): Promise<void>
}
