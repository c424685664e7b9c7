/**
 * `amqp` sink: publishes each event as one JSON message with publisher confirms.
 *
 * Invariants:
 * - An event is `delivered` only once the broker confirmed its message (`basic.ack`). A
 *   `basic.nack`, or a channel or connection lost before the confirm, makes that event `errored`
 *   (a `RetryableError` of its own, naming why the channel closed when the broker said so, a 403
 *   on a publish to an internal exchange: its source redelivers it); a message the broker returned as
 *   unroutable (`mandatory`, on by default) is `rejected`, never delivered, even though the
 *   broker confirms it afterwards; so is one amqplib cannot encode (a routing key or message-id
 *   over AMQP's 255 bytes), which is never published.
 * - An event whose JSON is larger than `maxMessageBytes` (16 MiB, RabbitMQ 4's default
 *   `max_message_size`) is `rejected` and never published: the broker would close the channel on
 *   it, erroring every message in flight on that channel, and a retry would do it again for ever.
 *   When the broker closes a channel for a message over a smaller limit of its own, the sink takes
 *   that limit for the rest of its run, so the retry rejects the event instead of looping.
 * - Up to `maxInFlight` messages await their confirms at once, across every pending write; a
 *   write waits for room, and for the socket to drain, instead of buffering without bound; a
 *   channel that closes meanwhile ends the wait (its unconfirmed events are `errored`).
 * - The runtime may have {@link AMQP_SINK_CONCURRENCY} writes pending at once (the sink's
 *   `concurrency`; a declaration's `concurrency` option overrides it), so the window does not
 *   drain at the end of each write: while one write waits for its last confirms the next one
 *   publishes. Writes then complete out of order, and so can the messages of different writes on
 *   the queue; declare `concurrency: 1` where the order of messages matters.
 * - Every message carries a `message-id`, so consumers can dedupe. It is, in this order: the
 *   string in the field `messageIdField` when that option is set; the record's public identity
 *   (`RecordId.of(event)`, the `_recordId` field its source set: the same on every redelivery);
 *   the `message-id` an `amqp` source read (`_amqp.messageId`); else a unique id
 *   (`<64 random bits of this sink, base64url>/<count, base 36>`), which only a record identity could make stable across a
 *   redelivery. The default names the record an event came from, not its content: events a
 *   transform split from one record (a `remap` returning several) share it, and RabbitMQ keeps
 *   them all, but a consumer that dedupes on `message-id` alone would keep only the first. Set
 *   `messageIdField` to a field that tells them apart where such a consumer reads the queue. (The
 *   JetStream sink, whose stream itself dedupes, adds a digest of the payload to its default.)
 * - With no live connection a write throws a `RetryableError` (the runtime retries it); the
 *   connection reconnects with back-off meanwhile.
 *
 * @module
 */
import { randomBytes } from 'node:crypto'
import { type EventArray, type JsonObject, type LogEvent, RecordId } from '@ackline/core'
import {
  ConfigIssue,
  codeOption,
  defineOptions,
  type OptionsOf,
  RejectError,
  RetryableError,
  type Sink,
  type SinkResult,
  warningsTo,
} from '@ackline/topology'
import type { ConfirmChannel, Message } from 'amqplib'
import { z } from 'zod'
import { brokerMaxMessageSize } from './internal/brokerMaxMessageSize.js'
import { Connection, connectionOptions, type Generation } from './internal/Connection.js'
import { declared } from './internal/declared.js'
import { delayCapIssue } from './internal/delayCapIssue.js'
import { shortString } from './internal/shortString.js'
import { urlIssue } from './internal/urlIssue.js'

/** RabbitMQ 4's default `max_message_size`: 16 MiB (RabbitMQ 3.8 to 3.13: 128 MiB). */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024

/**
 * Options of {@link amqpSink}: its schema (`validate`, `jsonSchema`, …).
 *
 * @example
 * ```ts
 * amqpSink({ url: 'amqp://guest:guest@127.0.0.1:5672', exchange: 'events', routingKey: 'audit' })
 * ```
 */
