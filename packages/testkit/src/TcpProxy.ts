/**
 * Fault injection on the network: a TCP proxy a test puts between a client and a server (a
 * broker, a database) and cuts at the moment it chooses, as a network failure would.
 *
 * Invariant: bytes pass through unchanged and in order in each direction, and an end (FIN) from
 * one side reaches the other after them, leaving the other direction open; `cut()` destroys every
 * connection open at that moment, both sides at once, and the proxy keeps accepting new
 * connections right after (so the client can reconnect through it); `close()` cuts and stops
 * listening for good (the client can never come back, like a dead host). Both are idempotent.
 * An `onData` that throws never crashes the test process: its connection is dropped, the error is
 * kept in `error`, and `close()` rejects with it.
 *
 * @module
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { describeThrown } from './internal/describeThrown.js'

/** Which way bytes travel through the proxy: `'up'` from the client to the server, `'down'` back. */
export type TcpDirection = 'up' | 'down'

/** Options of {@link tcpProxy}. */
export interface TcpProxyOptions {
  /** The server the proxy forwards to. */
  readonly target: { readonly host: string; readonly port: number }
  /**
   * Sees every chunk as it passes (it must not keep or change the buffer after returning), with
   * the number of the connection (1 for the first accepted): for tests that observe the protocol
   * on the wire, such as which acknowledgements a client sent. Called before the chunk is forwarded.
   * If it throws, that connection is dropped (both sides, as by `cut()`), and the proxy's `error`
   * and `close()` report it.
   */
  readonly onData?: (direction: TcpDirection, chunk: Buffer, connection: number) => void
}

/** A running proxy; see {@link tcpProxy}. */
export interface TcpProxy {
  /** The host clients connect to: always `127.0.0.1`. */
  readonly host: string
  /** The ephemeral port the proxy listens on. */
  readonly port: number
  /** `host:port`, for clients that take a server address (NATS `servers`, …). */
  readonly address: string
  /** Connections accepted so far. */
  readonly connections: number
  /** Connections open through the proxy now. */
  readonly open: number
  /** How many calls of `cut()` dropped at least one connection. */
  readonly cuts: number
  /**
   * The first error `onData` threw (its `cause`), whose connection was dropped, or the listener's
   * own error (accepting a connection failed); `undefined` if none.
   */
  readonly error: Error | undefined
  /** Destroys every connection open now (both sides); new connections are accepted again at once. */
  cut(): void
  /**
   * Cuts every connection and stops listening; resolves once the listener is closed, or rejects
   * then with `error` when `onData` threw.
   */
  close(): Promise<void>
}

class RunningProxy implements TcpProxy {
  readonly host = '127.0.0.1'
  connections = 0
  cuts = 0
  error: Error | undefined = undefined
  readonly #pairs = new Set<readonly [Socket, Socket]>()
  #closed: Promise<void> | undefined = undefined

  constructor(
    readonly server: Server,
    readonly port: number,
  ) {}

  get address(): string {
    return `${this.host}:${this.port}`
  }

  get open(): number {
    return this.#pairs.size
  }

