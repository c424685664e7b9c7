/**
 * A `SourceContext` for unit tests of sources, without the runtime: each sent batch gets real
 * events and (with acknowledgements on) a real `BatchNotifier`, and waits in `batches` until the
 * test plays the sinks by ending its events.
 */
import {
  BatchNotifier,
  type BatchStatus,
  EventArray,
  type JsonObject,
  LogEvent,
  RecordOutcomes,
} from '@ackline/core'
import type { BatchFailure, BatchReceipt, SendOptions, SourceContext } from '@ackline/topology'

export class FakeSourceContext implements SourceContext {
  readonly id: string
  readonly acknowledgements: boolean
  readonly #controller = new AbortController()
  /** Every batch sent, in order. */
  readonly batches: EventArray[] = []
  /** The options of every send, in order. */
  readonly sendOptions: (SendOptions | undefined)[] = []
  /** The fields of every batch, as sent (the events themselves may have ended since). */
  readonly #records: JsonObject[][] = []
  readonly #waiting: ((batch: EventArray) => void)[] = []
  /** When set, `send` waits for this before accepting (back pressure, or a runtime that refuses). */
  gate: Promise<void> | undefined = undefined
  /** When set, called with each batch as it is accepted: a test that plays the sinks for every batch. */
  onBatch: ((batch: EventArray) => void) | undefined = undefined

  constructor(options: { readonly id?: string; readonly acknowledgements?: boolean } = {}) {
    this.id = options.id ?? 'in'
    this.acknowledgements = options.acknowledgements ?? true
  }

  get signal(): AbortSignal {
    return this.#controller.signal
  }

  /** Stops the source, as the runtime does on `topology.stop()`. */
  stop(): void {
    this.#controller.abort()
  }

  async send(records: Iterable<JsonObject>, options?: SendOptions): Promise<BatchReceipt> {
    this.sendOptions.push(options)
    const events = EventArray.from(
      Array.from(records, (fields) => new LogEvent(fields, { sourceId: this.id })),
    )
    const outcomes = options?.outcomes === true
    const created = BatchNotifier.maybeCreate(this.acknowledgements, { sourceId: this.id, outcomes })
    if (created !== undefined) events.attach(created.notifier)
    if (this.gate !== undefined) {
      try {
        await this.gate
      } catch (error) {
        // Refused: the events never went downstream, so they end here, as the runtime's do.
        events.end('errored')
        throw error
      }
    }
    this.batches.push(events)
    this.#records.push(events.events.map((event) => ({ ...event.fields })))
    this.#waiting.shift()?.(events)
    this.onBatch?.(events)
    const status: Promise<BatchStatus> =
      created === undefined ? Promise.resolve('delivered') : created.receiver.promise
    const receiver = created?.receiver
    return {
      batchId: created?.notifier.id,
      status,
      // As the runtime: every record delivered once accepted without acknowledgements.
      outcomes: !outcomes
        ? undefined
        : receiver === undefined
          ? Promise.resolve(RecordOutcomes.all('delivered', events.length))
          : status.then(() => receiver.outcomes!),
      // What the topology's tracker reads: the reason the batch's ends gave, once it resolved.
      get failure() {
        return receiver?.reason as BatchFailure | undefined
      },
    }
  }

  async sendEvents(events: EventArray): Promise<void> {
    this.batches.push(events)
    this.#records.push(events.events.map((event) => ({ ...event.fields })))
    this.#waiting.shift()?.(events)
  }

  /** The next batch sent from now on (or the first one not yet taken). */
  nextBatch(): Promise<EventArray> {
    return new Promise((resolve) => this.#waiting.push(resolve))
  }

  /** The fields of every event sent so far, batch by batch, as they were sent. */
  records(): JsonObject[][] {
    return this.#records
  }
}
