/**
 * `nats` sink: publishes each event as JSON on a core NATS subject (no JetStream).
 *
 * Invariant: core NATS confirms nothing (a publish with no subscriber is dropped by the server
 * without a word), so this sink must never stand where an acknowledgement is expected. Its
 * `validate()` reports an issue unless it was made with `acknowledgements: false`, the user's
 * statement that they know; declare the sink with `{ acknowledgements: false }` in the builder too.
 * A write resolves once the server received the messages (a flush), which says nothing of
 * subscribers.
 *
 * @module
 */
import type { EventArray } from '@ackline/core'
import {
  ConfigIssue,
  defineOptions,
  type OptionsOf,
  type ResolvedOptionsOf,
  RetryableError,
  type Sink,
  type SinkResult,
} from '@ackline/topology'
import { z } from 'zod'
import { Connection } from './internal/Connection.js'
import { connectionShape } from './internal/connectionShape.js'

/** Options of {@link natsSink}: its schema (`validate`, `jsonSchema`, …). */
export const NatsSinkOptions = defineOptions({
  ...connectionShape,
  subject: z.string().min(1).describe('The subject to publish to.'),
  acknowledgements: z
    .boolean()
    .optional()
    .describe('Must be false: core NATS cannot confirm a delivery, and this says you know.'),
})
/** Options of {@link natsSink}. */
export type NatsSinkOptions = OptionsOf<typeof NatsSinkOptions>

/** The sink {@link natsSink} returns. */
export interface NatsSink extends Sink {
  readonly kind: 'nats'
  validate(): readonly ConfigIssue[]
  start(): Promise<void>
  write(events: EventArray): Promise<SinkResult>
  stop(): Promise<void>
}

class NatsPublisher implements NatsSink {
  readonly kind = 'nats'
  readonly #options: NatsSinkOptions
  readonly #o: ResolvedOptionsOf<typeof NatsSinkOptions>
  #connection: Connection | undefined = undefined

  constructor(options: NatsSinkOptions) {
    this.#options = options
    this.#o = NatsSinkOptions.resolve(options)
  }

  validate(): readonly ConfigIssue[] {
    const issues = NatsSinkOptions.validate(this.#options)
    if (this.#options.acknowledgements !== false) {
      issues.push(
        ConfigIssue.of(
          'acknowledgements',
          'false (core NATS cannot confirm a delivery; use jetstreamSink to acknowledge, or say acknowledgements: false here and in the sink declaration)',
          this.#options.acknowledgements,
        ),
      )
    }
    return issues
  }

  async start(): Promise<void> {
    this.#connection = await Connection.open('nats', this.#o)
  }

  async write(events: EventArray): Promise<SinkResult> {
    const connection = this.#connection
    if (connection === undefined) throw new RetryableError('nats', 'not started')
    const results: ('delivered' | Error)[] = []
    for (const event of events) {
      try {
        connection.nc.publish(this.#o.subject, JSON.stringify(event.fields))
        results.push('delivered')
      } catch (error) {
        results.push(error instanceof Error ? error : new TypeError(String(error)))
      }
    }
    try {
      await connection.nc.flush()
    } catch (error) {
      throw new RetryableError('nats', `flush failed: ${String(error)}`, { cause: error })
    }
    return results
  }

  async stop(): Promise<void> {
    await this.#connection?.close()
  }
}

/**
 * A sink publishing each event as JSON on a core NATS subject. It confirms nothing, so it is
 * allowed only with acknowledgements off: make it with `acknowledgements: false` and declare it so.
 *
 * @example
 * ```ts
 * builder.sink('live', ['in'], natsSink({ servers: '127.0.0.1:4222', subject: 'live', acknowledgements: false }), {
 *   acknowledgements: false,
 * })
 * ```
 */
export function natsSink(options: NatsSinkOptions): NatsSink {
  return new NatsPublisher(options)
}
