/**
 * `httpServer`: a source that receives events over HTTP, one batch per request, and answers each
 * request only once the pipeline has decided what became of its events.
 *
 * Invariant: a response never claims more than the pipeline did. `200` only once every event of
 * the request was delivered (or accepted, with acknowledgements off); `503` with `Retry-After`
 * when one errored, so the client retries (at-least-once); `400` when one was rejected or the body
 * is malformed. A client that asks (`?outcomes=1`, or the `outcomes` option) also gets each
 * record's outcome in send order; the status code stays the batch's. Malformed, oversized, too slow or unauthorized requests, and requests that arrive
 * while the topology stops, are answered before anything enters the pipeline; no body, however
 * deep, long or badly encoded, can make the handler throw. While a request's events wait for room
 * downstream, its connection is read no further (requests pipelined behind it wait unread), so
 * what the source holds waiting for room is bounded by `maxConnections`, not by what clients write.
 * A client that half-closes its connection once it wrote its requests still gets every answer
 * owed to it (a request its close cut off gets 400); the connection closes after the last one. An
 * answer that closes a connection (a refusal) is followed by a bounded read of what the client
 * still sends, discarded, so that a client still writing a body reads the answer rather than a
 * reset. A client that sends
 * `Expect: 100-continue` gets `100 Continue` only once its request passed every check made on its
 * headers (path, method, token, types, declared length) and its turn on the connection came; a
 * refusal is answered in its place, so the body of a refused request is never sent. A connection
 * the server reports it failed to accept is counted and warned (`onWarning`, thinly: the 1st, 2nd,
 * 4th, … of a run of failures), never thrown.
 *
 * @module
 */
import { constants } from 'node:buffer'
import { createHash, timingSafeEqual } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse, STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type { BatchStatus, RecordOutcome, RecordOutcomes } from '@ackline/core'
import {
  type BatchFailure,
  type BatchReceipt,
  ComponentError,
  type ComponentErrorOptions,
  ConfigIssue,
  codeOption,
  defineOptions,
  MAX_TIMER_MS,
  nextWarningAt,
  type OptionsOf,
  type ResolvedOptionsOf,
  type Source,
  type SourceContext,
  textOf,
  warningsTo,
} from '@ackline/topology'
import { z } from 'zod'
import { decodeUtf8 } from './internal/decodeUtf8.js'
import { normalizePercentEncoding } from './internal/normalizePercentEncoding.js'
import { type HostPort, parseAddress } from './internal/parseAddress.js'
import { formatOf, parseRecords } from './internal/parseRecords.js'

const DEFAULT_ADDRESS = '127.0.0.1:8686'
const HEALTH_PATH = '/health'
const HOST_PORT = "'host:port' with a port from 0 to 65535 (like '127.0.0.1:8686')"
const INGEST_PATH =
  "a path that starts with '/', holds printable ASCII but '?' and '#' (other characters percent-encoded, as clients send them: '/%C3%A9v' for '/év'), and is not '/health' in any spelling ('/%68ealth')"
const ACCEPTED_TYPES = 'application/json, application/x-ndjson'
/**
 * What the source still reads, and throws away, of a client that goes on sending after an answer
 * that closes its connection (a body past `maxBodyBytes`, requests pipelined behind a refusal): at
 * most this many bytes, for at most {@link LINGER_MS}. Closed with bytes arriving, the connection
 * would be reset, and a client still writing its body (many read only once it is sent) would lose
 * the answer waiting for it ("lingering close", as Apache and nginx do). Past either bound the
 * connection is closed regardless: the client keeps sending more than a refused request is worth.
 */
const LINGER_BYTES = 4 * 1024 * 1024
/** How long at most the source reads what a client sends after an answer that closes (see {@link LINGER_BYTES}). */
const LINGER_MS = 2_000
/**
 * Accept failures this far apart, or further, are two runs (see `#serverError`): a failure after a
 * minute without one begins a new run, warned at once.
 */
const ACCEPT_RUN_GAP_MS = 60_000
const BEARER_TOKEN =
  'characters a header carries (tab, printable ASCII, latin1 letters), with no blank at either end (what a client can send after "Bearer ")'

/**
 * Options of {@link httpServer}, declared once (`validate`, `resolve`, `jsonSchema`); every option
 * has a default. The limits protect a server on an open port (the README's HTTP section has them
 * in a table).
 *
 * @example
 * ```ts
 * httpServer({ address: '0.0.0.0:8686', maxBodyBytes: 1 << 20, authToken: process.env.TOKEN })
 * HttpServerOptions.validate({ address: 'localhost' }) // [{ field: 'address', message: "must be 'host:port' …, got \"localhost\"", … }]
 * ```
 */
