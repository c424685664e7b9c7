/**
 * A disk buffer in front of a sink: the `EdgeBuffer` of `@ackline/topology` on top of a
 * {@link DiskBuffer}.
 *
 * Invariants:
 * - An event's batch is never told `delivered` before the event is safe: with
 *   `acknowledgements: 'on-write'`, once its record is durable under the sync policy; with
 *   `'on-delivery'`, once the sink delivered the record read back from disk.
 * - Every finalizer group taken off a pushed event is ended exactly once in this process run:
 *   `delivered` (durable or delivered), `rejected` (dropped when full, too large, not encodable
 *   as JSON, or rejected by the sink and dead-lettered), `errored` (the write failed, or the
 *   buffer was disposed first).
 * - A record read back is a fresh batch of the buffer's own (source id `<sinkId>:buffer`);
 *   what the sink reports on it decides the record's fate: acknowledged, redelivered after a
 *   back-off, or dead-lettered. An `errored` record is never deleted.
 *
 * Events read back are what JSON made of them: a number that is not finite comes back `null`, a
 * member whose value is `undefined` comes back absent, and an ingest timestamp that is not a
 * finite number comes back `NaN` (RFC 0003, back pressure and limits).
 *
 * At-least-once across restarts: finalizers do not survive a process; after a restart the records
 * on disk are delivered again without them, and the sources (whose batches were never settled)
 * resend what they did not get acknowledged. Records acknowledged above the first unacknowledged
 * one may be delivered again after a crash.
 *
 * @module
 */
import {
  type BatchStatus,
  type BatchStatusReceiver,
  EventArray,
  EventFinalizerGroups,
  type JsonObject,
  type LogEvent,
  SlotBatches,
} from '@ackline/core'
import type { BatchFailure, EdgeBuffer } from '@ackline/topology'
import { type AppendResult, DiskBuffer, type DiskBufferMetrics, type ReplayResult } from './DiskBuffer.js'
import { DiskBufferError } from './DiskBufferError.js'
import { DiskEdgeBufferOptions } from './DiskBufferOptions.js'
import { EventRecord } from './internal/EventRecord.js'
import { RecordOrigins } from './internal/RecordOrigins.js'

/** An event in the dead-letter queue, decoded. */
export interface DeadLetterEvent {
  /** Its record's sequence number in the main queue when it was rejected. */
  readonly originalSeq: number
  /** The event's fields, as stored. */
  readonly fields: JsonObject
  /** The id of the source the event came from, if it had one. */
  readonly sourceId: string | undefined
  /** When the event entered the pipeline, ms since the epoch (`NaN` when it had no valid time). */
  readonly ingestTimestamp: number
}

/** The counters of a disk edge buffer: its record store's, and what the adapter settled on its own. */
export interface DiskEdgeBufferMetrics extends DiskBufferMetrics {
  /** Events settled `rejected` because the buffer was full (`whenFull: 'drop_newest'`). */
  readonly droppedWhenFull: number
  /** Events settled `rejected` because their record could not fit a segment. */
  readonly rejectedTooLarge: number
  /**
   * Events settled `rejected` because their fields cannot be written as a JSON object (nested too
   * deep, a BigInt, a cycle, a `toJSON` that gives something else); the reason they carry is a
   * `BatchFailure` of code `UNENCODABLE`.
   */
  readonly rejectedUnencodable: number
  /** Events settled `errored` because their write failed. */
  readonly writeErrored: number
  /** Records the sink rejected that were moved to the dead-letter queue in this run. */
  readonly deadLetteredThisRun: number
}

/** A disk buffer as the topology runtime sees it (its `EdgeBuffer`), with inspection on the side. */
export interface DiskEdgeBuffer extends EdgeBuffer {
  /**
   * Stores the events. Resolves once they are written (fsynced under `'always'`), settled, or,
   * when full and blocking, once there is room. The handles are consumed.
   */
  push(events: EventArray): Promise<void>
  /**
   * The next events for the sink, each a fresh batch of its own; `undefined` once closed and
   * drained, or on an abort that came before the pull took records (events it took are handed out
   * even so, and must be ended).
   */
  pull(signal?: AbortSignal): Promise<EventArray | undefined>
  /** No more pushes; `pull` drains what is left, then returns `undefined` and the files are closed. */
  close(): Promise<void>
  /** Closes the files now without draining. What is on disk stays for the next open; batches still waiting are settled `errored`. */
  dispose(): Promise<void>
  /** The record store underneath (for inspection and tests). */
  readonly store: DiskBuffer
  /** A snapshot of the edge's counters: the store's, and what the edge rejected, retried and dead-lettered. */
  metrics(): DiskEdgeBufferMetrics
  /** The events in the dead-letter queue, oldest first. */
  deadLetters(): AsyncGenerator<DeadLetterEvent>
  /** Moves every dead letter back into the queue, to be delivered again. */
  replayDeadLetters(): Promise<ReplayResult>
}

