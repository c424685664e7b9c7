/**
 * `httpServer`: a source that receives events over HTTP, one batch per request, and answers each
 * request only once the pipeline has decided what became of its events.
 *
 * Invariant: a response never claims more than the pipeline did. `200` only once every event of
 * the request was delivered (or accepted, with acknowledgements off); `503` with `Retry-After`
 * when one errored, so the client retries (at-least-once); `400` when one was rejected or the body
 * is malformed. Malformed, oversized, too slow or unauthorized requests, and requests that arrive
 * while the topology stops, are answered before anything enters the pipeline; no body, however
 * deep, long or badly encoded, can make the handler throw.
 *
 * @module
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse, STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type { BatchStatus } from '@ackline/core'
import type { BatchFailure, BatchReceipt, ConfigIssue, Source, SourceContext } from '@ackline/topology'
import { decodeUtf8 } from './internal/decodeUtf8.js'
import { type HostPort, parseAddress } from './internal/parseAddress.js'
import { formatOf, parseRecords } from './internal/parseRecords.js'

/** Options of {@link httpServer}. */
export interface HttpServerOptions {
  /** Where to listen, as `host:port` (`'0.0.0.0:80'`, `'[::1]:8686'`; port 0 picks a free one). Default `'127.0.0.1:8686'`. */
  readonly address?: string
  /** The largest body accepted, in bytes; a larger one gets `413`. Default 10 MiB. */
  readonly maxBodyBytes?: number
  /** When set, requests must carry `Authorization: Bearer <authToken>`, else they get `401`. */
  readonly authToken?: string
  /** The `Retry-After` of a `503`, in seconds. Default 5. */
  readonly retryAfterSeconds?: number
  /**
   * How deep arrays and objects may nest in a body (or in one NDJSON line), the outermost counting
   * as 1: a JSON array of flat objects is 2 deep. A deeper body gets `400` `TOO_DEEP` with the
   * limit and the position, before anything enters the pipeline. Default 64: far more than log and
   * metric data use (Elasticsearch's mapping depth limit is 20), and far from the call-stack limit
   * of code downstream that recurses over a value (encoders, transforms, `JSON.stringify`).
   */
  readonly maxDepth?: number
  /**
   * What a body that is not valid UTF-8 gets: `'reject'` (the default) answers `400`
   * `MALFORMED_BODY` with the `byteOffset` of the first invalid sequence, so data is never changed
   * silently; `'replace'` decodes it with U+FFFD in place of each invalid sequence. A leading UTF-8
   * byte order mark is skipped either way.
   */
  readonly invalidUtf8?: 'reject' | 'replace'
  /**
   * How long a client may take to send a request's headers, in ms, from the first byte; a slower
   * one (slowloris) gets `408` `REQUEST_TIMEOUT` and its connection closes. Default 10,000. At most
   * `requestTimeoutMs`.
   */
  readonly headersTimeoutMs?: number
  /**
   * How long a client may take to send a whole request (headers and body), in ms; a slower one
   * gets `408` `REQUEST_TIMEOUT` and its connection closes. The time the pipeline takes to answer
   * does not count. Default 30,000 (a 10 MiB body at 350 KB/s).
   */
  readonly requestTimeoutMs?: number
  /** How long an idle keep-alive connection stays open after a response, in ms. Default 5,000. */
  readonly keepAliveTimeoutMs?: number
  /**
   * How many connections may be open at once; the server closes further ones as they arrive,
   * without reading them (counted in `counters.connectionsDropped`). Default 1,024.
   */
  readonly maxConnections?: number
  /**
   * The most events one request may carry; a request with more gets `413` `TOO_MANY_EVENTS` and
   * nothing enters the pipeline. Bounds the work and memory one request can claim downstream.
   * Default 10,000.
   */
  readonly maxEventsPerRequest?: number
  /**
   * The path events are posted to (the query string is ignored). Default `'/'`. Must start with
   * `/` and cannot be `/health`, which answers `GET` with the source's state. Every other path
   * gets `404`.
   */
  readonly path?: string
  /**
   * What a body gets whose `Content-Type` names neither JSON (`application/json`, `*+json`) nor
   * NDJSON (`application/x-ndjson`, `application/ndjson`, `application/jsonl`, ...), or that has
   * none: `'sniff'` (the default) decodes it as JSON or NDJSON by its first character, because
   * `curl -d` sends `application/x-www-form-urlencoded` and simple clients send none;
   * `'reject'` answers `415` `UNSUPPORTED_MEDIA_TYPE` before reading the body.
   */
  readonly unknownContentType?: 'sniff' | 'reject'
}

