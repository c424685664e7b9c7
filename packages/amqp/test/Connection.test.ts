/** What the connection says of a failed connect, with no broker needed. */
import { createServer } from 'node:net'
import { inspect } from 'node:util'
import { AmqpError, amqpSink, amqpSource } from '@ackline/amqp'
import { describe, expect, it } from 'vitest'

/** A port on 127.0.0.1 that nothing listens on (one the OS just gave out and took back). */
async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

describe('amqp connect errors', () => {
  it("never show the digits of a password that the url's parse took for a port, in the message or its cause", async () => {
    // user '127.0.0.1', password '<port>/s3cret' written as is: the url parses as host 127.0.0.1,
    // port <port>, path '/s3cret@127.0.0.1:5672/'. The connect error was 'cannot connect to
    // amqp://***@127.0.0.1:5672/: connect ECONNREFUSED 127.0.0.1:<port>': the password's digits.
    const port = await closedPort()
    const url = `amqp://127.0.0.1:${port}/s3cret@127.0.0.1:5672/`
    const sinkError: unknown = await amqpSink({ url })
      .start()
      .catch((e: unknown) => e)
    const runError: unknown = await amqpSource({ url, queue: 'q' })
      .run({
        id: 'in',
        acknowledgements: true,
        signal: new AbortController().signal,
        send: () => Promise.reject(new Error('unused')),
        sendEvents: () => Promise.resolve(),
      })
      .catch((e: unknown) => e)
    for (const error of [sinkError, runError]) {
      console.log(`misparsed credentials, refused connect: ${(error as Error).message}`)
      expect(error).toBeInstanceOf(AmqpError)
      expect((error as AmqpError).code).toBe('AMQP_CONNECT_FAILED')
      expect((error as AmqpError).message).toMatch(/cannot connect to amqp:\/\/\*\*\*@127\.0\.0\.1:5672\/: /)
      // What failed is still said, and what to do about such a url.
      expect((error as AmqpError).message).toContain('ECONNREFUSED')
      expect((error as AmqpError).message).toMatch(/percent-encode/)
      // Nor in what a logger prints of it (its cause, the properties of the OS error).
      const printed = `${(error as Error).message}\n${inspect(error, { depth: 10 })}`
      expect(printed).not.toContain(String(port))
      expect(printed).not.toContain('s3cret')
    }
  })

  it('show the OS error as it is when the url parses as written', async () => {
    const port = await closedPort()
    const error: unknown = await amqpSink({ url: `amqp://guest:s3cret@127.0.0.1:${port}/` })
      .start()
      .catch((e: unknown) => e)
    expect((error as Error).message).toBe(
      `amqp (url): cannot connect to amqp://guest@127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}`,
    )
    expect((error as Error).cause).toMatchObject({ code: 'ECONNREFUSED', port })
  })

  it("never show a password written as is when the host after the url's last '@' is empty (the default host)", async () => {
    // 'amqp://${user}:${password}@${host}:5672/v' with the host unset: user '127.0.0.1', password
    // '<port>/s3cret', as written. It parses as host 127.0.0.1, port <port>, path '/s3cret@:5672/v'
    // and was taken for a url with an '@' in its virtual host: the connect error was 'cannot
    // connect to amqp://127.0.0.1:<port>/s3cret@:5672/v: connect ECONNREFUSED 127.0.0.1:<port>'.
    const port = await closedPort()
    const error: unknown = await amqpSink({ url: `amqp://127.0.0.1:${port}/s3cret@:5672/v` })
      .start()
      .catch((e: unknown) => e)
    console.log(`empty host after the last '@', refused connect: ${(error as Error).message}`)
    expect((error as Error).message).toMatch(
      /^amqp \(url\): cannot connect to amqp:\/\/\*\*\*@:5672\/v: connect ECONNREFUSED \(/,
    )
    const printed = `${(error as Error).message}\n${inspect(error, { depth: 10 })}`
    expect(printed).not.toContain(String(port))
    expect(printed).not.toContain('s3cret')
  })
  it("name the server when the user holds a '%' that begins no escape ('ops%team'), as amqplib reads it", async () => {
    // amqplib unescapes the user leniently and connects with 'ops%team'; describing the server
    // decoded it strictly and threw 'URIError: URI malformed' instead of the connect error (and, in
    // a reconnect's failure, threw from its handler: no warning, no further attempt).
    const port = await closedPort()
    const error: unknown = await amqpSink({ url: `amqp://ops%team:s3cret@127.0.0.1:${port}/` })
      .start()
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(AmqpError)
    expect((error as Error).message).toBe(
      `amqp (url): cannot connect to amqp://ops%team@127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}`,
    )
  })

  it("never show a user and password percent-encoded as one ('guest%3As3cret': the user 'guest:s3cret', as amqplib reads it)", async () => {
    // encodeURIComponent('guest:s3cret'), as one may read the build's hint ('percent-encode them
    // ... ':' %3A'), is a user holding a ':' and no password; the user was shown unescaped, and
    // every connect error and reconnect warning printed 'amqp://guest:s3cret@127.0.0.1:…'.
    const port = await closedPort()
    for (const userInfo of ['guest%3As3cret', 'guest%3as3cret:x']) {
      const error: unknown = await amqpSink({ url: `amqp://${userInfo}@127.0.0.1:${port}/` })
        .start()
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(AmqpError)
      expect((error as Error).message).toBe(
        `amqp (url): cannot connect to amqp://***@127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}`,
      )
      expect(`${(error as Error).message}\n${inspect(error, { depth: 10 })}`).not.toContain('s3cret')
    }
  })
})
