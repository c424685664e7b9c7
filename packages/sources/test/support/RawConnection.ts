/**
 * A bare TCP connection to a server under test, for clients no HTTP library would be: ones that
 * send headers or bodies a byte at a time, or never finish. Collects everything the server sends
 * until it closes the connection.
 */
import { connect, type Socket } from 'node:net'

export class RawConnection {
  readonly #socket: Socket
  readonly #chunks: Buffer[] = []
  readonly #watchers = new Set<() => void>()
  #trickle: NodeJS.Timeout | undefined = undefined
  /** Everything the server sent, once it closed the connection (or the connection failed). */
  readonly closed: Promise<string>
  /** Resolves once the connection is established. */
  readonly connected: Promise<void>

  constructor(port: number) {
    this.#socket = connect(port, '127.0.0.1')
    this.connected = new Promise((resolve, reject) => {
      this.#socket.once('connect', () => resolve())
      this.#socket.once('error', reject)
      // Destroyed before it connected: no 'error' follows, so say so here (a no-op once connected).
      this.#socket.once('close', () => reject(new Error('closed before connecting')))
    })
    this.connected.catch(() => {})
    this.#socket.on('data', (chunk: Buffer) => {
      this.#chunks.push(chunk)
      for (const watcher of this.#watchers) watcher()
    })
    this.closed = new Promise((resolve) => {
      this.#socket.on('error', () => {})
      this.#socket.once('close', () => {
        this.stopTrickle()
        for (const watcher of this.#watchers) watcher()
        resolve(Buffer.concat(this.#chunks).toString('utf8'))
      })
    })
  }

  /** What the server sent so far. */
  get received(): string {
    return Buffer.concat(this.#chunks).toString('utf8')
  }

  /**
   * What the server sent so far, once it matches `pattern` (or the connection closed first: then
   * everything it sent, for the test to say what did not match).
   */
  until(pattern: RegExp): Promise<string> {
    return new Promise((resolve) => {
      const check = (): void => {
        if (!pattern.test(this.received) && !this.#socket.destroyed) return
        this.#watchers.delete(check)
        resolve(this.received)
      }
      this.#watchers.add(check)
      check()
    })
  }

  /** Writes `data`: text as UTF-8, or bytes as they are (a compressed body). */
  write(data: string | Uint8Array): void {
    this.#socket.write(data)
  }

  /** Half-closes the connection (shuts down writing) and goes on reading what the server sends. */
  end(text?: string): void {
    if (text === undefined) this.#socket.end()
    else this.#socket.end(text)
  }

  /** Writes `text` again every `everyMs` until the connection closes: a client that never finishes. */
  trickle(text: string, everyMs: number): void {
    this.#trickle = setInterval(() => {
      if (!this.#socket.destroyed) this.#socket.write(text)
    }, everyMs)
  }

  stopTrickle(): void {
    clearInterval(this.#trickle)
  }

  destroy(): void {
    this.stopTrickle()
    this.#socket.destroy()
  }

  /** Resets the connection (an RST, not a FIN): a client that went away, not one that half-closed. */
  reset(): void {
    this.stopTrickle()
    this.#socket.resetAndDestroy()
  }
}

/** The status code and the JSON body of a raw HTTP/1.1 response. */
// biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field in tests.
export function parseRawResponse(text: string): { status: number; body: any } {
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0)
  const start = text.indexOf('\r\n\r\n')
  const body = start < 0 ? '' : text.slice(start + 4)
  return { status, body: body === '' ? undefined : JSON.parse(body) }
}
