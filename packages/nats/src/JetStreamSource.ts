/**
 * `jetstream` source: reads a JetStream stream through a durable pull consumer and tells the
 * server what became of each message only once the pipeline decided it.
 *
 * Invariants:
 * - A message is `ack`ed only when its batch resolved `delivered`; `errored` is `nak`ed with a
 *   back-off delay, `rejected` is `term`ed with the reason (the table in `internal/ackMapping.ts`).
 *   A batch the pipeline refused to accept is settled as `errored` (back-off, then `term` at
 *   `maxDeliveries`), so a refusal that recurs never loops hot; only at a stop are its messages
 *   given back at once (plain `nak`), for another instance to take, unless on the consumer's last
 *   delivery (MaxDeliver), where a nak would end it unsaid: that one is `term`ed with the reason.
 *   A message is never dropped silently: one whose payload is not JSON (or not UTF-8, or holds a
 *   number too large for a double, which would parse as `Infinity` and reach sinks as `null`) either enters the
 *   pipeline as a raw string field or is `term`ed with a reason (`invalidJson`).
 * - While a message is in the pipeline (from its arrival, also while an earlier batch waits to
 *   be accepted) past half its consumer's AckWait, the source sends `working()` so the server
 *   does not redeliver it (no duplicate from a slow sink). Should the server redeliver it anyway
 *   (the AckWait passed while the connection was down), the copy does not enter the pipeline
 *   again: the message is settled once, through its newest delivery. A batch that resolves while
 *   the connection is down is settled once it is back (the client drops what was written while
 *   it was down), or at once at a stop, whose close then warns of them.
 * - A user `onWarning` that throws or rejects stops nothing (see `#warn`).
 * - At most `min(maxInFlight, consumer MaxAckPending)` messages are in the pipeline at once: the
 *   source pulls no more until some settle (back pressure), and the server's MaxAckPending bounds
 *   the messages all instances sharing the consumer hold.
 * - `run` returns only once every message it took was settled with the server (or the stop's
 *   deadline ended the pipeline's wait), and the connection was flushed and closed.
 *
 * The messages of a pull that have already arrived travel together (up to `batchSize`) as one
 * batch sent with per-record outcomes; each message is settled by its own record's outcome, so one
 * message's outcome never decides another's. The source never waits to fill a batch.
 *
 * @module
 */
import type { JsonObject, RecordOutcome } from '@ackline/core'
import { JsonValue, RecordOutcomes } from '@ackline/core'
import {
  type BatchReceipt,
  ComponentError,
  ConfigIssue,
  codeOption,
  cutToBytes,
  defineOptions,
  MAX_TIMER_MS,
  nextWarningAt,
  type OptionsOf,
  type ResolvedOptionsOf,
  type Source,
  type SourceContext,
  warningsTo,
} from '@ackline/topology'
import {
  AckPolicy,
  type Consumer,
  type ConsumerInfo,
  type ConsumerMessages,
  JetStreamApiError,
  type JetStreamManager,
  type JsMsg,
  jetstream as jetstreamClient,
  jetstreamManager,
} from '@nats-io/jetstream'
import { z } from 'zod'
import { actionFor, type JetStreamAction } from './internal/ackMapping.js'
import { Connection, serversOf } from './internal/Connection.js'
import { connectionShape } from './internal/connectionShape.js'
import { jetstreamUnavailable } from './internal/jetstreamUnavailable.js'

/**
 * A stream or consumer name: what the client and the `nats` CLI accept (no `.`, `*`, `>`, `/`, `\\`
 * or white space), so a bad one is refused at build, naming the field, not at bind.
 */
const natsName = () =>
  z
    .string()
    .min(1)
    .refine((name) => !/[.*>/\\\s]/.test(name), "cannot contain '.', '*', '>', '/', '\\' or white space")

/**
 * The longest duration the server reads, in ms: it takes durations as a 64-bit count of
 * nanoseconds, `(2^63 - 1) / 10^6` ms (292 years). Longer, the server (2.9) ignores a nak's delay
 * and redelivers at once (a back-off became a hot loop), and refuses every pull ('bad request …
 * cannot unmarshal number … of type time.duration'), so the source never got a message.
 */
const MAX_SERVER_DURATION_MS = 9_223_372_036_854

/**
 * Options of {@link jetstream}: its schema (`validate`, `jsonSchema`, …).
 *
 * @example
 * ```ts
 * jetstream({ servers: '127.0.0.1:4222', stream: 'ORDERS', consumer: 'ackline', batchSize: 100 })
 * ```
 */
