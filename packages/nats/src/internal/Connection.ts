/**
 * One NATS connection of one component: connect, follow reconnects, close.
 *
 * Invariant: a failed first connect (unreachable server, refused credentials) is a
 * `ComponentError` naming the component and the servers; once connected, the client reconnects by
 * itself with back-off (`reconnectTimeWaitMs`, with jitter) for as long as the component runs, and
 * every drop and reconnect is counted here, in one place. `close()` is idempotent and first flushes
 * what was written, so acks and publishes sent before it reach the server. No socket the client
 * opened outlives a failed first connect or a `close()`: nats.js leaves open the socket of a connect
 * attempt whose server never sent its INFO, which kept the process from exiting.
 *
 * @module
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import { subscribe } from 'node:diagnostics_channel'
import type { Socket } from 'node:net'
import { ComponentError } from '@ackline/topology'
import { connect, type NatsConnection } from '@nats-io/transport-node'

/**
 * The sockets the client opened for one connection (its first connect and every reconnect, which
 * run in the async context of the first), while they are open. nats.js times out a connect whose
 * server accepted the TCP connection and never sent its INFO (a hung server, a load balancer with
 * no backend, a port of another service that waits for the client to speak), but its transport's
 * close does nothing before the INFO: the socket stayed open, and the process could not exit,
 * after a failed first connect as after a close during a reconnect. The client shows no handle on
 * it, so its sockets are collected as Node creates them (the `net.client.socket` channel).
 */
const clientSockets = new AsyncLocalStorage<ClientSockets>()
let collecting = false

/**
 * The open sockets of one connection's client. Once {@link ClientSockets.destroyAll} ran (a failed
 * first connect, a close), a socket the client opens after is destroyed at once: a close during a
 * reconnect ends the attempt at one address of a name, and the client goes on to the next address
 * after the close.
 */
class ClientSockets {
  readonly #open = new Set<Socket>()
  #done = false