export const AmqpSinkOptions = defineOptions({
  url: z
    .string()
    .min(1)
    .describe(
      'The broker, as an AMQP URL (`amqp://user:password@host:5672/vhost`, or `amqps://`); any other is refused at build.',
    ),
  exchange: shortString()
    .default('')
    .describe(
      "The exchange to publish to ('' is the default exchange, which routes by queue name). At most 255 bytes of UTF-8.",
    ),
  routingKey: shortString()
    .default('')
    .describe('The routing key of every message. At most 255 bytes of UTF-8.'),
  routingKeyField: z
    .string()
    .min(1)
    .optional()
    .describe(
      'A field (dotted path) whose string value is the routing key of that event; `routingKey` when absent.',
    ),
  mandatory: z
    .boolean()
    .default(true)
    .describe(
      'Ask the broker to return a message no queue takes; such an event is rejected, not delivered. With false the broker confirms and drops such a message, and its event counts delivered.',
    ),
  persistent: z
    .boolean()
    .default(true)
    .describe('Publish with delivery mode 2 (kept across broker restarts).'),
  maxInFlight: z.int().min(1).default(1000).describe('Messages awaiting their publisher confirm at once.'),
  maxMessageBytes: z
    .int()
    .min(1)
    .default(MAX_MESSAGE_BYTES)
    .describe(
      "The largest message body published, in bytes (default 16 MiB, RabbitMQ 4's default `max_message_size`; 3.x defaults to 128 MiB): a larger event is rejected, never published. A broker that closes a channel for a message over its own smaller limit lowers this to that limit for the rest of the run.",
    ),
  messageIdField: z
    .string()
    .min(1)
    .optional()
    .describe(
      "A field (dotted path) whose string value becomes the message-id, for deduplication downstream. Default: the record's `_recordId` (`RecordId` of @ackline/core), else an amqp source's `_amqp.messageId`, which events split from one record share (set this where a consumer dedupes on message-id alone).",
    ),
  omitFields: z
    .array(z.string().min(1))
    .default(['_amqp', RecordId.FIELD])
    .describe(
      'Top-level fields left out of the published JSON (by default the metadata of an amqp source and the record id, which goes out as the message-id).',
    ),
  declare: z
    .strictObject({
      exchange: z
        .strictObject({
          type: z.enum(['direct', 'topic', 'fanout', 'headers']).default('direct'),
          durable: z.boolean().default(true),
        })
        .optional()
        .describe(
          "Declare the exchange `exchange` at start (else it must exist: it is checked). Refused with exchange '' (the default exchange cannot be declared).",
        ),
      queue: z
        .strictObject({
          name: shortString().min(1),
          durable: z.boolean().default(true),
          bindingKey: shortString().default(''),
        })
        .optional()
        .describe('Declare a queue at start and bind it to the exchange with `bindingKey`.'),
    })
    .optional()
    .describe('Declarations made (idempotently) at start and after each reconnect.'),
  ...connectionOptions,
  onWarning: codeOption<(message: string) => void>('a function')
    .optional()
    .describe(
      'Where warnings go (lost connections, failed reconnects). Default: process.emitWarning, which also gets a warning this function threw on (or rejected, if async).',
    ),
})
/** Options of {@link amqpSink}. */
export type AmqpSinkOptions = OptionsOf<typeof AmqpSinkOptions>

/** What the sink has done so far, live: read `sink.counters` again for newer figures. */
export interface AmqpSinkCounters {
  /** Messages published. */
  readonly published: number
  /** Messages the broker confirmed and did not return: their events are delivered. */
  readonly confirmed: number
  /** Messages the broker nacked, or whose channel died before the confirm: errored. */
  readonly nacked: number
  /** Messages returned as unroutable: rejected. */
  readonly returned: number
  /** Events larger than `maxMessageBytes` (or the broker's own limit, once it told it): never published, rejected. */
  readonly tooLarge: number
  /**
   * Events whose message amqplib could not encode (a routing key or message-id over 255 bytes):
   * never published, rejected.
   */
  readonly unencodable: number
  /** Successful reconnects. */
  readonly reconnects: number
  /** Messages awaiting their confirm. */
  readonly inFlight: number
}

