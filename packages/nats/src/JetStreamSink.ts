/**
 * `jetstream` sink: publishes each event as a JSON message to a JetStream subject and counts it
 * delivered only once the stream acknowledged it (a PubAck).
 *
 * Invariants:
 * - An event is `delivered` only when its PubAck arrived, or when the PubAck says the stream
 *   already held a message with the same `Nats-Msg-Id` (a duplicate is a delivery that happened
 *   before, counted once in `counters.duplicates`). A PubAck names its stream and sequence: any
 *   other reply (a core NATS service answering requests on the subject) is a failed publish.
 * - The `Nats-Msg-Id` of an event is `msgId(event)` when that option is given (as it is), else
 *   `<origin>:<digest>`: the origin is the record's public identity (`RecordId.of(event)`, the
 *   `_recordId` field its source set), else `<stream>:<sequence>:<stored time in ms>` of a
 *   jetstream source's `_nats` metadata (the time tells a stream made again, whose sequences
 *   start over, from the one before); the digest is 22 characters of base64url of the SHA-256 of
 *   `subject` and the payload published. With no origin, no id. The digest keeps the events a
 *   transform split from one record (which share its origin) apart, or the stream kept the first
 *   and dropped the others as duplicates; the subject keeps apart the copies of one event that
 *   sinks on two subjects of one stream publish (the stream drops a repeated id whatever the
 *   subject). A retry or a redelivery of the same event publishes the same bytes on the same
 *   subject, so it has the same id and is still dropped. Children with byte-identical payloads
 *   are one message. The `_recordId` field and the metadata field are left out of the payload.
 * - A timeout, a dropped connection or an error from the server never counts as delivered: with a
 *   message id on every event the whole write is retried (`RetryableError`; the ids make the
 *   retry harmless for what was stored already); without one, only the failed events report an
 *   error (`errored`), so a source redelivers those alone.
 * - An event that can never be published fails alone (`rejected`, never retried), before it is
 *   published: one `JSON.stringify` cannot encode, one whose message (payload and headers) is over
 *   the server's `max_payload`, one whose message id is not a valid header value (a CR or LF), one
 *   whose `msgId` threw or returned neither a string nor `undefined`. Its batch-mates are
 *   published and settled by their own PubAcks. So does one the stream refuses in its PubAck as
 *   over its own `max_msg_size` (after publishing: the client cannot know that limit).
 * - At most `maxInFlight` publishes await their PubAck at once, across every pending write.
 * - The runtime may have {@link JETSTREAM_SINK_CONCURRENCY} writes pending at once (the sink's
 *   `concurrency`; a declaration's `concurrency` option overrides it), so the PubAck window does
 *   not drain at the end of each write. Writes then complete out of order, and messages of
 *   different writes may be stored out of order; declare `concurrency: 1` where order matters.
 * - When the client closes the connection for good (it gives up after a second authorization
 *   error in a row: credentials revoked or rotated), the next write connects again; while that
 *   fails, writes fail retryable, naming why (RFC 0007).
 *
 * @module
 */
import { createHash } from 'node:crypto'
import { type EventArray, type JsonObject, type LogEvent, RecordId } from '@ackline/core'
import {
  ComponentError,
  type ConfigIssue,
  codeOption,
  defineOptions,
  MAX_TIMER_MS,
  type OptionsOf,
  RejectError,
  type ResolvedOptionsOf,
  RetryableError,
  type Sink,
  type SinkResult,
} from '@ackline/topology'
import {
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  jetstream as jetstreamClient,
  jetstreamManager,
  type PubAck,
  PubHeaders,
} from '@nats-io/jetstream'
import { MsgHdrsImpl } from '@nats-io/transport-node'
import { z } from 'zod'
import { type Connection, serversOf } from './internal/Connection.js'
import { connectionShape } from './internal/connectionShape.js'
import { jetstreamUnavailable } from './internal/jetstreamUnavailable.js'
import { publishSubject } from './internal/publishSubject.js'
import { SinkConnection } from './internal/SinkConnection.js'
import { tooLarge } from './internal/tooLarge.js'