export const HttpServerOptions = defineOptions({
  address: z
    .string()
    .refine((address) => parseAddress(address) !== undefined, HOST_PORT)
    .default(DEFAULT_ADDRESS)
    .describe("Where to listen, as `host:port` ('0.0.0.0:80', '[::1]:8686'; port 0 picks a free one)."),
  maxBodyBytes: z
    .int()
    .min(1)
    // A body is decoded into one string: a longer one could not be (Node throws ERR_STRING_TOO_LONG).
    .max(constants.MAX_STRING_LENGTH)
    .default(10 * 1024 * 1024)
    .describe(
      'The largest body accepted, in bytes (at most the longest string Node can make); a larger one gets 413 BODY_TOO_LARGE.',
    ),
  authToken: z
    .string()
    .min(1)
    // Any other token would never match: a header value holds tab, 0x20-0x7e and 0x80-0xff
    // (sent and read as latin1; Node refuses any other character), and is trimmed.
    .refine(
      (token) => /^[\x21-\x7e\x80-\xff](?:[\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?$/.test(token),
      BEARER_TOKEN,
    )
    .optional()
    .describe(
      'When set, requests must carry `Authorization: Bearer <authToken>`, else they get 401. Characters a header value carries (tab, printable ASCII, latin1 letters such as é), with no blank or tab at either end.',
    ),
  retryAfterSeconds: z.int().min(0).default(5).describe('The `Retry-After` of a 503, in seconds.'),
  maxDepth: z
    .int()
    .min(1)
    .default(64)
    .describe(
      // 64: far more than log and metric data use (Elasticsearch's mapping depth limit is 20), and
      // far from the call-stack limit of code downstream that recurses over a value.
      'How deep arrays and objects may nest in a body (or one NDJSON line), the outermost counting as 1; ' +
        'a deeper body gets 400 TOO_DEEP with the limit and the position, before anything enters the pipeline.',
    ),
  invalidUtf8: z
    .enum(['reject', 'replace'])
    .default('reject')
    .describe(
      "What a body that is not valid UTF-8 gets: 'reject' answers 400 MALFORMED_BODY with the byteOffset " +
        "of the first invalid sequence; 'replace' decodes it with U+FFFD. A leading byte order mark is skipped either way.",
    ),
  headersTimeoutMs: z
    .int()
    .min(1)
    .default(10_000)
    .describe(
      'How long a client may take to send the headers, in ms (slowloris); a slower one gets 408 ' +
        'REQUEST_TIMEOUT and its connection closes. At most requestTimeoutMs.',
    ),
  requestTimeoutMs: z
    .int()
    .min(1)
    .default(30_000)
    .describe(
      'How long a client may take to send the whole request, in ms; a slower one gets 408 ' +
        "REQUEST_TIMEOUT. The pipeline's time to answer does not count: a request that waits unread on its " +
        'connection (pipelined behind one that waits for room downstream) gets it afresh once the connection ' +
        'is read again, so at most that wait plus requestTimeoutMs; one read meanwhile gets no more. A pipelined ' +
        'request sent with Expect: 100-continue gets it afresh once its 100 Continue is written (Node writes it ' +
        'after the answers owed before it, so its client waits for those).',
    ),
  keepAliveTimeoutMs: z
    .int()
    .min(1)
    // Node arms a socket timer of this plus a second: a longer one it truncates, with a warning.
    .max(MAX_TIMER_MS - 1000)
    .default(5_000)
    .describe(
      'How long an idle keep-alive connection stays open after a response, in ms (at most 2147482647: Node waits a second more, and a timer at most 2147483647).',
    ),
  maxConnections: z
    .int()
    .min(1)
    .default(1024)
    .describe(
      'How many connections may be open at once; further ones are closed on arrival (connectionsDropped).',
    ),
  maxEventsPerRequest: z
    .int()
    .min(1)
    .default(10_000)
    .describe(
      'The most events one request may carry; more gets 413 TOO_MANY_EVENTS and nothing enters the pipeline. ' +
        'The events are counted before any is parsed: such a body is refused without making its events.',
    ),
  path: z
    .string()
    // Compared with the request's path as sent: a client percent-encodes other characters (and
    // Node's parser refuses them raw), so a path holding one was never matched.
    .refine(
      (path) =>
        /^\/[\x21\x22\x24-\x3e\x40-\x7e]*$/.test(path) && normalizePercentEncoding(path) !== HEALTH_PATH,
      INGEST_PATH,
    )
    .default('/')
    .describe(
      'The path events are posted to, as clients send it (printable ASCII, other characters percent-encoded; of the query string, only `outcomes` is read); every other path but /health gets 404. ' +
        'Compared exactly once both are in one spelling (RFC 3986 6.2.2.1 and 6.2.2.2): percent-encodings in upper case (`%c3` is `%C3`) and those of unreserved characters decoded (`%7E` is `~`, `%65` is `e`; ' +
        "not in a path holding a '%' not followed by two hex digits, whose encodings are only upper-cased). " +
        'Nothing else: no other percent-decoding (`%2F` is not `/`), dot segments or case folding, so `/a/../events`, `/Events` or `/events/` is another path (a target in absolute form, `http://host/events`, is compared by its path).',
    ),
  unknownContentType: z
    .enum(['sniff', 'reject'])
    .default('sniff')
    .describe(
      "What a body gets whose Content-Type names neither JSON nor NDJSON, or that has none: 'sniff' decodes it " +
        "by its first character (curl -d sends application/x-www-form-urlencoded); 'reject' answers 415.",
    ),
  outcomes: z
    .enum(['never', 'on-request', 'always'])
    .default('on-request')
    .describe(
      "When a response lists each record's outcome (`records: [{ index, status }]`, in send order) beside " +
        "the batch's status: 'on-request' when the ingest URL's query has `outcomes=1` (or `outcomes=true`), " +
        "'always' for every batch, 'never' whatever the query says. The status code is the batch's either way.",
    ),
  onWarning: codeOption<(message: string) => void>('a function')
    .optional()
    .describe(
      'Where warnings go (the server failing to accept connections, as Node reports it: of a run of failures less than a minute ' +
        'apart, the 1st, 2nd, 4th, … and then every 1024th, with the count, each followed by one warning when the next connection is ' +
        'accepted; a connection libuv closes itself for want of a file descriptor, EMFILE on Unix, ' +
        'is never reported: keep maxConnections below the open-files limit; any other error the server reports). Default: process.emitWarning ' +
        '(code ACKLINE_HTTP_SERVER), where a warning also goes when onWarning throws on it.',
    ),
})
/** Options of {@link httpServer}, as a caller gives them. */
export type HttpServerOptions = OptionsOf<typeof HttpServerOptions>

/** What `GET /health` answers: `200` while the source runs, `503` (with `Retry-After`) once it stops. */
export interface HttpServerHealth {
  /** `'running'` while the source takes requests (200), `'stopping'` once its stop began (503). */
  readonly state: 'running' | 'stopping'
  /** The source's component id. */
  readonly componentId: string
  /** Requests whose events are in the pipeline, awaiting their status. */
  readonly inFlight: number
}

/**
 * One record's outcome in a response that lists them (`HttpServerResponseBody.records`).
 * `dropped` means a transform discarded every copy of the record without a status (a filter): the
 * pipeline did what it was told, so for the client it is as good as `delivered`; do not resend it.
 */
export interface HttpServerRecordStatus {
  /** The record's 0-based position in the request's body (array element or NDJSON line). */
  readonly index: number
  /** What became of the record: `delivered`, `dropped` (as good as delivered), `errored` (resend it) or `rejected` (do not). */
  readonly status: RecordOutcome
}

/** The body of every response: what became of the request, as data. */
export interface HttpServerResponseBody {
  /** The batch's status, when the request's events entered the pipeline. */
  readonly status?: BatchStatus
  /** How many events the request carried, when it was decoded. */
  readonly events?: number
  /** The batch's id, when acknowledgements are on and the events entered the pipeline. */
  readonly batchId?: string
  /**
   * Each record's outcome, in send order, when the client asked (see the `outcomes` option) and
   * the request's events entered the pipeline (never on a refusal). A client retries the
   * `errored` ones, whatever the status code: a `400` batch may hold errored records beside its
   * rejected ones, since `rejected` is the worse status.
   */
  readonly records?: readonly HttpServerRecordStatus[]
  /** Why the request was refused before entering the pipeline. */
  readonly error?: string
  /** A stable code for `error`. */
  readonly code?: HttpServerErrorCode
  /** For `MALFORMED_BODY` and `TOO_DEEP`: the offset in the decoded body (UTF-16 code units) where it broke. */
  readonly position?: number
  /** The 1-based line of `position`. */
  readonly line?: number
  /** The 1-based column of `position`. */
  readonly column?: number
  /** The limit passed: `maxDepth` for `TOO_DEEP`, `maxEventsPerRequest` or `maxBodyBytes` for a `413`. */
  readonly limit?: number
  /** For a body that is not UTF-8: the offset, in the body's bytes, of the first invalid sequence. */
  readonly byteOffset?: number
  /** The id of the component that decided a refusal (this source's). */
  readonly componentId?: string
  /**
   * Why the request was not a success, as data a client can act on: which component decided, a
   * stable code and a message. For a batch that was not delivered, the first failure that gave it
   * its status, as the topology reports it (`{ componentId: 'archive', code: 'WRITE_FAILED', ... }`;
   * absent when the pipeline gave no reason); for a refusal, this source's id, `code` and `error`.
   * Absent on a `200`.
   */
  readonly failure?: BatchFailure
}

/**
 * Why the source answered a request itself, with nothing of it in the pipeline (the README's HTTP
 * section has the full table). The status code follows from the code:
 * - `400`: `MALFORMED_BODY` (not JSON/NDJSON of objects, not UTF-8, or a number too large for a
 *   double, which would reach the sinks as `null`), `TOO_DEEP` (past
 *   `maxDepth`), `BAD_REQUEST` (not HTTP/1.1, or HTTP/1.1 without `Host`);
 * - `401` `UNAUTHORIZED`; `404` `NOT_FOUND`; `405` `METHOD_NOT_ALLOWED`;
 * - `408` `REQUEST_TIMEOUT` (past `headersTimeoutMs` or `requestTimeoutMs`);
 * - `413`: `BODY_TOO_LARGE` (past `maxBodyBytes`), `TOO_MANY_EVENTS` (past `maxEventsPerRequest`);
 * - `415` `UNSUPPORTED_MEDIA_TYPE` (a `Content-Encoding` such as gzip, or a type refused under
 *   `unknownContentType: 'reject'`); `431` `HEADERS_TOO_LARGE`;
 * - `501` `NOT_IMPLEMENTED` (a `Transfer-Encoding` naming a coding other than `chunked`: RFC 9112
 *   6.1; one whose last coding is not `chunked` is `400` `BAD_REQUEST`, RFC 9112 6.3);
 * - `503` with `Retry-After`: `SHUTTING_DOWN`, `NOT_ACCEPTED` (the pipeline did not take the batch).
 */
export type HttpServerErrorCode =
  | 'METHOD_NOT_ALLOWED'
  | 'UNAUTHORIZED'
  | 'BODY_TOO_LARGE'
  | 'MALFORMED_BODY'
  | 'TOO_DEEP'
  | 'SHUTTING_DOWN'
  | 'NOT_ACCEPTED'
  | 'REQUEST_TIMEOUT'
  | 'TOO_MANY_EVENTS'
  | 'BAD_REQUEST'
  | 'HEADERS_TOO_LARGE'
  | 'NOT_FOUND'
  | 'UNSUPPORTED_MEDIA_TYPE'
  | 'NOT_IMPLEMENTED'

/**
 * What the source has seen since it started, for metrics and tests. A snapshot: read
 * `source.counters` again for newer figures.
 */
export interface HttpServerCounters {
  /** Requests whose headers arrived. */
  readonly requests: number
  /**
   * Responses written, by HTTP status code (including the `408`s the source wrote on a timeout);
   * not an answer left unwritten because its client had gone (reset the connection) first.
   */
  readonly responses: Readonly<Record<number, number>>
  /** Requests the source answered itself, by code (timeouts, malformed bodies, limits, ...), counted as `responses`. */
  readonly refused: Readonly<Partial<Record<HttpServerErrorCode, number>>>
  /** Connections open now. */
  readonly openConnections: number
  /** Connections closed on arrival because `maxConnections` were open. */
  readonly connectionsDropped: number
  /**
   * Connections the server reported it failed to accept: their clients got no answer. On Unix,
   * libuv closes the connections it cannot accept for want of a file descriptor (`EMFILE`) itself,
   * without telling Node: those are not counted here, nor anywhere.
   */
  readonly acceptFailures: number
}
/**
 * The source {@link httpServer} returns. It runs once: a second `run` (the object declared in a
 * second topology) rejects with a `ComponentError` of code `RUNS_ONCE`; make one per topology.
 */
export interface HttpServerSource extends Source {
  readonly kind: 'http_server'
  readonly canAcknowledge: true
  validate(): readonly ConfigIssue[]
  /** The address actually bound (the real port when the option said 0), once listening. */
  readonly address: HostPort | undefined
  /** Resolves with the bound address once the server listens; rejects if it cannot listen. */
  listening(): Promise<HostPort>
  /** What the source has seen so far (a fresh snapshot on each read). */
  readonly counters: HttpServerCounters
}

const nothing = (): void => {}

type Writable<T> = { -readonly [K in keyof T]: T[K] }

/**
 * One connection's requests, let in one at a time: from its arrival until it is answered or its
 * events are accepted downstream, a request has the connection's turn; requests the client
 * pipelined meanwhile wait unread, and the connection pauses. So while the pipeline has no room,
 * a connection holds one request's events waiting for it, however many requests its client
 * writes without waiting for answers.
 */
interface Turns {
  /** The response of the request whose turn it is, if any. */
  current: ServerResponse | undefined
  /** Requests that arrived during another's turn, from `next` on, in order. */
  readonly waiting: [IncomingMessage, ServerResponse][]
  next: number
  /** Whether the connection was paused for them. */
  paused: boolean
  /** Set while `#endTurn` lets waiting requests in. */
  releasing: boolean
  /**
   * Set once a response that closes the connection was written: a request behind it could not be
   * answered, so nothing of it is read (its client, without an answer, sends it again).
   */
  closing: boolean
  /**
   * The response of the connection's latest request let in. After the stop, only its answer
   * closes the connection: Node writes a connection's answers in request order, and an earlier
   * one's close would drop the later ones (of requests whose events may be in the pipeline).
   */
  latest: ServerResponse | undefined
  /** The answer that closes the connection, once `closing`. */
  closer: ServerResponse | undefined
  /** How many of the connection's requests reached the handler (a held request's headers completing counts). */
  seen: number
  /**
   * Set when Node's timeout check found a request late while the source held the connection: the
   * client sent it, the source did not read it. Once reading resumes, the request gets
   * `requestTimeoutMs` afresh (Node checks it no more once it reported it).
   */
  late: boolean
  /**
   * Set once its client ended its side in the middle of a request and the answers owed were taken
   * in hand (see `#endedMidRequest`): the client sends nothing more, so Node's check finding that
   * request late later is no one's doing, and must not close the connection before them.
   */
  ended: boolean
  /**
   * The response of a request its client cut off by ending its side while the request still
   * waited its turn (see `#endedMidRequest`): answered 400 when its turn comes, as the last.
   */
  cut: ServerResponse | undefined
  /**
   * The response of a request waiting its turn whose rest Node failed to parse once it handed the
   * request over (a Transfer-Encoding whose last coding is not chunked, a malformed chunk; see
   * `#clientError`): answered 400 when its turn comes, which closes the connection.
   */
  malformed: ServerResponse | undefined
  /**
   * Set once Node failed to parse what came after the requests it handed over (a bad request line
   * or header) while one received whole was still owed its answer (see `#clientError`): the
   * connection is read no further, and once the last of those answers is written, a 400 closes it.
   */
  unparsed: boolean
  /**
   * The timer of the request timed afresh on the connection (see `#timeAfresh`): one at a time, a
   * newer one replacing it, and cleared when the connection closes.
   */
  afresh: ReturnType<typeof setTimeout> | undefined
  /**
   * The response whose `100 Continue` (or answer in its place) the connection's request waits for
   * before it is timed afresh (see `#lateAfterHold`): found late again meanwhile, by each cut after
   * the stop, it is not waited for twice.
   */
  goAhead: ServerResponse | undefined
}

const OUTCOMES = { outcomes: true } as const

/** The HTTP code for a batch status: the whole contract of this source in one place. */
const CODE_OF: Readonly<Record<BatchStatus, number>> = { delivered: 200, errored: 503, rejected: 400 }

class HttpServer implements HttpServerSource {
  readonly kind = 'http_server'
  readonly canAcknowledge = true
  #address: HostPort | undefined = undefined
  /** As given, for `validate()`; the source reads {@link #resolved}, whose unset options have their defaults. */
  readonly #options: HttpServerOptions
  readonly #resolved: ResolvedOptionsOf<typeof HttpServerOptions>
  readonly #maxBodyBytes: number
  readonly #maxDepth: number
  readonly #replaceInvalidUtf8: boolean
  readonly #retryAfter: string
  readonly #tokenDigest: Buffer | undefined
  /** The `path` option in the spelling request paths are compared in (see `normalizePercentEncoding`). */
  readonly #path: string
  readonly #listening: Promise<HostPort>
  #resolveListening: (address: HostPort) => void = nothing
  #rejectListening: (error: unknown) => void = nothing
  #stopping = false
  #componentId = 'http_server'
  /** The context `run` was given: requests that waited for their turn are served with it. */
  #context: SourceContext | undefined = undefined
  #requests = 0
  #inFlight = 0
  #openConnections = 0
  #connectionsDropped = 0
  #acceptFailures = 0
  /**
   * Accept failures in the current run (failures less than {@link ACCEPT_RUN_GAP_MS} apart, however
   * many connections were accepted between them): of these the 1st, 2nd, 4th, … are warned.
   */
  #failingAccepts = 0
  /** When the last accept failure came (`Date.now()`): a failure later than the gap begins a new run. */
  #lastAcceptFailure = 0
  /** Set by a warned accept failure: the next connection accepted says accepting works again. */
  #recoveryOwed = false
  /** Where warnings go, never throwing (set by `run`, which knows the component id). */
  #warn: (message: string) => void = nothing
  readonly #responses: Record<number, number> = {}
  readonly #refused: Partial<Record<HttpServerErrorCode, number>> = {}
  /** Sends not yet accepted downstream: `run` may not return before they are. */
  #accepting = 0
  /** Set while `run` waits for {@link #accepting} to reach 0. */
  #drained: (() => void) | undefined = undefined
  /**
   * Per connection, the responses not yet written: a request Node parsed whole may already have
   * its events in the pipeline, so an error later on its connection must not answer in its place.
   */
  readonly #unanswered = new WeakMap<Duplex, Set<ServerResponse>>()
  /** The connections open now (what `#cutOffLate` goes through after the stop). */
  readonly #sockets = new Set<Socket>()
  /** Per connection, which of its requests is let in and which wait unread (see {@link Turns}). */
  readonly #turns = new WeakMap<Duplex, Turns>()
  /**
   * The responses of requests whose client waits for `100 Continue` before sending its body:
   * written by `#serve` once the request passed the checks on its headers (by `#health` to a
   * health check it answers), never on a refusal
   * (whose answer then closes the connection, as Node does, since the body was not sent).
   */
  readonly #expectsContinue = new WeakSet<ServerResponse>()
  /** The response of each request that came with `Expect: 100-continue` (see `#goAheadOwed`). */
  readonly #continueOf = new WeakMap<IncomingMessage, ServerResponse>()
  /**
   * When the `100 Continue` of such a request went on the wire (`Date.now()`), until its
   * `requestTimeoutMs` is counted from then (see `#clientError`).
   */
  readonly #continuedAt = new WeakMap<IncomingMessage, number>()
  /** The connections that got an answer that closes them, read on until they close (see `#linger`). */
  readonly #lingering = new Set<Socket>()
  /** Set once `run` returns: from then on, an answer that closes its connection closes it at once. */
  #closed = false
  /**
   * The cut after the stop (`#cutOffLate`), pending: cleared once no connection is left for it,
   * at the end of `run` or when the last connection closes after it, so that it does not hold the
   * source for up to `requestTimeoutMs` with nothing to do.
   */
  #cutTimer: ReturnType<typeof setTimeout> | undefined = undefined
  /** Set by the first `run`: the state above is one run's (its stop is never undone), so a second is refused. */
  #ran = false

  constructor(options: HttpServerOptions) {
    this.#options = options
    const o = HttpServerOptions.resolve(options)
    this.#resolved = o
    this.#maxBodyBytes = o.maxBodyBytes
    this.#maxDepth = o.maxDepth
    this.#replaceInvalidUtf8 = o.invalidUtf8 === 'replace'
    this.#retryAfter = String(o.retryAfterSeconds)
    this.#tokenDigest = typeof o.authToken === 'string' ? digest(o.authToken) : undefined
    this.#path = normalizePercentEncoding(o.path)
    this.#listening = new Promise<HostPort>((resolve, reject) => {
      this.#resolveListening = resolve
      this.#rejectListening = reject
    })
    // Whoever never asks must not see an unhandled rejection; `run` rejects as well.
    this.#listening.catch(nothing)
  }

  get address(): HostPort | undefined {
    return this.#address
  }

  listening(): Promise<HostPort> {
    return this.#listening
  }

  get counters(): HttpServerCounters {
    return {
      requests: this.#requests,
      responses: { ...this.#responses },
      refused: { ...this.#refused },
      openConnections: this.#openConnections,
      connectionsDropped: this.#connectionsDropped,
      acceptFailures: this.#acceptFailures,
    }
  }

  validate(): readonly ConfigIssue[] {
    const issues = HttpServerOptions.validate(this.#options)
    // Node refuses a headers timeout longer than the request timeout; checked only when both are valid.
    const { headersTimeoutMs, requestTimeoutMs } = this.#resolved
    if (issues.some((i) => i.field === 'headersTimeoutMs' || i.field === 'requestTimeoutMs')) return issues
    if (headersTimeoutMs > requestTimeoutMs) {
      issues.push(
        ConfigIssue.of(
          'headersTimeoutMs',
          `at most requestTimeoutMs (${requestTimeoutMs})`,
          headersTimeoutMs,
        ),
      )
    }
    return issues
  }

  async run(context: SourceContext): Promise<void> {
    if (this.#ran) {
      // Run again (one object in two topologies, or in a topology built anew), it would answer
      // every request 503 SHUTTING_DOWN, /health 200, and listening() the first run's address.
      throw new ComponentError(
        'RUNS_ONCE',
        'an http_server source runs once: make a new one with httpServer(options) for each topology',
        { component: context.id },
      )
    }
    this.#ran = true
    this.#componentId = context.id
    this.#context = context
    this.#warn = warningsTo(this.#resolved.onWarning, context.id, 'ACKLINE_HTTP_SERVER')
    const o = this.#resolved
    const target = parseAddress(o.address)
    if (target === undefined) {
      const error = new HttpServerError('address', `cannot listen on ${JSON.stringify(o.address)}`, {
        component: context.id,
      })
      this.#rejectListening(error)
      throw error
    }
    const headersTimeout = o.headersTimeoutMs
    const requestTimeout = o.requestTimeoutMs
    const server = createServer(
      {
        headersTimeout,
        requestTimeout,
        keepAliveTimeout: o.keepAliveTimeoutMs,
        // Node checks both timeouts every 30 s by default, so a limit could be overshot by that
        // much; checking at a tenth of the shorter one (within 10 ms..1 s) keeps the overshoot small.
        connectionsCheckingInterval: Math.min(1000, Math.max(10, Math.floor(headersTimeout / 10))),
        // Node would answer a Host-less HTTP/1.1 request itself, 400 with no body and uncounted.
        requireHostHeader: false,
      },
      (request, response) => this.#handle(request, response, context),
    )
    server.maxConnections = o.maxConnections
    // A client that half-closes once it wrote its requests (shutdown of its writing) still reads:
    // by default Node ends the connection at once, and the answers of its requests whose events
    // are in the pipeline would be lost. With this flag Node marks the last of them to close the
    // connection once written (or ends it at once when none is owed).
    ;(server as Server & { httpAllowHalfOpen?: boolean }).httpAllowHalfOpen = true
    // `Expect: 100-continue`: Node would answer 100 Continue before the handler looks at the
    // request, so a client sent its whole body to a wrong path, without a token, or past
    // maxBodyBytes, only to have it refused (and, past LINGER_BYTES, be reset). The source answers
    // 100 itself once the request passed every check made on its headers (see `#serve`).
    server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
      this.#expectsContinue.add(response)
      this.#continueOf.set(request, response)
      this.#handle(request, response, context)
    })
    // An Expect other than 100-continue: Node would answer 417 itself, with no body and uncounted.
    // RFC 9110 10.1.1 lets a server ignore an expectation it does not know; the request is served.
    server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) =>
      this.#handle(request, response, context),
    )
    // CONNECT: Node hands the connection over as a tunnel and, with no listener, closes it without
    // an answer or a count.
    server.on('connect', (request: IncomingMessage, socket: Duplex, head: Buffer) =>
      this.#refuseConnect(request, socket, head),
    )
    server.on('connection', (socket: Socket) => {
      if (this.#recoveryOwed) {
        this.#recoveryOwed = false
        this.#warn(
          `http_server source '${context.id}': accepting connections again, after ${this.#failingAccepts} failed in this run (${this.#acceptFailures} in all)`,
        )
      }
      this.#openConnections++
      this.#sockets.add(socket)
      this.#unanswered.set(socket, new Set())
      this.#turns.set(socket, {
        current: undefined,
        waiting: [],
        next: 0,
        paused: false,
        releasing: false,
        closing: false,
        latest: undefined,
        closer: undefined,
        seen: 0,
        late: false,
        ended: false,
        cut: undefined,
        malformed: undefined,
        unparsed: false,
        afresh: undefined,
        goAhead: undefined,
      })
      socket.once('close', () => {
        // A request timed afresh there is gone with it: its timer would hold the source for nothing.
        const turns = this.#turns.get(socket)
        if (turns !== undefined) clearTimeout(turns.afresh)
        this.#openConnections--
        this.#sockets.delete(socket)
        if (this.#sockets.size === 0) this.#stopCutting()
      })
    })
    server.on('drop', () => this.#connectionsDropped++)
    server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) =>
      this.#clientError(error, socket),
    )
    try {
      await listen(server, target, (error) => this.#serverError(error))
    } catch (error) {
      const failure = new HttpServerError(
        'address',
        `cannot listen on ${target.host}:${target.port}: ${(error as Error).message}`,
        { component: context.id, cause: error },
      )
      this.#rejectListening(failure)
      throw failure
    }
    const bound = server.address()
    this.#address =
      typeof bound === 'object' && bound !== null ? { host: bound.address, port: bound.port } : target
    this.#resolveListening(this.#address)

    await aborted(context.signal)
    // From here a request gets 503 before it enters the pipeline; the ones already sent still get
    // their real status, whenever it resolves (after `run` returned, during the drain).
    this.#stopping = true
    server.close()
    // `close` also ends Node's checks of headersTimeoutMs and requestTimeoutMs: a client that was
    // still sending its request would hold its connection (and the process) open for good. Cut off
    // once no request could still arrive in time; unref'd, so it keeps nothing alive itself.
    this.#cutTimer = setTimeout(() => this.#cutOffLate(), Math.min(requestTimeout, MAX_TIMER_MS)).unref()
    if (this.#accepting > 0)
      await new Promise<void>((resolve) => {
        this.#drained = resolve
      })
    // A lingering connection owes its client nothing more: left to its bounds, it would keep the
    // process alive after the stop. Closed now, and from here on no connection lingers.
    this.#closed = true
    await Promise.all(
      [...this.#lingering].map(
        (socket) =>
          new Promise<void>((resolve) => {
            socket.once('close', () => resolve())
            socket.destroy()
          }),
      ),
    )
    if (this.#sockets.size === 0) this.#stopCutting()
  }

  /** Clears the pending cut after the stop (see {@link #cutTimer}); none before the stop. */
  #stopCutting(): void {
    clearTimeout(this.#cutTimer)
    this.#cutTimer = undefined
  }

  /**
   * The server failed once listening: Node reports there only a connection it could not accept
   * (`ENFILE`, `ENOBUFS`; not `EMFILE` on Unix, where libuv closes such connections itself, unseen),
   * whose client is left unanswered. Counted always; warned thinly, since under load a warning per
   * failure would flood the log with the same line: of a run of failures (each less than
   * {@link ACCEPT_RUN_GAP_MS} after the one before, connections accepted between them or not, as
   * when the process is short of file descriptors) the 1st, 2nd, 4th, … and then every
   * 1024th ({@link nextWarningAt}), with the count, and once after each of those, the next
   * connection accepted. Any other error (none that Node reports today) concerns no connection:
   * warned as the server's, not counted.
   */
  #serverError(error: unknown): void {
    if ((error as NodeJS.ErrnoException | undefined)?.syscall !== 'accept') {
      this.#warn(`http_server source '${this.#componentId}': the server reported an error: ${textOf(error)}`)
      return
    }
    this.#acceptFailures++
    const now = Date.now()
    if (now - this.#lastAcceptFailure > ACCEPT_RUN_GAP_MS) this.#failingAccepts = 0
    this.#lastAcceptFailure = now
    const failures = ++this.#failingAccepts
    const next = nextWarningAt(failures)
    if (next === undefined) return
    this.#recoveryOwed = true
    this.#warn(
      failures === 1
        ? `http_server source '${this.#componentId}': accepting a connection failed: ${textOf(error)}; its client got no answer ` +
            '(counted in acceptFailures; warned again at the 2nd failure of this run)'
        : `http_server source '${this.#componentId}': accepting connections failed ${failures} times in this run ` +
            `(${this.#acceptFailures} in all; said again at ${next}), the last: ${textOf(error)}; their clients got no answer`,
    )
  }

  /**
   * A connection failed outside any handler: a timeout (Node's checker found the headers or the
   * body late), a request Node could not parse, or a client that went away. Answered here, as
   * data like every other refusal, when nothing was written on the connection yet and no request
   * received whole awaits its answer there (bytes after a body: the client would read this answer
   * as that request's), and left to the source's own refusal when one that closes the connection
   * is written or queued there (Node refuses a request the source refused already), or will be
   * when its turn comes (Node failed on the rest of a request waiting its turn, refused 400 then):
   * the answers owed before it are written, then it. So too when what Node failed to parse (a bad
   * request line or header) came after requests received whole, one still owed its answer: the
   * refusal is written after the last of those answers (see `#refuseAfterOwed`). Otherwise the
   * connection closes without one: such a request is stopped before it enters the pipeline, or
   * keeps its real status there and the client sends it again.
   * Three are not the client's doing and keep the connection: a request Node failed to parse
   * found late while its 400 waits behind the answers owed before it (Node never sees its end; the
   * 400 closes the connection), a request late while the source held it, or while its 100
   * Continue waited behind earlier answers (timed afresh), and a client that
   * half-closed in the middle of a request (see `#endedMidRequest`; that request found late
   * afterwards, however long the answers before it take, changes nothing). Says whether it kept
   * the connection so (its close then comes of what it arranged).
   */
  #clientError(error: NodeJS.ErrnoException, socket: Duplex): boolean {
    const turns = this.#turns.get(socket)
    // Its answers are owed and written in order, the last closing the connection.
    // So too when Node failed to parse what came after them: its 400 is written after the last.
    if (
      (turns?.ended === true || turns?.unparsed === true) &&
      error.code === 'ERR_HTTP_REQUEST_TIMEOUT' &&
      !socket.destroyed
    )
      return true
    if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT' && turns !== undefined && !socket.destroyed) {
      const malformed = turns.malformed
      if (
        malformed !== undefined &&
        malformed.socket === null &&
        malformed.req === ((socket as Duplex & HttpSocket).parser?.incoming ?? undefined)
      ) {
        // Late because Node could not parse its rest (it never ends for Node): its 400, queued
        // behind the answers owed before it, closes the connection. Destroyed now, those answers
        // went with it, though their events were in the pipeline.
        return true
      }
      if (turns.paused && isHeld(socket)) {
        // Late because the source held the connection (its requests wait their turn), not because
        // the client was slow: checked again once reading resumes (see `#endTurn`). Only while the
        // connection is still unread: Node undoes the hold once an answer drains, and a request it
        // read meanwhile and still found unfinished is late by its client's doing.
        turns.late = true
        return true
      }
      if (this.#goAheadOwed(socket) !== undefined) {
        // Late because its client waits for a 100 Continue still queued behind the answers owed
        // before it: timed afresh once that is written.
        this.#lateAfterHold(socket, turns)
        return true
      }
      const incoming = (socket as Duplex & HttpSocket).parser?.incoming ?? undefined
      const continued = incoming == null ? undefined : this.#continuedAt.get(incoming)
      if (continued !== undefined) {
        // Its 100 Continue came after part of the time (written behind the answers owed before
        // it): the client has the rest of requestTimeoutMs from then. Node reports a request once.
        const left = continued + this.#resolved.requestTimeoutMs - Date.now()
        if (left > 0) {
          this.#timeAfresh(socket, turns, left)
          return true
        }
      }
    }
    if (error.code === 'HPE_INVALID_EOF_STATE' && this.#endedMidRequest(socket, turns)) return true
    const closer = turns?.closer
    if (
      error.code?.startsWith('HPE_') === true &&
      turns !== undefined &&
      closer !== undefined &&
      (closer.socket === socket || (closer.socket === null && !closer.writableFinished)) &&
      !closer.destroyed &&
      !socket.destroyed
    ) {
      // What Node failed to parse comes with or after a request the source refused already (a
      // Transfer-Encoding whose last coding is not chunked, which Node refuses only once it handed
      // the request over): that answer closes the connection, and its end lingers (see `#send`).
      // Destroyed now, the client's bytes still arriving, the connection was reset and the client
      // could lose the answer; and, that answer queued behind others owed before it (of requests
      // whose events are in the pipeline), those too. Queued, the connection is read no further
      // until it is written (see `#send`): nothing of what follows is served.
      if (closer.socket === null) {
        turns.paused = true
        holdReading(socket)
      }
      return true
    }
    const incoming = (socket as Duplex & HttpSocket).parser?.incoming ?? undefined
    const waiting =
      error.code?.startsWith('HPE_') === true && turns !== undefined && incoming != null && !incoming.complete
        ? turns.waiting.slice(turns.next).find(([request]) => request === incoming)
        : undefined
    if (turns !== undefined && waiting !== undefined && !socket.destroyed) {
      // What Node failed to parse is the rest of a request it handed over, which waits its turn
      // behind one whose events are in the pipeline (or on their way there): destroyed now, the
      // connection took that answer with it, and its client sent again what was delivered.
      // Refused when its turn comes instead, after the answers owed before it; the connection is
      // read no further (Node's parser would only fail again).
      turns.malformed = waiting[1]
      turns.paused = true
      holdReading(socket)
      return true
    }
    const current = turns?.current
    if (
      error.code?.startsWith('HPE_') === true &&
      turns !== undefined &&
      current !== undefined &&
      incoming != null &&
      !incoming.complete &&
      current.req === incoming &&
      !turns.closing &&
      socket.writable &&
      !socket.destroyed &&
      [...(this.#unanswered.get(socket) ?? [])].some((response) => response.req.complete)
    ) {
      // The same, of a request whose turn came (its body being read: Node failed on a chunk),
      // behind one received whole still owed its answer (its events accepted downstream, its
      // batch not decided): refused now, its 400 written after that answer and closing the
      // connection, which is read no further.
      turns.malformed = current
      turns.paused = true
      holdReading(socket)
      this.#refuseMalformed(incoming, current)
      return true
    }
    if (error.code?.startsWith('HPE_') === true && turns !== undefined && !socket.destroyed) {
      if (turns.unparsed) {
        // Failed again on what came since (Node reads a held connection again once an answer
        // drains there): its 400 is arranged already.
        turns.paused = true
        holdReading(socket)
        return true
      }
      if (
        this.#refuseAfterOwed(socket, turns, incoming, [
          error.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400,
          error.code === 'HPE_HEADER_OVERFLOW' ? 'HEADERS_TOO_LARGE' : 'BAD_REQUEST',
          error.code === 'HPE_HEADER_OVERFLOW'
            ? 'the request headers are too large'
            : 'the request is not valid HTTP/1.1',
        ])
      )
        return true
    }
    if (
      !socket.writable ||
      (socket as Socket).bytesWritten > 0 ||
      error.code === 'ECONNRESET' ||
      this.#stopUnanswered(socket)
    ) {
      socket.destroy()
      return false
    }
    const [status, code, message] =
      error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? ([408, 'REQUEST_TIMEOUT', 'the request did not arrive within the time limit'] as const)
        : error.code === 'HPE_HEADER_OVERFLOW'
          ? ([431, 'HEADERS_TOO_LARGE', 'the request headers are too large'] as const)
          : ([400, 'BAD_REQUEST', 'the request is not valid HTTP/1.1'] as const)
    this.#endWith(socket, turns, [status, code, message])
    return false
  }

  /**
   * What Node failed to parse (a bad request line or header) came after requests it handed over
   * whole, of which one is still owed its answer (its events may be in the pipeline): destroyed
   * now, the connection took those answers with it, and its client sent again what was delivered.
   * Instead the connection is read no further, those answers are written in order, and the refusal
   * follows the last, closing the connection; none follows an answer that closes it itself. Says
   * whether it took the connection in hand (not when no such answer is owed, or what failed is the
   * rest of a request Node handed over).
   */
  #refuseAfterOwed(
    socket: Duplex,
    turns: Turns,
    incoming: IncomingMessage | undefined,
    refusal: readonly [number, HttpServerErrorCode, string],
  ): boolean {
    if (turns.closing || !socket.writable || (incoming !== undefined && !incoming.complete)) return false
    const unanswered = this.#unanswered.get(socket)
    if (unanswered === undefined || ![...unanswered].some((response) => response.req.complete)) return false
    const pending = turns.waiting.slice(turns.next).map(([, response]) => response)
    const last = pending.length > 0 ? pending[pending.length - 1] : turns.latest
    if (last === undefined) return false
    turns.unparsed = true
    turns.paused = true
    holdReading(socket)
    const refuse = (): void => {
      if (!turns.closing && !socket.destroyed && socket.writable) this.#endWith(socket, turns, refusal)
    }
    // Node writes a connection's answers in order: once the last is written, all are.
    if (last.writableFinished) refuse()
    else last.once('finish', refuse)
    return true
  }

  /**
   * Writes `refusal` on `socket` itself (no response of Node's to write it through), which closes
   * the connection, and reads on what its client still sends (see `#linger`).
   */
  #endWith(
    socket: Duplex,
    turns: Turns | undefined,
    [status, code, message]: readonly [number, HttpServerErrorCode, string],
  ): void {
    this.#count(status, code)
    // Whatever Node still parses on this connection is not served (see `#handle`).
    if (turns !== undefined) turns.closing = true
    const text = JSON.stringify(this.#refusal(code, message)) + '\n'
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
    )
    this.#linger(socket as Socket)
  }

  /**
   * The client ended its side of the connection in the middle of a request (its headers or its
   * body cut off), where requests it sent whole before may still await their answers. It reads on,
   * as a client that half-closes does, so those answers are written, in order, and the connection
   * closes after the last: the cut-off request gets 400 as that last one, at once when its turn
   * came, or when it comes if it still waits (unless it was refused already, past maxBodyBytes
   * say: that answer closes); one cut off in its headers gets none (Node made it nothing to answer
   * through), and the answer before it closes the connection. Says whether it took the connection
   * in hand; not, but for a cut-off request whose turn came or is still to come, when none whole
   * awaits its answer (then `#clientError` goes on as for any bad request).
   */
  #endedMidRequest(socket: Duplex, turns: Turns | undefined): boolean {
    const unanswered = this.#unanswered.get(socket)
    if (turns === undefined || unanswered === undefined || !socket.writable) return false
    const owed = [...unanswered].some((response) => response.req.complete)
    const incoming = (socket as Duplex & HttpSocket).parser?.incoming ?? undefined
    const pending = turns.waiting.slice(turns.next).map(([, response]) => response)
    if (incoming !== undefined && !incoming.complete) {
      const cut = [...unanswered].find((response) => response.req === incoming)
      if (cut !== undefined && pending.includes(cut)) {
        // Waiting its turn behind a request still owed its answer (Node reads a held connection
        // again once an answer drains there): answered when its turn comes, after those.
        turns.ended = true
        turns.cut = cut
        return true
      }
      // Refused already (past maxBodyBytes, say), or behind an answer that closes the connection
      // (not served): that answer closes it.
      if (cut === undefined || turns.closing) {
        if (!owed) return false
        turns.ended = true
        return true
      }
      // Its turn came: answered whether or not answers were owed before it (written already, the
      // connection would otherwise close without a word).
      turns.ended = true
      this.#refuseCut(incoming, cut)
      return true
    }
    if (!owed) return false
    // Cut off in its headers: Node writes the answers in order, and the last one closes the connection.
    turns.ended = true
    const last = pending.length > 0 ? pending[pending.length - 1] : turns.latest
    if (last === undefined) return true
    if (!last.headersSent) last.setHeader('Connection', 'close')
    // Answered already without closing (a health check, ready before the answers owed before it):
    // marked last, as Node marks it on a half-close, so the connection closes once it is written,
    // not after keepAliveTimeoutMs.
    else if (!last.writableFinished) (last as ServerResponse & { _last?: boolean })._last = true
    else socket.end()
    return true
  }

  /** Answers 400 a request its client cut off by ending its side of the connection (see `#endedMidRequest`). */
  #refuseCut(request: IncomingMessage, response: ServerResponse): void {
    this.#refuse(
      request,
      response,
      400,
      'BAD_REQUEST',
      'the request was cut off: its client ended its side of the connection before the request did',
    )
  }

  /**
   * Answers 400 a request whose rest Node failed to parse while it waited its turn (see
   * `#clientError`): one whose body's length cannot be told is told so, as `#serve` would.
   */
  #refuseMalformed(request: IncomingMessage, response: ServerResponse): void {
    const transfer = request.headers['transfer-encoding']
    this.#refuse(
      request,
      response,
      400,
      'BAD_REQUEST',
      transfer !== undefined && transferCodings(transfer).at(-1) !== 'chunked'
        ? lengthUnknown(transfer)
        : 'the request is not valid HTTP/1.1',
    )
  }

  /**
   * Answers a CONNECT 405, as every method but POST on the path: Node has handed its connection
   * over (its parser detached), so the answer is written here, and what the client still sends is
   * read and discarded until it ends its side, within {@link LINGER_BYTES} (`head`, what came
   * behind the CONNECT in Node's read, included) and {@link LINGER_MS}. A CONNECT behind a
   * request still owed its answer cannot be answered in order: its connection closes, as Node did,
   * and the requests received whole that wait their turn there are stopped (see `#clientError`).
   */
  #refuseConnect(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    this.#requests++
    // An answer Node still writes (or holds for its turn) would come after this one.
    const writing = (socket as Duplex & { _httpMessage?: unknown })._httpMessage != null
    if (!socket.writable || writing || (this.#unanswered.get(socket)?.size ?? 0) > 0) {
      // Node took its close listener off the connection when it handed it over, so its close no
      // longer ends the requests waiting their turn there: let in later, they would be sent with
      // no connection left to answer them, and their client would send them again.
      this.#stopUnanswered(socket)
      socket.destroy()
      return
    }
    const message = `${request.method} is not accepted: events are posted to ${this.#resolved.path}`
    this.#count(405, 'METHOD_NOT_ALLOWED')
    const text = JSON.stringify(this.#refusal('METHOD_NOT_ALLOWED', message)) + '\n'
    socket.on('error', nothing)
    socket.end(
      `HTTP/1.1 405 ${STATUS_CODES[405]}\r\nAllow: POST\r\nConnection: close\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
    )
    // Once `run` returned, nothing lingers (see `#linger`); until then, `run`'s return closes it.
    if (this.#closed) {
      ;(socket as Socket).destroySoon()
      return
    }
    this.#lingering.add(socket as Socket)
    const timer = setTimeout(() => socket.destroy(), LINGER_MS).unref()
    socket.once('end', () => socket.destroy())
    socket.once('close', () => {
      clearTimeout(timer)
      this.#lingering.delete(socket as Socket)
    })
    let discarded = head.length
    socket.on('data', (chunk: Buffer) => {
      discarded += chunk.length
      if (discarded > LINGER_BYTES) socket.destroy()
    })
    socket.resume()
  }

  /**
   * Once an answer that closes `socket` was written (and its end sent), reads and discards what
   * the client still sends, until it ends its side or past {@link LINGER_BYTES} or
   * {@link LINGER_MS}, then closes: closed at once with bytes arriving, the connection would be
   * reset, and the client could lose the answer. Nothing read now is parsed: no request after
   * such an answer is served. Once `run` returned, and for those lingering when it returns, the
   * connection is closed at once; so too where Node's server does not feed its parser as this
   * expects (a Node of another design): nothing here throws or waits on a missing internal.
   * Idempotent.
   */
  #linger(socket: Socket): void {
    // Ended already, the client sends nothing more: Node's close is the right one.
    if (socket.destroyed || socket.readableEnded || this.#lingering.has(socket)) return
    // Node's server feeds its parser through a 'data' listener of the socket (and reads the
    // socket's stream itself only until one is added). Where there is none (a Node of another
    // design), the parser could not be stopped: closed at once, as Node's server would. So too
    // after the stop, so the process can end.
    if (this.#closed || socket.listeners('data').length === 0) {
      socket.destroySoon()
      return
    }
    this.#lingering.add(socket)
    // Undoes the close Node's server arranged (`destroySoon`) for once the answer is flushed.
    socket.removeListener('finish', socket.destroy)
    const timer = setTimeout(() => socket.destroy(), LINGER_MS).unref()
    let discarded = 0
    const discard = (chunk: Buffer): void => {
      discarded += chunk.length
      if (discarded > LINGER_BYTES) socket.destroy()
    }
    // Node's server wraps `on`: a 'data' listener makes its parser stop reading the socket itself;
    // its own listener, which feeds the parser, goes.
    socket.on('data', discard)
    for (const listener of socket.listeners('data'))
      if (listener !== discard) socket.removeListener('data', listener as (...args: unknown[]) => void)
    socket.once('end', () => socket.destroy())
    socket.once('close', () => {
      clearTimeout(timer)
      this.#lingering.delete(socket)
    })
    const http = socket as Socket & HttpSocket
    if (http._paused === true) http._paused = false
    socket.resume()
    // Paused while the parser read the socket itself, the socket's stream still counts a read as
    // pending and would never start one: started here, as `net` does.
    const handle = http._handle
    if (handle != null && handle.reading === false && typeof handle.readStart === 'function') {
      handle.reading = true
      if (handle.readStart() !== 0) socket.destroy()
    }
  }

  /**
   * After the stop, in place of Node's timeout checks (ended by `server.close`): answers 408 on
   * every connection still open where no request received whole awaits its answer, as Node's
   * checker would have, and closes it. A connection that still owes such an answer is looked at
   * again `requestTimeoutMs` later, and so on until none is left: once its answers are written,
   * a client that sends the rest of the request behind them no more (after its 100 Continue, say)
   * would hold it, and the process, open for good. Unref'd, so it keeps nothing alive itself.
   */
  #cutOffLate(): void {
    this.#cutTimer = undefined
    const late = Object.assign(new Error('the request did not arrive within the time limit'), {
      code: 'ERR_HTTP_REQUEST_TIMEOUT',
    })
    let owing = false
    for (const socket of this.#sockets) {
      const unanswered = this.#unanswered.get(socket) ?? []
      if ([...unanswered].some((response) => response.req.complete)) {
        owing = true
        continue
      }
      // Kept on purpose (a request timed afresh, answers owed to a client that half-closed), or
      // answered 408 and lingering: closed when that is done, not now.
      if (!this.#clientError(late, socket) && !socket.destroyed && !this.#lingering.has(socket))
        socket.destroySoon()
    }
    if (owing)
      this.#cutTimer = setTimeout(
        () => this.#cutOffLate(),
        Math.min(this.#resolved.requestTimeoutMs, MAX_TIMER_MS),
      ).unref()
  }

  /**
   * Stops every request received whole on `socket` that has no answer yet, and says whether there
   * was one. One whose body's end is still to be read is not sent: it must not be after this.
   */
  #stopUnanswered(socket: Duplex): boolean {
    let stopped = false
    for (const response of this.#unanswered.get(socket) ?? []) {
      if (!response.req.complete) continue
      stopped = true
      response.req.destroy()
    }
    return stopped
  }

  #count(status: number, code?: HttpServerErrorCode): void {
    this.#responses[status] = (this.#responses[status] ?? 0) + 1
    if (code !== undefined) this.#refused[code] = (this.#refused[code] ?? 0) + 1
  }

  #refusal(code: HttpServerErrorCode, message: string): HttpServerResponseBody {
    const componentId = this.#componentId
    return { error: message, code, componentId, failure: { componentId, code, message } }
  }

  #handle(request: IncomingMessage, response: ServerResponse, context: SourceContext): void {
    this.#requests++
    this.#unanswered.get(request.socket)?.add(response)
    const turns = this.#turns.get(request.socket)
    if (turns !== undefined) {
      turns.seen++
      if (turns.closing) {
        // Not served. Held only until the answer that closes the connection is written (until then
        // Node would parse whatever the client writes, however long the answers before it take);
        // then read again: closed with bytes unread, the connection would be reset, and the
        // client could lose the answers written before.
        if (turns.closer !== undefined && turns.closer.socket === null && !turns.closer.writableFinished) {
          turns.paused = true
          holdReading(request.socket)
        }
        return
      }
      if (turns.current !== undefined) {
        // Node parses what it already read; the hold stops it reading more. Held again at each
        // request: Node lets go of the hold itself once its own responses drain.
        turns.waiting.push([request, response])
        turns.paused = true
        holdReading(request.socket)
        return
      }
      turns.current = response
      turns.latest = response
    }
    this.#serve(request, response, context)
  }

  /**
   * Ends the turn of `response`'s request on its connection (answered, or its events accepted
   * downstream) and lets the next request waiting there in, in order. A loop, not a recursion: a
   * run of waiting requests that are answered at once (404s) would otherwise nest a call each.
   */
  #endTurn(response: ServerResponse, turns = this.#turns.get(response.req.socket)): void {
    if (turns === undefined || turns.current !== response) return
    const socket = response.req.socket
    turns.current = undefined
    if (turns.releasing) return
    turns.releasing = true
    if (turns.closing) turns.next = turns.waiting.length
    while (turns.current === undefined && turns.next < turns.waiting.length) {
      const [request, next] = turns.waiting[turns.next]!
      turns.waiting[turns.next++] = undefined!
      // Gone with its connection (a client that left, a timeout): nothing of it was read.
      if (request.destroyed || next.destroyed) continue
      turns.current = next
      turns.latest = next
      if (next === turns.cut) this.#refuseCut(request, next)
      else if (next === turns.malformed) this.#refuseMalformed(request, next)
      else this.#serve(request, next, this.#context!)
      if (turns.closing) turns.next = turns.waiting.length
    }
    if (turns.next === turns.waiting.length) {
      turns.waiting.length = 0
      turns.next = 0
    }
    turns.releasing = false
    this.#release(socket, turns)
  }

  /** Reads the connection again if the source held it (and times a request found late meanwhile). */
  #release(socket: Duplex, turns: Turns): void {
    if (!turns.paused) return
    turns.paused = false
    resumeReading(socket)
    if (turns.late) this.#lateAfterHold(socket, turns)
  }

  /**
   * A request found late while its connection was held gets `requestTimeoutMs` from the moment
   * reading resumes, or, when its client waits for `100 Continue` still queued behind the answers
   * owed before it, from the moment that is written (see `#goAheadOwed`); still unfinished then
   * (its headers, or its body, not all arrived), it is cut off as Node's check would have.
   * Unref'd, so it keeps nothing alive itself.
   */
  #lateAfterHold(socket: Duplex, turns: Turns): void {
    turns.late = false
    const owed = this.#goAheadOwed(socket)
    if (owed !== undefined) {
      // Found late again while it waits (each cut after the stop finds it so): waited for once.
      if (turns.goAhead === owed) return
      turns.goAhead = owed
      // Node writes what was queued on the response as it hands it the connection.
      owed.once('socket', () => {
        if (turns.goAhead === owed) turns.goAhead = undefined
        this.#timeAfresh(socket, turns)
      })
      return
    }
    this.#timeAfresh(socket, turns)
  }

  /**
   * The response of the request Node is reading on `socket`, when its client waits for the
   * `100 Continue` it asked for (or the answer in its place) and that is not on the wire: queued
   * behind the answers owed before it on the connection, which Node writes in order. Its client
   * rightly sends nothing meanwhile, so that time does not count against `requestTimeoutMs`.
   */
  #goAheadOwed(socket: Duplex): ServerResponse | undefined {
    const incoming = (socket as Duplex & HttpSocket).parser?.incoming ?? undefined
    if (incoming === undefined || incoming.complete) return undefined
    const response = this.#continueOf.get(incoming)
    return response !== undefined && response.socket === null && !response.destroyed ? response : undefined
  }

  /**
   * Gives the request Node is reading on `socket` `requestTimeoutMs` (or `ms`) from now (see
   * `#lateAfterHold`), once. One timer per connection: a request timed afresh again replaces its
   * own timer (Node reads one request at a time, and one that was timed before is past by then).
   */
  #timeAfresh(socket: Duplex, turns: Turns, ms = this.#resolved.requestTimeoutMs): void {
    const seen = turns.seen
    const incoming = (socket as Duplex & HttpSocket).parser?.incoming ?? undefined
    const body = incoming !== undefined && !incoming.complete
    // Timed from here: when this timer finds it late, it is cut off.
    if (incoming !== undefined) this.#continuedAt.delete(incoming)
    // Cleared when its connection closes first (see `run`): it would hold the source for nothing.
    clearTimeout(turns.afresh)
    turns.afresh = setTimeout(
      () => {
        turns.afresh = undefined
        if (socket.destroyed) return
        // Its body ended; or its headers (still arriving when it was found late) came, and its
        // body too, or a further request began (which Node checks itself).
        const now = (socket as Duplex & HttpSocket).parser?.incoming
        const done = body
          ? incoming.complete
          : turns.seen > seen + 1 || (turns.seen === seen + 1 && (now == null || now.complete))
        if (done) return
        const late = Object.assign(new Error('the request did not arrive within the time limit'), {
          code: 'ERR_HTTP_REQUEST_TIMEOUT',
        })
        this.#clientError(late, socket)
      },
      Math.min(ms, MAX_TIMER_MS),
    ).unref()
  }

  #serve(request: IncomingMessage, response: ServerResponse, context: SourceContext): void {
    if (request.httpVersion === '1.1' && request.headers.host === undefined) {
      // RFC 9112 3.2: a server must answer 400 to an HTTP/1.1 request without Host.
      this.#refuse(request, response, 400, 'BAD_REQUEST', 'an HTTP/1.1 request must carry a Host header')
      return
    }
    const url = originForm(request.url ?? '/')
    const query = url.indexOf('?')
    const path = normalizePercentEncoding(query < 0 ? url : url.slice(0, query))
    if (path === HEALTH_PATH) {
      this.#health(request, response, context)
      return
    }
    if (path !== this.#path) {
      this.#refuse(request, response, 404, 'NOT_FOUND', `events are posted to ${this.#resolved.path}`)
      return
    }
    if (this.#stopping) {
      this.#refuse(request, response, 503, 'SHUTTING_DOWN', 'the source is shutting down')
      return
    }
    if (request.method !== 'POST') {
      response.setHeader('Allow', 'POST')
      this.#refuse(request, response, 405, 'METHOD_NOT_ALLOWED', 'only POST is accepted')
      return
    }
    if (this.#tokenDigest !== undefined && !this.#authorized(request)) {
      response.setHeader('WWW-Authenticate', 'Bearer')
      this.#refuse(request, response, 401, 'UNAUTHORIZED', 'a valid bearer token is required')
      return
    }
    if (
      this.#resolved.unknownContentType === 'reject' &&
      formatOf(request.headers['content-type']) === undefined
    ) {
      response.setHeader('Accept-Post', ACCEPTED_TYPES)
      this.#refuse(
        request,
        response,
        415,
        'UNSUPPORTED_MEDIA_TYPE',
        `the Content-Type must be one of ${ACCEPTED_TYPES}`,
      )
      return
    }
    const encoding = request.headers['content-encoding']
    if (encoding !== undefined && !isIdentity(encoding)) {
      // Read as it is, a compressed body would be refused as "not UTF-8", which names the wrong cause.
      response.setHeader('Accept-Encoding', 'identity')
      this.#refuse(
        request,
        response,
        415,
        'UNSUPPORTED_MEDIA_TYPE',
        `the body is sent with Content-Encoding ${JSON.stringify(encoding)}; only uncompressed bodies are accepted`,
      )
      return
    }
    const transfer = request.headers['transfer-encoding']
    const codings = transfer === undefined ? [] : transferCodings(transfer)
    if (codings.length > 0 && codings.at(-1) !== 'chunked') {
      // Node refuses it too, but only after handing it here: a 100 Continue written meanwhile made
      // Node's refusal close the connection without an answer (bytes were written on it).
      this.#refuse(request, response, 400, 'BAD_REQUEST', lengthUnknown(transfer!))
      return
    }
    if (codings.some((name) => name !== 'chunked')) {
      // Node de-chunks the body and passes the rest on: read as it is, a body in another coding
      // would be refused as "not UTF-8", or, coded by no change to its bytes, taken as events.
      this.#refuse(
        request,
        response,
        501,
        'NOT_IMPLEMENTED',
        `the body is sent with Transfer-Encoding ${JSON.stringify(transfer)}; only chunked is implemented`,
      )
      return
    }
    const declared = Number(request.headers['content-length'] ?? 0)
    if (declared > this.#maxBodyBytes) {
      this.#tooLarge(request, response)
      return
    }

    // Its turn came and its headers passed: the client may send the body (queued by Node behind
    // the answers owed before it on the connection).
    if (this.#expectsContinue.delete(response)) {
      response.writeContinue()
      // Its client sends the body once the 100 is on the wire: Node writes what was queued on
      // the response as it hands it the connection.
      const continued = (): void => void this.#continuedAt.set(request, Date.now())
      if (response.socket !== null) continued()
      else response.once('socket', continued)
    }
    const chunks: Buffer[] = []
    let size = 0
    let refused = false
    request.on('data', (chunk: Buffer) => {
      if (refused) return
      size += chunk.length
      if (size > this.#maxBodyBytes) {
        refused = true
        chunks.length = 0
        this.#tooLarge(request, response)
        return
      }
      chunks.push(chunk)
    })
    request.on('error', nothing)
    request.on('end', () => {
      if (refused || request.destroyed) return
      // A body that came in one chunk (most do) is read where it lies, not copied.
      const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)
      this.#accept(request, response, context, bytes, this.#wantsOutcomes(url, query))
    })
  }

  /** Whether the response lists each record's outcome: the option, then (on request) the query. */
  #wantsOutcomes(url: string, query: number): boolean {
    switch (this.#resolved.outcomes) {
      case 'never':
        return false
      case 'always':
        return true
      case 'on-request': {
        if (query < 0) return false
        const asked = new URLSearchParams(url.slice(query + 1)).get('outcomes')
        return asked === '1' || asked === 'true'
      }
    }
  }

  #accept(
    request: IncomingMessage,
    response: ServerResponse,
    context: SourceContext,
    bytes: Buffer,
    withOutcomes: boolean,
  ): void {
    if (this.#stopping) {
      this.#refuse(request, response, 503, 'SHUTTING_DOWN', 'the source is shutting down')
      return
    }
    const body = decodeUtf8(bytes, this.#replaceInvalidUtf8)
    if (!body.ok) {
      const message = `the body is not valid UTF-8 at byte ${body.byteOffset}`
      this.#refuse(request, response, 400, 'MALFORMED_BODY', message, { byteOffset: body.byteOffset })
      return
    }
    const maxEvents = this.#resolved.maxEventsPerRequest
    const parsed = parseRecords(
      body.text,
      formatOf(request.headers['content-type']),
      this.#maxDepth,
      maxEvents,
    )
    if (!parsed.ok) {
      if (parsed.code === 'TOO_MANY_RECORDS') {
        this.#refuse(
          request,
          response,
          413,
          'TOO_MANY_EVENTS',
          `the body holds ${parsed.records} events, more than maxEventsPerRequest (${maxEvents})`,
          { events: parsed.records, limit: maxEvents },
        )
        return
      }
      const { ok: _, code, message, ...where } = parsed
      this.#refuse(request, response, 400, code, message, where)
      return
    }
    const events = parsed.records.length
    if (events === 0) {
      this.#respond(response, 200, {
        status: 'delivered',
        events: 0,
        ...(withOutcomes ? { records: [] } : {}),
      })
      return
    }
    // Checked and sent in one synchronous step, so a stop cannot slip in between.
    const sending = withOutcomes ? context.send(parsed.records, OUTCOMES) : context.send(parsed.records)
    this.#accepting++
    this.#inFlight++
    void this.#answer(response, sending, events, withOutcomes)
  }

  /**
   * Answers a request whose events were sent, once its batch is decided (and its records'
   * outcomes read, when asked for). A send the pipeline did not take, or a receipt that fails,
   * is answered 503 NOT_ACCEPTED. One async call per request, where a chain of `then`, `catch`
   * and `finally` made five promises and as many closures.
   */
  async #answer(
    response: ServerResponse,
    sending: Promise<BatchReceipt>,
    events: number,
    withOutcomes: boolean,
  ): Promise<void> {
    try {
      let receipt: BatchReceipt
      try {
        receipt = await sending
      } finally {
        if (--this.#accepting === 0) this.#drained?.()
        this.#endTurn(response)
      }
      const status = await receipt.status
      const records = withOutcomes ? recordsOf(await receipt.outcomes, events) : undefined
      const batchId = receipt.batchId
      // A hand-written context may give an id of another type: that one takes the general path.
      if (
        status === 'delivered' &&
        records === undefined &&
        (batchId === undefined || typeof batchId === 'string')
      ) {
        this.#send(response, 200, deliveredText(events, batchId))
        return
      }
      const failure = status === 'delivered' ? undefined : failureOf(receipt)
      // Built field by field, in the order the response lists them.
      const body: Writable<HttpServerResponseBody> = { status, events }
      if (batchId !== undefined) body.batchId = batchId
      if (records !== undefined) body.records = records
      if (failure !== undefined) body.failure = failure
      if (status === 'errored') response.setHeader('Retry-After', this.#retryAfter)
      this.#respond(response, CODE_OF[status], body)
    } catch (error) {
      response.setHeader('Retry-After', this.#retryAfter)
      this.#respond(
        response,
        503,
        this.#refusal('NOT_ACCEPTED', `the pipeline did not accept the events: ${textOf(error)}`),
        'NOT_ACCEPTED',
      )
    } finally {
      this.#inFlight--
    }
  }

  /** `GET /health`: the stop is read from the signal, so the answer turns 503 the moment it begins. */
  #health(request: IncomingMessage, response: ServerResponse, context: SourceContext): void {
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.setHeader('Allow', 'GET, HEAD')
      this.#refuse(request, response, 405, 'METHOD_NOT_ALLOWED', 'health answers GET and HEAD only')
      return
    }
    // A client waiting for 100 Continue gets it, as from Node before the source answered 100
    // itself: answered without it, Node closes the connection behind the source's back (the
    // requests pipelined after it were served, their events sent, their answers lost).
    if (this.#expectsContinue.delete(response)) response.writeContinue()
    const stopping = context.signal.aborted
    const health: HttpServerHealth = {
      state: stopping ? 'stopping' : 'running',
      componentId: context.id,
      inFlight: this.#inFlight,
    }
    if (stopping) response.setHeader('Retry-After', this.#retryAfter)
    this.#respond(response, stopping ? 503 : 200, health)
    request.resume()
  }

  #authorized(request: IncomingMessage): boolean {
    const header = request.headers.authorization
    if (header === undefined || !/^Bearer /i.test(header)) return false
    // Only the blanks HTTP puts around a value (spaces, tabs): `trim()` would also take a no-break
    // space (latin1 0xa0), which a token may start or end with and a client sends as it is.
    return timingSafeEqual(digest(header.slice(7).replace(/^[ \t]+|[ \t]+$/g, '')), this.#tokenDigest!)
  }

  #tooLarge(request: IncomingMessage, response: ServerResponse): void {
    this.#refuse(
      request,
      response,
      413,
      'BODY_TOO_LARGE',
      `the body exceeds maxBodyBytes (${this.#maxBodyBytes} bytes)`,
      { limit: this.#maxBodyBytes },
    )
  }

  /**
   * Answers without reading the rest of the body: it is discarded as it arrives (never buffered),
   * and the connection closes after the response so the client cannot pipeline more onto it
   * (once what the client still sends was read and discarded, within bounds: see `#linger`).
   */
  #refuse(
    request: IncomingMessage,
    response: ServerResponse,
    code: number,
    errorCode: HttpServerErrorCode,
    message: string,
    details: Partial<HttpServerResponseBody> = {},
  ): void {
    if (code === 503) response.setHeader('Retry-After', this.#retryAfter)
    response.setHeader('Connection', 'close')
    this.#respond(response, code, { ...this.#refusal(errorCode, message), ...details }, errorCode)
    request.resume()
  }

  #respond(
    response: ServerResponse,
    code: number,
    body: HttpServerResponseBody | HttpServerHealth,
    refused?: HttpServerErrorCode,
  ): void {
    this.#send(response, code, JSON.stringify(body) + '\n', refused)
  }

  /**
   * Writes a response whose body is `text`, unless one was written already or the client left, and
   * counts it (under `refused` too, for a refusal of the source's own) only when it writes it.
   */
  #send(response: ServerResponse, code: number, text: string, refused?: HttpServerErrorCode): void {
    const socket = response.req.socket
    this.#unanswered.get(socket)?.delete(response)
    const turns = this.#turns.get(socket)
    // Node destroys the response of a connection that closed only once it was handed the
    // connection: one queued behind an earlier answer is not, and would be "written" to nothing.
    if (!response.headersSent && !response.destroyed && !socket.destroyed) {
      // A later request's answer closes the connection, after this one.
      if (this.#stopping && (turns === undefined || response === turns.latest))
        response.setHeader('Connection', 'close')
      const closes = response.getHeader('Connection') === 'close'
      // Node's own close comes first, on the same event: `#linger` undoes it.
      if (closes) response.once('finish', () => this.#linger(socket as Socket))
      if (turns !== undefined && !turns.closing && closes) {
        turns.closing = true
        turns.closer = response
        // Its turn to be written: what the client wrote after it is read (and discarded) again.
        response.once('socket', () => {
          if (turns.current === undefined) this.#release(socket, turns)
        })
      }
      this.#count(code, refused)
      response.writeHead(code, {
        'Content-Type': 'application/json',
        'Content-Length': Buffer.byteLength(text),
      })
      response.end(text)
    }
    this.#endTurn(response, turns)
  }
}

