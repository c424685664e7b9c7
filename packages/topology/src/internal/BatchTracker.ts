/**
 * What a source is told about its batches: the batch's own status; the status its authoritative
 * sinks recorded, as soon as every event of the batch was recorded; or `errored` when the ack
 * timeout (or a forced stop) comes first.
 *
 * Invariant: each tracked batch is reported exactly once, whichever comes first. Neither the
 * timeout nor an early report touches an event handle: the handles keep their single owners and
 * still end exactly once, later; only the source's view is decided early.
 */
import {
  BatchStatus as Batch,
  type BatchStatus,
  type BatchStatusReceiver,
  type EventStatus,
} from '@ackline/core'
import type { LifecycleEvent } from '../LifecycleEvent.js'
import type { Counters } from './Counters.js'

interface Pending {
  readonly batchId: string
  readonly start: number
  readonly resolve: (status: BatchStatus) => void
  timer: ReturnType<typeof setTimeout> | undefined
  /** Events of the batch not recorded by an authoritative sink yet. */
  unrecorded: number
  /** The fold of what authoritative sinks recorded so far. */
  recorded: BatchStatus
}

export class BatchTracker {
  readonly #pending = new Map<string, Pending>()

  constructor(
    readonly sourceId: string,
    readonly counters: Counters,
    readonly ackTimeoutMs: number | undefined,
    readonly emit: (fact: LifecycleEvent) => void,
  ) {}

  /** The status the source will be told for the batch of `events` events that `receiver` reports on. */
  track(receiver: BatchStatusReceiver, events: number): Promise<BatchStatus> {
    this.counters.inFlight++
    let resolve!: (status: BatchStatus) => void
    const promise = new Promise<BatchStatus>((r) => {
      resolve = r
    })
    const entry: Pending = {
      batchId: receiver.batchId,
      start: Date.now(),
      resolve,
      timer: undefined,
      unrecorded: events,
      recorded: Batch.initial,
    }
    this.#pending.set(entry.batchId, entry)
    receiver.promise.then((status) => this.#finish(entry, status, false))
    if (this.ackTimeoutMs !== undefined) {
      entry.timer = setTimeout(() => this.#finish(entry, 'errored', true), this.ackTimeoutMs)
    }
    return promise
  }

  /** Batches not reported yet. */
  get pending(): number {
    return this.#pending.size
  }

  /**
   * An authoritative sink recorded `status` for one event of batch `batchId` (each event once).
   * Once every event of the batch is recorded its status is final, so the source is told now,
   * even while other copies are still on their way.
   */
  recorded(batchId: string, status: EventStatus): void {
    const entry = this.#pending.get(batchId)
    if (entry === undefined) return
    entry.recorded = Batch.update(entry.recorded, status)
    if (--entry.unrecorded === 0) this.#finish(entry, entry.recorded, false)
  }

  /** Reports every pending batch `errored` now (a stop's deadline passed). */
  forceAll(): void {
    for (const entry of [...this.#pending.values()]) this.#finish(entry, 'errored', true)
  }

  #finish(entry: Pending, status: BatchStatus, timedOut: boolean): void {
    if (this.#pending.get(entry.batchId) !== entry) return
    this.#pending.delete(entry.batchId)
    if (entry.timer !== undefined) clearTimeout(entry.timer)
    const latencyMs = Date.now() - entry.start
    this.counters.inFlight--
    this.counters.latency(latencyMs)
    entry.resolve(status)
    this.emit({
      type: 'batch_resolved',
      source: this.sourceId,
      batchId: entry.batchId,
      status,
      latencyMs,
      timedOut,
    })
  }
}
