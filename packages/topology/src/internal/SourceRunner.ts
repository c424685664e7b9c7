/**
 * Runs one source: gives it a context whose `send` makes events and batch notifiers, waits for
 * room downstream, and hands back a receipt.
 *
 * Invariant: with acknowledgements off for this source, no notifier is created and the receipt
 * says `delivered` once the batch is accepted; with them on, the receipt is decided by the
 * {@link BatchTracker}, exactly once.
 */
import { BatchNotifier, type BatchStatus, EventArray, type JsonObject, LogEvent } from '@ackline/core'
import type { BatchReceipt, Source, SourceContext } from '../Source.js'
import type { BatchTracker } from './BatchTracker.js'
import type { Counters } from './Counters.js'
import type { Output } from './Output.js'

const DELIVERED: Promise<BatchStatus> = Promise.resolve('delivered')

export class SourceRunner {
  readonly context: SourceContext

  constructor(
    readonly id: string,
    readonly source: Source,
    readonly acknowledgements: boolean,
    readonly output: Output,
    readonly counters: Counters,
    readonly tracker: BatchTracker,
    readonly signal: AbortSignal,
  ) {
    this.context = {
      id,
      acknowledgements,
      signal,
      send: (records) => this.#send(records),
      sendEvents: (events) => {
        this.counters.received += events.length
        return this.output.send(events)
      },
    }
  }

  run(): Promise<void> {
    return this.source.run(this.context)
  }

  async #send(records: Iterable<JsonObject>): Promise<BatchReceipt> {
    const options = { sourceId: this.id, ingestTimestamp: Date.now() }
    const list = Array.isArray(records) ? (records as readonly JsonObject[]) : Array.from(records)
    const n = list.length
    const events = new Array<LogEvent>(n)
    this.counters.received += n
    if (!this.acknowledgements) {
      for (let i = 0; i < n; i++) events[i] = new LogEvent(list[i]!, options)
      await this.output.send(new EventArray(events))
      return { batchId: undefined, status: DELIVERED }
    }
    const { notifier, receiver } = BatchNotifier.create({ sourceId: this.id })
    for (let i = 0; i < n; i++) events[i] = new LogEvent(list[i]!, options)
    // Attaches the whole array at once and releases the source's reference (the array is the batch).
    const array = new EventArray(events).attach(notifier)
    const status = this.tracker.track(receiver, n)
    await this.output.send(array)
    return { batchId: receiver.batchId, status }
  }
}