/**
 * The `http_server` source cannot listen (a bad or taken `address`): code `HTTP_SERVER_LISTEN`, the
 * source's component id (`http_server` when it has none yet) and the option concerned. `run` and
 * `listening()` reject with it.
 *
 * @example
 * ```ts
 * await source.listening().catch((e) => { if (e instanceof HttpServerError) console.error(e.component, e.field, e.message) })
 * ```
 */
export class HttpServerError extends ComponentError<'HTTP_SERVER_LISTEN'> {
  override readonly name = 'HttpServerError'
  declare readonly field: string

  constructor(
    /** The option concerned. */
    field: string,
    message: string,
    options: Omit<ComponentErrorOptions, 'field'> = {},
  ) {
    super('HTTP_SERVER_LISTEN', message, { ...options, component: options.component ?? 'http_server', field })
  }
}

/**
 * The body of a `200` without records, `JSON.stringify({ status: 'delivered', events, batchId })`
 * and a newline, written directly: it answers most requests, and building the object only to
 * serialise it cost more than the rest of the answer.
 */
function deliveredText(events: number, batchId: string | undefined): string {
  const id = batchId === undefined ? '' : `,"batchId":${JSON.stringify(batchId)}`
  return `{"status":"delivered","events":${events}${id}}\n`
}