  add(socket: Socket): void {
    if (this.#done) {
      // After the connect began: a socket destroyed before `connect()` is revived by it.
      setImmediate(() => socket.destroy())
      return
    }
    this.#open.add(socket)
    socket.once('close', () => this.#open.delete(socket))
  }

  destroyAll(): void {
    this.#done = true
    for (const socket of this.#open) socket.destroy()
    this.#open.clear()
  }
}

function collectSockets(): void {
  if (collecting) return
  collecting = true
  subscribe('net.client.socket', (message) => {
    clientSockets.getStore()?.add((message as { socket: Socket }).socket)
  })
}

/** What a component needs to connect. */
export interface ConnectionOptions {
  /** `host:port` or `nats://host:port`, one or several (a cluster). */
  readonly servers: string | readonly string[]
  readonly user?: string | undefined
  readonly pass?: string | undefined
  readonly token?: string | undefined
  /** The connection's name, shown by the server (`nats server report connections`). */
  readonly name?: string | undefined
  /** How long the first connect may take, in ms. */
  readonly connectTimeoutMs: number
  /** The wait between two reconnect attempts to the same server, in ms. */
  readonly reconnectTimeWaitMs: number
  /** How long `close()` waits for the server to confirm it read what was sent, in ms. */
  readonly closeTimeoutMs: number
}

/** Where the connection stands: the one piece of state, changed only by the status loop. */
export type ConnectionState = 'connected' | 'disconnected' | 'closed'

/** A live connection and what happened to it. */
export class Connection {
  readonly nc: NatsConnection
  #state: ConnectionState = 'connected'
  #reconnects = 0
  #disconnects = 0
  #closing: Promise<boolean> | undefined = undefined
  /**
   * What waits for the connection to be up again (see `whenConnected`), one wait per signal shared
   * by all its callers, woken by the status loop: an abort listener per caller put eleven and more
   * on a source's signal when as many batches settled during a drop, and Node warned of a leak.
   */
  readonly #waiting = new Map<AbortSignal, { readonly up: Promise<void>; readonly wake: () => void }>()

  readonly #component: string
  readonly #servers: string
  readonly #closeTimeoutMs: number
  /** The client's sockets that are open (see {@link clientSockets}). */
  readonly #sockets: ClientSockets
  /** Set once `close()` was called: a close that came otherwise is the client giving up. */
  #closedByUs = false

  private constructor(
    nc: NatsConnection,
    component: string,
    servers: string,
    sockets: ClientSockets,
    closeTimeoutMs: number,
  ) {
    this.nc = nc
    this.#component = component
    this.#servers = servers
    this.#closeTimeoutMs = closeTimeoutMs
    this.#sockets = sockets
    void this.#follow()
  }

  /**
   * Connects, or throws a `ComponentError` (`CONNECT_FAILED`, or `AUTH_FAILED` when the server
   * refused the credentials) whose message names `component` and the servers.
   */
  static async open(component: string, options: ConnectionOptions): Promise<Connection> {
    const servers = typeof options.servers === 'string' ? [options.servers] : [...options.servers]
    collectSockets()
    const sockets = new ClientSockets()
    try {
      const nc = await clientSockets.run(sockets, () =>
        connect({
          servers,
          ...(options.user !== undefined ? { user: options.user } : {}),
          ...(options.pass !== undefined ? { pass: options.pass } : {}),
          ...(options.token !== undefined ? { token: options.token } : {}),
          ...(options.name !== undefined ? { name: options.name } : {}),
          timeout: options.connectTimeoutMs,
          reconnect: true,
          maxReconnectAttempts: -1,
          reconnectTimeWait: options.reconnectTimeWaitMs,
          // A failed first connect is reported, not retried forever: the user sees a wrong address at start.
          waitOnFirstConnect: false,
        }),
      )
      return new Connection(nc, component, servers.join(', '), sockets, options.closeTimeoutMs)
    } catch (error) {
      sockets.destroyAll()
      throw connectError(component, servers.join(', '), error, 'cannot connect')
    }
  }

  /**
   * Why the client closed the connection for good by itself, as the `ComponentError` a first
   * connect would have failed with (`AUTH_FAILED` naming `user`, else `CONNECT_FAILED` naming
   * `servers`); `undefined` while it is open or reconnecting, or once `close()` closed it. The
   * client stops reconnecting after a second authorization error in a row (credentials revoked or
   * rotated on the server): nothing sent on it reaches the server any more, and no reconnect
   * comes.
   */
  async closedForGood(): Promise<ComponentError | undefined> {
    if (this.#closedByUs || !this.nc.isClosed()) return undefined
    const error = await this.nc.closed()
    if (this.#closedByUs) return undefined
    return connectError(
      this.#component,
      this.#servers,
      error ?? new Error('closed'),
      'the client closed the connection for good',
    )
  }

  /** Where the connection stands now. */
  get state(): ConnectionState {
    return this.#state
  }

  /**
   * Resolves once the connection is up (at once when it is), closed, or `signal` aborted. nats.js
   * empties what was written while disconnected each time it dials again, so a fire-and-forget
   * message (an ack) written then never reaches the server: a caller that must not lose one waits
   * here first. The state is the status loop's, a turn behind the client: what is written in the
   * moment the link drops, before the client says so, may still be lost.
   */
  whenConnected(signal: AbortSignal): Promise<void> {
    if (this.#state !== 'disconnected' || signal.aborted) return Promise.resolve()
    const waiting = this.#waiting.get(signal)
    if (waiting !== undefined) return waiting.up
    let resolve: () => void = () => {}
    const up = new Promise<void>((r) => {
      resolve = r
    })
    const wake = (): void => {
      this.#waiting.delete(signal)
      signal.removeEventListener('abort', wake)
      resolve()
    }
    this.#waiting.set(signal, { up, wake })
    signal.addEventListener('abort', wake, { once: true })
    return up
  }

  /** How many times the client reconnected after a drop. */
  get reconnects(): number {
    return this.#reconnects
  }

  /** How many times the connection dropped. */
  get disconnects(): number {
    return this.#disconnects
  }

  /**
   * The most bytes one message (payload and headers) may carry on the server this connection is
   * on now (its INFO's `max_payload`); `undefined` before the first INFO. A reconnect to another
   * server of a cluster may change it, so read it where it is used.
   */
  get maxPayload(): number | undefined {
    return this.nc.info?.max_payload
  }

  /**
   * Whether the server (as of this connection's INFO) is at least `major.minor.patch`. A server
   * older than 2.10.4 does not parse a term's reason (`+TERM <reason>`): it takes the whole
   * frame for an ack, so the caller must send a plain `term()` there.
   */
  serverAtLeast(major: number, minor: number, patch: number): boolean {
    const [a = 0, b = 0, c = 0] = (this.nc.info?.version ?? '0.0.0')
      .split(/[.-]/)
      .map((part) => Number.parseInt(part, 10) || 0)
    return a !== major ? a > major : b !== minor ? b > minor : c >= patch
  }

  /**
   * Flushes (so what was written reached the server), then closes, and destroys any socket the
   * client left open (a reconnect attempt to a server that never answered); harmless to call twice.
   * Resolves to whether the server confirmed it read everything written before: `false` when the
   * flush failed or got no answer within `closeTimeoutMs` (a server that stopped reading, a dead
   * link), or the client had closed the connection by itself; what was written may then be lost.
   */
  close(): Promise<boolean> {
    this.#closedByUs = true
    this.#closing ??= (async () => {
      let flushed = false
      if (!this.nc.isClosed()) {
        // A flush on a dead link would wait for the reconnect: bounded, as close must end. The
        // bound is cleared once the flush is answered: left pending, it held its closure (the
        // client) for closeTimeoutMs after every close.
        let timer: NodeJS.Timeout | undefined
        flushed = await Promise.race([
          this.nc.flush().then(
            () => true,
            () => false,
          ),
          new Promise<false>((resolve) => {
            timer = setTimeout(() => resolve(false), this.#closeTimeoutMs).unref()
          }),
        ])
        clearTimeout(timer)
        await this.nc.close().catch(() => undefined)
      }
      this.#sockets.destroyAll()
      this.#enter('closed')
      return flushed
    })()
    return this.#closing
  }

  async #follow(): Promise<void> {
    for await (const status of this.nc.status()) {
      switch (status.type) {
        case 'disconnect':
          this.#disconnects++
          this.#enter('disconnected')
          break
        case 'reconnect':
          this.#reconnects++
          this.#enter('connected')
          break
        case 'close':
          this.#enter('closed')
          break
        default:
          break
      }
    }
    // The status iterator ends when the client closes.
    this.#enter('closed')
  }

  #enter(state: ConnectionState): void {
    this.#state = state
    if (state === 'disconnected') return
    for (const { wake } of [...this.#waiting.values()]) wake()
  }
}

/** A connection failure as a `ComponentError`: `AUTH_FAILED` (field `user`) when the server refused the credentials, else `CONNECT_FAILED` (field `servers`). */
function connectError(component: string, servers: string, error: unknown, what: string): ComponentError {
  const text = error instanceof Error ? error.message : String(error)
  const auth = /authori[sz]ation|authentication|permissions/i.test(text)
  return new ComponentError(
    auth ? 'AUTH_FAILED' : 'CONNECT_FAILED',
    `${auth && what === 'cannot connect' ? 'the server refused the credentials' : what} (servers ${servers}): ${text}`,
    { component, field: auth ? 'user' : 'servers', cause: error },
  )
}

/** The servers as a message names them (`a:4222, b:4222`). */
export function serversOf(servers: string | readonly string[]): string {
  return typeof servers === 'string' ? servers : servers.join(', ')
}
