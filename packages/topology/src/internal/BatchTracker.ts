/**
 * What a source is told about its batches: the batch's own status, or `errored` when the ack
 * timeout (or a forced stop) comes first.
 *
 * Invariant: each tracked batch is reported exactly once, whichever comes first. The timeout
 * never touches an event handle: the handles keep their single owners and still end exactly
 * once, later; only the source's view is decided early (at-least-once: the upstream redelivers).
 */
import type { BatchStatus, BatchStatusReceiver } from '@ackline/core'
import type { LifecycleEvent } from '../LifecycleEvent.js'
import type { Counters } from './Counters.js'

interface Pending {
  readonly batchId: string
  readonly start: number
  readonly resolve: (status: BatchStatus) => void
  timer: ReturnType<typeof setTimeout> | undefined
}

export class BatchTracker {
  readonly #pending = new Set<Pending>()

  constructor(
    readonly sourceId: string,
    readonly counters: Counters,
    readonly ackTimeoutMs: number | undefined,
    readonly emit: (fact: LifecycleEvent) => void,
  ) {}

  /** The status the source will be told for the batch `receiver` reports on. */
  track(receiver: BatchStatusReceiver): Promise<BatchStatus> {
    this.counters.inFlight++
    let resolve!: (status: BatchStatus) => void
    const promise = new Promise<BatchStatus>((r) => {
      resolve = r
    })
    const entry: Pending = { batchId: receiver.batchId, start: Date.now(), resolve, timer: undefined }
    this.#pending.add(entry)
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

  /** Reports every pending batch `errored` now (a stop's deadline passed). */
  forceAll(): void {
    for (const entry of [...this.#pending]) this.#finish(entry, 'errored', true)
  }

  #finish(entry: Pending, status: BatchStatus, timedOut: boolean): void {
    if (!this.#pending.delete(entry)) return
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