/**
 * The receipt's failure, copied field by field: read once the status resolved, and checked, since
 * a runtime from before `BatchReceipt.failure` (or a hand-written context) may give none or another
 * shape, and a response must never echo more than the three fields.
 */
function failureOf(receipt: BatchReceipt): BatchFailure | undefined {
  const failure: unknown = receipt.failure
  if (typeof failure !== 'object' || failure === null) return undefined
  const { componentId, code, message } = failure as Record<string, unknown>
  if (typeof componentId !== 'string' || typeof code !== 'string') return undefined
  return { componentId, code, message: typeof message === 'string' ? message : '' }
}

/**
 * The records' outcomes as the response lists them, or none when the receipt has none that fit
 * (a hand-written context that ignores `{ outcomes: true }`): the batch's status cannot stand in
 * for them, since a `rejected` batch may hold records that errored and must be retried.
 */
function recordsOf(
  outcomes: RecordOutcomes | undefined,
  events: number,
): HttpServerRecordStatus[] | undefined {
  if (outcomes === undefined || outcomes.length !== events) return undefined
  const records = new Array<HttpServerRecordStatus>(events)
  let index = 0
  for (const status of outcomes) {
    records[index] = { index, status }
    index++
  }
  return records
}

/** What `node:http` keeps on a connection's socket for its own flow control (responses piling up unread). */
interface HttpSocket {
  _paused?: unknown
  /** The socket's libuv stream, which `net` starts and stops reading. */
  _handle?: { reading?: boolean; readStart?: () => number } | null
  parser?: { resume?: () => void; incoming?: IncomingMessage | null } | null
}

