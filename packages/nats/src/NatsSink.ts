/**
 * `nats` sink: publishes each event as JSON on a core NATS subject (no JetStream).
 *
 * Invariant: core NATS confirms nothing (a publish with no subscriber is dropped by the server
 * without a word), so this sink must never stand where an acknowledgement is expected. It says
 * `canAcknowledge: false`, and the builder refuses it (`ACK_UNSUPPORTED`, naming the sink and the
 * field `acknowledgements`) unless its declaration says `acknowledgements: false`, the user's
 * statement that they know. An event is `delivered` once the server read its message (a flush
 * answered on the connection it went out on), which says nothing of subscribers; a write whose
 * flush fails, or gets no answer within `timeoutMs` (a link that stopped passing bytes), throws a
 * `RetryableError` (the client discards what it buffered while disconnected
 * when it dials again, and a retry may send again what the server had read: at least once). An event that can never be published (one `JSON.stringify`
 * cannot encode, or one over the server's `max_payload`) is `rejected` alone, before publishing.
 * When the client closes the connection for good (a second authorization error in a row), the
 * next write connects again; while that fails, writes fail retryable, naming why.
 *
 * @module
 */
import type { EventArray } from '@ackline/core'
import {
  type ConfigIssue,
  defineOptions,
  MAX_TIMER_MS,
  type OptionsOf,
  type ResolvedOptionsOf,
  RetryableError,
  type Sink,
  type SinkResult,
} from '@ackline/topology'
import { z } from 'zod'
import { connectionShape } from './internal/connectionShape.js'
import { publishSubject } from './internal/publishSubject.js'
import { SinkConnection } from './internal/SinkConnection.js'
import { tooLarge } from './internal/tooLarge.js'

/** Options of {@link natsSink}: its schema (`validate`, `jsonSchema`, …). */
export const NatsSinkOptions = defineOptions({
  ...connectionShape,
  subject: publishSubject().describe('The subject to publish to.'),
  timeoutMs: z
    .int()
    .min(1)
    .max(MAX_TIMER_MS)
    .default(5000)
    .describe(
      'How long a write waits for the server to confirm (a flush) that it read the messages, in ms; unanswered, the write fails retryable.',
    ),
  acknowledgements: z
    .literal(false)
    .optional()
    .describe(
      'Optional, and false when given: core NATS cannot confirm a delivery. What counts is the declaration: `builder.sink(id, inputs, natsSink(…), { acknowledgements: false })`.',
    ),
})
/** Options of {@link natsSink}. */
export type NatsSinkOptions = OptionsOf<typeof NatsSinkOptions>

/** The sink {@link natsSink} returns. */
export interface NatsSink extends Sink {
  readonly kind: 'nats'
  /** Always `false`: the builder accepts this sink only when declared with `acknowledgements: false`. */
  readonly canAcknowledge: false
  validate(): readonly ConfigIssue[]
  start(): Promise<void>
  write(events: EventArray): Promise<SinkResult>
  stop(): Promise<void>
}

class NatsPublisher implements NatsSink {
  readonly kind = 'nats'
  readonly canAcknowledge = false
  readonly #options: NatsSinkOptions
  readonly #o: ResolvedOptionsOf<typeof NatsSinkOptions>
  /** The connection, made anew when the client gives up on it (see `SinkConnection`). */
  readonly #link: SinkConnection

  constructor(options: NatsSinkOptions) {
    this.#options = options
    this.#o = NatsSinkOptions.resolve(options)
    this.#link = new SinkConnection('nats', this.#o)
  }

  validate(): readonly ConfigIssue[] {
    return NatsSinkOptions.validate(this.#options)
  }

  async start(): Promise<void> {
    await this.#link.start()
  }

  async write(events: EventArray): Promise<SinkResult> {
    // Throws a RetryableError before start, or while connecting again after the client gave up fails.
    const connection = await this.#link.current()
    const subject = this.#o.subject
    const maxPayload = connection.maxPayload
    const results: ('delivered' | Error)[] = []
    for (const event of events) {
      let payload: Uint8Array
      try {
        payload = utf8.encode(JSON.stringify(event.fields))
      } catch (error) {
        results.push(error instanceof Error ? error : new TypeError(String(error)))
        continue
      }
      const refused = tooLarge('nats', subject, payload.length, maxPayload)
      if (refused !== undefined) {
        results.push(refused)
        continue
      }
      try {
        connection.nc.publish(subject, payload)
        results.push('delivered')
      } catch (error) {
        results.push(error instanceof Error ? error : new TypeError(String(error)))
      }
    }
    // Bounded: through a link that stopped passing bytes no answer comes, and the client gives up
    // on the link only after its own ping check, minutes later.
    let timer: NodeJS.Timeout | undefined
    const timeoutMs = this.#o.timeoutMs
    try {
      const answered = await Promise.race([
        connection.nc.flush().then(() => true),
        new Promise<false>((resolve) => {
          timer = setTimeout(() => resolve(false), timeoutMs)
        }),
      ])
      if (!answered)
        throw new RetryableError(
          'nats',
          `no answer from the server to the flush within ${timeoutMs} ms (timeoutMs): it may not have read the messages`,
        )
    } catch (error) {
      if (error instanceof RetryableError) throw error
      throw new RetryableError('nats', `flush failed: ${String(error)}`, { cause: error })
    } finally {
      clearTimeout(timer)
    }
    return results
  }

  async stop(): Promise<void> {
    await this.#link.stop()
  }
}

const utf8 = new TextEncoder()

/**
 * A sink publishing each event as JSON on a core NATS subject. It confirms nothing, so the builder
 * accepts it only when declared with `acknowledgements: false`.
 *
 * @example
 * ```ts
 * builder.sink('live', ['in'], natsSink({ servers: '127.0.0.1:4222', subject: 'live' }), { acknowledgements: false })
 * ```
 */
export function natsSink(options: NatsSinkOptions): NatsSink {
  return new NatsPublisher(options)
}
