// The fault-injection proxy against a local echo server: bytes pass both ways and are seen by the
// tap, `cut()` drops the open connections and lets new ones in, `close()` refuses them for good.
import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { type TcpDirection, tcpProxy } from '@ackline/testkit'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

let echo: Server
let echoPort: number

beforeEach(async () => {
  echo = createServer((socket) => socket.pipe(socket))
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve))
  echoPort = (echo.address() as { port: number }).port
})

afterEach(async () => {
  await new Promise<void>((resolve) => echo.close(() => resolve()))
})

/** Connects to `port`, sends `text`, resolves with the socket once the same text came back. */
async function roundTrip(port: number, text: string): Promise<Socket> {
  const socket = createConnection({ host: '127.0.0.1', port })
  let received = ''
  await new Promise<void>((resolve, reject) => {
    socket.on('error', reject)
    socket.on('data', (chunk) => {
      received += chunk.toString()
      if (received === text) resolve()
    })
    socket.write(text)
  })
  return socket
}

const closed = (socket: Socket): Promise<void> =>
  socket.destroyed ? Promise.resolve() : new Promise((resolve) => socket.once('close', () => resolve()))

describe('tcpProxy', () => {
  it('forwards bytes both ways unchanged and shows each chunk to the tap with its direction', async () => {
    const seen: [TcpDirection, string, number][] = []
    const proxy = await tcpProxy({
      target: { host: '127.0.0.1', port: echoPort },
      onData: (direction, chunk, connection) => seen.push([direction, chunk.toString(), connection]),
    })
    try {
      const socket = await roundTrip(proxy.port, 'hello through the proxy')
      expect(proxy.address).toBe(`127.0.0.1:${proxy.port}`)
      expect(proxy.connections).toBe(1)
      expect(proxy.open).toBe(1)
      const up = seen.filter(([d]) => d === 'up').map(([, text]) => text)
      const down = seen.filter(([d]) => d === 'down').map(([, text]) => text)
      expect(up.join('')).toBe('hello through the proxy')
      expect(down.join('')).toBe('hello through the proxy')
      expect(new Set(seen.map(([, , connection]) => connection))).toEqual(new Set([1]))
      socket.destroy()
    } finally {
      await proxy.close()
    }
  })

  it('cut() drops every open connection, counts the cut, and accepts new connections after', async () => {
    const proxy = await tcpProxy({ target: { host: '127.0.0.1', port: echoPort } })
    try {
      const a = await roundTrip(proxy.port, 'a')
      const b = await roundTrip(proxy.port, 'b')
      expect(proxy.open).toBe(2)
      proxy.cut()
      await Promise.all([closed(a), closed(b)])
      expect(proxy.cuts).toBe(1)
      expect(proxy.open).toBe(0)
      // Nothing open: a cut changes nothing and is not counted.
      proxy.cut()
      expect(proxy.cuts).toBe(1)
      const c = await roundTrip(proxy.port, 'again')
      expect(proxy.connections).toBe(3)
      c.destroy()
    } finally {
      await proxy.close()
    }
  })

  it('close() drops the connections and refuses new ones; closing twice is harmless', async () => {
    const proxy = await tcpProxy({ target: { host: '127.0.0.1', port: echoPort } })
    const socket = await roundTrip(proxy.port, 'x')
    await proxy.close()
    await closed(socket)
    await proxy.close()
    const refused = await new Promise<string>((resolve) => {
      const late = createConnection({ host: '127.0.0.1', port: proxy.port })
      late.on('connect', () => {
        late.destroy()
        resolve('connected')
      })
      late.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'))
    })
    expect(refused).toBe('ECONNREFUSED')
  })

  it('drops the client side when the server is unreachable', async () => {
    const dead = createServer()
    await new Promise<void>((resolve) => dead.listen(0, '127.0.0.1', resolve))
    const port = (dead.address() as { port: number }).port
    await new Promise<void>((resolve) => dead.close(() => resolve()))
    const proxy = await tcpProxy({ target: { host: '127.0.0.1', port } })
    try {
      const socket = createConnection({ host: '127.0.0.1', port: proxy.port })
      socket.on('error', () => {})
      await closed(socket)
      expect(proxy.connections).toBe(1)
      expect(proxy.open).toBe(0)
    } finally {
      await proxy.close()
    }
  })

  it('drops the connection whose onData throws, and reports the error from close(), not as an uncaught exception', async () => {
    const boom = new Error('tap broke')
    const proxy = await tcpProxy({
      target: { host: '127.0.0.1', port: echoPort },
      onData: () => {
        throw boom
      },
    })
    const socket = createConnection({ host: '127.0.0.1', port: proxy.port })
    socket.on('error', () => {})
    socket.write('hello')
    await closed(socket)
    expect(proxy.error?.message).toBe('tcpProxy: onData threw on connection 1: tap broke')
    expect(proxy.error?.cause).toBe(boom)
    expect(proxy.open).toBe(0)
    await expect(proxy.close()).rejects.toBe(proxy.error)
  })

  for (const tapped of [false, true]) {
    it(`passes a client's half-close on and the server's answer back${tapped ? ' (with onData)' : ''}`, async () => {
      // A server that reads until the client's end, then answers with what it read.
      const answering = createServer({ allowHalfOpen: true }, (socket) => {
        let text = ''
        socket.on('data', (chunk) => {
          text += chunk
        })
        socket.on('end', () => socket.end(`got ${text}`))
      })
      await new Promise<void>((resolve) => answering.listen(0, '127.0.0.1', resolve))
      const port = (answering.address() as { port: number }).port
      const proxy = await tcpProxy({
        target: { host: '127.0.0.1', port },
        ...(tapped ? { onData: () => {} } : {}),
      })
      try {
        const answer = await new Promise<string>((resolve, reject) => {
          const socket = createConnection({ host: '127.0.0.1', port: proxy.port, allowHalfOpen: true })
          let text = ''
          socket.on('data', (chunk) => {
            text += chunk
          })
          socket.on('error', reject)
          socket.on('close', () => resolve(text))
          socket.end('request')
        })
        expect(answer).toBe('got request')
        expect(proxy.cuts).toBe(0)
      } finally {
        await proxy.close()
        await new Promise<void>((resolve) => answering.close(() => resolve()))
      }
    })
  }

  it('keeps an error of its listener (accepting failed) and reports it from close(), not as an uncaught exception', async () => {
    const proxy = await tcpProxy({ target: { host: '127.0.0.1', port: echoPort } })
    const emfile = Object.assign(new Error('accept EMFILE'), { code: 'EMFILE' })
    // What Node's server emits when it cannot accept a connection.
    ;(proxy as unknown as { server: Server }).server.emit('error', emfile)
    expect(proxy.error?.message).toBe('tcpProxy: the listener failed: accept EMFILE')
    expect(proxy.error?.cause).toBe(emfile)
    const socket = await roundTrip(proxy.port, 'still forwarding')
    socket.destroy()
    await expect(proxy.close()).rejects.toBe(proxy.error)
  })

  it('refuses a target it cannot connect to, naming the field, instead of throwing at the first client', async () => {
    await expect(tcpProxy({ target: { host: '127.0.0.1', port: 70000 } })).rejects.toThrow(
      "tcpProxy: 'target.port' must be an integer from 1 to 65535, got 70000",
    )
    await expect(tcpProxy({ target: { host: '127.0.0.1', port: Number.NaN } })).rejects.toThrow(
      /'target\.port'.*got NaN/,
    )
    await expect(
      tcpProxy({ target: { host: '127.0.0.1', port: '5672' as unknown as number } }),
    ).rejects.toThrow(/'target\.port'/)
    await expect(tcpProxy({ target: { host: '', port: 5672 } })).rejects.toThrow(/'target\.host'/)
  })
})