/**
 * Stops reading `socket`. A plain `pause()` does not hold: Node's parser resumes the socket at the
 * end of every request it reads, unless the flag its server sets for its own flow control is set;
 * with the flag, the parser pauses too once through what it was given. Where the flag is gone (a
 * Node of another design), the pause holds until the next request ends: the requests let in
 * meanwhile still wait unread, only Node's own share of them is not bounded.
 */
function holdReading(socket: Duplex): void {
  const http = socket as Duplex & HttpSocket
  if (typeof http._paused === 'boolean') http._paused = true
  socket.pause()
}

/**
 * Whether `socket` is being read no further: held by {@link holdReading} and not let go by Node
 * since, or paused because a request waiting its turn buffered its body up to its limit.
 */
function isHeld(socket: Duplex): boolean {
  return (socket as Duplex & HttpSocket)._paused === true || socket.isPaused()
}

/** Reads `socket` again after {@link holdReading}, as Node's server does once its responses drain. */
function resumeReading(socket: Duplex): void {
  const http = socket as Duplex & HttpSocket
  if (http._paused === true) {
    http._paused = false
    http.parser?.resume?.()
  }
  socket.resume()
}

/** Why a request whose Transfer-Encoding `transfer` does not end in `chunked` is refused. */
function lengthUnknown(transfer: string): string {
  return `the body is sent with Transfer-Encoding ${JSON.stringify(transfer)}, whose last coding is not chunked: its length cannot be told`
}

