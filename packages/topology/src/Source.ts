/**
 * The contract between the runtime and a source.
 *
 * Invariant: a source sends batches through its context and, if it can acknowledge, tells its
 * upstream "got it" only after the batch's status resolved `delivered`. The context does the
 * plumbing (events, notifiers, back pressure, metrics) so a source holds only its own logic.
 *
 * @module
 */
import type { BatchStatus, EventArray, JsonObject, RecordOutcomes } from '@ackline/core'
import type { BatchFailure } from './BatchFailure.js'
import type { ConfigIssue } from './ConfigIssue.js'

/**
 * What {@link SourceContext.send} returns once the batch has entered the pipeline. Its fields are
 * read on demand (the id is written on each read, the promise made on the first), so read them
 * (once, where used often) rather than spreading or serializing the receipt itself.
 */
export interface BatchReceipt {
  /** The batch's id, or `undefined` when acknowledgements are off for this source. */
  readonly batchId: string | undefined
  /**
   * The batch's final status. With acknowledgements off it is `'delivered'` as soon as the batch
   * was accepted. It never rejects.
   */
  readonly status: Promise<BatchStatus>
  /**
   * Why the batch was not delivered: the first failure that gave it its final status (the
   * component, a code, a message). Read it once `status` resolved: `undefined` before that, and
   * always `undefined` for a delivered batch.
   */
  readonly failure: BatchFailure | undefined
  /**
   * Each record's outcome in send order (see `RecordOutcomes`), resolved together with `status`
   * and consistent with it; `undefined` unless the batch was sent with `{ outcomes: true }`. With
   * acknowledgements off every record is `delivered` once accepted; when the batch is decided
   * before it resolved (ack timeout, forced stop), records not finished for good count as
   * `errored`.
   */
  readonly outcomes?: Promise<RecordOutcomes> | undefined
}

const unread = (member: string): never => {
  throw new TypeError(
    `receipt.${member}: the batch was sent with { receipt: false }, so no receipt was kept for it`,
  )
}

/**
 * What `send` resolves to for a batch sent with `{ receipt: false }`: one object for every such
 * batch, whose members throw a `TypeError` when read (there is no receipt to read from).
 */
export const NO_RECEIPT: BatchReceipt = Object.freeze({
  get batchId(): string | undefined {
    return unread('batchId')
  },
  get status(): Promise<BatchStatus> {
    return unread('status')
  },
  get failure(): BatchFailure | undefined {
    return unread('failure')
  },
  get outcomes(): Promise<RecordOutcomes> | undefined {
    return unread('outcomes')
  },
})

/** Options of {@link SourceContext.send}. */
export interface SendOptions {
  /**
   * Ask for each record's outcome (`receipt.outcomes`): one byte per record kept while the batch
   * is in flight. Off by default; batches that do not ask pay nothing. Needs the receipt: a send
   * with `receipt: false` and `outcomes: true` is refused (its promise rejects with a
   * `TypeError`).
   */
  readonly outcomes?: boolean
  /**
   * `false` for a source that will not read the batch's receipt (it has no upstream to tell, as
   * a generator or stdin): no receipt and no promise of its own are made for the batch, and
   * `send` resolves, once the batch is accepted, to {@link NO_RECEIPT}, shared by every such
   * send, which throws a `TypeError` when read. The batch is tracked as any other: its
   * acknowledgement still comes back, and is counted, timed, timed out and reported as a
   * `batch_resolved` fact. Default `true`. A context that keeps receipts anyway (a test double)
   * may ignore it. A context that wraps another and reads the receipts (to log or count what
   * sources are told) must ask for them itself, `{ ...options, receipt: true }`, and hand its
   * source `NO_RECEIPT` when the source asked for none, as the testkit's `DeliveryLedger` does:
   * `generator()` without `onBatch` and `stdin()` send with `receipt: false`. (Without an ack
   * timeout or outcomes, every batch is kept as a slot of its source, RFC 0009: no notifier and
   * no state are made for it unless a component needs one, which changes its cost, not its
   * behaviour; with `receipt: false` its slot is then all it is.)
   */
  readonly receipt?: boolean
}

/** What the runtime gives a running source. */
export interface SourceContext {
  /** The source's component id. */
  readonly id: string
  /**
   * Whether some sink that acknowledges is reachable from this source. When false, sending
   * creates no batch notifier at all.
   */
  readonly acknowledgements: boolean
  /** Aborted when the topology stops: stop reading, finish the batch in hand, and return. */
  readonly signal: AbortSignal
  /**
   * Sends one batch: one event per record (this source's id, one ingest timestamp), a batch
   * notifier when acknowledgements are on, and waits for room downstream (back pressure). The
   * ingest timestamp is the clock read at this send or at an earlier send of the same burst (sends
   * back to back, with no turn of the event loop or drained microtask queue between them): one
   * reading serves at most 16 sends of fewer than 256 events in all (RFC 0002). Resolves
   * once the batch is accepted; `receipt.status` resolves when every sink settled it. Sends
   * that kept the event loop from turning for 10 to 20 ms (a source with no I/O of its own and
   * room downstream, or long synchronous work between sends) are held until it turns: the batch
   * is queued at once, but the promise resolves after timers and I/O callbacks had their turn, so
   * an endless source cannot starve them. A record that is not a JSON object (`null`, a number,
   * an array, as untyped code may send) makes the promise reject with a `TypeError` naming the
   * source and the record's index, and nothing of the batch is sent.
   */
  send(records: Iterable<JsonObject>, options?: SendOptions): Promise<BatchReceipt>
  /**
   * Sends events the source built itself (for sources that attach notifiers of their own, such
   * as offset-tracking ones). Ownership of the handles moves downstream. Resolves once they are
   * accepted, and lets the event loop turn as `send` does. Given anything but an `EventArray` (a
   * plain array of events, from untyped code), the promise rejects with a `TypeError` naming the
   * source, and nothing is sent: the events are still the caller's, to end. A handle is sent
   * once: an array holding one that an earlier send took (or that it holds twice) makes the
   * promise reject with a `ComponentError` `ALREADY_SENT`, one holding an ended handle with
   * `USE_AFTER_END` (each naming the source and the event's index), one holding something that
   * is no `LogEvent` (untyped code) with a `TypeError` naming the source and the index, and
   * nothing of the array is sent; the handle sent before is the topology's, not the caller's to
   * end. Send a `clone()` to send an event again.
   */
  sendEvents(events: EventArray): Promise<void>
}

/** A source of events. */
export interface Source {
  /** The kind of component, for messages and metrics (`"http_server"`, `"generator"`). */
  readonly kind: string
  /**
   * Whether the source can pass acknowledgements to its upstream. The builder warns when an
   * acknowledging sink is fed by a source that cannot.
   */
  readonly canAcknowledge: boolean
  /** Problems in the source's own configuration; the builder reports them with everything else. */
  validate?(): readonly ConfigIssue[]
  /**
   * Runs until the context's signal aborts (or the source runs out, for finite sources). Must
   * not resolve before every batch it sent is accepted. If it throws (at once, or by rejecting),
   * the runtime reports `RUN_FAILED` naming the source, and the source counts as finished: what
   * it feeds drains and closes as after any other source.
   */
  run(context: SourceContext): Promise<void>
}