/** Options of {@link jetstreamSink}: its schema (`validate`, `jsonSchema`, …). */
export const JetStreamSinkOptions = defineOptions({
  ...connectionShape,
  subject: publishSubject().describe('The subject to publish to; a stream must capture it.'),
  timeoutMs: z
    .int()
    .min(1)
    .max(MAX_TIMER_MS)
    .default(5000)
    .describe(
      "How long to wait for one PubAck, and at start for each of JetStream's answers to the stream lookup (three requests), in ms.",
    ),
  maxInFlight: z.int().min(1).default(256).describe('The most publishes awaiting their PubAck at once.'),
  msgId: codeOption<(event: LogEvent) => string | undefined>('a function')
    .optional()
    .describe(
      "The `Nats-Msg-Id` of an event, used as given (the stream drops a second message with the same id in its duplicate window, and the sink counts it delivered). Default: `<origin>:<digest>`, the origin being the record's `_recordId` (`RecordId` of @ackline/core), else `<stream>:<sequence>:<timestampMs>` from the `_nats` metadata of an event a jetstream source read, and the digest 22 characters of base64url of the SHA-256 of `subject` and the published payload, so events split from one record, and copies of one event that sinks publish on two subjects of one stream, are all stored while a retry of the same event is dropped (events with one origin and byte-identical payloads are one message); with no origin, none.",
    ),
  metadataField: z
    .union([z.string().min(1), z.literal(false)])
    .default('_nats')
    .describe(
      "A field holding a jetstream source's metadata: read for the default message id and left out of the payload; false: none.",
    ),
})
/** Options of {@link jetstreamSink}. */
export type JetStreamSinkOptions = OptionsOf<typeof JetStreamSinkOptions>
type Resolved = ResolvedOptionsOf<typeof JetStreamSinkOptions>

/** What the sink has seen since it started (a fresh snapshot on each read). */
export interface JetStreamSinkCounters {
  /** Messages the stream acknowledged as new. */
  readonly published: number
  /** Messages the stream acknowledged as duplicates of an id it held (counted delivered). */
  readonly duplicates: number
  /** Publishes that failed (timeout, no stream, connection lost). */
  readonly failed: number
  /**
   * Reconnects of the connection after a drop, and new connections made after the client closed
   * one for good (a second authorization error in a row).
   */
  readonly reconnects: number
  /** Publishes awaiting their PubAck now. */
  readonly inFlight: number
}

/** The sink {@link jetstreamSink} returns. */
export interface JetStreamSink extends Sink {
  readonly kind: 'jetstream'
  validate(): readonly ConfigIssue[]
  /**
   * Connects and checks that a stream captures `subject` and acknowledges publishes; throws a
   * `ComponentError` otherwise (`NO_STREAM` or `NO_ACK_STREAM` naming `subject`, `CONNECT_FAILED`
   * or `AUTH_FAILED` naming the servers or the user).
   */
  start(): Promise<void>
  write(events: EventArray): Promise<SinkResult>
  stop(): Promise<void>
  /** What the sink has done since it was made, counted (see {@link JetStreamSinkCounters}). */
  readonly counters: JetStreamSinkCounters
}

/**
 * How many writes the runtime keeps pending on a {@link jetstreamSink} unless its declaration
 * says otherwise (`builder.sink(id, inputs, jetstreamSink(…), { concurrency })`): one write
 * publishes while another waits for its PubAcks; `maxInFlight` bounds them together.
 */
export const JETSTREAM_SINK_CONCURRENCY = 4

class JetStreamPublisher implements JetStreamSink {
  readonly kind = 'jetstream'
  readonly concurrency = JETSTREAM_SINK_CONCURRENCY
  readonly #options: JetStreamSinkOptions
  readonly #o: Resolved
  /** The connection, made anew when the client gives up on it (see `SinkConnection`). */
  readonly #link: SinkConnection
  /** The JetStream client of the connection `#jsOn`. */
  #js: JetStreamClient | undefined = undefined
  #jsOn: Connection | undefined = undefined
  #inFlight = 0
  /** The PubAcks awaited, shared by every pending write. */
  readonly #window: Window
  readonly #count = { published: 0, duplicates: 0, failed: 0 }