/**
 * The request target in origin form (`/path?query`), the form the `path` option is compared in:
 * an absolute-form target (`http://host:port/path?query`, as sent to a proxy), which a server must
 * take (RFC 9112 3.2.2), loses its scheme and authority (`http://host` alone is `/`). Nothing else
 * is rewritten here (the path's percent-encodings are put in one spelling by the caller).
 */
function originForm(target: string): string {
  if (target.startsWith('/')) return target
  const authority = /^[a-z][a-z\d+.-]*:\/\/[^/?#]*/i.exec(target)
  if (authority === null) return target
  const rest = target.slice(authority[0].length)
  return rest.startsWith('/') ? rest : `/${rest}`
}

/**
 * The codings a Transfer-Encoding value names, in order and in lower case, read as a list (RFC
 * 9110 5.6.1) whose empty elements are ignored, parameters left out. Node passes on a request
 * whose last coding is `chunked`, the body de-chunked but still in any coding named before it
 * (RFC 9112 6.1: 501); one whose last coding is not `chunked` Node refuses as soon as its headers
 * are parsed, body sent or not, though it hands it to the handler first (RFC 9112 6.3: 400, the
 * body's length cannot be told).
 */
function transferCodings(transfer: string): string[] {
  const names: string[] = []
  for (const coding of transfer.split(',')) {
    const semicolon = coding.indexOf(';')
    const name = (semicolon < 0 ? coding : coding.slice(0, semicolon)).trim().toLowerCase()
    if (name !== '') names.push(name)
  }
  return names
}

/**
 * Whether a Content-Encoding value names no coding but `identity`: a list (RFC 9110 5.6.1) whose
 * empty elements are ignored, so an empty value, or two headers joined by Node, is none.
 */
function isIdentity(encoding: string): boolean {
  for (const coding of encoding.split(',')) {
    const name = coding.trim().toLowerCase()
    if (name !== '' && name !== 'identity') return false
  }
  return true
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token).digest()
}

