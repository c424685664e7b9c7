/**
 * `memory`: a sink that keeps what it is given, for tests, and can be told which events fail.
 *
 * Invariant: it reports one status per event, in order — `outcome(event)` when given, else
 * `delivered` — and keeps the fields of every event it was given, in arrival order. An `outcome`
 * that throws, returns no status or ends its event fails that event alone (`errored`, with the
 * error naming `outcome`); an event `beforeWrite` ended is not recorded, and fails alone too (the
 * error naming `beforeWrite`); `statuses` always says what the write reported for each event it
 * recorded.
 *
 * @module
 */
import type { DeliveryStatus, EventArray, JsonObject, LogEvent } from '@ackline/core'
import {
  ComponentError,
  type ConfigIssue,
  codeOption,
  defineOptions,
  type OptionsOf,
  RejectError,
  RetryableError,
  type Sink,
  type SinkResult,
  textOf,
} from '@ackline/topology'

/**
 * Options of {@link memory}: its schema (`validate`, `jsonSchema`, …).
 *
 * @example
 * ```ts
 * memory({ outcome: (e) => (e.get('bad') === true ? 'rejected' : 'delivered'), beforeWrite: () => gate })
 * ```
 */
export const MemorySinkOptions = defineOptions({
  outcome: codeOption<(event: LogEvent) => DeliveryStatus>('a function')
    .optional()
    .describe(
      "The status to report for an event (default, with no outcome: `delivered`). It must not end or keep the event: one it ends is recorded `errored`, with a `ComponentError` naming `outcome` (code `OUTCOME_ENDED_EVENT`; the event keeps the status it was ended with). A throw, or a return that is not 'delivered', 'errored' or 'rejected' (undefined, a promise), fails that event alone: `errored`, with a `ComponentError` naming `outcome` (code `OUTCOME_THREW` or `OUTCOME_INVALID`).",
    ),
  beforeWrite: codeOption<(events: EventArray) => void | Promise<void>>('a function')
    .optional()
    .describe(
      'Awaited before each write: make the sink slow, or hold it until a test lets it go. A `RetryableError` or `RejectError` it throws fails the write as it says; any other throw fails it retryably, as a `RetryableError` naming `beforeWrite`. It must not end an event: one it ends cannot be read, so it is not recorded (in `events` nor `statuses`), and the write reports for it a `ComponentError` naming `beforeWrite` (code `BEFORE_WRITE_ENDED_EVENT`; the event keeps the status it was ended with), the other events written as usual.',
    ),
})
/** Options of {@link memory}. */
export type MemorySinkOptions = OptionsOf<typeof MemorySinkOptions>

/**
 * The sink {@link memory} returns: what it was given and what it reported, in order.
 *
 * @example
 * ```ts
 * const sink = memory()
 * // … run a topology …
 * expect(sink.events).toEqual([{ n: 1 }])
 * ```
 */
export interface MemorySink extends Sink {
  readonly kind: 'memory'
  /**
   * The fields of every event written so far, as `outcome` left them, in order (read-only: they
   * may be shared with other copies). An event that had ended before the write reached it
   * (`beforeWrite` ended it) is not among them.
   */
  readonly events: readonly Readonly<JsonObject>[]
  /** The status reported for each of them, in the same order. */
  readonly statuses: readonly DeliveryStatus[]
  /** How many writes there were. */
  readonly writes: number
  /** Problems in the options, each naming its field; empty when they are fine. */
  validate(): readonly ConfigIssue[]
}

class Memory implements MemorySink {
  readonly kind = 'memory'
  readonly events: Readonly<JsonObject>[] = []
  readonly statuses: DeliveryStatus[] = []
  writes = 0
  readonly #options: MemorySinkOptions

  constructor(options: MemorySinkOptions) {
    this.#options = options
  }

