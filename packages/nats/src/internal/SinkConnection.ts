/**
 * A sink's connection, made anew when the client closed it for good.
 *
 * nats.js stops reconnecting after a second authorization error in a row (credentials revoked or
 * rotated on the server) and closes the connection: nothing written on it reaches a server again,
 * and no reconnect comes. A sink holding that client failed every write for as long as the
 * process lived, even once the credentials were good again. Here the next write connects again
 * instead (once for all the writes waiting then), and fails, retryable, naming why, while that
 * connect fails: the runtime's retry policy paces the attempts, as it paces the writes.
 *
 * Invariant: after `stop()` nothing connects again, and a connection made while stopping is closed.
 */
import { RetryableError } from '@ackline/topology'
import { Connection, type ConnectionOptions } from './Connection.js'

export class SinkConnection {
  readonly #component: string
  readonly #options: ConnectionOptions
  #connection: Connection | undefined = undefined
  /** The connect in flight after the client gave up, shared by every write waiting for it. */
  #reopening: Promise<Connection> | undefined = undefined
  #stopped = false
  /** Reconnects of the connections let go, and the connects that replaced them. */
  #earlierReconnects = 0

  constructor(component: string, options: ConnectionOptions) {
    this.#component = component
    this.#options = options
  }

  /** Connects; throws as `Connection.open` does (`CONNECT_FAILED`, `AUTH_FAILED`). */
  async start(): Promise<Connection> {
    this.#connection = await Connection.open(this.#component, this.#options)
    return this.#connection
  }

  /** The connection now: `undefined` before `start()`. Read it for what it says, not to write on. */
  get now(): Connection | undefined {
    return this.#connection
  }

  /** How many times the client reconnected after a drop, and the sink connected again after it gave up. */
  get reconnects(): number {
    return this.#earlierReconnects + (this.#connection?.reconnects ?? 0)
  }

  /**
   * The connection to write on: the one open, or, when the client closed it for good, a new one.
   * Throws a `RetryableError` before `start()`, after `stop()`, and while connecting again fails
   * (its message says why the client gave up and why the connect failed).
   */
  async current(): Promise<Connection> {
    const connection = this.#connection
    if (connection === undefined) throw new RetryableError(this.#component, 'not started')
    if (this.#stopped) throw new RetryableError(this.#component, 'stopped')
    if (!connection.nc.isClosed()) return connection
    this.#reopening ??= this.#reopen(connection).finally(() => {
      this.#reopening = undefined
    })
    return this.#reopening
  }

  async #reopen(old: Connection): Promise<Connection> {
    const gone = await old.closedForGood()
    let connection: Connection
    try {
      connection = await Connection.open(this.#component, this.#options)
    } catch (error) {
      const why = gone === undefined ? 'the connection closed' : gone.message
      throw new RetryableError(
        this.#component,
        `${why}; connecting again failed: ${error instanceof Error ? error.message : String(error)}`,
        { cause: error },
      )
    }
    if (this.#stopped) {
      await connection.close()
      throw new RetryableError(this.#component, 'stopped')
    }
    this.#earlierReconnects += old.reconnects + 1
    this.#connection = connection
    // Let go: closed by the client already; this only destroys what it left open.
    await old.close()
    return connection
  }

  /** Closes the connection (see `Connection.close`); no write connects again after it. */
  async stop(): Promise<boolean | undefined> {
    this.#stopped = true
    // A connect in flight is closed by its own end, as `#stopped` is set.
    await this.#reopening?.catch(() => undefined)
    return this.#connection?.close()
  }
}