export const JetStreamSourceOptions = defineOptions({
  ...connectionShape,
  stream: natsName().describe('The stream to read.'),
  consumer: natsName().describe('The durable pull consumer to read through (bound, or created).'),
  create: z
    .boolean()
    .default(true)
    .describe(
      'Create the consumer (ack policy explicit) when it does not exist; when false a missing one fails the run.',
    ),
  filterSubject: z.string().min(1).optional().describe('When creating the consumer: only these subjects.'),
  ackWaitMs: z
    .int()
    .min(100)
    .max(MAX_SERVER_DURATION_MS)
    .default(30_000)
    .describe(
      "When creating the consumer: its AckWait, in ms (a bound consumer's own is used; at most 9,223,372,036,854, the longest duration the server reads).",
    ),
  maxAckPending: z
    .int()
    .min(1)
    .default(1000)
    .describe("When creating the consumer: its MaxAckPending (a bound consumer's own is used)."),
  maxDeliver: z
    .int()
    .min(-1)
    .default(-1)
    .describe('When creating the consumer: its MaxDeliver (-1: unbounded).'),
  maxDeliveries: z
    .int()
    .min(0)
    .default(0)
    .describe(
      "An errored message is `term`ed (not `nak`ed) from this delivery on; 0 follows the consumer's MaxDeliver, or none. Never past the consumer's MaxDeliver, after which the server redelivers nothing.",
    ),
  batchSize: z
    .int()
    .min(1)
    .default(100)
    .describe(
      'The most messages one pull asks for, and one batch carries (what has arrived, never waited for).',
    ),
  maxInFlight: z
    .int()
    .min(1)
    .default(1000)
    .describe("The most messages in the pipeline at once (also bounded by the consumer's MaxAckPending)."),
  fetchExpiresMs: z
    .int()
    .min(1000)
    .max(MAX_SERVER_DURATION_MS)
    .default(5000)
    .describe(
      'How long one pull waits for messages on an idle stream, in ms (at most 9,223,372,036,854, the longest duration the server reads).',
    ),
  apiTimeoutMs: z
    .int()
    .min(1)
    .max(MAX_TIMER_MS)
    .default(5000)
    .describe(
      "How long to wait for each of JetStream's answers when the source binds its consumer (reading or creating it), in ms.",
    ),
  nakInitialMs: z
    .int()
    // Not 0: every later delay is a multiple of it, and a nak of 0 ms is a plain nak, so an
    // errored message came back at once on every delivery (the hot loop the back-off prevents).
    .min(1)
    .max(MAX_SERVER_DURATION_MS)
    .default(1000)
    .describe(
      'The delay of the first `nak` of an errored message, in ms (at least 1: each later delay is a multiple of it).',
    ),
  nakMaxMs: z
    .int()
    .min(0)
    .max(MAX_SERVER_DURATION_MS)
    .default(60_000)
    .describe(
      'The longest `nak` delay, in ms (at most 9,223,372,036,854, the longest duration the server reads: it ignores a longer delay and redelivers at once).',
    ),
  nakMultiplier: z.number().min(1).default(2).describe('What each further `nak` delay is multiplied by.'),
  doubleAck: z
    .boolean()
    .default(false)
    .describe(
      'Acknowledge with `ackAck` and wait for the server to confirm; unconfirmed acks are counted. Off: `ack`, with a flush at stop.',
    ),
  invalidJson: z
    .enum(['reject', 'raw'])
    .default('reject')
    .describe(
      "A payload that is not a JSON object: 'reject' terms it with the reason; 'raw' sends it as a string in `rawField`. A JSON value that is not an object goes to `rawField` either way. A payload that is not UTF-8 counts as invalid JSON ('raw': its bad bytes become U+FFFD), and so does one holding a number too large for a double (such as 1e400, which would parse as Infinity).",
    ),
  rawField: z
    .string()
    .min(1)
    .default('message')
    .describe('The field a raw or non-object payload goes to (not the metadataField).'),
  metadataField: z
    .union([z.string().min(1), z.literal(false)])
    .default('_nats')
    .describe(
      "The field that holds the broker's metadata (stream, sequences, subject, headers, delivery count, redelivered); false: none.",
    ),
  onWarning: codeOption<(message: string) => void>('a function')
    .optional()
    .describe("Where the source's warnings go. Default: process.emitWarning with code ACKLINE_NATS."),
})
/** Options of {@link jetstream}. */
export type JetStreamSourceOptions = OptionsOf<typeof JetStreamSourceOptions>
type Resolved = ResolvedOptionsOf<typeof JetStreamSourceOptions>

/**
 * The broker metadata an event carries under `metadataField` (default `_nats`).
 *
 * @example
 * ```ts
 * event.get('_nats.deliveryCount') // 2 on the first redelivery
 * ```
 */
export interface JetStreamMetadata {
  /** The stream the message was stored in. */
  readonly stream: string
  /** The durable consumer it was delivered through. */
  readonly consumer: string
  /** The subject it was published to. */
  readonly subject: string
  /** The message's sequence in the stream: its identity. */
  readonly streamSequence: number
  /** The delivery's sequence in the consumer. */
  readonly consumerSequence: number
  /** 1 on the first delivery. */
  readonly deliveryCount: number
  /** Whether the server delivered it before (`deliveryCount > 1`). */
  readonly redelivered: boolean
  /** When the message was stored, ms since the epoch. */
  readonly timestampMs: number
  /**
   * The message's headers, each name with all its values; none when the client cannot read them
   * (a header name holding a space or a character past ASCII, which the server stores as any
   * other), which the source warns of, naming the message: the 1st, 2nd, 4th, … such message and
   * then every 1024th ({@link nextWarningAt}), so a stream full of them does not flood the log.
   */
  readonly headers: { readonly [name: string]: readonly string[] }
}

/** What the source has seen since it started (a fresh snapshot on each read). */
export interface JetStreamSourceCounters {
  /** Messages taken from the server (redeliveries included). */
  readonly received: number
  /**
   * Messages acknowledged (`ack` / `ackAck`). None once the connection closed: what settles then
   * reaches no server and is warned of, counted in no counter but `received`.
   */
  readonly acked: number
  /** Messages given back with `nak(delay)`. */
  readonly nacked: number
  /** Messages terminated with `term(reason)` (rejected, invalid, or past `maxDeliveries`). */
  readonly terminated: number
  /** Messages whose payload was not a JSON object (terminated or passed raw, per `invalidJson`). */
  readonly invalid: number
  /** Messages received with a delivery count above 1. */
  readonly redelivered: number
  /** `working()` signals sent for slow messages. */
  readonly working: number
  /** `ackAck`s the server did not confirm (with `doubleAck`): those messages will come again. */
  readonly ackUnconfirmed: number
  /** Pulls that failed (a dropped connection, a deleted consumer); each is retried after a pause. */
  readonly pullErrors: number
  /** Reconnects of the connection after a drop. */
  readonly reconnects: number
  /** Messages in the pipeline now. */
  readonly inFlight: number
}