  constructor(options: JetStreamSinkOptions) {
    this.#options = options
    this.#o = JetStreamSinkOptions.resolve(options)
    this.#window = new Window(this.#o.maxInFlight)
    this.#link = new SinkConnection('jetstream', this.#o)
  }

  get counters(): JetStreamSinkCounters {
    return { ...this.#count, reconnects: this.#link.reconnects, inFlight: this.#inFlight }
  }

  validate(): readonly ConfigIssue[] {
    return JetStreamSinkOptions.validate(this.#options)
  }

  async start(): Promise<void> {
    const o = this.#o
    const connection = await this.#link.start()
    let noAck: string | undefined
    try {
      const jsm = await jetstreamManager(connection.nc, { timeout: o.timeoutMs })
      const stream = await jsm.streams.find(o.subject)
      // A stream with no_ack stores each message and answers nothing: every publish would time out
      // while stored, and each retry (or redelivery) stored it again.
      if ((await jsm.streams.info(stream)).config.no_ack === true) noAck = stream
    } catch (error) {
      await this.#link.stop()
      // Only the server's answer that no stream matches means the subject is wrong; JetStream
      // not enabled, a request that timed out, a connection lost on the way or a user not allowed
      // the lookup is the servers' or the user's.
      if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) {
        throw new ComponentError('NO_STREAM', `no stream captures subject '${o.subject}': ${String(error)}`, {
          component: 'jetstream',
          field: 'subject',
          cause: error,
        })
      }
      const what = `the lookup of the stream for subject '${o.subject}'`
      throw (
        jetstreamUnavailable('jetstream', o.servers, what, error) ??
        new ComponentError(
          'CONNECT_FAILED',
          `JetStream refused ${what} (servers ${serversOf(o.servers)}): ${String(error)}`,
          { component: 'jetstream', field: 'servers', cause: error },
        )
      )
    }
    if (noAck !== undefined) {
      await this.#link.stop()
      throw new ComponentError(
        'NO_ACK_STREAM',
        `stream '${noAck}', which captures subject '${o.subject}', has no_ack set: it never acknowledges a publish, so no event could be delivered (each would time out while the stream stored it, again on every retry)`,
        { component: 'jetstream', field: 'subject' },
      )
    }
  }

  async write(events: EventArray): Promise<SinkResult> {
    // Throws a RetryableError before start, or while connecting again after the client gave up fails.
    const connection = await this.#link.current()
    if (this.#jsOn !== connection) {
      this.#js = jetstreamClient(connection.nc)
      this.#jsOn = connection
    }
    const js = this.#js!
    const o = this.#o
    const results: (undefined | 'delivered' | Error)[] = new Array(events.length)
    let allHaveIds = true
    let delivered = 0
    let retryable = false
    const window = this.#window
    const publishes: Promise<void>[] = []
    const maxPayload = connection.maxPayload
    for (let i = 0; i < events.length; i++) {
      const event = events.events[i]!
      let payload: Uint8Array
      try {
        payload = utf8.encode(JSON.stringify(this.#payloadOf(event)))
      } catch (error) {
        results[i] = error instanceof Error ? error : new TypeError(String(error))
        continue
      }
      const id = this.#idOf(event, payload)
      if (id instanceof RejectError) {
        results[i] = id
        continue
      }
      const hdrs = headersOf(id)
      if (hdrs instanceof Error) {
        results[i] = hdrs
        continue
      }
      // Headers as the client will send them: the server's limit counts them with the payload.
      const refused = tooLarge('jetstream', o.subject, payload.length + hdrs.encode().length, maxPayload)
      if (refused !== undefined) {
        results[i] = refused
        continue
      }
      if (id === undefined) allHaveIds = false
      await window.acquire()
      this.#inFlight++
      publishes.push(
        js
          .publish(o.subject, payload, { timeout: o.timeoutMs, headers: hdrs })
          .then(
            (ack) => {
              // The publish is a request, and the first reply wins: a core NATS responder on the
              // subject (once no stream captures it) answers with JSON the client takes for a PubAck.
              if (!isPubAck(ack)) {
                this.#count.failed++
                retryable = true
                results[i] = new RetryableError(
                  'jetstream',
                  `publish to '${o.subject}' got a reply that is not a PubAck (no stream and sequence: ${shortJson(ack)}): no stream stored it`,
                )
                return
              }
              if (ack.duplicate) this.#count.duplicates++
              else this.#count.published++
              results[i] = 'delivered'
              delivered++
            },
            (error: unknown) => {
              this.#count.failed++
              if (error instanceof JetStreamApiError && error.code === STREAM_MESSAGE_TOO_LARGE) {
                // The stream refuses it on every attempt: a retry would only make it a poison message.
                results[i] = new RejectError(
                  'jetstream',
                  `the stream capturing '${o.subject}' refused the event's message of ${payload.length} bytes: ${messageOf(error)}`,
                  { cause: error },
                )
                return
              }
              retryable = true
              results[i] = new RetryableError(
                'jetstream',
                noResponders(error)
                  ? `no stream captures subject '${o.subject}' any more (the server found no responder for the publish: the stream was deleted or no longer takes the subject, or JetStream is unavailable)`
                  : `publish to '${o.subject}' failed: ${messageOf(error)}`,
                { cause: error },
              )
            },
          )
          .finally(() => {
            this.#inFlight--
            window.release()
          }),
      )
    }
    await Promise.all(publishes)
    // With ids on every event a retry of the whole write is harmless: what was stored comes back a duplicate.
    if (retryable && allHaveIds) {
      const first = results.find((r): r is Error => r instanceof RetryableError)
      throw first ?? new RetryableError('jetstream', 'a publish failed')
    }
    // All delivered (the common case) is said with nothing, so the runtime ends the array at once.
    return delivered === events.length ? undefined : (results as (Error | 'delivered')[])
  }

  async stop(): Promise<void> {
    await this.#link.stop()
  }

  #payloadOf(event: LogEvent): JsonObject {
    const field = this.#o.metadataField
    const fields = event.fields
    const hasMetadata = field !== false && field in fields
    if (!hasMetadata && !(RecordId.FIELD in fields)) return fields as JsonObject
    const payload: JsonObject = { ...fields }
    if (hasMetadata) delete payload[field]
    delete payload[RecordId.FIELD]
    return payload
  }

  /**
   * The message id of `event`, published as `payload`, or why it has none it can be published
   * with: a `msgId` that throws or returns something other than a string or `undefined` (untyped
   * JS) fails that event alone. An empty id is no id (the server ignores an empty `Nats-Msg-Id`).
   */
  #idOf(event: LogEvent, payload: Uint8Array): string | undefined | RejectError {
    const msgId = this.#o.msgId
    if (msgId !== undefined) {
      let id: unknown
      try {
        id = msgId(event)
      } catch (error) {
        return new RejectError('jetstream', `msgId threw: ${messageOf(error)}`, {
          field: 'msgId',
          cause: error,
        })
      }
      if (id === undefined || id === '') return undefined
      if (typeof id !== 'string')
        return new RejectError(
          'jetstream',
          `msgId returned ${id === null ? 'null' : typeof id}, not a string or undefined`,
          { field: 'msgId' },
        )
      return id
    }
    const origin = this.#originOf(event)
    // With the payload's digest: the children of one record split by a transform share its origin,
    // and the stream took every one after the first for a duplicate (counted delivered, stored
    // nowhere). A few µs for a small payload, beside some 150 µs a publish takes here (PubAck window 256).
    return origin === undefined ? undefined : `${origin}:${digestOf(this.#o.subject, payload)}`
  }

  /** Where `event` came from, stable across redeliveries: its record identity, else its jetstream source's message. */
  #originOf(event: LogEvent): string | undefined {
    const id = RecordId.of(event)
    if (id !== undefined) return id
    const field = this.#o.metadataField
    if (field === false) return undefined
    const meta = event.fields[field]
    if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) return undefined
    const { stream, streamSequence, timestampMs } = meta as {
      stream?: unknown
      streamSequence?: unknown
      timestampMs?: unknown
    }
    if (typeof stream !== 'string' || typeof streamSequence !== 'number') return undefined
    // With the stored time: a stream made again numbers from 1 again, and its messages were taken
    // for the old ones with those sequences (duplicates, counted delivered, stored nowhere).
    return typeof timestampMs === 'number'
      ? `${stream}:${streamSequence}:${timestampMs}`
      : `${stream}:${streamSequence}`
  }
}