/** What `GET /health` answers: `200` while the source runs, `503` (with `Retry-After`) once it stops. */
export interface HttpServerHealth {
  readonly state: 'running' | 'stopping'
  /** The source's component id. */
  readonly componentId: string
  /** Requests whose events are in the pipeline, awaiting their status. */
  readonly inFlight: number
}

/** The body of every response: what became of the request, as data. */
export interface HttpServerResponseBody {
  /** The batch's status, when the request's events entered the pipeline. */
  readonly status?: BatchStatus
  /** How many events the request carried, when it was decoded. */
  readonly events?: number
  /** The batch's id, when acknowledgements are on and the events entered the pipeline. */
  readonly batchId?: string
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
 * - `400`: `MALFORMED_BODY` (not JSON/NDJSON of objects, or not UTF-8), `TOO_DEEP` (past
 *   `maxDepth`), `BAD_REQUEST` (not HTTP/1.1);
 * - `401` `UNAUTHORIZED`; `404` `NOT_FOUND`; `405` `METHOD_NOT_ALLOWED`;
 * - `408` `REQUEST_TIMEOUT` (past `headersTimeoutMs` or `requestTimeoutMs`);
 * - `413`: `BODY_TOO_LARGE` (past `maxBodyBytes`), `TOO_MANY_EVENTS` (past `maxEventsPerRequest`);
 * - `415` `UNSUPPORTED_MEDIA_TYPE`; `431` `HEADERS_TOO_LARGE`;
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

/**
 * What the source has seen since it started, for metrics and tests. A snapshot: read
 * `source.counters` again for newer figures.
 */
export interface HttpServerCounters {
  /** Requests whose headers arrived. */
  readonly requests: number
  /** Responses sent, by HTTP status code (including the `408`s the source wrote on a timeout). */
  readonly responses: Readonly<Record<number, number>>
  /** Requests the source answered itself, by code (timeouts, malformed bodies, limits, ...). */
  readonly refused: Readonly<Partial<Record<HttpServerErrorCode, number>>>
  /** Connections open now. */
  readonly openConnections: number
  /** Connections closed on arrival because `maxConnections` were open. */
  readonly connectionsDropped: number
}
/** The source {@link httpServer} returns. */
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

const DEFAULT_ADDRESS = '127.0.0.1:8686'
const DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
const DEFAULT_MAX_DEPTH = 64
const DEFAULT_HEADERS_TIMEOUT_MS = 10_000
const DEFAULT_REQUEST_TIMEOUT_MS = 30_000
const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 5_000
const DEFAULT_MAX_CONNECTIONS = 1024
const DEFAULT_MAX_EVENTS_PER_REQUEST = 10_000
const HEALTH_PATH = '/health'
const ACCEPTED_TYPES = 'application/json, application/x-ndjson'
/** The options that must be positive integers when given. */
const POSITIVE_INTEGERS = [
  'maxBodyBytes',
  'maxDepth',
  'headersTimeoutMs',
  'requestTimeoutMs',
  'keepAliveTimeoutMs',
  'maxConnections',
  'maxEventsPerRequest',
] as const
const nothing = (): void => {}

/** The HTTP code for a batch status: the whole contract of this source in one place. */
const CODE_OF: Readonly<Record<BatchStatus, number>> = { delivered: 200, errored: 503, rejected: 400 }

class HttpServer implements HttpServerSource {
  readonly kind = 'http_server'
  readonly canAcknowledge = true
  #address: HostPort | undefined = undefined
  readonly #options: HttpServerOptions
  readonly #maxBodyBytes: number
  readonly #maxDepth: number
  readonly #replaceInvalidUtf8: boolean
  readonly #retryAfter: string
  readonly #tokenDigest: Buffer | undefined
  readonly #listening: Promise<HostPort>
  #resolveListening: (address: HostPort) => void = nothing
  #rejectListening: (error: unknown) => void = nothing
  #stopping = false
  #componentId = 'http_server'
  #requests = 0
  #inFlight = 0
  #openConnections = 0
  #connectionsDropped = 0
  readonly #responses: Record<number, number> = {}
  readonly #refused: Partial<Record<HttpServerErrorCode, number>> = {}
  /** Sends not yet accepted downstream: `run` may not return before they are. */
  readonly #accepting = new Set<Promise<unknown>>()