/** The source {@link jetstream} returns. */
export interface JetStreamSource extends Source {
  readonly kind: 'jetstream'
  readonly canAcknowledge: true
  validate(): readonly ConfigIssue[]
  /** What the source has seen so far. */
  readonly counters: JetStreamSourceCounters
  /**
   * Resolves once connected and bound to the consumer; rejects with the `ComponentError` that
   * failed the run (`CONNECT_FAILED`, also when JetStream does not answer; `AUTH_FAILED`;
   * `NO_CONSUMER`, also when the server refuses to create it; `ACK_POLICY`; `NOT_PULL`).
   */
  ready(): Promise<void>
}

interface InFlight {
  /**
   * The newest delivery of the message: a redelivery of a message still in the pipeline takes
   * this place instead of entering the pipeline again, so the settlement goes to it.
   */
  msg: JsMsg
  /** When the last signal (delivery or `working()`) reset the server's AckWait clock. */
  lastTouch: number
}

const nothing = (): void => {}
/**
 * The longest reason, in bytes of UTF-8, a `term` sends the server (the warning keeps it whole): a
 * term over the server's `max_payload` is refused by the client, a throw while a batch is settled.
 */
const TERM_REASON_MAX_BYTES = 1024
/** What a term sends before its reason: `+TERM ` (the whole payload must fit the server's max_payload). */
const TERM_PREFIX_BYTES = '+TERM '.length
/** Throws on bytes that are not UTF-8, where `msg.string()` would put U+FFFD in silently. */
const strictUtf8 = new TextDecoder('utf-8', { fatal: true })

