/**
 * What a source is told about its batches: the batch's own status; the status its authoritative
 * sinks recorded, as soon as every event of the batch was recorded; or `errored` when the ack
 * timeout (or a forced stop) comes first.
 *
 * Invariant: each tracked batch is reported exactly once, whichever comes first. Neither the
 * timeout nor an early report touches an event handle: the handles keep their single owners and
 * still end exactly once, later; only the source's view is decided early.
 *
 * Cost: a tracked batch is one object: it is also the source's receipt, the listener its
 * receiver calls when it resolves (no closure), and a link in the list of pending batches (no map
 * entry; a map by receiver is kept only for sources that feed an authoritative sink, which report
 * by receiver). The receipt's promise is made only when the source reads `status`, the batch id
 * only when someone reads it, and the `batch_resolved` fact only while someone watches the
 * lifecycle. While nobody watches, a batch that resolves is decided inside the `end` that
 * resolved it: deciding only counts, unlinks and settles the receipt's promise (whose reactions
 * run later), so no code of anyone else's runs inside that `end`. While someone watches, the
 * facts (the watcher's code) are emitted for the batches resolved in one microtask per burst,
 * never inside the `end`. A delivered batch costs nothing more for its failure: the failure is
 * read from the receiver (or made) only for a batch that ends otherwise.
 */