  validate(): readonly ConfigIssue[] {
    return MemorySinkOptions.validate(this.#options)
  }

  async write(events: EventArray): Promise<SinkResult> {
    const { beforeWrite, outcome } = this.#options
    if (beforeWrite !== undefined) {
      try {
        await beforeWrite(events)
      } catch (cause) {
        // What a test throws on purpose (to make the write fail) is passed as it is; anything
        // else is a bug in the callback, retried like any failure: a `TypeError` passed on would
        // be read as the events' encoding error and reject them for good.
        if (cause instanceof RetryableError || cause instanceof RejectError) throw cause
        throw new RetryableError('memory', `beforeWrite threw: ${messageOf(cause)}`, {
          field: 'beforeWrite',
          cause,
        })
      }
    }
    this.writes++
    const result: (DeliveryStatus | Error)[] = []
    for (const event of events) {
      if (event.isEnded) {
        // Ended before the write reached it (by `beforeWrite`, against its contract; or by a
        // forced stop, which settled the write already): its fields cannot be read, and a read
        // throwing out of the write would have it retried, recording the events before it twice.
        result.push(
          new ComponentError(
            'BEFORE_WRITE_ENDED_EVENT',
            'the event had ended before the write reached it; beforeWrite must not end events (the sink reports their status)',
            { component: 'memory', field: 'beforeWrite' },
          ),
        )
        continue
      }
      // Read before `outcome` runs too: one that ends the event (against its contract) would make
      // the read after it throw out of the write, which is retried, recording the events before
      // it twice. Only a fallback: fields are copied on write, so what `outcome` changed through
      // a handle that shares them with a copy is in the object read after it, not this one.
      const given = event.fields
      let status: DeliveryStatus
      let entry: DeliveryStatus | Error
      try {
        const chosen: unknown = outcome === undefined ? 'delivered' : outcome(event)
        if (chosen !== 'delivered' && chosen !== 'errored' && chosen !== 'rejected') {
          // `undefined` from a branch that forgot to return is no `delivered`; a promise (an
          // async outcome) or a typo is no status: the event fails, as for a throw. A promise's
          // rejection is the same failure, already reported: it must not go unhandled.
          const then = (chosen as PromiseLike<unknown> | undefined)?.then
          if (typeof then === 'function') Promise.resolve(chosen).catch(() => undefined)
          status = 'errored'
          entry = new ComponentError(
            'OUTCOME_INVALID',
            `outcome returned ${describe(chosen)}, not 'delivered', 'errored' or 'rejected'`,
            { component: 'memory', field: 'outcome' },
          )
        } else {
          status = chosen
          entry = status
        }
      } catch (cause) {
        // A throwing callback fails its event alone: thrown out of the write, it would be retried,
        // and the events before it recorded twice, as `delivered` where they were not.
        status = 'errored'
        entry = new ComponentError('OUTCOME_THREW', `outcome threw: ${messageOf(cause)}`, {
          component: 'memory',
          field: 'outcome',
          cause,
        })
      }
      if (event.isEnded) {
        // The runtime leaves an ended event as it is; the entry only reports the misuse.
        status = 'errored'
        entry = new ComponentError(
          'OUTCOME_ENDED_EVENT',
          'outcome ended its event; it must only return a status (the sink reports it)',
          { component: 'memory', field: 'outcome' },
        )
      }
      this.events.push(event.isEnded ? given : event.fields)
      this.statuses.push(status)
      result.push(entry)
    }
    return result
  }
}

/** A thrown value's message, never throwing itself. */
const messageOf = (error: unknown): string => {
  try {
    return error instanceof Error ? String(error.message) : textOf(error)
  } catch {
    return textOf(error)
  }
}

/** What an outcome returned, for a message. */
const describe = (value: unknown): string =>
  typeof value === 'string'
    ? JSON.stringify(value)
    : typeof value === 'function'
      ? 'a function'
      : typeof (value as PromiseLike<unknown> | undefined)?.then === 'function'
        ? 'a promise'
        : typeof value === 'object' && value !== null
          ? 'an object'
          : textOf(value)

/**
 * A sink that keeps every event's fields; `outcome` chooses events to report `errored` or
 * `rejected`.
 *
 * @example
 * ```ts
 * const sink = memory({ outcome: (e) => (e.get('n') === 3 ? 'errored' : 'delivered') })
 * builder.sink('out', ['in'], sink)
 * // … sink.events, sink.statuses
 * ```
 */
export function memory(options: MemorySinkOptions = {}): MemorySink {
  return new Memory(options)
}