  constructor(options: HttpServerOptions) {
    this.#options = options
    this.#maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
    this.#maxDepth = options.maxDepth ?? DEFAULT_MAX_DEPTH
    this.#replaceInvalidUtf8 = options.invalidUtf8 === 'replace'
    this.#retryAfter = String(options.retryAfterSeconds ?? 5)
    this.#tokenDigest = typeof options.authToken === 'string' ? digest(options.authToken) : undefined
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
    }
  }

  validate(): readonly ConfigIssue[] {
    const o = this.#options
    const issues: ConfigIssue[] = []
    if (o.address !== undefined && parseAddress(o.address) === undefined) {
      issues.push({
        field: 'address',
        message: `must be 'host:port' with a port from 0 to 65535 (like '${DEFAULT_ADDRESS}'), got ${JSON.stringify(o.address)}`,
      })
    }
    for (const field of POSITIVE_INTEGERS) {
      const value = o[field]
      if (value !== undefined && !isPositiveInteger(value))
        issues.push({ field, message: `must be a positive integer, got ${String(value)}` })
    }
    // Node refuses a headers timeout longer than the request timeout; checked only when both are valid.
    const headers = o.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS
    const whole = o.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS
    if (isPositiveInteger(headers) && isPositiveInteger(whole) && headers > whole) {
      issues.push({
        field: 'headersTimeoutMs',
        message: `must be at most requestTimeoutMs (${whole}), got ${headers}`,
      })
    }
    if (o.invalidUtf8 !== undefined && o.invalidUtf8 !== 'reject' && o.invalidUtf8 !== 'replace') {
      issues.push({
        field: 'invalidUtf8',
        message: `must be 'reject' or 'replace', got ${JSON.stringify(o.invalidUtf8)}`,
      })
    }
    if (o.path !== undefined && !(typeof o.path === 'string' && /^\/[^?#\s]*$/.test(o.path))) {
      issues.push({
        field: 'path',
        message: `must start with '/' and hold no '?', '#' or spaces, got ${JSON.stringify(o.path)}`,
      })
    } else if (o.path === HEALTH_PATH) {
      issues.push({ field: 'path', message: `cannot be '${HEALTH_PATH}', which answers health checks` })
    }
    const policy = o.unknownContentType
    if (policy !== undefined && policy !== 'sniff' && policy !== 'reject') {
      issues.push({
        field: 'unknownContentType',
        message: `must be 'sniff' or 'reject', got ${JSON.stringify(policy)}`,
      })
    }
    if (o.authToken !== undefined && (typeof o.authToken !== 'string' || o.authToken === '')) {
      issues.push({ field: 'authToken', message: 'must be a non-empty string' })
    }
    const retry = o.retryAfterSeconds
    if (retry !== undefined && !(Number.isSafeInteger(retry) && retry >= 0)) {
      issues.push({
        field: 'retryAfterSeconds',
        message: `must be a whole number of seconds, got ${String(retry)}`,
      })
    }
    return issues
  }

  async run(context: SourceContext): Promise<void> {
    const target = parseAddress(this.#options.address ?? DEFAULT_ADDRESS)
    if (target === undefined) {
      const error = new HttpServerError(
        'address',
        `cannot listen on ${JSON.stringify(this.#options.address)}`,
      )
      this.#rejectListening(error)
      throw error
    }
    this.#componentId = context.id
    const o = this.#options
    const headersTimeout = o.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS
    const requestTimeout = o.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS
    const server = createServer(
      {
        headersTimeout,
        requestTimeout,
        keepAliveTimeout: o.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
        // Node checks both timeouts every 30 s by default, so a limit could be overshot by that
        // much; checking at a tenth of the shorter one (within 10 ms..1 s) keeps the overshoot small.
        connectionsCheckingInterval: Math.min(1000, Math.max(10, Math.floor(headersTimeout / 10))),
      },
      (request, response) => this.#handle(request, response, context),
    )
    server.maxConnections = o.maxConnections ?? DEFAULT_MAX_CONNECTIONS
    server.on('connection', (socket: Socket) => {
      this.#openConnections++
      socket.once('close', () => this.#openConnections--)
    })
    server.on('drop', () => this.#connectionsDropped++)
    server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) =>
      this.#clientError(error, socket),
    )
    try {
      await listen(server, target)
    } catch (error) {
      const failure = new HttpServerError(
        'address',
        `cannot listen on ${target.host}:${target.port}: ${(error as Error).message}`,
        { cause: error },
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
    while (this.#accepting.size > 0) await Promise.allSettled([...this.#accepting])
  }

  /**
   * A connection failed outside any handler: a timeout (Node's checker found the headers or the
   * body late), a request Node could not parse, or a client that went away. Answered here, as
   * data like every other refusal, when nothing was written on the connection yet.
   */
  #clientError(error: NodeJS.ErrnoException, socket: Duplex): void {
    if (!socket.writable || (socket as Socket).bytesWritten > 0 || error.code === 'ECONNRESET') {
      socket.destroy()
      return
    }
    const [status, code, message] =
      error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? ([408, 'REQUEST_TIMEOUT', 'the request did not arrive within the time limit'] as const)
        : error.code === 'HPE_HEADER_OVERFLOW'
          ? ([431, 'HEADERS_TOO_LARGE', 'the request headers are too large'] as const)
          : ([400, 'BAD_REQUEST', 'the request is not valid HTTP/1.1'] as const)
    this.#count(status, code)
    const text = JSON.stringify(this.#refusal(code, message)) + '\n'
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
    )
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
    const path = (request.url ?? '/').split('?', 1)[0]
    if (path === HEALTH_PATH) {
      this.#health(request, response, context)
      return
    }
    if (path !== (this.#options.path ?? '/')) {
      this.#refuse(request, response, 404, 'NOT_FOUND', `events are posted to ${this.#options.path ?? '/'}`)
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
      this.#options.unknownContentType === 'reject' &&
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
    const declared = Number(request.headers['content-length'] ?? 0)
    if (declared > this.#maxBodyBytes) {
      this.#tooLarge(request, response)
      return
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
      if (refused) return
      this.#accept(request, response, context, Buffer.concat(chunks, size))
    })
  }

  #accept(request: IncomingMessage, response: ServerResponse, context: SourceContext, bytes: Buffer): void {
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
    const parsed = parseRecords(body.text, formatOf(request.headers['content-type']), this.#maxDepth)
    if (!parsed.ok) {
      const { ok: _, code, message, ...where } = parsed
      this.#refuse(request, response, 400, code, message, where)
      return
    }
    const events = parsed.records.length
    const maxEvents = this.#options.maxEventsPerRequest ?? DEFAULT_MAX_EVENTS_PER_REQUEST
    if (events > maxEvents) {
      this.#refuse(
        request,
        response,
        413,
        'TOO_MANY_EVENTS',
        `the body holds ${events} events, more than maxEventsPerRequest (${maxEvents})`,
        { events, limit: maxEvents },
      )
      return
    }
    if (events === 0) {
      this.#count(200)
      this.#respond(response, 200, { status: 'delivered', events: 0 })
      return
    }
    // Checked and sent in one synchronous step, so a stop cannot slip in between.
    const sending = context.send(parsed.records)
    this.#accepting.add(sending)
    this.#inFlight++
    sending
      .finally(() => this.#accepting.delete(sending))
      .then(async (receipt) => {
        const status = await receipt.status
        const failure = status === 'delivered' ? undefined : failureOf(receipt)
        const body: HttpServerResponseBody = {
          status,
          events,
          ...(receipt.batchId === undefined ? {} : { batchId: receipt.batchId }),
          ...(failure === undefined ? {} : { failure }),
        }
        if (status === 'errored') response.setHeader('Retry-After', this.#retryAfter)
        this.#count(CODE_OF[status])
        this.#respond(response, CODE_OF[status], body)
      })
      .catch((error: unknown) => {
        response.setHeader('Retry-After', this.#retryAfter)
        this.#count(503, 'NOT_ACCEPTED')
        this.#respond(
          response,
          503,
          this.#refusal('NOT_ACCEPTED', `the pipeline did not accept the events: ${String(error)}`),
        )
      })
      .finally(() => this.#inFlight--)
  }

  /** `GET /health`: the stop is read from the signal, so the answer turns 503 the moment it begins. */
  #health(request: IncomingMessage, response: ServerResponse, context: SourceContext): void {
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.setHeader('Allow', 'GET, HEAD')
      this.#refuse(request, response, 405, 'METHOD_NOT_ALLOWED', 'health answers GET and HEAD only')
      return
    }
    const stopping = context.signal.aborted
    const health: HttpServerHealth = {
      state: stopping ? 'stopping' : 'running',
      componentId: context.id,
      inFlight: this.#inFlight,
    }
    if (stopping) response.setHeader('Retry-After', this.#retryAfter)
    this.#count(stopping ? 503 : 200)
    this.#respond(response, stopping ? 503 : 200, health)
    request.resume()
  }

  #authorized(request: IncomingMessage): boolean {
    const header = request.headers.authorization
    if (header === undefined || !/^Bearer /i.test(header)) return false
    return timingSafeEqual(digest(header.slice(7).trim()), this.#tokenDigest!)
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
   * and the connection closes after the response so the client cannot pipeline more onto it.
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
    this.#count(code, errorCode)
    this.#respond(response, code, { ...this.#refusal(errorCode, message), ...details })
    request.resume()
  }

  #respond(response: ServerResponse, code: number, body: HttpServerResponseBody | HttpServerHealth): void {
    if (response.headersSent || response.destroyed) return
    if (this.#stopping) response.setHeader('Connection', 'close')
    const text = JSON.stringify(body) + '\n'
    response.writeHead(code, {
      'Content-Type': 'application/json',
      'Content-Length': Buffer.byteLength(text),
    })
    response.end(text)
  }
}

/**
 * The `http_server` source cannot listen (a bad or taken `address`); names the option concerned.
 * `run` and `listening()` reject with it.
 *
 * @example
 * ```ts
 * await source.listening().catch((e) => { if (e instanceof HttpServerError) console.error(e.field, e.message) })
 * ```
 */
export class HttpServerError extends Error {
  override readonly name = 'HttpServerError'
  readonly code = 'HTTP_SERVER_LISTEN'
  readonly component = 'http_server'

  constructor(
    /** The option concerned. */
    readonly field: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(`http_server (${field}): ${message}`, options)
  }
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

function isPositiveInteger(value: unknown): boolean {
  return Number.isSafeInteger(value) && (value as number) > 0
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token).digest()
}

function listen(server: Server, { host, port }: HostPort): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      // Errors after listening (a client's bad request) are per connection; Node answers them.
      server.on('error', nothing)
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
 * when the batch resolves: `200` delivered, `503` + `Retry-After` errored, `400` rejected. Bodies
 * that are malformed, not UTF-8 or nested past `maxDepth` get `400` naming where; bodies over
 * `maxBodyBytes` or `maxEventsPerRequest` `413`; clients slower than `headersTimeoutMs` /
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