class JetStreamPullSource implements JetStreamSource {
  readonly kind = 'jetstream'
  readonly canAcknowledge = true
  readonly #options: JetStreamSourceOptions
  #component = 'jetstream'
  #warnTo: ((message: string) => void) | undefined = undefined
  #connection: Connection | undefined = undefined
  /** The messages in the pipeline, by stream sequence (a consumer reads one stream). */
  readonly #inFlight = new Map<number, InFlight>()
  /** Whether the server reads a term's reason (2.10.4+); before, the reason goes to a warning only. */
  #termReasons = false
  /**
   * Messages settled (acked, nacked, termed) while the connection was down: only at a stop, which
   * does not wait for it. The client drops what was written then when it dials again, so the
   * close warns of them even when its own flush, after a reconnect, was answered.
   */
  #settledWhileDown = 0
  /**
   * Pulls failed in a row (reset by one that ends without an error): their warnings thin out (see
   * `#pullFailed`), so a consumer deleted under the source does not warn at every retry.
   */
  #pullFailures = 0
  /**
   * Messages whose headers could not be read, since the source was made: their warnings thin out
   * ({@link nextWarningAt}), so a stream full of them does not print one warning per message.
   */
  #unreadableHeaders = 0
  /** The closed connection whose lost settlements were warned of (see `#lostWithConnection`). */
  #lostWarnedOn: Connection | undefined = undefined
  readonly #count = {
    received: 0,
    acked: 0,
    nacked: 0,
    terminated: 0,
    invalid: 0,
    redelivered: 0,
    working: 0,
    ackUnconfirmed: 0,
    pullErrors: 0,
  }
  #resolveReady: () => void = nothing
  #rejectReady: (error: unknown) => void = nothing
  readonly #ready: Promise<void>

  constructor(options: JetStreamSourceOptions) {
    this.#options = options
    this.#ready = new Promise((resolve, reject) => {
      this.#resolveReady = resolve
      this.#rejectReady = reject
    })
    this.#ready.catch(nothing)
  }

  get counters(): JetStreamSourceCounters {
    return { ...this.#count, reconnects: this.#connection?.reconnects ?? 0, inFlight: this.#inFlight.size }
  }

  ready(): Promise<void> {
    return this.#ready
  }

  validate(): readonly ConfigIssue[] {
    const issues = JetStreamSourceOptions.validate(this.#options)
    if (issues.length > 0) return issues
    const o = JetStreamSourceOptions.resolve(this.#options)
    if (o.nakMaxMs < o.nakInitialMs)
      return [ConfigIssue.of('nakMaxMs', `at least nakInitialMs (${o.nakInitialMs})`, o.nakMaxMs)]
    // The metadata is written after the raw payload: under one name it replaced the payload.
    if (o.rawField === o.metadataField)
      return [
        ConfigIssue.of(
          'rawField',
          `not the metadataField ('${o.metadataField}'): the metadata would replace a raw payload`,
          o.rawField,
        ),
      ]
    return []
  }

  async run(context: SourceContext): Promise<void> {
    this.#component = context.id
    const o = JetStreamSourceOptions.resolve(this.#options)
    let connection: Connection
    let consumer: Consumer
    let info: ConsumerInfo
    try {
      connection = await Connection.open(context.id, o)
      this.#connection = connection
      ;({ consumer, info } = await this.#bind(connection, o))
    } catch (error) {
      await this.#connection?.close()
      this.#rejectReady(error)
      throw error
    }
    this.#termReasons = connection.serverAtLeast(2, 10, 4)
    this.#resolveReady()
    const ackWaitMs = Math.max(1, Math.floor((info.config.ack_wait ?? 30e9) / 1e6))
    // The lower of the two bounds: the server redelivers nothing past its MaxDeliver, so a nak on that
    // delivery would leave the message neither acked nor pending, without a word.
    const serverMaxDeliver = Math.max(0, info.config.max_deliver ?? -1)
    const maxDeliveries =
      o.maxDeliveries > 0 && (serverMaxDeliver === 0 || o.maxDeliveries < serverMaxDeliver)
        ? o.maxDeliveries
        : serverMaxDeliver
    const serverLimit = info.config.max_ack_pending ?? -1
    const limit = Math.min(o.maxInFlight, serverLimit > 0 ? serverLimit : o.maxInFlight)
    // Within the consumer's own request limits (MaxRequestBatch, MaxRequestExpires), if it has any:
    // the server refuses a pull over either (409), so every pull failed and nothing was consumed.
    const maxRequestBatch = info.config.max_batch ?? 0
    const pullSize = maxRequestBatch > 0 ? Math.min(o.batchSize, maxRequestBatch) : o.batchSize
    const maxRequestExpiresMs = Math.floor((info.config.max_expires ?? 0) / 1e6)
    // The client takes no expiry under 1 s: a consumer that allows less is left to refuse it, said in a warning.
    const expires =
      maxRequestExpiresMs > 0
        ? Math.max(1000, Math.min(o.fetchExpiresMs, maxRequestExpiresMs))
        : o.fetchExpiresMs
    // Never longer than a timer waits: a longer interval fires every 1 ms (an AckWait over 99 days).
    const heartbeat = setInterval(
      () => this.#touchSlow(ackWaitMs),
      Math.min(MAX_TIMER_MS, Math.max(50, Math.floor(ackWaitMs / 4))),
    )
    heartbeat.unref()
    const settling = new Set<Promise<void>>()
    const room = new Room(limit)
    // A full pipeline would otherwise keep the run going, silent, once the client closed the
    // connection for good, until it had room for a pull that could only fail.
    void connection.nc.closed().then(
      () => room.interrupt(),
      () => room.interrupt(),
    )
    const told = (): number => this.#count.acked + this.#count.nacked + this.#count.terminated
    const toldBefore = told()
    const settledWhileDownBefore = this.#settledWhileDown
    try {
      while (!context.signal.aborted) {
        await room.wait(this.#inFlight.size, context.signal)
        if (context.signal.aborted) break
        if (this.#inFlight.size >= limit) {
          // Woken by the connection's close, with no room: the client gave up on it (else it was ours).
          const gone = await connection.closedForGood()
          if (gone !== undefined) throw gone
          break
        }
        const want = Math.min(pullSize, limit - this.#inFlight.size)
        let messages: ConsumerMessages
        try {
          messages = await consumer.fetch({ max_messages: want, expires })
        } catch (error) {
          await this.#pullFailed(error, context.signal, connection, o)
          continue
        }
        const stop = (): void => messages.stop()
        context.signal.addEventListener('abort', stop, { once: true })
        // A stop that came while the fetch was being set up: its abort has fired already, and the
        // listener never would (the pull would then hold the stop up to fetchExpiresMs).
        if (context.signal.aborted) stop()
        let batch: InFlight[] = []
        let records: JsonObject[] = []
        // The acceptance of the batch sent last, while the pipeline has not taken it. Messages of
        // the pull that arrive meanwhile are taken all the same (in flight, so working() covers
        // them: in the client's iterator the server would deliver them again each AckWait) and go
        // as the next batch once it is accepted; the next pull waits for every acceptance.
        let accepting: Promise<void> | undefined
        const send = (): void => {
          if (batch.length === 0) return
          const settled = this.#send(batch, records, o, context, maxDeliveries, serverMaxDeliver, room)
          batch = []
          records = []
          settling.add(settled)
          void settled.then(() => settling.delete(settled))
          accepting = settled.accepted.then(() => {
            accepting = undefined
            send()
          })
        }
        const accepted = async (): Promise<void> => {
          while (accepting !== undefined) await accepting
        }
        try {
          for await (const msg of messages) {
            this.#pullSucceeded(o)
            const taken = this.#take(msg, o)
            if (taken !== undefined) {
              batch.push(taken.entry)
              records.push(taken.record)
            }
            if (batch.length >= o.batchSize) {
              // A full batch waits for the one before (then sent by its acceptance, if not yet).
              while (accepting !== undefined && batch.length >= o.batchSize) await accepting
              if (accepting === undefined) send()
            } else if (accepting === undefined && messages.getPending() <= 0) {
              // Send what has arrived once nothing more is waiting in the iterator: no added latency.
              send()
            }
          }
          this.#pullSucceeded(o)
        } catch (error) {
          await this.#pullFailed(error, context.signal, connection, o)
        } finally {
          context.signal.removeEventListener('abort', stop)
        }
        // Messages taken before the pull ended or failed are the server's deliveries all the same;
        // the next pull waits until the pipeline accepted them, so back pressure reaches it.
        await accepted()
        send()
        await accepted()
      }
      await Promise.all(settling)
    } finally {
      clearInterval(heartbeat)
      // Acks, naks and terms are fire-and-forget: unconfirmed by the flush, the last of them may be
      // lost with the socket (the messages then come again after their AckWait: a duplicate, never a loss).
      if (!(await connection.close()) && told() > toldBefore) {
        this.#warn(
          `${this.#component}: the server did not confirm within ${o.closeTimeoutMs} ms (closeTimeoutMs) that it read what the source sent last before the connection closed (acks, naks, terms); the messages settled last may be delivered again`,
        )
      }
      const whileDown = this.#settledWhileDown - settledWhileDownBefore
      if (whileDown > 0) {
        this.#warn(
          `${this.#component}: ${whileDown} message(s) settled while the connection was down (the stop does not wait for it), and the client drops what is written then (acks, naks, terms): they may be delivered again`,
        )
      }
    }
  }

  /** Throws the servers' or the user's failure (`jetstreamUnavailable`) of `what`, if `error` is one. */
  #throwIfUnavailable(o: Resolved, what: string, error: unknown): void {
    const unavailable = jetstreamUnavailable(this.#component, o.servers, what, error)
    if (unavailable !== undefined) throw unavailable
  }

  async #bind(connection: Connection, o: Resolved): Promise<{ consumer: Consumer; info: ConsumerInfo }> {
    const js = jetstreamClient(connection.nc, { timeout: o.apiTimeoutMs })
    let jsm: JetStreamManager
    try {
      jsm = await jetstreamManager(connection.nc, { timeout: o.apiTimeoutMs })
    } catch (error) {
      // JetStream not enabled, or the server went away between the connect and this first request.
      throw (
        jetstreamUnavailable(this.#component, o.servers, '', error) ??
        new ComponentError(
          'CONNECT_FAILED',
          `JetStream did not answer (servers ${serversOf(o.servers)}): ${String(error)}`,
          { component: this.#component, field: 'servers', cause: error },
        )
      )
    }
    let info: ConsumerInfo
    try {
      info = await jsm.consumers.info(o.stream, o.consumer)
    } catch (error) {
      this.#throwIfUnavailable(o, `the request for consumer '${o.consumer}' of stream '${o.stream}'`, error)
      const missing = error instanceof JetStreamApiError && (error.code === 10014 || error.code === 10059)
      if (!missing) {
        throw new ComponentError(
          'NO_CONSUMER',
          `cannot read consumer '${o.consumer}' of stream '${o.stream}': ${String(error)}`,
          {
            component: this.#component,
            field: 'consumer',
            cause: error,
          },
        )
      }
      if (!o.create || (error as JetStreamApiError).code === 10059) {
        throw new ComponentError(
          'NO_CONSUMER',
          (error as JetStreamApiError).code === 10059
            ? `stream '${o.stream}' does not exist`
            : `consumer '${o.consumer}' of stream '${o.stream}' does not exist and create is false`,
          {
            component: this.#component,
            field: (error as JetStreamApiError).code === 10059 ? 'stream' : 'consumer',
            cause: error,
          },
        )
      }
      try {
        info = await jsm.consumers.add(o.stream, {
          durable_name: o.consumer,
          ack_policy: AckPolicy.Explicit,
          ack_wait: o.ackWaitMs * 1e6,
          max_ack_pending: o.maxAckPending,
          max_deliver: o.maxDeliver,
          ...(o.filterSubject !== undefined ? { filter_subject: o.filterSubject } : {}),
        })
      } catch (error) {
        this.#throwIfUnavailable(o, `the creation of consumer '${o.consumer}' of stream '${o.stream}'`, error)
        // The server refused the settings (a filter subject outside the stream, a limit): name them.
        const filter = /filter/i.test(String(error)) && o.filterSubject !== undefined
        throw new ComponentError(
          'NO_CONSUMER',
          `cannot create consumer '${o.consumer}' of stream '${o.stream}'${filter ? ` with filterSubject '${o.filterSubject}'` : ''}: ${String(error)}`,
          { component: this.#component, field: filter ? 'filterSubject' : 'consumer', cause: error },
        )
      }
    }
    if (info.config.ack_policy !== AckPolicy.Explicit) {
      // `all` would acknowledge messages still in the pipeline; `none` acknowledges nothing.
      throw new ComponentError(
        'ACK_POLICY',
        `consumer '${o.consumer}' of stream '${o.stream}' has ack policy '${info.config.ack_policy}'; this source needs 'explicit' (each message acknowledged on its own)`,
        { component: this.#component, field: 'consumer' },
      )
    }
    if (info.config.deliver_subject !== undefined && info.config.deliver_subject !== '') {
      throw new ComponentError(
        'NOT_PULL',
        `consumer '${o.consumer}' is a push consumer; this source needs a pull consumer`,
        {
          component: this.#component,
          field: 'consumer',
        },
      )
    }
    let consumer: Consumer
    try {
      consumer = await js.consumers.get(o.stream, o.consumer)
    } catch (error) {
      this.#throwIfUnavailable(o, `the request for consumer '${o.consumer}' of stream '${o.stream}'`, error)
      throw new ComponentError(
        'NO_CONSUMER',
        `cannot read consumer '${o.consumer}' of stream '${o.stream}': ${String(error)}`,
        { component: this.#component, field: 'consumer', cause: error },
      )
    }
    return { consumer, info }
  }

  /**
   * Counts a message and decodes it: its in-flight entry and record, or `undefined` when it was
   * terminated at once (a payload that cannot enter the pipeline) or is a redelivery of a message
   * still in the pipeline (which then settles through this delivery).
   */
  #take(msg: JsMsg, o: Resolved): { entry: InFlight; record: JsonObject } | undefined {
    this.#count.received++
    if (msg.info.deliveryCount > 1) this.#count.redelivered++
    const record = this.#decode(msg, o)
    if (typeof record === 'string') {
      this.#count.invalid++
      this.#count.terminated++
      this.#term(msg, record)
      return undefined
    }
    const holding = this.#inFlight.get(msg.info.streamSequence)
    if (holding !== undefined && isRedeliveryOf(msg, holding.msg)) {
      // The server redelivered a message the pipeline still holds (its AckWait passed while
      // working() could not reach the server, a dropped connection): the copy in the pipeline
      // stands for it, settled once, through this newest delivery.
      holding.msg = msg
      holding.lastTouch = Date.now()
      return undefined
    }
    // Otherwise a new message, even under a sequence the pipeline holds (a stream deleted and made
    // again numbers from 1): it goes in, and the held entry settles on its own (see `#release`).
    const entry: InFlight = { msg, lastTouch: Date.now() }
    // In flight from now on: `working()` covers it while it waits for its batch to be accepted.
    this.#inFlight.set(msg.info.streamSequence, entry)
    return { entry, record }
  }

  /**
   * Sends messages as one batch with per-record outcomes and settles each with the server by its
   * own record's outcome once the batch resolved. `maxDeliveries` bounds an errored message's
   * deliveries; `serverMaxDeliver` is the consumer's own MaxDeliver (0: none), past which the
   * server redelivers nothing.
   */
  #send(
    batch: readonly InFlight[],
    records: readonly JsonObject[],
    o: Resolved,
    context: SourceContext,
    maxDeliveries: number,
    serverMaxDeliver: number,
    room: Room,
  ): Promise<void> & { accepted: Promise<void> } {
    let receipt: Promise<BatchReceipt>
    try {
      receipt = context.send(records, { outcomes: true })
    } catch (error) {
      receipt = Promise.reject(error)
    }
    const settled = receipt
      .then(
        async (r) => {
          const outcomes = await outcomesOf(r, batch.length)
          await this.#connectedOrStopping(context)
          if (this.#lostWithConnection(batch)) return
          this.#noteIfDown(batch.length)
          const applied: Promise<void>[] = []
          for (let i = 0; i < batch.length; i++) {
            const msg = this.#release(batch[i]!)
            const outcome = outcomes.get(i)
            const action = actionFor(
              outcome,
              msg.info.deliveryCount,
              maxDeliveries,
              this.#backoff(o),
              describe(outcome, r),
            )
            const confirming = this.#apply(msg, action, o)
            if (confirming !== undefined) applied.push(confirming)
          }
          if (applied.length > 0) await Promise.all(applied)
        },
        async (error: unknown) => {
          await this.#connectedOrStopping(context)
          if (this.#lostWithConnection(batch)) return
          this.#noteIfDown(batch.length)
          const first = `${batch.length} message(s) from ${batch[0]?.msg.info.streamSequence}`
          if (context.signal.aborted) {
            // Not accepted because the topology stopped first: give them back at once for another
            // instance. Not one on the consumer's last delivery: the server redelivers nothing past
            // MaxDeliver, so a nak would leave it neither acked nor pending for good, unsaid.
            let givenBack = 0
            for (const entry of batch) {
              const msg = this.#release(entry)
              if (serverMaxDeliver > 0 && msg.info.deliveryCount >= serverMaxDeliver) {
                this.#count.terminated++
                this.#term(
                  msg,
                  `not accepted by the pipeline (stopping) on the last delivery the consumer allows (MaxDeliver ${serverMaxDeliver}): ${String(error)}`,
                )
                continue
              }
              this.#count.nacked++
              givenBack++
              msg.nak()
            }
            if (givenBack > 0)
              this.#warn(
                `${this.#component}: ${givenBack === batch.length ? first : `${givenBack} of ${first}`} not accepted (stopping), given back: ${String(error)}`,
              )
            return
          }
          // Refused while running (a buffer that cannot take them): it may recur on every delivery,
          // so they back off as an errored record does, and are never redelivered in a hot loop.
          const reason = `not accepted by the pipeline: ${String(error)}`
          const delays: number[] = []
          for (const entry of batch) {
            const msg = this.#release(entry)
            const action = actionFor(
              'errored',
              msg.info.deliveryCount,
              maxDeliveries,
              this.#backoff(o),
              reason,
            )
            if (action.kind === 'nak') delays.push(action.delayMs)
            this.#apply(msg, action, o)
          }
          this.#warn(
            `${this.#component}: ${first} not accepted: ${String(error)}; ${delays.length} given back with a back-off of ${delays.length > 0 ? Math.min(...delays) : 0} ms or more`,
          )
        },
      )
      .finally(() => {
        for (const entry of batch) this.#release(entry)
        room.release()
      }) as Promise<void> & { accepted: Promise<void> }
    settled.accepted = receipt.then(nothing, nothing)
    return settled
  }

  /**
   * Waits, before a batch is settled with the server, for a dropped connection to be up again (or
   * for the stop): nats.js empties what was written while disconnected when it dials again, so an
   * ack written then never reached the server, the counters said acked, and the message came again
   * after its AckWait. A stop does not wait (its close warns when the server did not confirm).
   */
  #connectedOrStopping(context: SourceContext): Promise<void> {
    return this.#connection?.whenConnected(context.signal) ?? Promise.resolve()
  }

  /**
   * Whether the connection is closed (the client gave up on it, which failed the run), so nothing
   * the source writes reaches the server: then the batch's messages are taken out of the pipeline
   * uncounted, and a warning says they come again. The client takes an ack on a closed connection
   * without a word and sends it nowhere, and `acked` used to count it.
   */
  #lostWithConnection(batch: readonly InFlight[]): boolean {
    const connection = this.#connection
    if (connection?.nc.isClosed() !== true) return false
    // Said once, for every message in the pipeline now (none can come in any more): once per
    // batch, a pipeline of many small batches printed as many warnings.
    if (this.#lostWarnedOn !== connection) {
      this.#lostWarnedOn = connection
      let first = Number.POSITIVE_INFINITY
      for (const seq of this.#inFlight.keys()) first = Math.min(first, seq)
      const count = Math.max(this.#inFlight.size, batch.length)
      this.#warn(
        `${this.#component}: ${count} message(s) from ${Number.isFinite(first) ? first : batch[0]?.msg.info.streamSequence} in the pipeline when the connection closed settle after it (said once for all of them): not told to the server, which delivers them again once their AckWait passed`,
      )
    }
    for (const entry of batch) this.#release(entry)
    return true
  }

  /** Counts `settled` messages about to be settled into a connection that is down (see `#settledWhileDown`). */
  #noteIfDown(settled: number): void {
    const state = this.#connection?.state
    if (state === 'disconnected') this.#settledWhileDown += settled
  }

  /**
   * Takes a message out of the pipeline as it is settled, returning its newest delivery: a
   * redelivery arriving after this point is a new delivery (the settlement may not have reached
   * the server), not one to fold into this entry.
   */
  #release(entry: InFlight): JsMsg {
    const seq = entry.msg.info.streamSequence
    if (this.#inFlight.get(seq) === entry) this.#inFlight.delete(seq)
    return entry.msg
  }

  /** Tells the server; a promise only for an awaited `ackAck` (`doubleAck`), else done at once. */
  #apply(msg: JsMsg, action: JetStreamAction, o: Resolved): Promise<void> | undefined {
    switch (action.kind) {
      case 'ack':
        if (o.doubleAck) {
          return msg.ackAck().then(
            (confirmed) => {
              if (confirmed) this.#count.acked++
              else this.#count.ackUnconfirmed++
            },
            () => {
              this.#count.ackUnconfirmed++
            },
          )
        } else {
          msg.ack()
          this.#count.acked++
        }
        return
      case 'nak':
        msg.nak(action.delayMs)
        this.#count.nacked++
        return
      case 'term':
        this.#term(msg, action.reason)
        this.#count.terminated++
        return
    }
  }

  /**
   * Terminates a message and says why in a warning; the reason goes to the server too (into its
   * MSG_TERMINATED advisory) where it can read it, cut to {@link TERM_REASON_MAX_BYTES}, or to
   * what the server's max_payload leaves after `+TERM ` when that is less: a 2.9 server would take
   * `+TERM <reason>` for an ack.
   */
  #term(msg: JsMsg, reason: string): void {
    // Cut: the client refuses a term over the server's max_payload, and a sink's reason may be long.
    // The server's own max_payload may be smaller than the cut (a setting of its own: 512 is one),
    // read now: a reconnect to another server of a cluster may change it.
    const room = Math.min(
      TERM_REASON_MAX_BYTES,
      (this.#connection?.maxPayload ?? TERM_REASON_MAX_BYTES) - TERM_PREFIX_BYTES,
    )
    // cutToBytes needs room for '…' and one character; a server that leaves less gets no reason.
    if (this.#termReasons && room >= 4) msg.term(cutToBytes(reason, room))
    else msg.term()
    this.#warn(
      `${this.#component}: terminated message ${msg.info.streamSequence} of stream '${msg.info.stream}': ${reason}`,
    )
  }

  /** The record of a message, or why it cannot enter the pipeline. */
  #decode(msg: JsMsg, o: Resolved): JsonObject | string {
    let text: string
    let utf8 = true
    try {
      text = strictUtf8.decode(msg.data)
    } catch {
      // Decoding with U+FFFD in place of the bad bytes would alter the payload without a word.
      utf8 = false
      text = msg.string()
    }
    if (!utf8 && o.invalidJson !== 'raw') return "payload is not valid UTF-8; invalidJson is 'reject'"
    let record: JsonObject
    let parsed: unknown
    let ok = true
    try {
      if (!utf8) throw new SyntaxError('payload is not valid UTF-8')
      parsed = JSON.parse(text)
      // A number a double cannot hold parsed as Infinity, which would reach the sinks as null.
      const huge = JsonValue.numberOutOfRange(text, parsed as JsonValue)
      if (huge !== undefined) throw new SyntaxError(`the number ${huge.shown} is too large for a double`)
    } catch (error) {
      ok = false
      parsed = error
    }
    if (ok && typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
      record = parsed as JsonObject
    } else if (ok) {
      this.#count.invalid++
      record = { [o.rawField]: parsed as JsonValue }
    } else if (o.invalidJson === 'raw') {
      this.#count.invalid++
      record = { [o.rawField]: text }
    } else {
      return `payload is not valid JSON (${(parsed as Error).message}); invalidJson is 'reject'`
    }
    if (o.metadataField === false) return record
    let headers = headersOf(msg)
    if (headers instanceof Error) {
      // Thrown out of the pull, it failed the pull: this message and the rest of it came again
      // after their AckWait, and failed it again. The payload is whole: it goes on without them.
      // Each such message warned: a stream full of them flooded the log, so the warnings thin out.
      const count = ++this.#unreadableHeaders
      const next = nextWarningAt(count)
      if (next !== undefined) {
        const which = `${this.#component}: message ${msg.info.streamSequence} of stream '${msg.info.stream}'`
        this.#warn(
          count === 1
            ? `${which}: its headers cannot be read (${headers.message}); passed on without them`
            : `${which}: its headers cannot be read (${headers.message}); passed on without them (${count} such messages so far, said again at ${next})`,
        )
      }
      headers = {}
    }
    const metadata = metadataOf(msg, o.consumer, headers)
    if (o.metadataField === '__proto__') {
      // Defined, not assigned: the assignment replaced the record's prototype, the metadata lost.
      Object.defineProperty(record, o.metadataField, {
        value: metadata,
        writable: true,
        enumerable: true,
        configurable: true,
      })
    } else {
      record[o.metadataField] = metadata as unknown as JsonValue
    }
    return record
  }

  #backoff(o: Resolved): { initialMs: number; maxMs: number; multiplier: number } {
    return { initialMs: o.nakInitialMs, maxMs: o.nakMaxMs, multiplier: o.nakMultiplier }
  }

  /** Sends `working()` for every message in the pipeline past half its AckWait since the last signal. */
  #touchSlow(ackWaitMs: number): void {
    const now = Date.now()
    for (const entry of this.#inFlight.values()) {
      if (now - entry.lastTouch >= ackWaitMs / 2) {
        entry.msg.working()
        entry.lastTouch = now
        this.#count.working++
      }
    }
  }

  /**
   * Counts a failed pull, warns of it when due and waits before the next; throws the connection's
   * failure when the client closed it for good (it gave up after a second authorization error in
   * a row): no pull could succeed again, and the source used to warn of failed pulls for as long
   * as it ran. Of failures in a row, the 1st, 2nd, 4th, … and then every 1024th warn
   * ({@link nextWarningAt}), naming the consumer and the stream: a consumer deleted under
   * the source failed every pull, and each warned, for as long as the process lived (whether a
   * deleted consumer should end the run is an open question).
   */
  async #pullFailed(error: unknown, signal: AbortSignal, connection: Connection, o: Resolved): Promise<void> {
    if (signal.aborted) return
    const gone = await connection.closedForGood()
    if (gone !== undefined) throw gone
    this.#count.pullErrors++
    const failures = ++this.#pullFailures
    const next = nextWarningAt(failures)
    const pauseMs = Math.max(100, o.reconnectTimeWaitMs)
    if (next !== undefined) {
      const why = error instanceof Error ? error.message : String(error)
      const from = `consumer '${o.consumer}' of stream '${o.stream}'`
      this.#warn(
        failures === 1
          ? `${this.#component}: a pull from ${from} failed, retrying every ${pauseMs} ms: ${why}`
          : `${this.#component}: pulls from ${from} have failed ${failures} times in a row, retrying every ${pauseMs} ms (said again at ${next}): ${why}`,
      )
    }
    await sleep(pauseMs, signal)
  }

  /**
   * Ends a run of failed pulls (see `#pullFailed`), saying so when there was one: at a pull's first
   * message, or at its end without an error.
   */
  #pullSucceeded(o: Resolved): void {
    if (this.#pullFailures === 0) return
    const failures = this.#pullFailures
    this.#pullFailures = 0
    this.#warn(
      `${this.#component}: pulls from consumer '${o.consumer}' of stream '${o.stream}' succeed again after ${failures} failed`,
    )
  }

  /**
   * Reports a warning. A user `onWarning` that throws or rejects never reaches the caller:
   * warnings are said in the middle of settling a batch or of the pull loop, which must go on
   * (`warningsTo`).
   */
  #warn(message: string): void {
    this.#warnTo ??= warningsTo(this.#options.onWarning, this.#component, 'ACKLINE_NATS')
    this.#warnTo(message)
  }
}