/**
 * Listens on `host:port`. An error before listening rejects; one after (a connection the server
 * could not accept: a client's bad request is a `clientError` instead) goes to `failed`, so it
 * neither crashes the process nor goes unreported.
 */
function listen(server: Server, { host, port }: HostPort, failed: (error: unknown) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      server.on('error', failed)
      resolve()
    })
  })
}

function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve()
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }))
}

/**
 * An HTTP source: `POST` to `path` (default `/`) a JSON array of objects, one object, or NDJSON (by
 * `Content-Type`: `application/json`, `application/x-ndjson`; other types and none are sniffed,
 * or refused with `415` under `unknownContentType: 'reject'`); each request is one batch, answered
 * when the batch resolves: `200` delivered, `503` + `Retry-After` errored, `400` rejected; with
 * `?outcomes=1` (or `outcomes: 'always'`) the body also lists each record's outcome. Bodies
 * that are malformed, not UTF-8 or nested past `maxDepth` get `400` naming where; compressed ones
 * (a `Content-Encoding`) `415`, or sent in a transfer coding other than chunked `501`; bodies over `maxBodyBytes` or `maxEventsPerRequest` `413`; clients slower than `headersTimeoutMs` /
 * `requestTimeoutMs` `408`; requests without the bearer token `401`; other paths `404`; requests
 * during shutdown `503`. `GET /health` answers `200` while running, `503` while stopping. Every
 * refusal names its `code` and the source's `componentId`; none lets anything into the pipeline.
 *
 * @example
 * ```ts
 * const topology = new TopologyBuilder({ acknowledgements: true })
 *   .source('in', httpServer({ address: '127.0.0.1:8686', authToken: process.env.TOKEN }))
 *   .sink('out', ['in'], file({ path: './data/events.ndjson' }))
 *   .build()
 * // curl -H 'Authorization: Bearer …' -d '[{"message":"hi"}]' http://127.0.0.1:8686/
 * ```
 */
export function httpServer(options: HttpServerOptions = {}): HttpServerSource {
  return new HttpServer(options)
}