/** The sink {@link amqpSink} returns. */
export interface AmqpSink extends Sink {
  readonly kind: 'amqp'
  /** What the sink has done since it was made, counted (see {@link AmqpSinkCounters}). */
  readonly counters: AmqpSinkCounters
  validate(): readonly ConfigIssue[]
  start(): Promise<void>
  write(events: EventArray): Promise<SinkResult>
  stop(): Promise<void>
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] }
type Resolved = ReturnType<typeof AmqpSinkOptions.resolve>

/** A message awaiting its confirm. */
interface Publish {
  returned: boolean
}

const COMPONENT = 'amqp'

/**
 * How many writes the runtime keeps pending on an {@link amqpSink} unless its declaration says
 * otherwise (`builder.sink(id, inputs, amqpSink(…), { concurrency })`): enough that one write
 * publishes while another waits for its confirms; the window `maxInFlight` bounds them together.
 */
export const AMQP_SINK_CONCURRENCY = 4

class AmqpPublisher implements AmqpSink {
  readonly kind = 'amqp'
  readonly concurrency = AMQP_SINK_CONCURRENCY
  readonly #options: AmqpSinkOptions
  readonly #counters: Mutable<AmqpSinkCounters> = {
    published: 0,
    confirmed: 0,
    nacked: 0,
    returned: 0,
    tooLarge: 0,
    unencodable: 0,
    reconnects: 0,
    inFlight: 0,
  }
  #resolved: Resolved | undefined
  #connection: Connection<ConfirmChannel> | undefined
  /**
   * Messages awaiting their confirm, per generation, by {@link returnKey} (exchange, routing key and
   * message-id), in publish order.
   */
  #awaiting = new WeakMap<Generation<ConfirmChannel>, Map<string, Publish[]>>()
  /**
   * Why the broker closed a generation's channel (its 'error', a 403 on a publish to an internal
   * exchange, say), which amqplib emits just before failing the confirms still pending with only
   * 'channel closed': each of those events says why.
   */
  readonly #closedBy = new WeakMap<Generation<ConfirmChannel>, Error>()
  /**
   * Room taken in the confirm window: messages awaiting their confirm, and room handed to a waiting
   * write that has not published yet. Never more than `maxInFlight`, so neither is `inFlight`.
   */
  #taken = 0
  /** Writes waiting for room in the window, in order: each is handed one slot when woken. */
  #waiters: (() => void)[] = []
  /**
   * Message ids made for events without one: this sink's prefix (64 random bits, 11 characters)
   * and a count in base 36. Short on purpose: the broker's confirm rate falls with the length of
   * the id (a 37-character UUID prefix halved it against `p-<n>` on RabbitMQ 3.10, `pnpm bench amqp`).
   */
  readonly #idPrefix = `${randomBytes(8).toString('base64url')}/`
  /** The largest body published: `maxMessageBytes`, or the broker's limit once a channel closed on it. */
  #maxBytes = MAX_MESSAGE_BYTES
  /** Where {@link #maxBytes} comes from, for the reason a rejected event carries. */
  #maxBytesFrom = 'maxMessageBytes'
  #madeIds = 0

  constructor(options: AmqpSinkOptions) {
    this.#options = options
  }

  get counters(): AmqpSinkCounters {
    return { ...this.#counters }
  }

  validate(): readonly ConfigIssue[] {
    const issues = AmqpSinkOptions.validate(this.#options)
    if (issues.length > 0) return issues
    const o = AmqpSinkOptions.resolve(this.#options)
    // The default exchange cannot be declared: the declaration was skipped without a word, and
    // every event went to the default exchange, routed by queue name, returned or misrouted.
    const undeclarable =
      o.declare?.exchange !== undefined && o.exchange === ''
        ? [
            ConfigIssue.of(
              'declare.exchange',
              "absent when exchange is '' (the default exchange, which cannot be declared): set exchange to the name to declare",
              o.declare.exchange,
            ),
          ]
        : []
    return [
      ...urlIssue(o.url),
      ...undeclarable,
      ...delayCapIssue(
        'reconnectInitialDelayMs',
        o.reconnectInitialDelayMs,
        'reconnectMaxDelayMs',
        o.reconnectMaxDelayMs,
      ),
    ]
  }

  async start(): Promise<void> {
    const o = AmqpSinkOptions.resolve(this.#options)
    this.#resolved = o
    this.#maxBytes = o.maxMessageBytes
    this.#maxBytesFrom = 'maxMessageBytes'
    const warn = warningsTo(o.onWarning, `${COMPONENT} sink`, 'ACKLINE_AMQP')
    const connection = new Connection<ConfirmChannel>({
      url: o.url,
      component: COMPONENT,
      warnAs: `${COMPONENT} sink`,
      heartbeatSeconds: o.heartbeatSeconds,
      connectTimeoutMs: o.connectTimeoutMs,
      closeTimeoutMs: o.closeTimeoutMs,
      backoff: { initialDelayMs: o.reconnectInitialDelayMs, maxDelayMs: o.reconnectMaxDelayMs },
      onWarning: warn,
      openChannel: (model) => model.createConfirmChannel(),
      setup: async (generation) => {
        const channel = generation.channel
        const awaiting = new Map<string, Publish[]>()
        this.#awaiting.set(generation, awaiting)
        channel.on('error', (error: Error) => this.#closedBy.set(generation, error))
        channel.on('return', (message: Message) => {
          // The broker returns an unroutable message before it confirms it: mark the oldest
          // unconfirmed publish with that id and route, so its confirm reads as rejected. The id
          // alone is not enough: ids from `messageIdField` (or upstream) may repeat, and a routable
          // message with the same id may still await its confirm (a durable queue's fsync).
          const { exchange, routingKey } = message.fields
          const key = returnKey(exchange, routingKey, String(message.properties.messageId))
          const entry = awaiting.get(key)?.find((publish) => !publish.returned)
          if (entry !== undefined) entry.returned = true
        })
        const declarations = o.declare
        if (declarations?.exchange !== undefined && o.exchange !== '') {
          const type = declarations.exchange.type ?? 'direct'
          const durable = declarations.exchange.durable ?? true
          await declared(
            channel.assertExchange(o.exchange, type, { durable }),
            COMPONENT,
            'declare.exchange',
            `the exchange '${o.exchange}' cannot be declared ${durable ? 'durable' : 'transient'}, of type ${type}`,
          )
        } else if (o.exchange !== '') {
          await declared(
            channel.checkExchange(o.exchange),
            COMPONENT,
            'exchange',
            `the exchange '${o.exchange}' cannot be published to`,
          )
        }
        if (declarations?.queue !== undefined) {
          const { name, durable = true, bindingKey = '' } = declarations.queue
          await declared(
            channel.assertQueue(name, { durable }),
            COMPONENT,
            'declare.queue',
            `the queue '${name}' cannot be declared ${durable ? 'durable' : 'transient'}`,
          )
          if (o.exchange !== '') {
            await declared(
              channel.bindQueue(name, o.exchange, bindingKey),
              COMPONENT,
              'declare.queue',
              `the queue '${name}' cannot be bound to the exchange '${o.exchange}' with '${bindingKey}'`,
            )
          }
        }
        if (generation.id > 1) this.#counters.reconnects++
      },
      onLost: (_generation, error, duringSetup) => {
        if (this.#connection === connection && !duringSetup)
          warn(`${COMPONENT} sink: lost the connection to the broker (${error.message}); reconnecting`)
        const brokerMax = brokerMaxMessageSize(error)
        if (brokerMax !== undefined && brokerMax < this.#maxBytes) {
          this.#maxBytes = brokerMax
          this.#maxBytesFrom = "the broker's max_message_size"
          warn(
            `${COMPONENT} sink: the broker takes messages of at most ${brokerMax} bytes (its max_message_size); larger events are rejected from now on`,
          )
        }
        // Confirms of the dead channel fail through amqplib's callbacks ("channel closed").
        return undefined
      },
    })
    await connection.open()
    // Set only once open: a loss during the first setup fails start instead of warning.
    this.#connection = connection
  }

  async write(events: EventArray): Promise<SinkResult> {
    const o = this.#resolved
    const connection = this.#connection
    if (o === undefined || connection === undefined) throw new Error('amqp sink: write before start')
    const generation = connection.current
    if (generation === undefined) {
      throw new RetryableError(COMPONENT, 'not connected to the broker (reconnecting)')
    }
    const results: (SinkResult & unknown[])[number][] = new Array(events.length)
    const awaiting = this.#awaiting.get(generation)
    // One promise per write, not per message: it resolves when the last confirm of the write came.
    let unconfirmed = 0
    let delivered = 0
    let published = false
    let allConfirmed: (() => void) | undefined
    /** The socket's next 'drain' once a publish found it full, or the channel's close. */
    let draining: Promise<void> | undefined
    let index = 0
    for (const event of events) {
      const i = index++
      let body: Buffer
      try {
        body = Buffer.from(JSON.stringify(omit(event.fields, o.omitFields)), 'utf8')
      } catch (error) {
        results[i] = error instanceof Error ? error : new TypeError(String(error))
        continue
      }
      if (body.length > this.#maxBytes) {
        this.#counters.tooLarge++
        results[i] = new RejectError(
          COMPONENT,
          `the event's message is ${body.length} bytes, more than ${this.#maxBytes} (${this.#maxBytesFrom}): the broker would close the channel on it`,
        )
        continue
      }
      const room = this.#room(o.maxInFlight)
      if (room !== undefined) await room
      if (!generation.live) {
        results[i] = new RetryableError(COMPONENT, 'the connection to the broker was lost before publishing')
        // A write that publishes nothing hands its slot on, or the next would wait for a confirm
        // no message in flight will bring.
        this.#release()
        continue
      }
      const messageId = this.#messageId(event, o)
      const routingKey = routingKeyOf(event, o)
      const key = returnKey(o.exchange, routingKey, messageId)
      const publish: Publish = { returned: false }
      let settled = false
      const settle = (error: unknown): void => {
        if (settled) return
        settled = true
        this.#counters.inFlight--
        const remaining = awaiting?.get(key)
        if (remaining !== undefined) {
          if (remaining.length === 1) awaiting?.delete(key)
          else remaining.splice(remaining.indexOf(publish), 1)
        }
        if (error !== null && error !== undefined) {
          this.#counters.nacked++
          const closedBy = this.#closedBy.get(generation)
          const reason =
            closedBy !== undefined
              ? `the channel closed (${closedBy.message})`
              : error instanceof Error
                ? error.message
                : String(error)
          results[i] = new RetryableError(
            COMPONENT,
            `the broker did not confirm message ${messageId}: ${reason}`,
            {
              cause: error,
            },
          )
        } else if (publish.returned) {
          this.#counters.returned++
          results[i] = new RejectError(
            COMPONENT,
            `message ${messageId} is unroutable: exchange '${o.exchange}' has no queue bound for routing key '${routingKey}'`,
          )
        } else {
          this.#counters.confirmed++
          results[i] = 'delivered'
          delivered++
        }
        this.#release()
        if (--unconfirmed === 0) allConfirmed?.()
      }
      let ok: boolean
      try {
        ok = generation.channel.publish(
          o.exchange,
          routingKey,
          body,
          { persistent: o.persistent, mandatory: o.mandatory, messageId, contentType: 'application/json' },
          settle,
        )
      } catch (error) {
        // amqplib validates and encodes a message before sending any of it, and registers its
        // confirm only after: a throw published nothing and no confirm will come.
        results[i] = unpublished(error, messageId)
        if (results[i] instanceof RejectError) this.#counters.unencodable++
        else this.#counters.nacked++
        this.#release()
        continue
      }
      // Counted once sent: the broker's return and confirm can only come after this turn.
      const list = awaiting?.get(key)
      if (list === undefined) awaiting?.set(key, [publish])
      else list.push(publish)
      this.#counters.inFlight++
      this.#counters.published++
      unconfirmed++
      published = true
      if (!ok && draining === undefined) {
        draining = drainedOrClosed(generation.channel).then(() => {
          draining = undefined
        })
      }
    }
    if (published && unconfirmed > 0) await new Promise<void>((resolve) => (allConfirmed = resolve))
    if (draining !== undefined) await draining
    // All delivered (the common case) is said with nothing, so the runtime ends the array at once.
    return delivered === events.length ? undefined : results
  }

  async stop(): Promise<void> {
    await this.#connection?.close()
  }

  /**
   * Takes one slot of the window: at once (`undefined`, no promise on the common path) when there is
   * room and no write waits before this one, else once a released slot is handed to it. A slot is
   * handed over, not freed and looked for: a write woken from the window used to publish without
   * looking again, after an earlier woken one or a new write had taken the room (one read of
   * several confirms woke several writes), so more than `maxInFlight` messages were unconfirmed.
   */
  #room(max: number): Promise<void> | undefined {
    if (this.#taken < max && this.#waiters.length === 0) {
      this.#taken++
      return undefined
    }
    return new Promise<void>((resolve) => this.#waiters.push(resolve))
  }

  /** Gives back a slot (its message was confirmed, or the write published nothing with it): to the next waiting write, if any. */
  #release(): void {
    const next = this.#waiters.shift()
    if (next === undefined) this.#taken--
    else next()
  }

  #messageId(event: LogEvent, o: Resolved): string {
    if (o.messageIdField !== undefined) {
      const own = event.get(o.messageIdField)
      if (typeof own === 'string' && own !== '') return own
    }
    const id = RecordId.of(event)
    if (id !== undefined) return id
    const metadata = event.fields._amqp
    if (typeof metadata === 'object' && metadata !== null && !Array.isArray(metadata)) {
      const upstream = metadata.messageId
      if (typeof upstream === 'string' && upstream !== '') return upstream
    }
    // Unique, not stable: nothing republishes this message (a write that throws has published
    // nothing; a failed message is settled on its own and comes back, if at all, as a new event).
    return `${this.#idPrefix}${(++this.#madeIds).toString(36)}`
  }
}

/**
 * Waits for the channel's socket to drain, or for the channel to close (a lost connection never
 * drains; its confirms have then failed already), so a write never waits for ever.
 */
function drainedOrClosed(channel: ConfirmChannel): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      channel.off('drain', done)
      channel.off('close', done)
      resolve()
    }
    channel.on('drain', done)
    channel.on('close', done)
  })
}

