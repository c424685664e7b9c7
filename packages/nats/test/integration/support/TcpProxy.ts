// A TCP proxy the test controls, between a client and the NATS server: `cut()` drops every
// connection through it (the client sees the link die and reconnects through the proxy again);
// `close()` drops them and stops listening (the client can never come back: a dead instance).
import { createConnection, createServer, type Server, type Socket } from 'node:net'

export class TcpProxy {
  #cuts = 0
  private constructor(
    readonly server: Server,
    readonly port: number,
    readonly sockets: Set<Socket>,
  ) {}

  static async open(targetHost: string, targetPort: number): Promise<TcpProxy> {
    const sockets = new Set<Socket>()
    const server = createServer((client) => {
      const upstream = createConnection({ host: targetHost, port: targetPort })
      sockets.add(client)
      sockets.add(upstream)
      const drop = (): void => {
        client.destroy()
        upstream.destroy()
        sockets.delete(client)
        sockets.delete(upstream)
      }
      client.on('error', drop).on('close', drop)
      upstream.on('error', drop).on('close', drop)
      client.pipe(upstream)
      upstream.pipe(client)
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return new TcpProxy(server, (server.address() as { port: number }).port, sockets)
  }

  get url(): string {
    return `127.0.0.1:${this.port}`
  }

  /** How many times `cut` dropped at least one connection. */
  get cuts(): number {
    return this.#cuts
  }

  /** Drops every connection open through the proxy now. */
  cut(): void {
    if (this.sockets.size > 0) this.#cuts++
    for (const socket of this.sockets) socket.destroy()
    this.sockets.clear()
  }

  /** Drops every connection and stops listening. */
  async close(): Promise<void> {
    this.cut()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}