class DiskEdgeBufferImpl implements DiskEdgeBuffer {
  readonly store: DiskBuffer
  readonly #sinkId: string
  /**
   * The batches of records read back: one per record, kept as slots (RFC 0009), each with its
   * sequence number as its tracking; their source id is `<sinkId>:buffer`.
   */
  readonly #readBack: SlotBatches
  readonly #onWrite: boolean
  readonly #whenFull: 'wait' | 'refuse'
  readonly #maxPerPull: number
  readonly #log: (message: string) => void
  /** `closing`: no more pushes, pulls drain; `closed`: the store is closing or closed (`shutDown` resolves once it is). */
  #state:
    | { readonly kind: 'open' | 'closing' }
    | { readonly kind: 'closed'; readonly shutDown: Promise<void> } = { kind: 'open' }
  /** The original finalizer groups of records written in this run, by sequence number ('on-delivery'). */
  readonly #origins = new RecordOrigins()
  /**
   * Records read back whose batch resolved and that are not settled yet: sequence number,
   * status, reason, three entries each. They are settled together in one microtask (see `pull`).
   */
  #resolved: unknown[] = []
  readonly #m = {
    droppedWhenFull: 0,
    rejectedTooLarge: 0,
    rejectedUnencodable: 0,
    writeErrored: 0,
    deadLetteredThisRun: 0,
  }

  constructor(store: DiskBuffer, options: DiskEdgeBufferOptions, log: (message: string) => void) {
    this.store = store
    this.#sinkId = options.sinkId
    this.#readBack = new SlotBatches(`${options.sinkId}:buffer`, {
      slotResolved: (status, _openedAt, _now, block, index) =>
        this.#heard(block.trackingOf(index) as number, status, undefined),
      // A record's batch that got a state (its sink gave a reason, say): the reason is on it.
      batchResolved: (status, receiver) => this.#heard(receiver.tracking as number, status, receiver),
    })
    this.#onWrite = options.acknowledgements === 'on-write'
    this.#whenFull = options.whenFull === 'drop_newest' ? 'refuse' : 'wait'
    this.#maxPerPull = options.maxEventsPerPull ?? 1000
    this.#log = log
  }

  async push(events: EventArray): Promise<void> {
    const list = events.events
    const groups = EventFinalizerGroups.detach(list)
    if (this.#state.kind !== 'open') {
      groups.endAll('errored')
      for (const event of list) event.end()
      throw new DiskBufferError('CLOSED', `push after close (sink ${this.#sinkId})`, this.store.path)
    }
    const payloads: string[] = []
    const index: number[] = []
    let result: AppendResult
    try {
      const max = this.store.maxRecordBytes
      for (let i = 0; i < list.length; i++) {
        const event = list[i]!
        const payload = this.#encode(event)
        event.end() // the handle carries no finalizer any more: ending it settles nothing
        if (typeof payload !== 'string') {
          this.#m.rejectedUnencodable++
          groups.end(i, 'rejected', { reason: payload })
          this.#log(payload.message)
          continue
        }
        // UTF-8 takes at most 3 bytes per UTF-16 unit: most records need no count of their bytes.
        if (payload.length * 3 > max && Buffer.byteLength(payload, 'utf8') > max) {
          this.#m.rejectedTooLarge++
          const message = `disk buffer of sink ${this.#sinkId}: rejected an event of ${Buffer.byteLength(payload, 'utf8')} bytes, larger than a segment (${max} bytes of payload)`
          groups.end(i, 'rejected', { reason: this.#failure('RECORD_TOO_LARGE', message) })
          this.#log(message)
          continue
        }
        payloads.push(payload)
        index.push(i)
      }
      if (payloads.length === 0) return
      result = await this.store.append(payloads, { whenFull: this.#whenFull })
    } catch (error) {
      // Until the append answered, only this call holds the groups: none may stay detached.
      groups.endAll('errored')
      throw error
    }
    switch (result.status) {
      case 'full': {
        this.#m.droppedWhenFull += index.length
        const reason = this.#failure(
          'BUFFER_FULL',
          `the disk buffer of sink ${this.#sinkId} was full and dropped the events (whenFull: 'drop_newest')`,
        )
        for (const i of index) groups.end(i, 'rejected', { reason })
        return
      }
      case 'failed': {
        this.#m.writeErrored += index.length
        const reason = this.#failure(
          'WRITE_FAILED',
          `the disk buffer of sink ${this.#sinkId} could not write the events: ${result.error.message}`,
        )
        for (const i of index) groups.end(i, 'errored', { reason })
        return
      }
      case 'written':
        if (this.#onWrite) {
          const settle = (durable: 'durable' | 'failed'): void => {
            if (durable === 'durable') for (const i of index) groups.end(i, 'delivered')
            else {
              const reason = this.#notDurable()
              for (const i of index) groups.end(i, 'errored', { reason })
            }
          }
          // Under sync 'always' the promise is already resolved: settle before push returns.
          void result.durable.then(settle)
          await Promise.resolve()
        } else {
          const first = result.firstSeq
          // Usually every event was stored: then record k carries group k, and no index is kept.
          const push = this.#origins.add(
            first,
            index.length,
            groups,
            index.length === list.length ? undefined : index,
          )
          // With group commit a write may still fail after push resolved: those records never come
          // back. Ended by the push, not by number: the numbers may be a later push's by then.
          void result.durable.then((durable) => {
            if (durable === 'durable') return
            this.#origins.endPush(push, 'errored', { reason: this.#notDurable() })
          })
        }
        return
    }
  }

  /** Why events written, but not made durable (their write or fsync failed after push), are errored. */
  #notDurable(): BatchFailure {
    return this.#failure(
      'WRITE_FAILED',
      `the disk buffer of sink ${this.#sinkId} could not make the events durable (their write or fsync failed)`,
    )
  }

  /** Why the buffer settled events itself (what their sources' receipts report as the failure). */
  #failure(code: string, message: string): BatchFailure {
    return { componentId: this.#sinkId, code, message }
  }

  /**
   * The event's record, or the failure (code `UNENCODABLE`, as a sink's) that explains why it has
   * none: its finalizers are detached already, so a throw here would leave them unsettled.
   */
  #encode(event: LogEvent): string | BatchFailure {
    try {
      return EventRecord.encode(event)
    } catch (error) {
      // JSON.stringify throws on a BigInt, a cycle, or nesting deeper than its recursion goes.
      const cause = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
      return {
        componentId: this.#sinkId,
        code: 'UNENCODABLE',
        message: `disk buffer of sink ${this.#sinkId}: rejected an event whose fields cannot be written as JSON (${cause})`,
      }
    }
  }

  async pull(signal?: AbortSignal): Promise<EventArray | undefined> {
    for (;;) {
      const records = await this.store.read(this.#maxPerPull, { signal })
      if (records === undefined) {
        if (this.#state.kind === 'closing' && signal?.aborted !== true) await this.#shutDown()
        return undefined
      }
      const events: LogEvent[] = []
      const now = Date.now()
      for (const record of records) {
        const data = EventRecord.decode(record.payload)
        if (data === undefined) {
          this.#log(
            `disk buffer of sink ${this.#sinkId}: record ${record.seq} is not an event; dead-lettered`,
          )
          void this.#deadLetter(record.seq)
          continue
        }
        const event = EventRecord.toEvent(data)
        // One batch per record, so each record is acknowledged, retried or dead-lettered as soon
        // as the sink settled it, with its own reason. A slot: no notifier, state, listener or
        // promise per record; the leak detector still sees a record the sink loses.
        this.#readBack.adopt(event, now, record.seq)
        events.push(event)
      }
      if (events.length > 0) return new EventArray(events)
    }
  }

  async close(): Promise<void> {
    if (this.#state.kind !== 'open') return
    this.#state = { kind: 'closing' }
    this.store.endWrites()
  }

  dispose(): Promise<void> {
    return this.#shutDown()
  }

  metrics(): DiskEdgeBufferMetrics {
    return { ...this.store.metrics(), ...this.#m }
  }

  async *deadLetters(): AsyncGenerator<DeadLetterEvent> {
    for await (const letter of this.store.deadLetters()) {
      const data = EventRecord.decode(letter.payload)
      if (data !== undefined) yield { originalSeq: letter.originalSeq, ...data }
    }
  }

  replayDeadLetters(): Promise<ReplayResult> {
    return this.store.replayDeadLetters()
  }

  /**
   * The batch of record `seq` resolved. This runs inside whichever `end` resolved it, where no
   * other handle may be ended, so the record is only noted here; the records noted before the
   * next microtask (a sink ends a whole array in one call) are settled together in it.
   */
  #heard(seq: number, status: BatchStatus, receiver: BatchStatusReceiver | undefined): void {
    const resolved = this.#resolved
    if (resolved.length === 0) queueMicrotask(() => this.#settleHeard())
    resolved.push(seq, status, status === 'delivered' ? undefined : receiver?.reason)
  }

  #settleHeard(): void {
    const resolved = this.#resolved
    this.#resolved = []
    let failure: { readonly error: unknown } | undefined
    for (let i = 0; i < resolved.length; i += 3) {
      // One record's failure (a bug) must not leave the others unsettled: it is thrown after them.
      try {
        this.#settled(resolved[i] as number, resolved[i + 1] as BatchStatus, resolved[i + 2])
      } catch (error) {
        failure ??= { error }
      }
    }
    if (failure !== undefined) throw failure.error
  }

  /** `reason`: why the sink did not deliver the record, passed on to the original batches. */
  #settled(seq: number, status: BatchStatus, reason: unknown): void {
    switch (status) {
      case 'delivered': {
        this.store.ack(seq)
        this.#origins.end(seq, 'delivered')
        return
      }
      case 'errored':
        // Not deleted and not settled upstream: handed to the sink again after a back-off.
        this.store.nack(seq)
        return
      case 'rejected':
        void this.#deadLetter(seq, reason)
        return
    }
  }

  async #deadLetter(seq: number, reason?: unknown): Promise<void> {
    const outcome = await this.store.deadLetter(seq).catch(() => 'failed' as const)
    switch (outcome) {
      case 'dead-lettered':
        this.#m.deadLetteredThisRun++
        this.#origins.end(seq, 'rejected', reason === undefined ? undefined : { reason })
        return
      case 'failed':
        this.store.nack(seq)
        return
      case 'unknown':
        return
    }
  }

  /** Closes the store, once; every caller (a draining pull, `dispose`) waits until it is closed. */
  #shutDown(): Promise<void> {
    if (this.#state.kind === 'closed') return this.#state.shutDown
    const shutDown = (async () => {
      try {
        await this.store.close()
      } finally {
        // Still on disk for the next run, but this run's batches cannot wait for it (nor for a
        // file that failed to close).
        this.#origins.endAll('errored')
      }
    })()
    this.#state = { kind: 'closed', shutDown }
    return shutDown
  }
}

