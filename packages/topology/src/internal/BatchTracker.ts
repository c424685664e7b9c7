/**
 * What a source is told about its batches: the batch's own status; the status its authoritative
 * sinks recorded, as soon as every event of the batch was recorded; or `errored` when the ack
 * timeout (or a forced stop) comes first.
 *
 * Invariant: each tracked batch is reported exactly once, whichever comes first. Neither the
 * timeout nor an early report touches an event handle: the handles keep their single owners and
 * still end exactly once, later; only the source's view is decided early.
 *
 * Cost: a tracked batch costs the tracker no object of its own while in flight. The tracker is the
 * listener every receiver calls when it resolves (one object for all batches, no closure); it
 * counts pending batches rather than listing them, and finds them, when a stop gives up on them,
 * among the batches core still watches (`LeakDetector.forEachUnresolved`). What a batch needs
 * beyond its receiver (a decision made before it resolved, a failure, a source waiting
 * on its receipt, authoritative records) is kept with the receiver, in a {@link Tracking} made on
 * first use. With an ack timeout, the tracker keeps its batches in one queue in deadline order,
 * with one timer for the oldest (a slot per batch, not a timer per batch). The receipt is made per
 * send and held only by the source, so a source that drops it leaves nothing behind. The
 * receipt's promise is made only when the source reads `status`, the batch id only when someone
 * reads it, and the `batch_resolved` fact only while someone watches the lifecycle.
 *
 * A batch that resolves is decided inside the `end` that resolved it: deciding only counts and
 * settles the receipt's promise (whose reactions run later), so no code of anyone else's runs
 * inside that `end`. While someone watches, the facts (the watcher's code) of the batches decided
 * so are emitted in one microtask per burst, never inside the `end`; facts keep the order of the
 * decisions. A delivered batch costs nothing more for its failure: the failure is read from the
 * receiver (or made) only for a batch that ends otherwise.
 */
import {
  BatchStatus as Batch,
  type BatchResolvedListener,
  type BatchStatus,
  type BatchStatusReceiver,
  type EventStatus,
  LeakDetector,
  type RecordOutcomes,
  SlotBatches,
  type SlotBatchOwner,
  type SlotBlock,
} from '@ackline/core'
import type { BatchFailure } from '../BatchFailure.js'
import type { LifecycleEvent } from '../LifecycleEvent.js'
import type { BatchReceipt } from '../Source.js'
import type { Counters } from './Counters.js'

/** Where the tracker reports: `emit` a fact, and whether anyone is `watching` at all. */
export interface FactSink {
  readonly emit: (fact: LifecycleEvent) => void
  readonly watching: () => boolean
}

/**
 * What the tracker keeps for the batches that need more than their receiver: a decision made
 * before the batch resolved (a timeout, authoritative records, a forced stop) or a failure, a
 * source waiting on its receipt, outcomes. Kept in the receiver's `tracking`, made on first use:
 * a batch delivered while nobody waits on it never has one, with an ack timeout or without (the
 * timeouts are kept by the tracker, see `BatchTracker.#timeouts`). A batch whose source asked for
 * per-record outcomes always has one (they are taken when it is decided).
 */
class Tracking {
  /** What the source was told, once decided; a batch decided when it resolved without anything else to keep has no `Tracking`. */
  decided: BatchStatus | undefined = undefined
  /** What the source was told was the failure; `undefined` when delivered or not decided yet. */
  failure: BatchFailure | undefined = undefined
  /** The outcomes taken when the batch was decided. */
  taken: RecordOutcomes | undefined = undefined
  /** The resolver of the receipt's promise, while its source waits for the decision. */
  waiting: ((status: BatchStatus) => void) | undefined = undefined
  /** The fold of what authoritative sinks recorded so far. */
  recorded: BatchStatus = Batch.initial
  /** The failure that explains `recorded`, as the first authoritative sink to raise it said. */
  recordedFailure: BatchFailure | undefined = undefined
  /** Events of the batch not recorded by an authoritative sink yet; -1 until the first record. */
  unrecorded = -1
}

/**
 * The receipt of a batch kept as a slot (RFC 0009), which is also its tracking: the tracker
 * decides it in `slotResolved`, or, once the batch got a receiver (a reason, a record, a forced
 * stop), through that receiver, whose `tracking` it then is. So a slot batch with a receipt is
 * this one object (and the promise of its status, once the source waits on it), where a batch
 * with a notifier is a notifier, a state, a receipt and a tracking. Never has outcomes: a send
 * that asks for them keeps its notifier.
 */