/**
 * Whether `msg` is a later delivery of the message `held` is one of: the same stream, sequence and
 * stored time, delivered more times. A new message that only shares the sequence is not.
 */
function isRedeliveryOf(msg: JsMsg, held: JsMsg): boolean {
  return (
    msg.info.stream === held.info.stream &&
    msg.info.timestampNanos === held.info.timestampNanos &&
    msg.info.deliveryCount > held.info.deliveryCount
  )
}

/**
 * Each record's outcome; a context that ignores `{ outcomes: true }` (a test double, an older
 * runtime) gives the batch status, which then stands for every record.
 */
async function outcomesOf(receipt: BatchReceipt, length: number): Promise<RecordOutcomes> {
  const outcomes = await receipt.outcomes
  return outcomes ?? RecordOutcomes.all(await receipt.status, length)
}

/** Why a record was not delivered, in one line: its batch's first failure (reasons are per batch). */
function describe(outcome: RecordOutcome, receipt: BatchReceipt): string | undefined {
  if (outcome === 'delivered' || outcome === 'dropped') return undefined
  const failure = receipt.failure
  return failure === undefined ? undefined : `${failure.componentId} ${failure.code}: ${failure.message}`
}

/**
 * The message's headers, each name with all its values, or the client's error reading them: it
 * parses them on first read and throws on a name it would not send (a space, a character past
 * ASCII), which a client that does not check names can publish and the server stores.
 */