/**
 * Opens a disk buffer for a sink (recovering whatever a crash left in `options.path`).
 *
 * @example
 * ```ts
 * const buffer = await openDiskBuffer({ path: '/var/lib/ackline/file-out', sinkId: 'file-out' })
 * await buffer.push(events)           // stored; the batches settle when the sink delivers them
 * const out = await buffer.pull()     // fresh events read back from disk
 * out?.end('delivered')               // acknowledged: the record goes, the source's batch settles
 * await buffer.close()                // no more pushes; pull drains then returns undefined
 * ```
 */
export async function openDiskBuffer(options: DiskEdgeBufferOptions): Promise<DiskEdgeBuffer> {
  const invalid = DiskBufferError.ofIssues(DiskEdgeBufferOptions.validate(options), options?.path)
  if (invalid !== undefined) throw invalid
  const log =
    options.log ?? ((message: string) => process.emitWarning(message, { code: 'ACKLINE_DISK_BUFFER' }))
  const store = await DiskBuffer.open({
    path: options.path,
    maxBytes: options.maxBytes,
    segmentBytes: options.segmentBytes,
    sync: options.sync,
    retryBackoff: options.retryBackoff,
    ledgerIntervalMs: options.ledgerIntervalMs,
    ledgerEveryAcks: options.ledgerEveryAcks,
    log,
    fileSystem: options.fileSystem,
  })
  return new DiskEdgeBufferImpl(store, options, log)
}