export class SlotReceipt extends Tracking implements BatchReceipt {
  /** The id's millisecond after the epoch and its counter, set by the runner once the batch is made. */
  idMs = 0
  idSeq = 0
  #promise: Promise<BatchStatus> | undefined = undefined

  get batchId(): string {
    return SlotBatches.idOf(this.idMs, this.idSeq)
  }

  get status(): Promise<BatchStatus> {
    if (this.#promise === undefined) {
      const decided = this.decided
      // No helper taking a closure for the tracking: that closure was ~100 bytes a batch more.
      this.#promise =
        decided !== undefined
          ? Promise.resolve(decided)
          : new Promise<BatchStatus>((resolve) => {
              this.waiting = resolve
            })
    }
    return this.#promise
  }
}

/** The receiver's tracking, if it has one. */
const trackingOf = (receiver: BatchStatusReceiver): Tracking | undefined =>
  receiver.tracking as Tracking | undefined

/** The receiver's tracking, made now if it had none. */
function tracking(receiver: BatchStatusReceiver): Tracking {
  let kept = trackingOf(receiver)
  if (kept === undefined) {
    kept = new Tracking()
    receiver.tracking = kept
  }
  return kept
}

/**
 * What the source was told about the batch: the decision its tracking keeps, or else, once the
 * receiver resolved, its status (the tracker decides every batch by the time its receiver has
 * told it). `undefined` until then.
 */
function decidedOf(receiver: BatchStatusReceiver): BatchStatus | undefined {
  return trackingOf(receiver)?.decided ?? receiver.status
}

/** Whether an entry of the ack-timeout queue still waits for its decision. */
const stillPending = (receiver: BatchStatusReceiver | undefined): receiver is BatchStatusReceiver =>
  receiver !== undefined && decidedOf(receiver) === undefined

/**
 * The receipt a source is given for a batch. Nothing of the tracker's holds it, so a source that
 * drops it (most do) leaves only the batch's receiver and notifier in flight; everything a
 * receipt reads is kept with the receiver.
 */
export class Receipt implements BatchReceipt {
  #promise: Promise<BatchStatus> | undefined = undefined

  constructor(readonly receiver: BatchStatusReceiver) {}

  get batchId(): string {
    return this.receiver.batchId
  }

  /** What the source was told was the failure; `undefined` when delivered or not decided yet. */
  get failure(): BatchFailure | undefined {
    return trackingOf(this.receiver)?.failure
  }

  /** What the source was told; `undefined` until then. */
  get decided(): BatchStatus | undefined {
    return decidedOf(this.receiver)
  }

  get status(): Promise<BatchStatus> {
    // One receipt per batch, and its promise is made once: one resolver to keep.
    if (this.#promise === undefined) {
      const decided = this.decided
      // As `SlotReceipt.status`: the tracking is made only while the source waits.
      this.#promise =
        decided !== undefined
          ? Promise.resolve(decided)
          : new Promise<BatchStatus>((resolve) => {
              tracking(this.receiver).waiting = resolve
            })
    }
    return this.#promise
  }

  /**
   * Per-record outcomes, for batches that keep them: taken when the batch is decided, so they
   * agree with the status the source is told.
   */
  get outcomes(): Promise<RecordOutcomes> | undefined {
    if (!this.receiver.keepsOutcomes) return undefined
    // The snapshot's microtask was queued before the status settled, so it has run by now.
    return this.status.then(() => trackingOf(this.receiver)?.taken ?? this.receiver.outcomesNow()!)
  }
}

/** A `batch_resolved` fact waiting for the next flush, while someone watches. */
interface QueuedFact {
  readonly batchId: string
  readonly status: BatchStatus
  readonly latencyMs: number
  readonly failure: BatchFailure | undefined
}