/**
 * The result of an event whose publish threw: amqplib's `TypeError` or `RangeError` says the
 * message cannot be encoded (a routing key or message-id over 255 bytes), which no retry changes,
 * so it is rejected; anything else (a channel closed meanwhile) is retried.
 */
function unpublished(error: unknown, messageId: string): Error {
  const reason = error instanceof Error ? error.message : String(error)
  const id = messageId.length > 64 ? `${messageId.slice(0, 64)}…` : messageId
  if (error instanceof TypeError || error instanceof RangeError) {
    return new RejectError(
      COMPONENT,
      `message ${id} cannot be encoded, and no retry would change that: ${reason}`,
      {
        cause: error,
      },
    )
  }
  return new RetryableError(COMPONENT, `message ${id} was not published: ${reason}`, { cause: error })
}

/** What tells a returned message's publish apart: its exchange, routing key and message-id. */
function returnKey(exchange: string, routingKey: string, messageId: string): string {
  return `${exchange}\u0000${routingKey}\u0000${messageId}`
}

function routingKeyOf(event: LogEvent, o: Resolved): string {
  if (o.routingKeyField === undefined) return o.routingKey
  const value = event.get(o.routingKeyField)
  return typeof value === 'string' ? value : o.routingKey
}

function omit(fields: Readonly<JsonObject>, keys: readonly string[]): JsonObject {
  if (keys.length === 0 || !keys.some((key) => key in fields)) return fields as JsonObject
  const copy: JsonObject = { ...fields }
  for (const key of keys) delete copy[key]
  return copy
}

/**
 * A RabbitMQ sink: publishes each event as a JSON message to `exchange` with `routingKey`, with
 * publisher confirms; delivered only when confirmed, rejected when returned unroutable.
 *
 * @example
 * ```ts
 * builder.sink('bus', ['parse'], amqpSink({ url: 'amqp://guest:guest@127.0.0.1:5672', exchange: 'events', routingKey: 'parsed' }))
 * ```
 */
export function amqpSink(options: AmqpSinkOptions): AmqpSink {
  return new AmqpPublisher(options)
}