import {
  BatchStatus as Batch,
  type BatchResolvedListener,
  type BatchStatus,
  type BatchStatusReceiver,
  type EventStatus,
  type RecordOutcomes,
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

/** The fields of a tracked batch that only some batches use. */
class RareFields {
  timer: ReturnType<typeof setTimeout> | undefined = undefined
  /** The fold of what authoritative sinks recorded so far. */
  recorded: BatchStatus = Batch.initial
  /** The failure that explains `recorded`, as the first authoritative sink to raise it said. */
  recordedFailure: BatchFailure | undefined = undefined
  /** Events of the batch not recorded by an authoritative sink yet; -1 until the first record. */
  unrecorded = -1
  /** The outcomes taken when the batch was decided. */
  outcomes: RecordOutcomes | undefined = undefined
  /** What the source was told was the failure; `undefined` when delivered or not decided yet. */
  failure: BatchFailure | undefined = undefined
}

/**
 * One tracked batch, and the receipt its source holds. Every field is paid per batch in flight,
 * so it keeps only the list links, the decision (or, before it, the resolver of a source that
 * waits for it) and the receipt's promise (made when the source reads `status`); a timeout,
 * authoritative records, outcomes and a failure use {@link RareFields}.
 */
class TrackedBatch implements BatchReceipt, BatchResolvedListener {
  /** Neighbours in the tracker's list of pending batches, oldest first. */
  prev: TrackedBatch | undefined = undefined
  next: TrackedBatch | undefined = undefined
  /** What only some batches need; made on first use. */
  rare: RareFields | undefined = undefined
  /**
   * What the source was told (a status); before that, the resolver of the receipt's promise when
   * the source already waits for it, or `undefined`. One field for the two, as each is paid per batch.
   */
  #decision: BatchStatus | ((status: BatchStatus) => void) | undefined = undefined
  #promise: Promise<BatchStatus> | undefined = undefined

  constructor(
    readonly tracker: BatchTracker,
    readonly receiver: BatchStatusReceiver,
    /**
     * When the batch started, in ms after the tracker's epoch (a small integer, not a boxed
     * double). Kept, not read from the batch id's stamp: stamps never go backwards,
     * but the clock may (a stepped clock, fake timers), and latency is measured on the clock.
     */
    readonly start: number,
  ) {}

  rareFields(): RareFields {
    if (this.rare === undefined) this.rare = new RareFields()
    return this.rare
  }

  /** Called by the receiver, inside the `end` that resolved the batch. */
  batchResolved(status: BatchStatus): void {
    this.tracker._resolved(this, status)
  }

  get batchId(): string {
    return this.receiver.batchId
  }

  /** What the source was told was the failure; `undefined` when delivered or not decided yet. */
  get failure(): BatchFailure | undefined {
    return this.rare?.failure
  }

  /** What the source was told; `undefined` until then. */
  get decided(): BatchStatus | undefined {
    const decision = this.#decision
    return typeof decision === 'string' ? decision : undefined
  }

  get status(): Promise<BatchStatus> {
    if (this.#promise === undefined) {
      const decided = this.decided
      this.#promise =
        decided !== undefined
          ? Promise.resolve(decided)
          : new Promise<BatchStatus>((resolve) => {
              this.#decision = resolve
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
    return this.status.then(() => this.rare?.outcomes ?? this.receiver.outcomesNow()!)
  }

  decide(status: BatchStatus, failure: BatchFailure | undefined): void {
    if (failure !== undefined) this.rareFields().failure = failure
    // Taken a microtask later: an authoritative sink reports a record to the tracker just before
    // it ends (and so records) the event, in the same synchronous call.
    if (this.receiver.keepsOutcomes) {
      queueMicrotask(() => {
        this.rareFields().outcomes = this.receiver.outcomesNow()
      })
    }
    const waiting = this.#decision
    this.#decision = status
    if (typeof waiting === 'function') waiting(status)
  }
}

export class BatchTracker {
  /** The pending batches, oldest first, as a list through the batches themselves. */
  #head: TrackedBatch | undefined = undefined
  #tail: TrackedBatch | undefined = undefined
  #count = 0
  /** The pending batches by receiver, for authoritative sinks (they report by receiver); only when one is fed. */
  readonly #byReceiver: Map<BatchStatusReceiver, TrackedBatch> | undefined
  /** While someone watches the facts: batches whose receivers resolved since the last flush. */
  #resolved: TrackedBatch[] = []
  #flushScheduled = false
  /** Start times are kept relative to this (see `TrackedBatch.start`). */
  readonly #epoch = Date.now()
  readonly #flush = (): void => {
    this.#flushScheduled = false
    const resolved = this.#resolved
    this.#resolved = []
    for (let i = 0; i < resolved.length; i++) {
      const entry = resolved[i]!
      const receiver = entry.receiver
      this.#finish(
        entry,
        receiver.status!,
        receiver.status === 'delivered' ? undefined : receiver.reason,
        false,
      )
    }
  }

  constructor(
    readonly sourceId: string,
    readonly counters: Counters,
    readonly ackTimeoutMs: number | undefined,
    readonly facts: FactSink,
    /** Whether an authoritative sink may report this source's batches (see {@link recorded}). */
    authoritative = true,
  ) {
    this.#byReceiver = authoritative ? new Map() : undefined
  }

  /**
   * @internal A tracked batch's receiver resolved: decide it now while nobody watches the facts
   * (see the module header), or report it in the next flush.
   */
  _resolved(entry: TrackedBatch, status: BatchStatus): void {
    if (!this.facts.watching()) {
      this.#finish(entry, status, status === 'delivered' ? undefined : entry.receiver.reason, false)
      return
    }
    this.#resolved.push(entry)
    if (!this.#flushScheduled) {
      this.#flushScheduled = true
      queueMicrotask(this.#flush)
    }
  }

  /**
   * Tracks the batch that `receiver` reports on (its events attached already), created at
   * `start` (ms since the epoch); returns the receipt its source is given.
   */
  track(receiver: BatchStatusReceiver, start: number): BatchReceipt {
    this.counters.inFlight++
    const entry = new TrackedBatch(this, receiver, start - this.#epoch)
    const tail = this.#tail
    if (tail === undefined) this.#head = entry
    else {
      tail.next = entry
      entry.prev = tail
    }
    this.#tail = entry
    this.#count++
    this.#byReceiver?.set(receiver, entry)
    receiver.onResolved(entry)
    // A receiver that had resolved already (an empty batch) calls back at once, and while nobody
    // watches the batch is decided there: no timer for it, nothing would clear one.
    if (entry.decided !== undefined) return entry
    if (this.ackTimeoutMs !== undefined) {
      const ms = this.ackTimeoutMs
      entry.rareFields().timer = setTimeout(
        () =>
          this.#finish(
            entry,
            'errored',
            this.#failure('ACK_TIMEOUT', `the batch did not resolve within ackTimeoutMs (${ms} ms)`),
            true,
          ),
        ms,
      )
    }
    return entry
  }

  /** Batches not reported yet. */
  get pending(): number {
    return this.#count
  }

  /**
   * An authoritative sink recorded `status` for one event of the batch `receiver` reports on (each
   * event once). Once every event of the batch is recorded its status is final, so the source is
   * told now, even while other copies are still on their way.
   */
  recorded(receiver: BatchStatusReceiver, status: EventStatus, failure: BatchFailure | undefined): void {
    const entry = this.#byReceiver?.get(receiver)
    if (entry === undefined) return
    const rare = entry.rareFields()
    if (rare.unrecorded < 0) rare.unrecorded = receiver.eventCount
    const next = Batch.update(rare.recorded, status)
    if (next !== rare.recorded) {
      rare.recorded = next
      rare.recordedFailure = failure
    } else if (next !== 'delivered' && rare.recordedFailure === undefined) {
      rare.recordedFailure = failure
    }
    if (--rare.unrecorded === 0) this.#finish(entry, rare.recorded, rare.recordedFailure, false)
  }

  /**
   * Reports every pending batch now (a stop's deadline passed): `errored`, unless its receiver
   * has resolved and only the report was still queued.
   */
  forceAll(): void {
    const entries: TrackedBatch[] = []
    for (let entry = this.#head; entry !== undefined; entry = entry.next) entries.push(entry)
    for (const entry of entries) {
      const status = entry.receiver.status
      if (status === undefined) {
        const failure = this.#failure('STOPPED', 'the topology stopped before the batch resolved')
        this.#finish(entry, 'errored', failure, true)
      } else {
        this.#finish(entry, status, status === 'delivered' ? undefined : entry.receiver.reason, false)
      }
    }
  }

  /**
   * Decides the batch. `reason` is what explains a status other than `delivered` (a failure made
   * by the runtime, or whatever reason the batch's receiver kept); a batch that is not delivered
   * always gets a failure, `UNEXPLAINED` when nothing said why.
   */
  #finish(entry: TrackedBatch, status: BatchStatus, reason: unknown, timedOut: boolean): void {
    if (entry.decided !== undefined) return
    this.#unlink(entry)
    const timer = entry.rare?.timer
    if (timer !== undefined) clearTimeout(timer)
    const latencyMs = Date.now() - this.#epoch - entry.start
    this.counters.inFlight--
    this.counters.latency(latencyMs)
    if (status === 'delivered') {
      entry.decide(status, undefined)
      if (this.facts.watching()) {
        this.facts.emit({
          type: 'batch_resolved',
          source: this.sourceId,
          batchId: entry.batchId,
          status,
          latencyMs,
          timedOut,
        })
      }
      return
    }
    const failure =
      asFailure(reason) ?? this.#failure('UNEXPLAINED', `the batch ended ${status} and no component said why`)
    // The source's own decisions (timeouts, stops) are counted here; the others where they were made.
    if (failure.componentId === this.sourceId) this.counters.failed(failure.code, 1)
    entry.decide(status, failure)
    if (this.facts.watching()) {
      this.facts.emit({
        type: 'batch_resolved',
        source: this.sourceId,
        batchId: entry.batchId,
        status,
        latencyMs,
        timedOut,
        failure,
      })
    }
  }

  #unlink(entry: TrackedBatch): void {
    const { prev, next } = entry
    if (prev === undefined) this.#head = next
    else prev.next = next
    if (next === undefined) this.#tail = prev
    else next.prev = prev
    entry.prev = undefined
    entry.next = undefined
    this.#count--
    this.#byReceiver?.delete(entry.receiver)
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
