/**
 * `httpServer`: a source that receives events over HTTP, one batch per request, and answers each
 * request only once the pipeline has decided what became of its events.
 *
 * Invariant: a response never claims more than the pipeline did. `200` only once every event of
 * the request was delivered (or accepted, with acknowledgements off); `503` with `Retry-After`
 * when one errored, so the client retries (at-least-once); `400` when one was rejected or the body
 * is malformed. Malformed, oversized or unauthorized requests, and requests that arrive while the
 * topology stops, are answered before anything enters the pipeline.
 *
 * @module
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { BatchStatus } from '@ackline/core'
import type { ConfigIssue, Source, SourceContext } from '@ackline/topology'
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
  /** For `TOO_DEEP`: the nesting limit (`maxDepth`). */
  readonly limit?: number
  /** For a body that is not UTF-8: the offset, in the body's bytes, of the first invalid sequence. */
  readonly byteOffset?: number
}

/** Why a request was refused before its events entered the pipeline. */
export type HttpServerErrorCode =
  | 'METHOD_NOT_ALLOWED'
  | 'UNAUTHORIZED'
  | 'BODY_TOO_LARGE'
  | 'MALFORMED_BODY'
  | 'TOO_DEEP'
  | 'SHUTTING_DOWN'
  | 'NOT_ACCEPTED'

/** The source {@link httpServer} returns. */
export interface HttpServerSource extends Source {
  readonly kind: 'http_server'
  readonly canAcknowledge: true
  validate(): readonly ConfigIssue[]
  /** The address actually bound (the real port when the option said 0), once listening. */
  readonly address: HostPort | undefined
  /** Resolves with the bound address once the server listens; rejects if it cannot listen. */
  listening(): Promise<HostPort>
}

const DEFAULT_ADDRESS = '127.0.0.1:8686'
const DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
const DEFAULT_MAX_DEPTH = 64
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

  validate(): readonly ConfigIssue[] {
    const o = this.#options
    const issues: ConfigIssue[] = []
    if (o.address !== undefined && parseAddress(o.address) === undefined) {
      issues.push({
        field: 'address',
        message: `must be 'host:port' with a port from 0 to 65535 (like '${DEFAULT_ADDRESS}'), got ${JSON.stringify(o.address)}`,
      })
    }
    if (o.maxBodyBytes !== undefined && !(Number.isSafeInteger(o.maxBodyBytes) && o.maxBodyBytes > 0)) {
      issues.push({
        field: 'maxBodyBytes',
        message: `must be a positive integer, got ${String(o.maxBodyBytes)}`,
      })
    }
    if (o.maxDepth !== undefined && !(Number.isSafeInteger(o.maxDepth) && o.maxDepth > 0)) {
      issues.push({ field: 'maxDepth', message: `must be a positive integer, got ${String(o.maxDepth)}` })
    }
    if (o.invalidUtf8 !== undefined && o.invalidUtf8 !== 'reject' && o.invalidUtf8 !== 'replace') {
      issues.push({
        field: 'invalidUtf8',
        message: `must be 'reject' or 'replace', got ${JSON.stringify(o.invalidUtf8)}`,
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
    const server = createServer((request, response) => this.#handle(request, response, context))
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

  #handle(request: IncomingMessage, response: ServerResponse, context: SourceContext): void {
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
    if (events === 0) {
      this.#respond(response, 200, { status: 'delivered', events: 0 })
      return
    }
    // Checked and sent in one synchronous step, so a stop cannot slip in between.
    const sending = context.send(parsed.records)
    this.#accepting.add(sending)
    sending
      .finally(() => this.#accepting.delete(sending))
      .then(async (receipt) => {
        const status = await receipt.status
        const body: HttpServerResponseBody =
          receipt.batchId === undefined ? { status, events } : { status, events, batchId: receipt.batchId }
        if (status === 'errored') response.setHeader('Retry-After', this.#retryAfter)
        this.#respond(response, CODE_OF[status], body)
      })
      .catch((error: unknown) => {
        response.setHeader('Retry-After', this.#retryAfter)
        this.#respond(response, 503, {
          error: `the pipeline did not accept the events: ${String(error)}`,
          code: 'NOT_ACCEPTED',
        })
      })
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
    this.#respond(response, code, { error: message, code: errorCode, ...details })
    request.resume()
  }

  #respond(response: ServerResponse, code: number, body: HttpServerResponseBody): void {
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
 * An HTTP source: `POST` a JSON array of objects, one object, or NDJSON (by `Content-Type`:
 * `application/json`, `application/x-ndjson`; sniffed when absent); each request is one batch,
 * answered when the batch resolves: `200` delivered, `503` + `Retry-After` errored, `400`
 * rejected. Malformed bodies get `400` (naming the line and column), bodies over `maxBodyBytes`
 * `413`, requests without the bearer token `401`, requests during shutdown `503`.
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