/** Bounds the publishes awaiting a PubAck. */
class Window {
  #free: number
  readonly #waiting: (() => void)[] = []
  constructor(size: number) {
    this.#free = size
  }
  acquire(): Promise<void> {
    if (this.#free > 0) {
      this.#free--
      return Promise.resolve()
    }
    return new Promise((resolve) => this.#waiting.push(resolve))
  }
  release(): void {
    const next = this.#waiting.shift()
    if (next !== undefined) next()
    else this.#free++
  }
}

const utf8 = new TextEncoder()

/**
 * 22 characters of base64url (132 bits) of the SHA-256 of `subject`, a line feed and `payload`:
 * what tells apart events of one origin. With the subject: a stream drops a repeated id whatever
 * the subject, so two sinks on two of its subjects publishing one event (a fan-out) had the second
 * copy dropped as a duplicate, counted delivered. A subject holds no white space (refused at build),
 * so the line feed ends it unambiguously.
 */
function digestOf(subject: string, payload: Uint8Array): string {
  return createHash('sha256').update(subject).update('\n').update(payload).digest('base64url').slice(0, 22)
}

/** The PubAck error of a message over the stream's own `max_msg_size` (JSStreamMessageExceedsMaximumErr). */
const STREAM_MESSAGE_TOO_LARGE = 10054

/** The headers of a message with id `id` (`Nats-Msg-Id`), or why it cannot carry that id. */
function headersOf(id: string | undefined): MsgHdrsImpl | RejectError {
  // The implementation, not the `MsgHdrs` interface: its `encode()` is the size the client sends.
  const hdrs = new MsgHdrsImpl()
  if (id === undefined) return hdrs
  try {
    hdrs.set(PubHeaders.MsgIdHdr, id)
    return hdrs
  } catch (error) {
    return new RejectError(
      'jetstream',
      `the event's Nats-Msg-Id is not a valid header value: ${messageOf(error)}`,
      {
        field: 'msgId',
        cause: error,
      },
    )
  }
}

/**
 * Whether a reply the client parsed as a PubAck is one: it names the stream that stored the message
 * and its sequence there. The client only refuses a reply whose stream is `''`, so `{}` or
 * `{"received":true}` from a service answering requests on the subject passed for a stored message.
 */
function isPubAck(ack: PubAck): boolean {
  const { stream, seq } = ack as { stream?: unknown; seq?: unknown }
  return (
    typeof stream === 'string' &&
    stream !== '' &&
    typeof seq === 'number' &&
    Number.isSafeInteger(seq) &&
    seq > 0
  )
}

/** A reply as a reason shows it: its JSON, cut to 200 characters. */
function shortJson(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value)
  return text.length > 200 ? `${text.slice(0, 200)}…` : text
}

/**
 * Whether a publish failed because nothing answers requests on its subject: the client turns the
 * server's "no responders" into `JetStreamNotEnabled` ("jetstream is not enabled"), which here,
 * after the start found a stream, means the stream is gone.
 */
function noResponders(error: unknown): boolean {
  const cause = (error as { cause?: unknown } | undefined)?.cause as { isNoResponders?: unknown } | undefined
  return (
    (error as Error | undefined)?.name === 'JetStreamNotEnabled' &&
    typeof cause?.isNoResponders === 'function' &&
    (cause as { isNoResponders(): boolean }).isNoResponders()
  )
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

/**
 * A sink publishing each event as JSON to `subject` and waiting for the stream's PubAck: an event
 * is delivered only when the stream stored it (or already held its `Nats-Msg-Id`).
 *
 * @example
 * ```ts
 * builder.sink('out', ['in'], jetstreamSink({ servers: '127.0.0.1:4222', subject: 'orders.archived' }))
 * ```
 */
export function jetstreamSink(options: JetStreamSinkOptions): JetStreamSink {
  return new JetStreamPublisher(options)
}
