// A TCP proxy the test controls, between the client and the broker: `cut()` destroys every
// connection passing through it at once (as a network failure would), and new connections are
// accepted again right after, so the client can reconnect.
import { createConnection, createServer, type Server, type Socket } from 'node:net'

export class TcpProxy {
  readonly #sockets = new Set<Socket>()
  cuts = 0
  connections = 0

  private constructor(
    readonly server: Server,
    readonly port: number,
  ) {}

  /** Listens on an ephemeral port of 127.0.0.1 and forwards to `target`. */
  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    const sockets = new Set<Socket>()
    let proxy: TcpProxy | undefined
    const server = createServer((client) => {
      if (proxy !== undefined) proxy.connections++
      const upstream = createConnection(target)
      sockets.add(client)
      sockets.add(upstream)
      const close = (): void => {
        client.destroy()
        upstream.destroy()
        sockets.delete(client)
        sockets.delete(upstream)
      }
      client.on('error', close).on('close', close)
      upstream.on('error', close).on('close', close)
      client.pipe(upstream)
      upstream.pipe(client)
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const address = server.address()
    if (address === null || typeof address === 'string') throw new Error('proxy has no port')
    proxy = new TcpProxy(server, address.port)
    proxy.#adopt(sockets)
    return proxy
  }

  #shared: Set<Socket> | undefined
  #adopt(sockets: Set<Socket>): void {
    this.#shared = sockets
  }

  /** The broker URL through this proxy. */
  url(user = 'guest', password = 'guest'): string {
    return `amqp://${user}:${password}@127.0.0.1:${this.port}`
  }

  /** Destroys every connection now open through the proxy. */
  cut(): void {
    this.cuts++
    for (const socket of this.#shared ?? this.#sockets) socket.destroy()
  }

  async close(): Promise<void> {
    this.cut()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}