export class BatchTracker implements BatchResolvedListener, SlotBatchOwner {
  /** Batches not decided yet. */
  #count = 0
  /**
   * With an ack timeout: the batches tracked and their deadlines, in the order they were tracked,
   * which is the order of their deadlines (each is the time it was tracked plus `ackTimeoutMs`,
   * on the monotonic clock `performance.now()`, which no wall-clock step moves). One timer, for
   * the oldest undecided batch, serves them all: a timer per batch costs an object, its list
   * entry and about as much CPU as the rest of the batch's tracking. Entries before
   * `#timeoutsHead`, and batches decided otherwise, are dead; the queue is compacted when it has
   * at least 32 slots and more than half of them are dead, and dropped whenever nothing is
   * pending.
   */
  #timeouts: (BatchStatusReceiver | undefined)[] | undefined = undefined
  /** `#deadlines[i]`: when `#timeouts[i]` times out, in `performance.now()` ms (unboxed doubles). */
  #deadlines: number[] = []
  /** The first entry of `#timeouts` not dealt with yet. */
  #timeoutsHead = 0
  #timer: ReturnType<typeof setTimeout> | undefined = undefined
  /** While `#expire` walks the queue: it is not compacted, and no timer is armed, under it. */
  #expiring = false
  /** While someone watches: facts of batches decided inside an `end`, emitted at the next flush. */
  #facts: QueuedFact[] = []
  #flushScheduled = false
  readonly #flush = (): void => {
    this.#flushScheduled = false
    const facts = this.#facts
    if (facts.length === 0) return
    this.#facts = []
    // Whoever watched when the batches were decided may have left since: facts go to watchers only.
    if (!this.facts.watching()) return
    for (let i = 0; i < facts.length; i++) {
      const { batchId, status, latencyMs, failure } = facts[i]!
      this.#emit(batchId, status, latencyMs, false, failure)
    }
  }

  constructor(
    readonly sourceId: string,
    readonly counters: Counters,
    readonly ackTimeoutMs: number | undefined,
    readonly facts: FactSink,
  ) {}

  /**
   * @internal A tracked batch's receiver resolved, inside the `end` that resolved it: decide it
   * now. Its fact, while someone watches, waits for a flush a microtask later (see the module
   * header); the flush is queued before the receipt settles, so a source that awaited its
   * receipt finds the fact emitted.
   */
  batchResolved(status: BatchStatus, receiver: BatchStatusReceiver, now: number): void {
    if (this.facts.watching() && !this.#flushScheduled) {
      this.#flushScheduled = true
      queueMicrotask(this.#flush)
    }
    this.#finish(receiver, status, status === 'delivered' ? undefined : receiver.reason, false, true, now)
  }

  /**
   * Tracks the batch that `receiver` reports on (its events attached already); returns the
   * receipt its source is given. The batch's latency is measured from the time its notifier was
   * opened with.
   */
  track(receiver: BatchStatusReceiver): Receipt {
    this.follow(receiver)
    return new Receipt(receiver)
  }

  /**
   * Starts tracking a batch kept as a slot (`SlotBatches`, with this tracker as its owner): it is
   * counted now, and decided in {@link BatchTracker.slotResolved}, or as any batch once it has a
   * receiver. Only for sources without an ack timeout: the timeout queue keeps receivers.
   */
  followSlot(): void {
    this.counters.inFlight++
    this.#count++
  }

  /**
   * A batch kept as a slot resolved (see {@link BatchTracker.followSlot}): decided as a batch
   * resolving with nothing kept is in `#finish`, with its id read now for the fact.
   */
  slotResolved(status: BatchStatus, openedAt: number, now: number, block: SlotBlock, index: number): void {
    const watching = this.facts.watching()
    if (watching && !this.#flushScheduled) {
      this.#flushScheduled = true
      queueMicrotask(this.#flush)
    }
    this.#count--
    const latencyMs = now - openedAt
    this.counters.inFlight--
    this.counters.latency(latencyMs)
    let failure: BatchFailure | undefined
    if (status !== 'delivered') {
      // No reason: an end with one gives the batch a state first, and so a receiver.
      failure = this.#failure('UNEXPLAINED', `the batch ended ${status} and no component said why`)
      this.counters.failed(failure.code, 1)
    }
    const receipt = block.trackingOf(index) as SlotReceipt | undefined
    if (receipt !== undefined) {
      receipt.decided = status
      receipt.failure = failure
      const waiting = receipt.waiting
      receipt.waiting = undefined
      waiting?.(status)
    }
    if (watching) this.#facts.push({ batchId: block.batchId(index), status, latencyMs, failure })
  }

  /**
   * Tracks the batch as {@link BatchTracker.track} does, for a source that will not read its
   * receipt (`send(records, { receipt: false })`): no receipt is made.
   */
  follow(receiver: BatchStatusReceiver): void {
    this.counters.inFlight++
    this.#count++
    receiver.onResolved(this)
    // A receiver that had resolved already (an empty batch) called back at once and the batch is
    // decided: it waits for no timeout.
    if (this.ackTimeoutMs !== undefined && decidedOf(receiver) === undefined) this.#awaitTimeout(receiver)
  }

  /** Queues `receiver` for its ack timeout, arming the timer when nothing else is waiting. */
  #awaitTimeout(receiver: BatchStatusReceiver): void {
    if (this.#timeouts === undefined) this.#timeouts = []
    const deadline = performance.now() + this.ackTimeoutMs!
    this.#timeouts.push(receiver)
    this.#deadlines.push(deadline)
    if (this.#timer === undefined && !this.#expiring)
      this.#timer = setTimeout(this.#expire, this.ackTimeoutMs!)
  }

  /**
   * The timer fired: every batch whose deadline has passed is decided `errored`, oldest first;
   * then the queue is compacted if it is mostly dead, and the timer armed for the oldest batch
   * still waiting. What a decision runs (a lifecycle watcher's code) may track batches or stop the
   * topology meanwhile: each entry is taken out of the queue before its batch is decided, and the
   * queue is read again after every decision.
   */
  readonly #expire = (): void => {
    this.#timer = undefined
    const now = performance.now()
    const ms = this.ackTimeoutMs!
    this.#expiring = true
    try {
      for (;;) {
        const queue = this.#timeouts
        const head = this.#timeoutsHead
        if (queue === undefined || head >= queue.length) break
        const receiver = queue[head]
        const due = stillPending(receiver)
        if (due && this.#deadlines[head]! > now) break
        queue[head] = undefined
        this.#timeoutsHead = head + 1
        if (due) {
          this.#finish(
            receiver,
            'errored',
            this.#failure('ACK_TIMEOUT', `the batch did not resolve within ackTimeoutMs (${ms} ms)`),
            true,
            false,
          )
        }
      }
    } finally {
      this.#expiring = false
    }
    this.#settleTimeouts()
  }

  /**
   * After a decision or an expiry, with an ack timeout: the queue goes once nothing is pending;
   * it is compacted when it has at least 32 slots and more than half of them are dead (so it
   * holds at most about twice the pending batches, at a constant amortised cost per batch); the
   * timer is armed for the oldest pending batch if it is not.
   */
  #settleTimeouts(): void {
    const queue = this.#timeouts
    if (queue === undefined || this.#expiring) return
    if (this.#count === 0) {
      if (this.#timer !== undefined) clearTimeout(this.#timer)
      this.#timer = undefined
      this.#timeouts = undefined
      this.#deadlines = []
      this.#timeoutsHead = 0
      return
    }
    // Every pending batch is in the queue: the rest of it is dead.
    if (queue.length >= 32 && (queue.length - this.#count) * 2 > queue.length) {
      const kept: BatchStatusReceiver[] = []
      const deadlines: number[] = []
      for (let i = this.#timeoutsHead; i < queue.length; i++) {
        const receiver = queue[i]
        if (stillPending(receiver)) {
          kept.push(receiver)
          deadlines.push(this.#deadlines[i]!)
        }
      }
      this.#timeouts = kept
      this.#deadlines = deadlines
      this.#timeoutsHead = 0
    }
    if (this.#timer !== undefined) return
    const timeouts = this.#timeouts!
    let head = this.#timeoutsHead
    while (head < timeouts.length && !stillPending(timeouts[head])) head++
    this.#timeoutsHead = head
    if (head < timeouts.length) {
      this.#timer = setTimeout(this.#expire, Math.max(0, this.#deadlines[head]! - performance.now()))
    }
  }

  /** Slots of the ack-timeout queue, dead ones included (for tests of its bound). */
  get timeoutQueueLength(): number {
    return this.#timeouts === undefined ? 0 : this.#timeouts.length
  }

  /** Batches not reported yet. */
  get pending(): number {
    return this.#count
  }

  /**
   * An authoritative sink recorded `status` for one event of the batch `receiver` reports on (each
   * event once). Once every event of the batch is recorded its status is final, so the source is
   * told now, even while other copies are still on their way. A batch this tracker does not track,
   * or decided already, is ignored.
   */
  recorded(receiver: BatchStatusReceiver, status: EventStatus, failure: BatchFailure | undefined): void {
    if (!receiver.hasListener(this) || decidedOf(receiver) !== undefined) return
    const kept = tracking(receiver)
    if (kept.unrecorded < 0) kept.unrecorded = receiver.eventCount
    const next = Batch.update(kept.recorded, status)
    if (next !== kept.recorded) {
      kept.recorded = next
      kept.recordedFailure = failure
    } else if (next !== 'delivered' && kept.recordedFailure === undefined) {
      kept.recordedFailure = failure
    }
    if (--kept.unrecorded === 0) this.#finish(receiver, kept.recorded, kept.recordedFailure, false, false)
  }

  /**
   * Reports every pending batch now (a stop's deadline passed): `errored`. Every batch whose
   * receiver resolved was decided already, in the `end` that resolved it.
   */
  forceAll(): void {
    BatchTracker.forceAll([this])
  }

  /**
   * {@link BatchTracker.forceAll} for several trackers (a topology's sources) in one pass over the
   * batches core still watches, rather than one pass per tracker.
   */
  static forceAll(trackers: readonly BatchTracker[]): void {
    const pending = trackers.filter((tracker) => {
      tracker.#flush()
      return tracker.#count > 0
    })
    if (pending.length === 0) return
    LeakDetector.forEachUnresolved((receiver) => {
      for (const tracker of pending) {
        if (!receiver.hasListener(tracker)) continue
        if (decidedOf(receiver) === undefined) {
          const failure = tracker.#failure('STOPPED', 'the topology stopped before the batch resolved')
          tracker.#finish(receiver, 'errored', failure, true, false)
        }
        return
      }
    })
  }

  /**
   * Decides the batch, once. `reason` is what explains a status other than `delivered` (a failure
   * made by the runtime, or whatever reason the batch's receiver kept); a batch that is not
   * delivered always gets a failure, `UNEXPLAINED` when nothing said why. `deferFact`: the
   * decision is made inside an `end`, so its fact waits for the flush. `now`: the clock reading
   * its latency is measured to (the one its receiver resolved with, shared by the batches one
   * `end` resolved).
   */
  #finish(
    receiver: BatchStatusReceiver,
    status: BatchStatus,
    reason: unknown,
    timedOut: boolean,
    deferFact: boolean,
    now = Date.now(),
  ): void {
    let kept = trackingOf(receiver)
    if (kept?.decided !== undefined) return
    this.#count--
    if (this.#timeouts !== undefined) this.#settleTimeouts()
    const latencyMs = now - receiver.openedAt
    this.counters.inFlight--
    this.counters.latency(latencyMs)
    let failure: BatchFailure | undefined
    if (status !== 'delivered') {
      failure =
        asFailure(reason) ??
        this.#failure('UNEXPLAINED', `the batch ended ${status} and no component said why`)
      // The source's own decisions (timeouts, stops) are counted here; the others where they were made.
      if (failure.componentId === this.sourceId) this.counters.failed(failure.code, 1)
    }
    // A batch decided as its receiver resolves, delivered, with nothing else kept: its receiver's
    // status is the decision, so nothing more is written (the common case costs no object).
    if (kept !== undefined || failure !== undefined || !deferFact || receiver.keepsOutcomes) {
      kept ??= tracking(receiver)
      kept.decided = status
      kept.failure = failure
      // Taken a microtask later: an authoritative sink reports a record to the tracker just before
      // it ends (and so records) the event, in the same synchronous call.
      if (receiver.keepsOutcomes) {
        const snapshot = kept
        queueMicrotask(() => {
          snapshot.taken = receiver.outcomesNow()
        })
      }
      const waiting = kept.waiting
      kept.waiting = undefined
      waiting?.(status)
    }
    if (!this.facts.watching()) return
    if (deferFact) this.#facts.push({ batchId: receiver.batchId, status, latencyMs, failure })
    else {
      this.#flush() // facts keep the order of the decisions
      this.#emit(receiver.batchId, status, latencyMs, timedOut, failure)
    }
  }

  #emit(
    batchId: string,
    status: BatchStatus,
    latencyMs: number,
    timedOut: boolean,
    failure: BatchFailure | undefined,
  ): void {
    this.facts.emit({
      type: 'batch_resolved',
      source: this.sourceId,
      batchId,
      status,
      latencyMs,
      timedOut,
      ...(failure === undefined ? {} : { failure }),
    })
  }

  #failure(code: string, message: string): BatchFailure {
    return { componentId: this.sourceId, code, message: `source '${this.sourceId}': ${message}` }
  }
}

/**
 * A reason kept by core, as a failure: the runtime's own reasons are failures already; a reason
 * from other code (a source's own notifiers, a custom buffer) counts when it has the same shape.
 */
function asFailure(reason: unknown): BatchFailure | undefined {
  if (typeof reason !== 'object' || reason === null) return undefined
  const { componentId, code, message } = reason as Partial<Record<keyof BatchFailure, unknown>>
  if (typeof componentId === 'string' && typeof code === 'string' && typeof message === 'string') {
    return reason as BatchFailure
  }
  return undefined
}