function headersOf(msg: JsMsg): Record<string, string[]> | Error {
  try {
    // Own fields, not assignments: a header named `__proto__` would set the prototype instead.
    return msg.headers === undefined
      ? {}
      : Object.fromEntries(Array.from(msg.headers, ([name, values]) => [name, [...values]]))
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error))
  }
}

function metadataOf(msg: JsMsg, consumer: string, headers: Record<string, string[]>): JetStreamMetadata {
  return {
    stream: msg.info.stream,
    consumer,
    subject: msg.subject,
    streamSequence: msg.info.streamSequence,
    consumerSequence: msg.info.deliverySequence,
    deliveryCount: msg.info.deliveryCount,
    redelivered: msg.info.deliveryCount > 1,
    timestampMs: Math.floor(msg.info.timestampNanos / 1e6),
    headers,
  }
}

/** Wakes the pull loop when a message settles and there is room again. */
class Room {
  #wake: (() => void) | undefined = undefined
  #interrupted = false
  constructor(readonly limit: number) {}
  /** Resolves once there is room, `signal` aborted, or `interrupt()` was called. */
  wait(inFlight: number, signal: AbortSignal): Promise<void> {
    if (inFlight < this.limit || signal.aborted || this.#interrupted) return Promise.resolve()
    return new Promise((resolve) => {
      const done = (): void => {
        this.#wake = undefined
        signal.removeEventListener('abort', done)
        resolve()
      }
      this.#wake = done
      signal.addEventListener('abort', done, { once: true })
    })
  }
  /** Wakes the loop and never lets it wait again: the connection closed. */
  interrupt(): void {
    this.#interrupted = true
    this.#wake?.()
  }
  release(): void {
    this.#wake?.()
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer)
      signal.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal.addEventListener('abort', done, { once: true })
  })
}

/**
 * A source reading stream `stream` through durable pull consumer `consumer` (created with an
 * explicit ack policy when missing, unless `create: false`). Each message is acknowledged only
 * once the pipeline delivered it, `nak`ed with back-off when it errored, `term`ed when rejected.
 * Broker metadata is under `_nats` (see {@link JetStreamMetadata}).
 *
 * @example
 * ```ts
 * new TopologyBuilder({ acknowledgements: true })
 *   .source('orders', jetstream({ servers: '127.0.0.1:4222', stream: 'ORDERS', consumer: 'archive' }))
 *   .sink('archive', ['orders'], file({ path: './orders.ndjson' }))
 * ```
 */
export function jetstream(options: JetStreamSourceOptions): JetStreamSource {
  return new JetStreamPullSource(options)
}