  accept(client: Socket, options: TcpProxyOptions): void {
    const id = ++this.connections
    const upstream = createConnection({
      host: options.target.host,
      port: options.target.port,
      allowHalfOpen: true,
    })
    const pair = [client, upstream] as const
    this.#pairs.add(pair)
    const drop = (): void => {
      this.#pairs.delete(pair)
      client.destroy()
      upstream.destroy()
    }
    // A reset (or a refused connect) on one side drops both, as a broken link would. A clean end
    // (FIN) is passed on as an end after the bytes before it, and the other way stays open: a
    // client that half-closes still gets the server's answer. The pair is gone once both closed.
    client.on('error', drop)
    upstream.on('error', drop)
    const closed = (): void => {
      if (client.destroyed && upstream.destroyed) this.#pairs.delete(pair)
    }
    client.on('close', closed)
    upstream.on('close', closed)
    const { onData } = options
    if (onData === undefined) {
      client.pipe(upstream)
      upstream.pipe(client)
      return
    }
    // Called from a socket's 'data' event, where a throw would be an uncaught exception.
    const failed = (cause: unknown): void => {
      const reason = describeThrown(cause, true)
      this.error ??= new Error(`tcpProxy: onData threw on connection ${id}: ${reason}`, { cause })
      drop()
    }
    const seen = (direction: TcpDirection, chunk: Buffer): boolean => {
      try {
        // An async onData's rejection would otherwise be unhandled: it drops the connection as a throw does.
        const returned: unknown = onData(direction, chunk, id)
        if (typeof (returned as PromiseLike<unknown> | undefined)?.then === 'function')
          (returned as PromiseLike<unknown>).then(undefined, failed)
        return true
      } catch (cause) {
        failed(cause)
        return false
      }
    }
    // What `pipe` does at the end of its source, for the tapped path.
    client.on('end', () => upstream.end())
    upstream.on('end', () => client.end())
    client.on('data', (chunk: Buffer) => {
      if (!seen('up', chunk)) return
      // Back pressure as `pipe` would apply it: stop reading while the other side is full.
      if (!upstream.write(chunk)) client.pause()
    })
    upstream.on('drain', () => client.resume())
    upstream.on('data', (chunk: Buffer) => {
      if (!seen('down', chunk)) return
      if (!client.write(chunk)) upstream.pause()
    })
    client.on('drain', () => upstream.resume())
  }

  cut(): void {
    if (this.#pairs.size > 0) this.cuts++
    for (const [client, upstream] of [...this.#pairs]) {
      client.destroy()
      upstream.destroy()
    }
    this.#pairs.clear()
  }

  close(): Promise<void> {
    this.cut()
    this.#closed ??= new Promise<void>((resolve) => this.server.close(() => resolve()))
    return this.#closed.then(() => {
      if (this.error !== undefined) throw this.error
    })
  }
}

/**
 * Starts a TCP proxy on an ephemeral port of 127.0.0.1 that forwards each connection to
 * `target`; point the client at `proxy.port` (or `proxy.address`) and call `cut()` to simulate a
 * network failure mid-flow. Close it when the test ends. Throws a `TypeError` or `RangeError`
 * naming the field for a target that is not a host and a port from 1 to 65535.
 *
 * @example
 * ```ts
 * const proxy = await tcpProxy({ target: { host: '127.0.0.1', port: 5672 } })
 * const source = amqpSource({ url: `amqp://guest:guest@${proxy.address}`, queue })
 * // … once the sink reported its first 100 records:
 * proxy.cut() // the source loses its connection and must reconnect through the proxy
 * await proxy.close()
 * ```
 */
export async function tcpProxy(options: TcpProxyOptions): Promise<TcpProxy> {
  // Checked here: `createConnection` throws a bad port at the first client, inside the server's
  // connection listener, where the throw is an uncaught exception that ends the test process.
  const { host, port } = options.target ?? {}
  if (typeof host !== 'string' || host === '')
    throw new TypeError(`tcpProxy: 'target.host' must be a host name or address, got ${String(host)}`)
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new RangeError(`tcpProxy: 'target.port' must be an integer from 1 to 65535, got ${String(port)}`)
  if (options.onData !== undefined && typeof options.onData !== 'function')
    throw new TypeError(`tcpProxy: 'onData' must be a function, got ${typeof options.onData}`)
  let proxy: RunningProxy | undefined
  // Half-open, so a client's FIN is passed on rather than answered by closing its socket.
  const server = createServer({ allowHalfOpen: true }, (client) => {
    // The listener only runs after `listen` resolved, by which time `proxy` is set.
    if (proxy === undefined) client.destroy()
    else proxy.accept(client, options)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject)
      resolve()
    })
  })
  const address = server.address()
  if (address === null || typeof address === 'string') {
    server.close()
    throw new Error('tcpProxy: the listener has no TCP port')
  }
  const running = new RunningProxy(server, address.port)
  proxy = running
  // A listener's error once listening (EMFILE when accepting, as a test that opens many
  // connections can cause) would be an uncaught exception without a listener: it is kept instead.
  server.on('error', (cause: Error) => {
    running.error ??= new Error(`tcpProxy: the listener failed: ${cause.message}`, { cause })
  })
  return running
}
