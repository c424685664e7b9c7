/**
 * Runs one sink: pulls arrays from its buffer, writes them with the retry policy, and ends every
 * handle it handed to `write` exactly once with the status the write reported.
 *
 * Invariant: an array is settled once — by the write's outcome, or by `force()` at a stop's
 * deadline, whichever comes first; the later one is ignored. An authoritative sink ends its
 * handles with `{ authoritative: true }`, and tells the batch trackers what it recorded for each
 * (batch, event) it is the first to record, so a source can be told at once.
 */
import {
  type BatchStatusReceiver,
  type DeliveryStatus,
  type EndOptions,
  type EventArray,
  EventStatus,
  type LogEvent,
} from '@ackline/core'
import type { EdgeBuffer } from '../EdgeBuffer.js'
import type { LifecycleEvent } from '../LifecycleEvent.js'
import type { ResolvedOptionsOf } from '../OptionsSchema.js'
import { RejectError } from '../RejectError.js'
import { RetryPolicy } from '../RetryPolicy.js'
import type { Sink } from '../Sink.js'
import type { Counters } from './Counters.js'

const AUTHORITATIVE: EndOptions = { authoritative: true }

export class SinkRunner {
  readonly #endOptions: EndOptions | undefined
  readonly #policy: ResolvedOptionsOf<typeof RetryPolicy>
  #current: EventArray | undefined = undefined
  #wake: (() => void) | undefined = undefined
  #forced = false

  constructor(
    readonly id: string,
    readonly sink: Sink,
    readonly buffer: EdgeBuffer,
    authoritative: boolean,
    retry: RetryPolicy | undefined,
    readonly counters: Counters,
    readonly emit: (fact: LifecycleEvent) => void,
    /** Told, for an authoritative sink, the status recorded for one event of a batch. */
    readonly onRecorded: (
      sourceId: string | undefined,
      receiver: BatchStatusReceiver,
      status: EventStatus,
    ) => void,
  ) {
    this.#endOptions = authoritative ? AUTHORITATIVE : undefined
    this.#policy = RetryPolicy.resolve(retry)
  }

  async run(): Promise<void> {
    for (;;) {
      const array = await this.buffer.pull()
      if (array === undefined) return
      this.counters.received += array.length
      await this.#write(array)
    }
  }

  /** Settles the array being written `errored` now and stops retrying. */
  force(): void {
    this.#forced = true
    const current = this.#current
    if (current !== undefined) {
      this.#current = undefined
      this.#settle(current, 'errored')
    }
    this.#wake?.()
  }

  async #write(array: EventArray): Promise<void> {
    this.counters.inFlight += array.length
    this.#current = array
    let outcome: DeliveryStatus | readonly DeliveryStatus[] = 'errored'
    for (let attempt = 1; ; attempt++) {
      try {
        const result = await this.sink.write(array)
        if (result === undefined) {
          outcome = 'delivered'
        } else if (result.length !== array.length) {
          this.#report(
            'BAD_RESULT',
            `returned ${result.length} statuses for ${array.length} events`,
            array.length,
          )
          outcome = 'errored'
        } else {
          outcome = result
        }
        break
      } catch (error) {
        if (error instanceof RejectError) {
          this.#report('WRITE_FAILED', `rejected: ${error.message}`, array.length, error)
          outcome = 'rejected'
          break
        }
        const last = attempt >= this.#policy.attempts || this.#forced
        this.#report(
          'WRITE_FAILED',
          `attempt ${attempt} of ${this.#policy.attempts} failed${last ? '' : ', will retry'}: ${String(error)}`,
          array.length,
          error,
        )
        if (last) break
        await this.#sleep(RetryPolicy.backoffMs(this.#policy, attempt))
        if (this.#forced) break
      }
    }
    // A forced stop may have settled this array while the write was pending.
    if (this.#current === array) {
      this.#current = undefined
      this.#settle(array, outcome)
    }
  }

  #settle(array: EventArray, outcome: DeliveryStatus | readonly DeliveryStatus[]): void {
    const events = array.events
    const options = this.#endOptions
    const counters = this.counters
    counters.inFlight -= events.length
    if (options !== undefined) {
      for (let i = 0; i < events.length; i++) {
        const event = events[i]!
        if (!event.isEnded) this.#endAuthoritative(event, typeof outcome === 'string' ? outcome : outcome[i]!)
      }
      if (typeof outcome === 'string') counters.settled(outcome, events.length)
      else for (const status of outcome) counters.settled(status, 1)
      return
    }
    if (typeof outcome === 'string') {
      try {
        array.end(outcome)
      } catch {
        // A sink ended some handle itself (against its contract): end the rest one by one.
        for (let i = 0; i < events.length; i++) {
          const event = events[i]!
          if (!event.isEnded) event.end(outcome)
        }
      }
      counters.settled(outcome, events.length)
      return
    }
    for (let i = 0; i < events.length; i++) {
      const event = events[i]!
      const status = outcome[i]!
      if (!event.isEnded) event.end(status, options)
      counters.settled(status, 1)
    }
  }

  /** Ends one handle authoritatively, first reporting what it records for each batch not recorded yet. */
  #endAuthoritative(event: LogEvent, status: DeliveryStatus): void {
    for (const finalizer of event.metadata.finalizers) {
      const current = finalizer.status
      // Read before the end: a slot already recorded (by another authoritative copy) is not counted twice.
      if (current !== 'recorded')
        this.onRecorded(finalizer.sourceId, finalizer.receiver, EventStatus.update(current, status))
    }
    event.end(status, AUTHORITATIVE)
  }

  #sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.#wake = undefined
        resolve()
      }, ms)
      this.#wake = () => {
        clearTimeout(timer)
        this.#wake = undefined
        resolve()
      }
    })
  }

  #report(code: 'WRITE_FAILED' | 'BAD_RESULT', message: string, events: number, cause?: unknown): void {
    this.emit({
      type: 'component_error',
      component: this.id,
      code,
      message: `sink '${this.id}' (${this.sink.kind}): ${message}`,
      events,
      ...(cause === undefined ? {} : { cause }),
    })
  }
}
