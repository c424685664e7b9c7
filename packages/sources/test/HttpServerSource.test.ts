import { constants } from 'node:buffer'
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import { request as httpRequest, type Server, type ServerResponse } from 'node:http'
import { connect, Socket } from 'node:net'
import { deflateSync, gzipSync } from 'node:zlib'
import type { EventArray } from '@ackline/core'
import { HttpServerError, HttpServerOptions, type HttpServerSource, httpServer } from '@ackline/sources'
import { ComponentError, MAX_TIMER_MS } from '@ackline/topology'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { FakeSourceContext } from './support/FakeSourceContext.js'
import { request } from './support/HttpRequest.js'
import { parseRawResponse, RawConnection } from './support/RawConnection.js'

interface Running {
  readonly source: HttpServerSource
  readonly context: FakeSourceContext
  readonly port: number
  readonly run: Promise<void>
}

const running: Running[] = []

async function start(options: HttpServerOptions = {}, acknowledgements = true): Promise<Running> {
  const source = httpServer({ address: '127.0.0.1:0', ...options })
  const context = new FakeSourceContext({ acknowledgements })
  const run = source.run(context)
  const { port } = await source.listening()
  const started = { source, context, port, run }
  running.push(started)
  return started
}

afterEach(async () => {
  for (const { context, run } of running.splice(0)) {
    context.stop()
    await run
    for (const batch of context.batches) for (const event of batch) if (!event.isEnded) event.end('delivered')
  }
})

const json = (body: unknown) => ({
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify(body),
})

/**
 * A client that writes `head`, then each of `pieces` while its connection stays open, and ends
 * its side (with `tail`), all before it reads anything (as many clients do): what it read once the
 * connection closed, and the error its writes met (a reset), if any.
 */
async function writeAllThenRead(
  port: number,
  head: string,
  pieces: readonly Buffer[],
  tail?: string,
): Promise<{ text: string; failure: Error | undefined }> {
  const socket = connect(port, '127.0.0.1')
  const chunks: Buffer[] = []
  let failure: Error | undefined
  socket.on('error', (error) => {
    failure = error
  })
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
  socket.on('data', (chunk: Buffer) => chunks.push(chunk))
  socket.pause()
  const write = (data: string | Buffer) =>
    new Promise<void>((resolve) => socket.write(data, () => setImmediate(resolve)))
  await write(head)
  for (let i = 0; i < pieces.length && !socket.destroyed; i++) await write(pieces[i]!)
  if (!socket.destroyed) {
    if (tail === undefined) socket.end()
    else socket.end(tail)
  }
  // Only now, its body all written, does the client read.
  socket.resume()
  await closed
  return { text: Buffer.concat(chunks).toString('utf8'), failure }
}

/**
 * A client that writes `text` and keeps its side open once the server ended its own, sending
 * nothing more unless told: only the server closes. `received` gives what it read so far,
 * `closed` all it read, once the connection closed.
 */
function halfOpenClient(
  port: number,
  text: string,
): { socket: Socket; ended: () => boolean; received: () => string; closed: Promise<string> } {
  const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true })
  const chunks: Buffer[] = []
  let ended = false
  socket.on('data', (chunk: Buffer) => chunks.push(chunk))
  socket.on('end', () => {
    ended = true
  })
  socket.on('error', () => {})
  const closed = new Promise<string>((resolve) =>
    socket.once('close', () => resolve(Buffer.concat(chunks).toString('utf8'))),
  )
  socket.write(text)
  return { socket, ended: () => ended, received: () => Buffer.concat(chunks).toString('utf8'), closed }
}

describe('httpServer: acknowledgements', () => {
  it.each([
    ['delivered', 200],
    ['errored', 503],
    ['rejected', 400],
  ] as const)('answers a request whose batch resolves %s with %i', async (status, code) => {
    const { context, port } = await start()
    const next = context.nextBatch()
    const answer = request(port, json([{ n: 1 }, { n: 2 }]))
    const batch = await next
    expect(batch.events.map((e) => e.fields)).toEqual([{ n: 1 }, { n: 2 }])
    batch.end(status)
    const { status: got, headers, body } = await answer
    expect(got).toBe(code)
    expect(body).toMatchObject({ status, events: 2 })
    expect(body.batchId).toEqual(expect.any(String))
    expect(headers['retry-after']).toBe(status === 'errored' ? '5' : undefined)
  })

  it.each([
    ['a runtime id', undefined],
    ['an id that needs escaping', 'id "quoted" \\ \u2028 é'],
    ['no id', null],
    ['an id that is not a string', 42],
  ] as const)(
    'writes a 200 body byte for byte as the JSON of status, events and batch id, with %s',
    async (_, id) => {
      const { context, port } = await start()
      if (id !== undefined) {
        // A hand-written context whose receipts carry this id (`null`: none at all).
        const send = context.send.bind(context)
        context.send = async (records, options) => ({
          ...(await send(records, options)),
          batchId: (id === null ? undefined : id) as string,
        })
      }
      context.onBatch = (batch) => batch.end('delivered')
      const body = '[{"n":1},{"n":2}]'
      const connection = new RawConnection(port)
      connection.write(
        `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n` +
          `Connection: close\r\n\r\n${body}`,
      )
      const text = await connection.closed
      expect(text).toMatch(/^HTTP\/1\.1 200 /)
      const answer = text.slice(text.indexOf('\r\n\r\n') + 4)
      const batchId = id === undefined ? JSON.parse(answer).batchId : id === null ? undefined : id
      if (id === undefined) expect(batchId).toEqual(expect.any(String))
      expect(answer).toBe(`${JSON.stringify({ status: 'delivered', events: 2, batchId })}\n`)
    },
  )

  it.each([
    ['rejected', 400],
    ['errored', 503],
  ] as const)(
    'names the component, code and message of the first failure of a %s batch',
    async (status, code) => {
      const { context, port } = await start()
      const next = context.nextBatch()
      const answer = request(port, json([{ n: 1 }, { n: 2 }]))
      const [a, b] = (await next).events
      a!.end('delivered')
      b!.end(status, { reason: { componentId: 'archive', code: 'SOME_CODE', message: 'it went wrong' } })
      const { status: got, body } = await answer
      expect(got).toBe(code)
      expect(body).toMatchObject({
        status,
        events: 2,
        failure: { componentId: 'archive', code: 'SOME_CODE', message: 'it went wrong' },
      })
    },
  )

  it('gives no failure for a delivered batch, and none it does not know', async () => {
    const { context, port } = await start()
    const next = context.nextBatch()
    const answer = request(port, json([{ n: 1 }, { n: 2 }]))
    const [a, b] = (await next).events
    a!.end('delivered')
    b!.end('errored')
    expect((await answer).body.failure).toBeUndefined()
    const next2 = context.nextBatch()
    const answer2 = request(port, json([{ n: 1 }]))
    ;(await next2).end('delivered')
    expect((await answer2).body.failure).toBeUndefined()
  })

  it('names the source itself as the component in every refusal', async () => {
    const { port } = await start()
    const answer = await request(port, { headers: { 'content-type': 'application/json' }, body: '[' })
    expect(answer.body.failure).toEqual({
      componentId: 'in',
      code: 'MALFORMED_BODY',
      message: answer.body.error,
    })
  })

  it('answers with the worst status of the batch', async () => {
    const { context, port } = await start({ retryAfterSeconds: 7 })
    const next = context.nextBatch()
    const answer = request(port, json([{ n: 1 }, { n: 2 }, { n: 3 }]))
    const [a, b, c] = (await next).events
    a!.end('delivered')
    b!.end('errored')
    c!.end('delivered')
    const { status, headers } = await answer
    expect(status).toBe(503)
    expect(headers['retry-after']).toBe('7')
  })

  it('does not answer before the batch resolves', async () => {
    const { context, port } = await start()
    const next = context.nextBatch()
    let answered = false
    const answer = request(port, json([{ n: 1 }])).then((a) => {
      answered = true
      return a
    })
    const batch = await next
    // A full round trip on another connection: had the server answered at once, we would know.
    expect((await request(port, { method: 'GET' })).status).toBe(405)
    expect(answered).toBe(false)
    batch.end('delivered')
    expect((await answer).status).toBe(200)
  })

  it('sends one batch per request', async () => {
    const { context, port } = await start()
    const answers = [request(port, json([{ r: 1 }])), request(port, json([{ r: 2 }, { r: 3 }]))]
    while (context.batches.length < 2) await context.nextBatch()
    for (const batch of context.batches) batch.end('delivered')
    await Promise.all(answers)
    expect(
      context
        .records()
        .map((records) => records.length)
        .sort(),
    ).toEqual([1, 2])
  })

  it('answers 200 once accepted when acknowledgements are off', async () => {
    const { context, port } = await start({}, false)
    const answer = await request(port, json([{ n: 1 }]))
    expect(answer.status).toBe(200)
    expect(answer.body).toEqual({ status: 'delivered', events: 1 })
    expect(context.batches[0]!.events[0]!.isEnded).toBe(false)
  })

  it('answers 503 when the pipeline does not accept the batch', async () => {
    const { context, port } = await start()
    context.gate = Promise.reject(new Error('closed'))
    context.gate.catch(() => {})
    const answer = await request(port, json([{ n: 1 }]))
    expect(answer.status).toBe(503)
    expect(answer.body.code).toBe('NOT_ACCEPTED')
    expect(answer.headers['retry-after']).toBe('5')
  })
})

describe('httpServer: per-record outcomes', () => {
  it('lists each record as its events ended, a clone folding into its record', async () => {
    const { context, port } = await start()
    const next = context.nextBatch()
    const answer = request(port, { path: '/?outcomes=1', ...json([{ n: 0 }, { n: 1 }, { n: 2 }]) })
    const [a, b, c] = (await next).events
    const copy = b!.clone()
    a!.end('delivered')
    b!.end('delivered')
    copy.end('errored')
    c!.end()
    const { status, body } = await answer
    expect(status).toBe(503)
    expect(body.records).toEqual([
      { index: 0, status: 'delivered' },
      { index: 1, status: 'errored' },
      { index: 2, status: 'dropped' },
    ])
  })

  it('lists no records when the context gives no outcomes, rather than guess them from the status', async () => {
    const { context, port } = await start()
    // A hand-written context that ignores `{ outcomes: true }`.
    const send = context.send.bind(context)
    context.send = (records) => send(records)
    const next = context.nextBatch()
    const answer = request(port, { path: '/?outcomes=1', ...json([{ n: 0 }, { n: 1 }]) })
    const [a, b] = (await next).events
    a!.end('errored')
    b!.end('rejected')
    const { status, body } = await answer
    expect(status).toBe(400)
    expect(body.status).toBe('rejected')
    expect(body).not.toHaveProperty('records')
  })

  it('declares the option with its default and refuses an unknown value', () => {
    expect(HttpServerOptions.resolve({}).outcomes).toBe('on-request')
    expect(HttpServerOptions.validate({ outcomes: 'sometimes' as never })).toEqual([
      expect.objectContaining({ field: 'outcomes' }),
    ])
  })
})

describe('httpServer: bodies', () => {
  const cases: [string, Record<string, string>, string, unknown[]][] = [
    ['a JSON array', { 'content-type': 'application/json' }, '[{"a":1},{"a":2}]', [{ a: 1 }, { a: 2 }]],
    ['one JSON object', { 'content-type': 'application/json; charset=utf-8' }, '{"a":1}', [{ a: 1 }]],
    ['NDJSON', { 'content-type': 'application/x-ndjson' }, '{"a":1}\r\n\n{"a":2}\n', [{ a: 1 }, { a: 2 }]],
    ['NDJSON without a content type', {}, '{"a":1}\n{"a":2}', [{ a: 1 }, { a: 2 }]],
    ['a JSON array without a content type', {}, ' [{"a":1}]', [{ a: 1 }]],
    [
      'one pretty-printed object as text/plain',
      { 'content-type': 'text/plain' },
      '{\n  "a": 1\n}\n',
      [{ a: 1 }],
    ],
  ]
  it.each(cases)('decodes %s', async (_, headers, body, expected) => {
    const { context, port } = await start()
    const next = context.nextBatch()
    const answer = request(port, { headers, body })
    ;(await next).end('delivered')
    expect((await answer).status).toBe(200)
    expect(context.records()).toEqual([expected])
  })

  it('answers an empty body with 200 and sends nothing', async () => {
    const { context, port } = await start()
    const answer = await request(port, { body: '' })
    expect(answer).toMatchObject({ status: 200, body: { status: 'delivered', events: 0 } })
    expect(context.batches).toEqual([])
  })

  it('refuses a body of blanks JSON does not take (no-break space, byte order mark) as malformed, not as empty', async () => {
    const { context, port } = await start()
    const answer = await request(port, {
      headers: { 'content-type': 'application/json' },
      body: ' \u00a0\ufeff ',
    })
    expect(answer).toMatchObject({ status: 400, body: { code: 'MALFORMED_BODY' } })
    const line = await request(port, {
      headers: { 'content-type': 'application/x-ndjson' },
      body: '{"a":1}\n\u00a0\n{"b":2}\n',
    })
    expect(line).toMatchObject({ status: 400, body: { code: 'MALFORMED_BODY', line: 2 } })
    expect(context.batches).toEqual([])
  })

  const malformed: [string, Record<string, string>, string, string][] = [
    ['a JSON array', { 'content-type': 'application/json' }, '[{"a":1},\n {"b":}]', 'line 2, column 7'],
    ['an unterminated array', { 'content-type': 'application/json' }, '[{"a":1}', 'unexpected end of input'],
    [
      'an NDJSON line',
      { 'content-type': 'application/x-ndjson' },
      '{"a":1}\n{"a":1,,}\n',
      'line 2, column 8',
    ],
    ['a sniffed NDJSON line', {}, '{"a":1}\nnot json', 'line 2, column 2'],
    ['an array holding a number', { 'content-type': 'application/json' }, '[{"a":1}, 2]', 'element 1'],
    [
      'an NDJSON line holding an array',
      { 'content-type': 'application/x-ndjson' },
      '{"a":1}\n[1]',
      'line 2 is not',
    ],
    ['a JSON string', { 'content-type': 'application/json' }, '"hi"', 'array of objects'],
    // JSON.parse reads these as Infinity, which every sink would write as null.
    [
      'a number too large for a double',
      { 'content-type': 'application/json' },
      '[{"a":"1e999"}, {"b": 1e400}]',
      'a number too large for a double at line 1, column 23 (position 22): 1e400',
    ],
    [
      'an NDJSON line holding 400 digits',
      { 'content-type': 'application/x-ndjson' },
      `{"a":1}\n{"b":-${'9'.repeat(400)}}`,
      `a number too large for a double at line 2, column 6 (position 13): -${'9'.repeat(19)}… (401 characters)`,
    ],
  ]
  it.each(malformed)(
    'answers 400 for %s, naming where, before anything is sent',
    async (_, headers, body, where) => {
      const { context, port } = await start()
      const answer = await request(port, { headers, body })
      expect(answer.status).toBe(400)
      expect(answer.body.code).toBe('MALFORMED_BODY')
      expect(answer.body.error).toContain(where)
      expect(context.batches).toEqual([])
    },
  )

  it('answers 413 at once when Content-Length exceeds maxBodyBytes', async () => {
    const { context, port } = await start({ maxBodyBytes: 10 })
    const answer = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(
        { host: '127.0.0.1', port, method: 'POST', headers: { 'content-length': 1_000_000 }, agent: false },
        (res) => {
          res.resume()
          resolve(res.statusCode!)
          req.destroy()
        },
      )
      req.on('error', (e: NodeJS.ErrnoException) => (e.code === 'ECONNRESET' ? undefined : reject(e)))
      // Only the headers: the server must answer without waiting for a megabyte it will not read.
      req.flushHeaders()
    })
    expect(answer).toBe(413)
    expect(context.batches).toEqual([])
  })

  it('answers 413 when a chunked body grows past maxBodyBytes', async () => {
    const { context, port } = await start({ maxBodyBytes: 64 })
    const chunk = JSON.stringify({ pad: 'x'.repeat(40) })
    const answer = await request(port, {
      headers: { 'content-type': 'application/x-ndjson' },
      body: [chunk, '\n', chunk],
    })
    expect(answer.status).toBe(413)
    expect(answer.body.code).toBe('BODY_TOO_LARGE')
    expect(context.batches).toEqual([])
  })

  it.each([
    ['declares a Content-Length past maxBodyBytes', false],
    ['sends a chunked body that grows past maxBodyBytes', true],
  ])(
    'lets a client that %s and writes on after its refusal read the whole 413, without a reset',
    async (_, chunked) => {
      // A client that sends its whole body before it reads (many do) is still writing when the
      // refusal closes the connection: closed with its bytes arriving, the connection is reset,
      // and the client's write fails before it read the answer waiting for it.
      const { source, context, port } = await start({ maxBodyBytes: 1024 })
      const piece = Buffer.alloc(16 * 1024, 'x')
      const pieces = 32
      const { text, failure } = await writeAllThenRead(
        port,
        `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
          (chunked
            ? 'Transfer-Encoding: chunked\r\n\r\n'
            : `Content-Length: ${piece.length * pieces}\r\n\r\n`),
        Array.from({ length: pieces }, () =>
          chunked ? Buffer.concat([Buffer.from('4000\r\n'), piece, Buffer.from('\r\n')]) : piece,
        ),
        chunked ? '0\r\n\r\n' : '',
      )
      expect(failure?.message).toBeUndefined()
      expect(parseRawResponse(text)).toMatchObject({ status: 413, body: { code: 'BODY_TOO_LARGE' } })
      expect(context.batches).toEqual([])
      while (source.counters.openConnections > 0) await new Promise((r) => setImmediate(r))
    },
  )

  it('reads what a client sends after its refusal only so far: one that never stops writing is closed', async () => {
    const { source, port } = await start({ maxBodyBytes: 1024 })
    const connection = new RawConnection(port)
    await connection.connected
    connection.write(`POST / HTTP/1.1\r\nHost: x\r\nContent-Length: ${1 << 30}\r\n\r\n`)
    // A gigabyte, as fast as the connection takes it: far more than the source reads on.
    connection.trickle('x'.repeat(64 * 1024), 0)
    const text = await connection.closed
    expect(parseRawResponse(text)).toMatchObject({ status: 413, body: { code: 'BODY_TOO_LARGE' } })
    while (source.counters.openConnections > 0) await new Promise((r) => setImmediate(r))
  })

  it('reads what a client sends after its refusal only for so long: one that stops without ending is closed', async () => {
    const { source, port } = await start({ maxBodyBytes: 1024 })
    // A client that keeps its side open once the server ended its own: only the source closes.
    // Half a body, then silence, neither the rest nor the end of its side.
    const { socket, ended, closed } = halfOpenClient(
      port,
      `POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\n\r\n${'x'.repeat(2048)}`,
    )
    while (source.counters.openConnections > 0 || !ended()) await new Promise((r) => setTimeout(r, 10))
    await new Promise<void>((resolve) => socket.end(resolve))
    const text = await closed
    expect(parseRawResponse(text)).toMatchObject({ status: 413, body: { code: 'BODY_TOO_LARGE' } })
  })

  it('closes, when the stop comes, a connection it reads on after a refusal: run returns with it closed', async () => {
    const { source, context, port, run } = await start({ maxBodyBytes: 1024 })
    // A client that keeps its side open once the server ended its own, silent: only the source closes.
    const { socket, ended, closed } = halfOpenClient(
      port,
      `POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\n\r\n${'x'.repeat(2048)}`,
    )
    // Its 413 read (the source ended its side): the connection lingers.
    while (!ended()) await new Promise((r) => setTimeout(r, 5))
    expect(source.counters.openConnections).toBe(1)
    context.stop()
    await run
    // Left open, it would keep the process alive after the stop until the lingering ends.
    expect(source.counters.openConnections).toBe(0)
    socket.end()
    expect(parseRawResponse(await closed).status).toBe(413)
  })

  it('accepts a body of exactly maxBodyBytes', async () => {
    const body = '[{"a":1}]'
    const { context, port } = await start({ maxBodyBytes: Buffer.byteLength(body) })
    const next = context.nextBatch()
    const answer = request(port, { body })
    ;(await next).end('delivered')
    expect((await answer).status).toBe(200)
  })
})

describe('httpServer: bodies that must not take the process down', () => {
  const deepMalformed = '['.repeat(12_000)
  const deepValid = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth)
  const cases: [string, Record<string, string>, string][] = [
    ['12 KB of unclosed [ as JSON', { 'content-type': 'application/json' }, deepMalformed],
    [
      '12 KB of unclosed [ as NDJSON',
      { 'content-type': 'application/x-ndjson' },
      `{"a":1}\n${deepMalformed}`,
    ],
    ['12 KB of unclosed [ without a content type', {}, `{"a":1}\n${deepMalformed}`],
    ['a valid object 100,000 levels deep', { 'content-type': 'application/json' }, deepValid(100_000)],
    [
      'a valid NDJSON line 100,000 levels deep',
      { 'content-type': 'application/x-ndjson' },
      deepValid(100_000),
    ],
  ]
  it.each(cases)('answers %s with 400 TOO_DEEP, the limit and the position', async (_, headers, body) => {
    const { context, port } = await start()
    const answer = await request(port, { headers, body })
    expect(answer.status).toBe(400)
    expect(answer.body).toMatchObject({ code: 'TOO_DEEP', limit: 64, position: expect.any(Number) })
    expect(context.batches).toEqual([])
  })

  it('names the position of the first bracket past the limit', async () => {
    const { port } = await start({ maxDepth: 3 })
    const answer = await request(port, { body: '[{"a":[1]}, {"b":{"c":[2]}}]' })
    expect(answer.body).toMatchObject({ code: 'TOO_DEEP', limit: 3, position: 22, line: 1, column: 23 })
  })

  it('accepts a body exactly maxDepth deep', async () => {
    const { context, port } = await start({ maxDepth: 3 })
    const next = context.nextBatch()
    const answer = request(port, { body: '[{"a":[1]}, {"b":{"c":2}}]' })
    ;(await next).end('delivered')
    expect((await answer).status).toBe(200)
  })

  it('reports the syntax error when it comes before the nesting limit', async () => {
    const { port } = await start()
    const answer = await request(port, {
      headers: { 'content-type': 'application/json' },
      body: `[{"a":}, ${'['.repeat(10_000)}`,
    })
    expect(answer.body).toMatchObject({ code: 'MALFORMED_BODY', position: 6, line: 1, column: 7 })
  })

  it('accepts a deep body when maxDepth allows it, and locates an error deep inside it', async () => {
    const { port } = await start({ maxDepth: 200_000 })
    const answer = await request(port, {
      headers: { 'content-type': 'application/json' },
      body: `${'['.repeat(100_000)}x`,
    })
    expect(answer.body).toMatchObject({ code: 'MALFORMED_BODY', position: 100_000 })
  })

  it('answers a huge malformed string, many keys and a long NDJSON line without crashing', async () => {
    const { context, port } = await start({ maxBodyBytes: 32 * 1024 * 1024 })
    const huge = `[{"s":"${'x'.repeat(2_000_000)}`
    const manyKeys = `{${Array.from({ length: 50_000 }, (_, i) => `"k${i}":${i}`).join(',')},}`
    const longLine = `{"a":1}\n{"s":"${'\\u0041'.repeat(1_000_000)}", oops}`
    const answers = await Promise.all([
      request(port, { headers: { 'content-type': 'application/json' }, body: huge }),
      request(port, { headers: { 'content-type': 'application/json' }, body: manyKeys }),
      request(port, { headers: { 'content-type': 'application/x-ndjson' }, body: longLine }),
    ])
    expect(answers.map((a) => [a.status, a.body.code])).toEqual([
      [400, 'MALFORMED_BODY'],
      [400, 'MALFORMED_BODY'],
      [400, 'MALFORMED_BODY'],
    ])
    expect(answers[0]!.body.position).toBe(huge.length)
    expect(answers[2]!.body).toMatchObject({ line: 2 })
    expect(context.batches).toEqual([])
  })

  it('accepts an object with many keys and a huge string', async () => {
    const { context, port } = await start({ maxBodyBytes: 32 * 1024 * 1024 })
    const fields = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, i]))
    const next = context.nextBatch()
    const answer = request(port, json([fields, { s: 'y'.repeat(1_000_000) }]))
    ;(await next).end('delivered')
    expect((await answer).status).toBe(200)
    expect(Object.keys(context.records()[0]![0]!).length).toBe(20_000)
  })
})

describe('httpServer: text encoding', () => {
  const bytes = (...parts: (string | number[])[]) =>
    Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : Buffer.from(p))))

  it.each([
    ['a lone continuation byte', bytes('[{"a":"', [0x80], '"}]'), 7],
    ['a truncated sequence', bytes('[{"a":"é', [0xe2, 0x82], '"}]'), 9],
    ['an overlong encoding', bytes('[{"a":"', [0xc0, 0xaf], '"}]'), 7],
    ['an encoded surrogate', bytes('[{"a":"', [0xed, 0xa0, 0x80], '"}]'), 7],
    ['a byte that never occurs in UTF-8', bytes('{"a":1}\n{"b":"', [0xff], '"}'), 14],
  ])('answers 400 MALFORMED_BODY naming the byte offset of %s', async (_, body, offset) => {
    const { context, port } = await start()
    const answer = await request(port, { headers: { 'content-type': 'application/json' }, body })
    expect(answer.status).toBe(400)
    expect(answer.body).toMatchObject({ code: 'MALFORMED_BODY', byteOffset: offset })
    expect(answer.body.error).toContain(`byte ${offset}`)
    expect(context.batches).toEqual([])
  })

  it('answers a compressed body 415 naming its Content-Encoding, rather than as text that is not UTF-8', async () => {
    const { context, port } = await start({ invalidUtf8: 'replace' })
    for (const [encoding, compress] of [
      ['gzip', gzipSync],
      ['deflate', deflateSync],
    ] as const) {
      const answer = await request(port, {
        headers: { 'content-type': 'application/json', 'content-encoding': encoding },
        body: compress('[{"a":1}]'),
      })
      expect(answer.status).toBe(415)
      expect(answer.headers['accept-encoding']).toBe('identity')
      expect(answer.body).toMatchObject({
        code: 'UNSUPPORTED_MEDIA_TYPE',
        error: `the body is sent with Content-Encoding "${encoding}"; only uncompressed bodies are accepted`,
      })
    }
    context.onBatch = (batch) => batch.end('delivered')
    const identity = { 'content-type': 'application/json', 'content-encoding': 'identity' }
    expect((await request(port, { headers: identity, body: '[{"a":1}]' })).status).toBe(200)
    expect(context.records()).toEqual([[{ a: 1 }]])
  })

  it.each([
    ['gzip, chunked', gzipSync('[{"a":1}]')],
    ['x-custom, chunked', Buffer.from('[{"a":1}]')],
    ['gzip;level=1 , Chunked', gzipSync('[{"a":1}]')],
  ])(
    'answers 501 NOT_IMPLEMENTED to a body sent with a transfer coding other than chunked (%s), rather than reading it as it is',
    async (codings, body) => {
      // RFC 9112 6.1: a server that receives a transfer coding it does not understand should answer
      // 501. Node passes such a request when chunked is the last coding, and the source read the
      // body as if uncoded: as text that is not UTF-8, or, if it happened to be JSON, as events.
      const { source, context, port } = await start()
      context.onBatch = (batch) => batch.end('delivered')
      const connection = new RawConnection(port)
      await connection.connected
      connection.write(
        `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: ${codings}\r\n\r\n` +
          `${body.length.toString(16)}\r\n`,
      )
      connection.write(body)
      connection.end('\r\n0\r\n\r\n')
      const { status, body: answer } = parseRawResponse(await connection.closed)
      expect(status).toBe(501)
      expect(answer).toMatchObject({
        code: 'NOT_IMPLEMENTED',
        componentId: 'in',
        error: `the body is sent with Transfer-Encoding ${JSON.stringify(codings)}; only chunked is implemented`,
      })
      expect(context.batches).toEqual([])
      expect(source.counters.refused).toEqual({ NOT_IMPLEMENTED: 1 })
    },
  )

  it('answers 400 a Transfer-Encoding whose last coding is not chunked from a client waiting for 100 Continue, rather than a 100 Continue and no answer', async () => {
    // Node hands such a request to the handler before it refuses it: the source wrote 100 Continue,
    // and Node's refusal then found bytes written on the connection, so it closed without a word.
    const { source, context, port } = await start()
    const connection = new RawConnection(port)
    await connection.connected
    connection.write(
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nTransfer-Encoding: gzip\r\n\r\n',
    )
    const received = await connection.until(/\r\n\r\n[\s\S]*\n$/)
    connection.end()
    await connection.closed
    const { status, body } = parseRawResponse(received)
    expect(status).toBe(400)
    expect(body).toMatchObject({
      code: 'BAD_REQUEST',
      componentId: 'in',
      error: expect.stringMatching(/Transfer-Encoding/),
    })
    expect(context.batches).toEqual([])
    expect(source.counters.refused).toEqual({ BAD_REQUEST: 1 })
  })

  it.each([
    ['with its body', '[{"a":1}]'],
    ['its client still to send its body', ''],
  ])(
    'answers 400 a Transfer-Encoding whose last coding is not chunked, as RFC 9112 6.3 requires (by design): %s',
    async (_, body) => {
      // The body's length cannot be told then: Node refuses the request as soon as its headers are
      // parsed (having handed it to the handler first), not once its body begins.
      const { source, context, port } = await start()
      const connection = new RawConnection(port)
      await connection.connected
      connection.write(
        `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n${body}`,
      )
      const { status, body: answer } = parseRawResponse(await connection.until(/\r\n\r\n[\s\S]*\n$/))
      connection.end()
      expect(status).toBe(400)
      expect(answer).toMatchObject({ code: 'BAD_REQUEST', componentId: 'in' })
      await connection.closed
      expect(context.batches).toEqual([])
      expect(source.counters.refused).toEqual({ BAD_REQUEST: 1 })
    },
  )

  it.each([
    ['that sends its body at once', ''],
    ['waiting for 100 Continue no longer', 'Expect: 100-continue\r\n'],
  ])(
    'lets a client %s, with a Transfer-Encoding whose last coding is not chunked, read the whole 400 while it writes on, without a reset',
    async (_, expect100) => {
      // Node's own refusal of such a request (a parse error) follows the source's 400 at once: it
      // destroyed the connection, its bytes still arriving, so the client's write was reset and it
      // never read the answer (before c126690, without Expect, Node's 400 lingered as it should).
      const { source, context, port } = await start()
      const piece = Buffer.alloc(16 * 1024, 'x')
      const { text, failure } = await writeAllThenRead(
        port,
        `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${expect100}Transfer-Encoding: gzip\r\n\r\n`,
        Array.from({ length: 32 }, () => piece),
      )
      expect(failure?.message).toBeUndefined()
      expect(parseRawResponse(text)).toMatchObject({
        status: 400,
        body: { code: 'BAD_REQUEST', error: expect.stringMatching(/Transfer-Encoding/) },
      })
      expect(context.batches).toEqual([])
      expect(source.counters.refused).toEqual({ BAD_REQUEST: 1 })
      while (source.counters.openConnections > 0) await new Promise((r) => setImmediate(r))
    },
  )

  it('answers in order, then closes, a Transfer-Encoding whose last coding is not chunked sent behind a request whose answer is still owed', async () => {
    // Node refuses such a request (a parse error) right after the source refused it, its 400
    // queued behind the answer owed before it: the connection was destroyed at once, the request
    // before it stopped, though its events were in the pipeline. Its client got neither answer
    // and sent again what was delivered.
    const { source, context, port } = await start()
    const next = context.nextBatch()
    const connection = new RawConnection(port)
    await connection.connected
    connection.write(
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a":1}]',
    )
    const first = await next
    connection.write(
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n',
    )
    while (source.counters.requests < 2) await new Promise((r) => setImmediate(r))
    first.end('delivered')
    const answers = (await connection.closed).split(/(?=HTTP\/1\.1 )/).map(parseRawResponse)
    expect(answers).toMatchObject([
      { status: 200, body: { status: 'delivered', events: 1 } },
      { status: 400, body: { code: 'BAD_REQUEST', error: expect.stringMatching(/Transfer-Encoding/) } },
    ])
    expect(context.records()).toEqual([[{ a: 1 }]])
    expect(source.counters.responses).toEqual({ 200: 1, 400: 1 })
  })

  const gzipped =
    'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n'
  it.each([
    [
      'a Transfer-Encoding whose last coding is not chunked',
      'waits for room downstream',
      true,
      gzipped,
      /Transfer-Encoding/,
    ],
    [
      'a Transfer-Encoding whose last coding is not chunked',
      'came in the same write',
      false,
      gzipped,
      /Transfer-Encoding/,
    ],
    [
      'a malformed chunk',
      'came in the same write',
      false,
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n',
      /not valid HTTP/,
    ],
  ])(
    'answers in order, then closes, %s sent while the request before it %s',
    async (_, __, gated, refused, error) => {
      // Its turn not yet come, the source had not refused it when Node did (a parse error): the
      // connection was destroyed at once and the request before it stopped, though its events
      // were (or, let through the gate, went) in the pipeline. Its client got neither answer.
      const { source, context, port } = await start()
      let room = (): void => {}
      if (gated)
        context.gate = new Promise((resolve) => {
          room = resolve
        })
      const next = context.nextBatch()
      const connection = new RawConnection(port)
      await connection.connected
      const before =
        'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a":1}]'
      if (gated) {
        connection.write(before)
        // Its events are in the pipeline, waiting for room.
        while (context.sendOptions.length < 1) await new Promise((r) => setImmediate(r))
        connection.write(refused)
      } else connection.write(before + refused)
      while (source.counters.requests < 2) await new Promise((r) => setImmediate(r))
      room()
      // Stopped with its connection, the request before it is never sent: nothing to end then.
      const sent = await Promise.race([next, connection.closed.then(() => undefined)])
      sent?.end('delivered')
      const answers = (await connection.closed).split(/(?=HTTP\/1\.1 )/).map(parseRawResponse)
      expect(answers).toMatchObject([
        { status: 200, body: { status: 'delivered', events: 1 } },
        { status: 400, body: { code: 'BAD_REQUEST', error: expect.stringMatching(error) } },
      ])
      expect(context.records()).toEqual([[{ a: 1 }]])
      expect(source.counters).toMatchObject({
        requests: 2,
        responses: { 200: 1, 400: 1 },
        refused: { BAD_REQUEST: 1 },
      })
    },
  )

  it.each([
    ['empty', ''],
    ['a blank', ' '],
    ['identity with an empty element', 'identity, '],
    ['identity twice, as two headers are joined', 'Identity, identity'],
  ])(
    'takes a Content-Encoding that names no coding but identity (%s) as none, as RFC 9110 lists are read',
    async (_, encoding) => {
      const { context, port } = await start()
      context.onBatch = (batch) => batch.end('delivered')
      const headers = { 'content-type': 'application/json', 'content-encoding': encoding }
      expect((await request(port, { headers, body: '[{"a":1}]' })).status).toBe(200)
      expect(context.records()).toEqual([[{ a: 1 }]])
    },
  )

  it('refuses a Content-Encoding list that names a coding beside identity', async () => {
    const { context, port } = await start()
    const headers = { 'content-type': 'application/json', 'content-encoding': 'identity, gzip' }
    const answer = await request(port, { headers, body: gzipSync('[{"a":1}]') })
    expect(answer.status).toBe(415)
    expect(answer.body).toMatchObject({ code: 'UNSUPPORTED_MEDIA_TYPE' })
    expect(context.batches).toEqual([])
  })

  it("replaces invalid bytes with U+FFFD when invalidUtf8 is 'replace'", async () => {
    const { context, port } = await start({ invalidUtf8: 'replace' })
    const next = context.nextBatch()
    const answer = request(port, { body: bytes('[{"a":"x', [0xff], 'y"}]') })
    ;(await next).end('delivered')
    expect((await answer).status).toBe(200)
    expect(context.records()).toEqual([[{ a: 'x\uFFFDy' }]])
  })

  it.each([
    ['JSON', 'application/json', '[{"a":"é"}]'],
    ['NDJSON', 'application/x-ndjson', '{"a":"é"}\n'],
    ['a sniffed body', 'text/plain', '{"a":"é"}'],
  ])('accepts and skips a UTF-8 byte order mark before %s', async (_, type, text) => {
    const { context, port } = await start()
    const next = context.nextBatch()
    const answer = request(port, { headers: { 'content-type': type }, body: bytes([0xef, 0xbb, 0xbf], text) })
    ;(await next).end('delivered')
    expect((await answer).status).toBe(200)
    expect(context.records()).toEqual([[{ a: 'é' }]])
  })

  it('counts the byte order mark in the byte offset', async () => {
    const { port } = await start()
    const answer = await request(port, { body: bytes([0xef, 0xbb, 0xbf], '[{"a":"', [0xc3], '"}]') })
    expect(answer.body).toMatchObject({ code: 'MALFORMED_BODY', byteOffset: 10 })
  })
})

describe('httpServer: limits of a server on an open port', () => {
  const connections: RawConnection[] = []
  afterEach(() => {
    for (const c of connections.splice(0)) c.destroy()
  })
  const open = async (port: number): Promise<RawConnection> => {
    const c = new RawConnection(port)
    connections.push(c)
    await c.connected
    return c
  }
  const served = async (context: FakeSourceContext, port: number): Promise<number> => {
    const next = context.nextBatch()
    const answer = request(port, json([{ n: 1 }]))
    ;(await next).end('delivered')
    return (await answer).status
  }

  it('cuts off a client that sends its headers too slowly with 408, and serves others meanwhile', async () => {
    const { source, context, port } = await start({ headersTimeoutMs: 800, requestTimeoutMs: 5000 })
    const slowloris = await open(port)
    slowloris.write('POST / HTTP/1.1\r\nHost: x\r\n')
    slowloris.trickle('X-Slow: 1\r\n', 50)
    const order: string[] = []
    const cut = slowloris.closed.then((text) => {
      order.push('cut')
      return text
    })
    expect(await served(context, port)).toBe(200)
    order.push('served')
    const { status, body } = parseRawResponse(await cut)
    expect(status).toBe(408)
    expect(body).toMatchObject({ code: 'REQUEST_TIMEOUT', componentId: 'in' })
    expect(order).toEqual(['served', 'cut'])
    expect(source.counters.refused.REQUEST_TIMEOUT).toBe(1)
    expect(source.counters.responses[408]).toBe(1)
  })

  it('cuts off a client that sends its body too slowly with 408, and sends nothing downstream', async () => {
    const { source, context, port } = await start({ headersTimeoutMs: 500, requestTimeoutMs: 800 })
    const slow = await open(port)
    slow.write(
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n[',
    )
    slow.trickle(' ', 50)
    expect(await served(context, port)).toBe(200)
    const { status, body } = parseRawResponse(await slow.closed)
    expect(status).toBe(408)
    expect(body.code).toBe('REQUEST_TIMEOUT')
    expect(source.counters.refused.REQUEST_TIMEOUT).toBe(1)
    expect(context.batches.length).toBe(1)
  })

  it('serves nothing a client sends after its 408, and closes at once where it cannot stop Node parsing (a Node of another design)', async () => {
    const { source, context, port } = await start({ headersTimeoutMs: 200, requestTimeoutMs: 300 })
    // A Node whose parser is not fed by a 'data' listener on the socket: the source cannot stop it.
    const listeners = Socket.prototype.listeners
    const spy = vi.spyOn(Socket.prototype, 'listeners').mockImplementation(function (this: Socket, name) {
      return name === 'data' ? [] : listeners.call(this, name)
    })
    try {
      const body = '[{"late":1}]'
      const { socket, received, closed } = halfOpenClient(
        port,
        `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n[`,
      )
      while (!received().includes('\r\n\r\n')) await new Promise((r) => setTimeout(r, 5))
      // Cut off with 408: the rest of its body, and a request after it, arrive only now.
      socket.write(
        `${body.slice(1)}POST / HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      )
      socket.end()
      expect(parseRawResponse(await closed).status).toBe(408)
      expect(context.batches).toEqual([])
      while (source.counters.openConnections > 0) await new Promise((r) => setImmediate(r))
    } finally {
      spy.mockRestore()
    }
  })

  it('does not count the time the pipeline takes against requestTimeoutMs', async () => {
    const { context, port } = await start({ headersTimeoutMs: 300, requestTimeoutMs: 300 })
    const next = context.nextBatch()
    const answer = request(port, json([{ n: 1 }]))
    const batch = await next
    // Hold the batch past the limit, measured by the server itself: a slowloris cut meanwhile.
    const slowloris = await open(port)
    slowloris.write('POST / HTTP/1.1\r\n')
    slowloris.trickle('X: 1\r\n', 20)
    expect(parseRawResponse(await slowloris.closed).status).toBe(408)
    batch.end('delivered')
    expect((await answer).status).toBe(200)
  })

  it.each([
    [
      'a Transfer-Encoding whose last coding is not chunked',
      'Transfer-Encoding: gzip\r\n\r\n',
      /Transfer-Encoding/,
    ],
    ['a malformed chunk', 'Transfer-Encoding: chunked\r\n\r\nZZ\r\n', /not valid HTTP/],
  ])(
    'answers in order a request before one with %s, though the answer takes longer than requestTimeoutMs',
    async (_, rest, error) => {
      // The one Node could not parse, refused 400 once its turn came, stays unfinished for Node:
      // its check found it late while the answer before it was still owed, and the connection was
      // destroyed, that request stopped though its events were in the pipeline (delivered, no
      // answer: its client sent them again).
      const { source, context, port } = await start({ headersTimeoutMs: 300, requestTimeoutMs: 300 })
      const next = context.nextBatch()
      const connection = await open(port)
      connection.write(
        'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a":1}]' +
          `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${rest}`,
      )
      const batch = await next
      // Hold the batch past the limit, measured by the server itself: a slowloris cut meanwhile,
      // begun after the request Node could not parse, so Node's check found that one late first.
      const slowloris = await open(port)
      slowloris.write('POST / HTTP/1.1\r\n')
      slowloris.trickle('X: 1\r\n', 20)
      expect(parseRawResponse(await slowloris.closed).status).toBe(408)
      batch.end('delivered')
      const answers = (await connection.closed).split(/(?=HTTP\/1\.1 )/).map(parseRawResponse)
      expect(answers).toMatchObject([
        { status: 200, body: { status: 'delivered', events: 1 } },
        { status: 400, body: { code: 'BAD_REQUEST', error: expect.stringMatching(error) } },
      ])
      // The slowloris's request never reached the handler (its headers never ended).
      expect(source.counters).toMatchObject({
        requests: 2,
        responses: { 200: 1, 400: 1, 408: 1 },
        refused: { BAD_REQUEST: 1, REQUEST_TIMEOUT: 1 },
      })
    },
  )

  it('closes an idle keep-alive connection after keepAliveTimeoutMs', async () => {
    const { port } = await start({ keepAliveTimeoutMs: 100 })
    const idle = await open(port)
    idle.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n')
    const text = await idle.closed
    expect(parseRawResponse(text).status).toBe(200)
    expect(text).toMatch(/keep-alive/i)
    // Node's own default (5 s) would outlast this test's time limit.
  }, 4000)

  it('drops connections past maxConnections, and counts them', async () => {
    const { source, context, port } = await start({ maxConnections: 1 })
    const first = await open(port)
    while (source.counters.openConnections < 1) await new Promise((r) => setImmediate(r))
    const second = await open(port)
    expect(await second.closed).toBe('')
    expect(source.counters.connectionsDropped).toBe(1)
    first.destroy()
    await first.closed
    while (source.counters.openConnections > 0) await new Promise((r) => setImmediate(r))
    expect(await served(context, port)).toBe(200)
  })

  it('takes no further request from a connection while one of its requests waits for room downstream, then answers them all in order', async () => {
    // A client may pipeline requests without waiting for answers: read and sent as they came,
    // each would wait for room with its events made, however many the client wrote.
    const { source, context, port } = await start()
    let room = (): void => {}
    context.gate = new Promise((resolve) => {
      room = resolve
    })
    const n = 50
    let text = ''
    for (let i = 0; i < n; i++) {
      const body = JSON.stringify([{ i }])
      const last = i === n - 1 ? 'Connection: close\r\n' : ''
      text += `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n${last}\r\n${body}`
    }
    const connection = await open(port)
    connection.write(text)
    while (context.sendOptions.length === 0) await new Promise((r) => setImmediate(r))
    for (let turn = 0; turn < 5; turn++) await new Promise((r) => setImmediate(r))
    expect(context.sendOptions).toHaveLength(1)
    context.onBatch = (batch) => batch.end('delivered')
    room()
    const answers = (await connection.closed).split('HTTP/1.1 ').slice(1)
    expect(answers.map((answer) => answer.slice(0, 3))).toEqual(Array(n).fill('200'))
    expect(context.records().map(([record]) => record!.i)).toEqual([...Array(n).keys()])
    expect(source.counters.requests).toBe(n)
  })

  it.each([
    ['a path it does not serve (404)', 'POST /elsewhere HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n'],
    [
      'a malformed body (400)',
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 3\r\n\r\n[1]',
    ],
  ])(
    'lets nothing into the pipeline of a request pipelined behind a refusal of %s, whose answer closes the connection',
    async (_, refused) => {
      // The connection closes after the refusal: a request sent on behind it would never be answered,
      // and its client, left without an answer, would send its events again.
      const { context, port } = await start()
      context.onBatch = (batch) => batch.end('delivered')
      const connection = await open(port)
      connection.write(
        refused +
          'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a":1}]',
      )
      const answers = (await connection.closed).split('HTTP/1.1 ').slice(1)
      expect(answers).toHaveLength(1)
      expect(context.records()).toEqual([])
    },
  )

  it('reads no further what a client pipelines behind a refusal while the answers before the refusal wait', async () => {
    // Not served, yet parsed as they came: behind an answer that waits for its batch, a client
    // writing on past a refusal made Node parse (and keep) every request it wrote.
    const { source, context, port } = await start()
    const post = 'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n'
    const connection = await open(port)
    connection.write(
      `${post}[{"a":1}]POST /elsewhere HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n` +
        `${post}[{"f":1}]`.repeat(10_000),
    )
    while (context.batches.length === 0) await new Promise((r) => setImmediate(r))
    for (let turn = 0; turn < 50; turn++) await new Promise((r) => setImmediate(r))
    // What Node had read when the first of them came, a read or two (one is at most 64 KiB, 745 of them).
    expect(source.counters.requests).toBeLessThan(2000)
    context.batches[0]!.end('delivered')
    const answers = (await connection.closed).split('HTTP/1.1 ').slice(1)
    expect(answers.map((answer) => answer.slice(0, 3))).toEqual(['200', '404'])
    expect(context.records()).toEqual([[{ a: 1 }]])
  })

  it("does not cut off a pipelined request for the time its connection was held, a client's slowness only after", async () => {
    // Held while the request before it waits for room, a request Node had read only in part (cut
    // at a read's end) stays unfinished: Node's check saw it late, though its client sent it all
    // at once, and the connection closed with every answer, the accepted request's too.
    const { context, port } = await start({ headersTimeoutMs: 200, requestTimeoutMs: 200 })
    let room = (): void => {}
    context.gate = new Promise((resolve) => {
      room = resolve
    })
    const post = (body: string, extra = '') =>
      `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n${extra}\r\n${body}`
    const second = post('[{"a":2}]')
    const sent = await open(port)
    sent.write(post('[{"a":1}]') + second.slice(0, -4))
    // The same, whose client never sends the rest: cut off requestTimeoutMs after reading resumed.
    const stalled = await open(port)
    stalled.write(post('[{"a":10}]') + second.slice(0, -4))
    while (context.sendOptions.length < 2) await new Promise((r) => setImmediate(r))
    sent.write(second.slice(-4) + post('[{"a":3}]', 'Connection: close\r\n'))
    // Past requestTimeoutMs (Node checks every 20 ms here) while held: not the client's doing.
    await new Promise((r) => setTimeout(r, 600))
    context.onBatch = (batch) => batch.end('delivered')
    room()
    const answers = (await sent.closed).split('HTTP/1.1 ').slice(1)
    expect(answers.map((answer) => answer.slice(0, 3))).toEqual(['200', '200', '200'])
    const cut = (await stalled.closed).split('HTTP/1.1 ').slice(1)
    expect(cut.map((answer) => answer.slice(0, 3))).toEqual(['200'])
    expect(context.records().map(([record]) => record!.a)).toEqual(expect.arrayContaining([1, 2, 3, 10]))
    expect(context.records()).toHaveLength(4)
  })

  it('writes every answer it owes to a client that half-closed its connection while they were pending, then closes', async () => {
    // A client may shut down its writing once it sent its requests and read on: the answers of
    // requests whose events are in the pipeline must still reach it.
    const { source, context, port } = await start()
    let room = (): void => {}
    context.gate = new Promise((resolve) => {
      room = resolve
    })
    const post = (body: string) =>
      `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`
    const connection = await open(port)
    connection.end(post('[{"a":1}]') + post('[{"a":2}]') + post('[{"a":3}]'))
    while (context.sendOptions.length === 0) await new Promise((r) => setImmediate(r))
    context.onBatch = (batch) => setImmediate(() => batch.end('delivered'))
    room()
    const answers = (await connection.closed).split('HTTP/1.1 ').slice(1)
    expect(answers.map((answer) => answer.slice(0, 3))).toEqual(['200', '200', '200'])
    expect(context.records().map(([record]) => record!.a)).toEqual([1, 2, 3])
    while (source.counters.openConnections > 0) await new Promise((r) => setImmediate(r))
  })

  it('writes the answer of a request whose batch resolves after its client half-closed, then closes', async () => {
    const { source, context, port } = await start()
    const next = context.nextBatch()
    const body = '[{"a":1}]'
    const connection = await open(port)
    connection.end(
      `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    )
    const batch = await next
    // The client's FIN reached the server before the batch resolved: a request on another
    // connection, a full round trip later, is answered after it.
    expect((await request(port, { method: 'GET' })).status).toBe(405)
    batch.end('delivered')
    const answers = (await connection.closed).split('HTTP/1.1 ').slice(1)
    expect(answers.map((answer) => answer.slice(0, 3))).toEqual(['200'])
    while (source.counters.openConnections > 0) await new Promise((r) => setImmediate(r))
  })

  it.each([
    [
      'in its body',
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a"',
      true,
    ],
    ['in its headers', 'POST / HTTP/1.1\r\nHost: x\r\nContent-Ty', false],
  ])(
    'writes the answers owed to a client that half-closed with its last request cut off %s, then closes',
    async (_, cut, refused) => {
      // Node reports the cut-off request as a parse error: the connection was closed at once, and
      // the answer of the request before it, whose events were in the pipeline, was lost.
      const { source, context, port } = await start()
      const next = context.nextBatch()
      const connection = await open(port)
      connection.end(
        `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a":1}]${cut}`,
      )
      const batch = await next
      // The client's FIN reached the server: a request on another connection, a round trip later, is answered after it.
      expect((await request(port, { method: 'GET' })).status).toBe(405)
      batch.end('delivered')
      const answers = (await connection.closed).split(/(?=HTTP\/1\.1 )/)
      expect(answers.map(parseRawResponse)).toMatchObject([
        { status: 200, body: { status: 'delivered', events: 1 } },
        ...(refused ? [{ status: 400, body: { code: 'BAD_REQUEST', componentId: 'in' } }] : []),
      ])
      expect(context.records()).toEqual([[{ a: 1 }]])
      expect(source.counters.responses).toMatchObject({ 200: 1, ...(refused ? { 400: 1 } : {}) })
    },
  )

  it.each([
    [
      'in its body',
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a"',
      true,
    ],
    ['in its headers', 'POST / HTTP/1.1\r\nHost: x\r\nContent-Ty', false],
  ])(
    'writes the answers owed to a client that half-closed with its last request cut off %s, however long past requestTimeoutMs they take',
    async (_, cut, refused) => {
      // Node's check then found the cut-off request late: the connection was closed, and the
      // answer before it, whose events were in the pipeline, was lost.
      const { context, port } = await start({ headersTimeoutMs: 200, requestTimeoutMs: 200 })
      const next = context.nextBatch()
      const connection = await open(port)
      connection.end(
        `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a":1}]${cut}`,
      )
      const batch = await next
      expect((await request(port, { method: 'GET' })).status).toBe(405)
      // requestTimeoutMs later, as the server measures it: a slowloris opened now is cut off then.
      const slowloris = await open(port)
      slowloris.write('POST / HTTP/1.1\r\n')
      slowloris.trickle('X: 1\r\n', 20)
      expect(parseRawResponse(await slowloris.closed).status).toBe(408)
      batch.end('delivered')
      const answers = (await connection.closed).split(/(?=HTTP\/1\.1 )/)
      expect(answers.map(parseRawResponse)).toMatchObject([
        { status: 200, body: { status: 'delivered', events: 1 } },
        ...(refused ? [{ status: 400, body: { code: 'BAD_REQUEST' } }] : []),
      ])
    },
  )

  it('answers 400 to a request cut off in its body by its client half-closing once the answers before it were written', async () => {
    // Nothing was owed any more, and something was written: the connection closed without a word,
    // where the same request first on its connection got its 400.
    const { context, port } = await start()
    context.onBatch = (batch) => batch.end('delivered')
    const connection = await open(port)
    connection.write(
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a":1}]',
    )
    await connection.until(/\r\n\r\n[\s\S]*\n$/)
    connection.end(
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a"',
    )
    const answers = (await connection.closed).split(/(?=HTTP\/1\.1 )/)
    expect(answers.map(parseRawResponse)).toMatchObject([
      { status: 200, body: { events: 1 } },
      { status: 400, body: { code: 'BAD_REQUEST', error: expect.stringMatching(/cut off/) } },
    ])
    expect(context.records()).toEqual([[{ a: 1 }]])
  })

  it('closes the connection after the last answer owed to a client that half-closed in the headers of a request, that answer written already or not', async () => {
    // The health check's answer was ready before the batch's: it kept the connection, which then
    // stayed open, the client reading on, until keepAliveTimeoutMs.
    const { context, port } = await start({ keepAliveTimeoutMs: 600_000 })
    const next = context.nextBatch()
    const connection = await open(port)
    connection.end(
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a":1}]' +
        'GET /health HTTP/1.1\r\nHost: x\r\n\r\nPOST / HTTP/1.1\r\nHost: x\r\nContent-Ty',
    )
    const batch = await next
    expect((await request(port, { method: 'GET' })).status).toBe(405)
    batch.end('delivered')
    const answers = (await connection.closed).split(/(?=HTTP\/1\.1 )/)
    expect(answers.map(parseRawResponse)).toMatchObject([
      { status: 200, body: { status: 'delivered', events: 1 } },
      { status: 200, body: { state: 'running' } },
    ])
  })

  it('writes both answers owed to a client that half-closed in the middle of a request refused past maxBodyBytes', async () => {
    const { context, port } = await start({ maxBodyBytes: 16 })
    const next = context.nextBatch()
    const connection = await open(port)
    connection.end(
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a":1}]' +
        `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n[${'{"b":1},'.repeat(4)}`,
    )
    const batch = await next
    expect((await request(port, { method: 'GET' })).status).toBe(405)
    batch.end('delivered')
    const answers = (await connection.closed).split(/(?=HTTP\/1\.1 )/)
    expect(answers.map(parseRawResponse)).toMatchObject([
      { status: 200, body: { events: 1 } },
      { status: 413, body: { code: 'BODY_TOO_LARGE' } },
    ])
    expect(context.records()).toEqual([[{ a: 1 }]])
  })

  it.each([
    ['one request', 1],
    ['two requests, the second answer queued behind the first', 2],
  ])(
    'counts no response for an answer it could not write, its client having reset the connection: %s',
    async (_, n) => {
      // The source skips an answer whose connection is gone, but counted it in responses anyway.
      const { source, context, port } = await start()
      const receipts: Promise<unknown>[] = []
      const send = context.send.bind(context)
      context.send = async (records, options) => {
        const receipt = await send(records, options)
        receipts.push(receipt.status)
        return receipt
      }
      const connection = await open(port)
      const post = (body: string) =>
        `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`
      connection.write(post('[{"a":1}]').repeat(n))
      while (context.batches.length < n) await new Promise((r) => setImmediate(r))
      connection.reset()
      while (source.counters.openConnections > 0) await new Promise((r) => setImmediate(r))
      for (const batch of context.batches) batch.end('delivered')
      await Promise.all(receipts)
      // What the source does once a batch's status resolved takes no I/O: done before this turn ends.
      await new Promise((r) => setImmediate(r))
      expect(source.counters.requests).toBe(n)
      expect(source.counters.responses).toEqual({})
      // A client that stays gets its answer counted as ever.
      expect(await served(context, port)).toBe(200)
      expect(source.counters.responses).toEqual({ 200: 1 })
    },
  )

  it.each([
    [
      'body',
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a"',
      true,
    ],
    ['headers', 'POST / HTTP/1.1\r\nHost: x\r\nContent-Ty', false],
  ])(
    'writes the answers owed to a client that half-closed in the %s of a request waiting its turn, once Node read its connection again',
    async (_, cut, refused) => {
      // The source holds a connection while a request waits for room, but Node reads it again once
      // an answer drains there: the client's half-close then came while the request it cut off in
      // its body still waited its turn, and the connection was closed at once, losing every answer
      // owed (the events of the request waiting for room went downstream once room came: the client
      // sent them again).
      const { context, port } = await start()
      const post = (body: string) =>
        `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`
      const connection = await open(port)
      connection.write(post('[{"a":1}]') + post('[{"a":2}]'))
      while (context.batches.length < 2) await new Promise((r) => setImmediate(r))
      let room = (): void => {}
      context.gate = new Promise((resolve) => {
        room = resolve
      })
      connection.end(post('[{"a":3}]') + cut)
      while (context.sendOptions.length < 3) await new Promise((r) => setImmediate(r))
      // The second answer, queued behind the first, drains to Node's buffer: Node reads the
      // connection again, and the client's FIN reaches the server a round trip later.
      context.batches[1]!.end('delivered')
      expect((await request(port, { method: 'GET' })).status).toBe(405)
      context.onBatch = (batch) => batch.end('delivered')
      context.gate = undefined
      room()
      context.batches[0]!.end('delivered')
      const answers = (await connection.closed).split(/(?=HTTP\/1\.1 )/)
      expect(answers.map(parseRawResponse)).toMatchObject([
        { status: 200, body: { events: 1 } },
        { status: 200, body: { events: 1 } },
        { status: 200, body: { events: 1 } },
        ...(refused
          ? [{ status: 400, body: { code: 'BAD_REQUEST', error: expect.stringMatching(/cut off/) } }]
          : []),
      ])
      expect(context.records()).toEqual([[{ a: 1 }], [{ a: 2 }], [{ a: 3 }]])
    },
  )

  it('cuts off a slow request found late while Node read its connection again, though the source still held it', async () => {
    // Node undoes the source's hold on a connection once an answer drains there: the request read
    // meanwhile, still unfinished when Node's check finds it late, is the client's slowness and
    // gets no more time than requestTimeoutMs (it used to wait for the hold's end, then get it afresh).
    const { source, context, port } = await start({ headersTimeoutMs: 200, requestTimeoutMs: 200 })
    const post = (body: string) =>
      `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`
    const connection = await open(port)
    connection.write(post('[{"z":1}]') + post('[{"z":2}]'))
    while (context.batches.length < 2) await new Promise((r) => setImmediate(r))
    // No room downstream now: the next request waits, the one behind it waits unread.
    let room = (): void => {}
    context.gate = new Promise((resolve) => {
      room = resolve
    })
    connection.write(`${post('[{"a":1}]')}${post('[{"w":1}]')}POST / HTTP/1.1\r\nHost: x\r\n`)
    while (source.counters.requests < 4) await new Promise((r) => setImmediate(r))
    // The second request's answer, queued behind the first's, drains to Node's buffer: Node
    // reads the connection again.
    context.batches[1]!.end('delivered')
    while (source.counters.responses[200] !== 1) await new Promise((r) => setImmediate(r))
    connection.trickle('X-Slow: 1\r\n', 50)
    let closed = false
    void connection.closed.then(() => {
      closed = true
    })
    // Ten times requestTimeoutMs, with Node checking every 20 ms: a cut-off would have come.
    for (let i = 0; i < 100 && !closed; i++) await new Promise((r) => setTimeout(r, 20))
    const waiting = context.batches.length
    room()
    expect(closed).toBe(true)
    // Cut off while the request before it still waited for room.
    expect(waiting).toBe(2)
  })

  it('answers 413 TOO_MANY_EVENTS past maxEventsPerRequest and sends nothing', async () => {
    const { context, port } = await start({ maxEventsPerRequest: 2 })
    const answer = await request(port, json([{ n: 1 }, { n: 2 }, { n: 3 }]))
    expect(answer.status).toBe(413)
    expect(answer.body).toMatchObject({ code: 'TOO_MANY_EVENTS', events: 3, limit: 2, componentId: 'in' })
    expect(context.batches).toEqual([])
  })

  it.each([
    // Line by line, up to the limit: a malformed line within it is found as such.
    ['NDJSON', 'application/x-ndjson', Array.from({ length: 5000 }, () => '{"n":1}').join('\n'), 2],
    ['a JSON array', 'application/json', `[${Array.from({ length: 5000 }, () => '{"n":1}').join(',')}]`, 0],
    ['NDJSON sniffed', undefined, Array.from({ length: 5000 }, () => '{"n":1}').join('\n'), 0],
  ])('refuses %s of too many events, parsing no more events than the limit', async (_, type, body, most) => {
    const { context, port } = await start({ maxEventsPerRequest: 2 })
    const parsed: string[] = []
    const parse = JSON.parse
    // Every text the source parses; the test's own client parses the answer, which is not a record.
    JSON.parse = ((text: string, reviver?: never) => {
      if (typeof text === 'string' && text.startsWith('{"n"')) parsed.push(text)
      if (typeof text === 'string' && text.startsWith('[{"n"')) parsed.push(text)
      return parse(text, reviver)
    }) as typeof JSON.parse
    let answer: Awaited<ReturnType<typeof request>>
    try {
      answer = await request(port, { headers: type === undefined ? {} : { 'content-type': type }, body })
    } finally {
      JSON.parse = parse
    }
    expect(answer.status).toBe(413)
    expect(answer.body).toMatchObject({ code: 'TOO_MANY_EVENTS', events: 5000, limit: 2 })
    expect(parsed.length).toBe(most)
    expect(context.batches).toEqual([])
  })

  it('answers TOO_DEEP, where it is, for a body with more braces than maxEventsPerRequest', async () => {
    const { context, port } = await start({ maxEventsPerRequest: 2, maxDepth: 3 })
    const answer = await request(port, json([{ a: { b: { c: {} } } }, { d: 1 }]))
    expect(answer.status).toBe(400)
    // '[{"a":{"b":{': the third brace is the fourth level.
    expect(answer.body).toMatchObject({ code: 'TOO_DEEP', position: 11, limit: 3 })
    expect(context.batches).toEqual([])
  })

  it('refuses JSON sent as application/x-ndjson as malformed at its first line, however many lines it has', async () => {
    const { context, port } = await start({ maxEventsPerRequest: 2 })
    const body = JSON.stringify([{ n: 1 }, { n: 2 }, { n: 3 }], null, 2)
    const answer = await request(port, { headers: { 'content-type': 'application/x-ndjson' }, body })
    expect(answer.status).toBe(400)
    expect(answer.body).toMatchObject({ code: 'MALFORMED_BODY', line: 1 })
    expect(context.batches).toEqual([])
  })

  it('refuses NDJSON sent as application/json as malformed, not as too many events', async () => {
    const { context, port } = await start({ maxEventsPerRequest: 2 })
    const body = Array.from({ length: 5 }, (_, n) => JSON.stringify({ n })).join('\n')
    const answer = await request(port, { headers: { 'content-type': 'application/json' }, body })
    expect(answer.status).toBe(400)
    expect(answer.body).toMatchObject({ code: 'MALFORMED_BODY', line: 2 })
    expect(context.batches).toEqual([])
  })

  it.each([
    ['objects nested in each event', 'application/json', '[{"a":{"b":{"c":{}}}},{"d":[{},{}]}]', 2],
    ['braces inside strings', 'application/x-ndjson', '{"m":"{{{{ \\" {{{"}\n{"m":"}}}{{{"}', 2],
    ['one object over several lines, sniffed', undefined, '{\n "a": {"b": {}},\n "c": [{}, {}]\n}', 1],
  ])(
    'counts only the events, not every brace, against maxEventsPerRequest: %s',
    async (_, type, body, events) => {
      const { context, port } = await start({ maxEventsPerRequest: 2 })
      context.onBatch = (batch) => batch.end('delivered')
      const answer = await request(port, {
        headers: type === undefined ? {} : { 'content-type': type },
        body,
      })
      expect(answer.status).toBe(200)
      expect(context.batches.map((batch) => batch.length)).toEqual([events])
    },
  )

  it('answers a request that is not HTTP with 400 BAD_REQUEST', async () => {
    const { source, port } = await start()
    const garbage = await open(port)
    garbage.write('HELLO\r\n\r\n')
    expect(parseRawResponse(await garbage.closed)).toMatchObject({
      status: 400,
      body: { code: 'BAD_REQUEST' },
    })
    expect(source.counters.refused.BAD_REQUEST).toBe(1)
  })

  it('answers a CONNECT 405 METHOD_NOT_ALLOWED as data, and counts it, where Node closed the connection without a word', async () => {
    const { source, context, port } = await start()
    const tunnel = await open(port)
    tunnel.end(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`)
    const text = await tunnel.closed
    expect(parseRawResponse(text)).toMatchObject({
      status: 405,
      body: { code: 'METHOD_NOT_ALLOWED', componentId: 'in', failure: { code: 'METHOD_NOT_ALLOWED' } },
    })
    expect(text).toMatch(/\r\nAllow: POST\r\n/)
    expect(source.counters).toMatchObject({
      requests: 1,
      responses: { 405: 1 },
      refused: { METHOD_NOT_ALLOWED: 1 },
    })
    expect(context.batches).toEqual([])
  })

  it('reads what a client sends after refusing its CONNECT only so far: one that never stops writing is closed', async () => {
    // Read on for 2 s whatever it wrote, a client could make the source read and discard as much
    // as the link carries in that time, where any other refusal reads at most 4 MiB.
    const { source, port } = await start()
    const socket = connect({ port, host: '127.0.0.1' })
    socket.on('error', () => {})
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
    const write = (data: string | Buffer) =>
      new Promise<boolean>((resolve) => socket.write(data, (error) => resolve(error == null)))
    await write(`CONNECT x:1 HTTP/1.1\r\nHost: x:1\r\n\r\n`)
    // 64 MiB: the source, reading on no further than 4 MiB, closes before the client could write
    // it all (what the connection's buffers hold is far less).
    const piece = Buffer.alloc(1 << 20, 0x78)
    let written = 0
    while (written < 64 && !socket.destroyed && (await write(piece))) written++
    expect(written).toBeLessThan(64)
    await closed
    while (source.counters.openConnections > 0) await new Promise((r) => setImmediate(r))
    expect(source.counters.refused.METHOD_NOT_ALLOWED).toBe(1)
  })

  it('answers an HTTP/1.1 request without Host itself, 400 BAD_REQUEST as data, and counts it', async () => {
    const { source, context, port } = await start()
    const client = await open(port)
    client.write('POST / HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a":1}]')
    expect(parseRawResponse(await client.closed)).toMatchObject({
      status: 400,
      body: { code: 'BAD_REQUEST', componentId: 'in', error: expect.stringContaining('Host') },
    })
    expect(source.counters).toMatchObject({ requests: 1, responses: { 400: 1 }, refused: { BAD_REQUEST: 1 } })
    expect(context.batches).toHaveLength(0)
  })

  it('serves a request whose Expect it cannot meet as if it had none, rather than let Node answer 417 without a body', async () => {
    const { source, context, port } = await start()
    context.onBatch = (batch) => batch.end('delivered')
    const client = await open(port)
    client.write(
      'POST / HTTP/1.1\r\nHost: x\r\nExpect: something-else\r\nConnection: close\r\n' +
        'Content-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a":1}]',
    )
    expect(parseRawResponse(await client.closed)).toMatchObject({
      status: 200,
      body: { status: 'delivered', events: 1 },
    })
    expect(source.counters).toMatchObject({ requests: 1, responses: { 200: 1 } })
  })

  const post =
    'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a":1}]'

  /**
   * Opens a connection, sends {@link post} and waits for its batch (its answer is then owed),
   * then writes `garbage` and waits for Node's parse error of it: how the tests of a request Node
   * cannot parse behind an owed answer begin.
   */
  const garbageBehindOwed = async (
    context: FakeSourceContext,
    port: number,
    garbage: string,
  ): Promise<{ client: RawConnection; batch: EventArray }> => {
    let server: Server | undefined
    const seen = (message: unknown): void => {
      server = (message as { server: Server }).server
    }
    subscribe('http.server.request.start', seen)
    try {
      const client = await open(port)
      const next = context.nextBatch()
      client.write(post)
      const batch = await next
      const failed = new Promise<void>((resolve) => server?.once('clientError', () => resolve()))
      client.write(garbage)
      await failed
      return { client, batch }
    } finally {
      unsubscribe('http.server.request.start', seen)
    }
  }

  it.each([
    ['a bad request line', 'HELLO\r\n\r\n'],
    ['a header with a space in its name', 'POST / HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n'],
    [
      'two Content-Length headers',
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n[]',
    ],
  ])('answers a request in the pipeline, then 400, when its connection then sends %s', async (_, garbage) => {
    // Node's parse error came while the request's answer was owed: the connection was destroyed,
    // and its client, without the answer, sent again what was delivered.
    const { source, context, port } = await start()
    const { client, batch } = await garbageBehindOwed(context, port, garbage)
    batch.end('delivered')
    const answers = (await client.closed).split(/(?=HTTP\/1\.1 )/).map(parseRawResponse)
    expect(answers).toMatchObject([
      { status: 200, body: { status: 'delivered', events: 1 } },
      { status: 400, body: { code: 'BAD_REQUEST', error: 'the request is not valid HTTP/1.1' } },
    ])
    expect(context.records()).toEqual([[{ a: 1 }]])
    expect(source.counters).toMatchObject({
      requests: 1,
      responses: { 200: 1, 400: 1 },
      refused: { BAD_REQUEST: 1 },
    })
  })

  it('answers a request in the pipeline, then 400, when garbage follows and the answer takes longer than requestTimeoutMs', async () => {
    // Node's check finds the connection late once it failed to parse: it must not close the
    // connection before the answer owed.
    const { source, context, port } = await start({ headersTimeoutMs: 300, requestTimeoutMs: 300 })
    const errors: string[] = []
    let reported = (): void => {}
    const seen = (message: unknown): void => {
      const server = (message as { server: Server }).server
      if (server.listenerCount('clientError') > 1) return
      server.on('clientError', (error: NodeJS.ErrnoException) => {
        errors.push(error.code ?? '')
        reported()
      })
    }
    subscribe('http.server.request.start', seen)
    try {
      const client = await open(port)
      const next = context.nextBatch()
      client.write(post)
      const batch = await next
      client.write('HELLO\r\n\r\n')
      while (!errors.includes('ERR_HTTP_REQUEST_TIMEOUT'))
        await new Promise<void>((resolve) => {
          reported = resolve
        })
      expect(errors[0]).toBe('HPE_INVALID_METHOD')
      batch.end('delivered')
      const answers = (await client.closed).split(/(?=HTTP\/1\.1 )/).map(parseRawResponse)
      expect(answers).toMatchObject([
        { status: 200, body: { status: 'delivered', events: 1 } },
        { status: 400, body: { code: 'BAD_REQUEST' } },
      ])
      expect(source.counters).toMatchObject({ requests: 1, responses: { 200: 1, 400: 1 } })
    } finally {
      unsubscribe('http.server.request.start', seen)
    }
  })

  it('answers a request in the pipeline, then 400, when garbage follows twice', async () => {
    const { source, context, port } = await start()
    const { client, batch } = await garbageBehindOwed(context, port, 'HELLO\r\n\r\n')
    client.write('MORE GARBAGE\r\n\r\n')
    batch.end('delivered')
    const answers = (await client.closed).split(/(?=HTTP\/1\.1 )/).map(parseRawResponse)
    expect(answers).toMatchObject([
      { status: 200, body: { status: 'delivered', events: 1 } },
      { status: 400, body: { code: 'BAD_REQUEST' } },
    ])
    expect(source.counters).toMatchObject({ requests: 1, responses: { 200: 1, 400: 1 } })
  })

  it('answers a request in the pipeline and closes, with no 400 after, when garbage follows and the stop came', async () => {
    const { source, context, port } = await start()
    const { client, batch } = await garbageBehindOwed(context, port, 'HELLO\r\n\r\n')
    context.stop()
    batch.end('delivered')
    // The answer owed closes the connection itself (the stop): nothing may follow it.
    const answers = (await client.closed).split(/(?=HTTP\/1\.1 )/).map(parseRawResponse)
    expect(answers).toMatchObject([{ status: 200, body: { status: 'delivered', events: 1 } }])
    expect(source.counters).toMatchObject({ requests: 1, responses: { 200: 1 } })
  })

  it('answers a request whose body garbage follows at once, then 400, and closes', async () => {
    const { source, context, port } = await start()
    const client = await open(port)
    context.onBatch = (batch) => batch.end('delivered')
    client.write(`${post}HELLO\r\n\r\n`)
    const answers = (await client.closed).split(/(?=HTTP\/1\.1 )/).map(parseRawResponse)
    expect(answers).toMatchObject([
      { status: 200, body: { status: 'delivered', events: 1 } },
      { status: 400, body: { code: 'BAD_REQUEST' } },
    ])
    expect(context.records()).toEqual([[{ a: 1 }]])
    // The source still serves others.
    expect((await request(port, json([{ n: 1 }]))).status).toBe(200)
    expect(context.records()).toEqual([[{ a: 1 }], [{ n: 1 }]])
    expect(source.counters).toMatchObject({ requests: 2, responses: { 200: 2, 400: 1 } })
  })

  it('answers a request in the pipeline and one waiting its turn in order, then 400, when garbage follows them', async () => {
    const { source, context, port } = await start()
    let failed = (): void => {}
    const parsed = new Promise<void>((resolve) => {
      failed = resolve
    })
    const seen = (message: unknown): void => {
      const server = (message as { server: Server }).server
      if (server.listeners('clientError').includes(failed)) return
      server.once('clientError', failed)
    }
    subscribe('http.server.request.start', seen)
    try {
      let room = (): void => {}
      context.gate = new Promise((resolve) => {
        room = resolve
      })
      const client = await open(port)
      // The second waits its turn behind the first, whose events wait for room downstream.
      client.write(`${post}${post.replace('"a"', '"b"')}POST / HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n`)
      await parsed
      let batches = 0
      context.onBatch = (batch) => batch.end(++batches === 1 ? 'delivered' : 'errored')
      room()
      const answers = (await client.closed).split(/(?=HTTP\/1\.1 )/).map(parseRawResponse)
      expect(answers).toMatchObject([
        { status: 200, body: { status: 'delivered', events: 1 } },
        { status: 503 },
        { status: 400, body: { code: 'BAD_REQUEST' } },
      ])
      expect(context.records()).toEqual([[{ a: 1 }], [{ b: 1 }]])
      expect(source.counters).toMatchObject({ requests: 2, responses: { 200: 1, 503: 1, 400: 1 } })
    } finally {
      unsubscribe('http.server.request.start', seen)
    }
  })

  it('answers a request in the pipeline, then 400 for the one whose turn came, when that one sends a malformed chunk', async () => {
    // The first's events were accepted downstream (its turn ended) and its answer was still owed
    // when the second, being read, sent a malformed chunk: Node's parse error destroyed the
    // connection, the first was stopped though its events were delivered, and its client, with
    // no answer, sent them again.
    const { source, context, port } = await start()
    const { client, batch } = await garbageBehindOwed(
      context,
      port,
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n[{"\r\nZZ\r\n',
    )
    batch.end('delivered')
    const answers = (await client.closed).split(/(?=HTTP\/1\.1 )/).map(parseRawResponse)
    expect(answers).toMatchObject([
      { status: 200, body: { status: 'delivered', events: 1 } },
      { status: 400, body: { code: 'BAD_REQUEST', error: 'the request is not valid HTTP/1.1' } },
    ])
    expect(context.records()).toEqual([[{ a: 1 }]])
    expect(source.counters).toMatchObject({
      requests: 2,
      responses: { 200: 1, 400: 1 },
      refused: { BAD_REQUEST: 1 },
    })
  })

  it('lets nothing into the pipeline of a request waiting its turn when a CONNECT behind it closes the connection', async () => {
    // Handed over for the CONNECT, the connection had lost Node's close listener, which ends the
    // requests waiting there: the second request was sent once the first was accepted, with no
    // connection left to answer it (its client, without an answer, sends it again).
    const { context, port } = await start()
    let room = (): void => {}
    context.gate = new Promise((resolve) => {
      room = resolve
    })
    const connection = await open(port)
    connection.write(`${post}${post.replace('"a"', '"b"')}CONNECT x:1 HTTP/1.1\r\nHost: x:1\r\n\r\n`)
    expect(await connection.closed).toBe('')
    context.onBatch = (batch) => batch.end('delivered')
    room()
    // The source still serves others (a request sent after the first was accepted), and the second
    // request never came.
    expect((await request(port, json([{ n: 1 }]))).status).toBe(200)
    expect(context.records()).toEqual([[{ a: 1 }], [{ n: 1 }]])
  })

  it('answers headers past the size limit with 431 HEADERS_TOO_LARGE', async () => {
    const { source, port } = await start()
    const big = await open(port)
    big.write(`POST / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(32 * 1024)}\r\n\r\n`)
    expect(parseRawResponse(await big.closed)).toMatchObject({
      status: 431,
      body: { code: 'HEADERS_TOO_LARGE', componentId: 'in' },
    })
    expect(source.counters.refused.HEADERS_TOO_LARGE).toBe(1)
  })

  it('refuses a maxBodyBytes past the longest string, whose bodies could not be decoded', () => {
    // A body of 600 MiB under maxBodyBytes 2^30 made decoding throw ERR_STRING_TOO_LONG in the
    // request's 'end' handler: an uncaught exception, and the request never answered.
    const longest = constants.MAX_STRING_LENGTH
    expect(httpServer({ maxBodyBytes: 2 ** 30 }).validate()).toEqual([
      {
        field: 'maxBodyBytes',
        expected: `an integer from 1 to ${longest}`,
        got: String(2 ** 30),
        message: `must be an integer from 1 to ${longest}, got ${2 ** 30}`,
      },
    ])
    expect(httpServer({ maxBodyBytes: longest }).validate()).toEqual([])
  })

  it('refuses a keepAliveTimeoutMs longer than a socket timer holds once Node adds its second', () => {
    // Node arms keepAliveTimeoutMs + 1000 on the socket; past 2^31 - 1 it truncates it with a
    // TimeoutOverflowWarning on the process.
    const longest = MAX_TIMER_MS - 1000
    expect(httpServer({ keepAliveTimeoutMs: longest }).validate()).toEqual([])
    expect(httpServer({ keepAliveTimeoutMs: longest + 1 }).validate()).toEqual([
      expect.objectContaining({ field: 'keepAliveTimeoutMs', got: String(longest + 1) }),
    ])
  })

  it('reports bad limits by field', () => {
    const issues = httpServer({
      headersTimeoutMs: 0,
      requestTimeoutMs: -1,
      keepAliveTimeoutMs: 1.5,
      maxConnections: Number.NaN,
      maxEventsPerRequest: 0,
    }).validate()
    expect(issues.map((i) => i.field)).toEqual([
      'headersTimeoutMs',
      'requestTimeoutMs',
      'keepAliveTimeoutMs',
      'maxConnections',
      'maxEventsPerRequest',
    ])
    expect(httpServer({ headersTimeoutMs: 2000, requestTimeoutMs: 1000 }).validate()).toEqual([
      {
        field: 'headersTimeoutMs',
        expected: 'at most requestTimeoutMs (1000)',
        got: '2000',
        message: 'must be at most requestTimeoutMs (1000), got 2000',
      },
    ])
  })
})

describe('httpServer: Expect: 100-continue', () => {
  // curl sends `Expect: 100-continue` with any body past 1 MB and waits (a second) for `100
  // Continue` before sending it; other clients wait for good.
  const connections: RawConnection[] = []
  afterEach(() => {
    for (const c of connections.splice(0)) c.destroy()
  })
  const open = async (port: number): Promise<RawConnection> => {
    const c = new RawConnection(port)
    connections.push(c)
    await c.connected
    return c
  }
  const answered = /\r\n\r\n[\s\S]*\n$/

  it.each([
    ['a path it does not serve', 'POST /elsewhere', 'Content-Length: 9\r\n', 404, 'NOT_FOUND'],
    ['a method other than POST', 'PUT /', 'Content-Length: 9\r\n', 405, 'METHOD_NOT_ALLOWED'],
    ['no bearer token', 'POST /', 'Content-Length: 9\r\n', 401, 'UNAUTHORIZED'],
    ['a body past maxBodyBytes', 'POST /', 'Content-Length: 100000000\r\n', 413, 'BODY_TOO_LARGE'],
    [
      'a compressed body',
      'POST /',
      'Content-Length: 9\r\nContent-Encoding: gzip\r\n',
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    ],
  ] as const)(
    'refuses a request of %s with its answer in place of 100 Continue, so the client never sends the body',
    async (_, line, headers, status, code) => {
      const { source, context, port } = await start({ authToken: code === 'UNAUTHORIZED' ? 't' : undefined })
      const client = await open(port)
      client.write(
        `${line} HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Type: application/json\r\n` +
          `${code === 'UNAUTHORIZED' ? '' : 'Authorization: Bearer t\r\n'}${headers}\r\n`,
      )
      const text = await client.until(answered)
      expect(text).not.toContain('100 Continue')
      expect(parseRawResponse(text)).toMatchObject({ status, body: { code, componentId: 'in' } })
      // The answer closes the connection: the client, which sent nothing more, is not reset.
      expect(await client.closed).toBe(text)
      expect(source.counters).toMatchObject({ requests: 1, responses: { [status]: 1 } })
      expect(context.batches).toHaveLength(0)
    },
  )

  it('answers 100 Continue to a request it will read, then serves its body', async () => {
    const { context, port } = await start()
    context.onBatch = (batch) => batch.end('delivered')
    const client = await open(port)
    client.write(
      'POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Type: application/json\r\n' +
        'Content-Length: 9\r\nConnection: close\r\n\r\n',
    )
    expect(await client.until(/\r\n\r\n/)).toBe('HTTP/1.1 100 Continue\r\n\r\n')
    client.write('[{"a":1}]')
    const text = await client.closed
    expect(parseRawResponse(text.slice('HTTP/1.1 100 Continue\r\n\r\n'.length))).toMatchObject({
      status: 200,
      body: { status: 'delivered', events: 1 },
    })
    expect(context.records()).toEqual([[{ a: 1 }]])
  })

  it.each([
    ['whose batch is pending', false],
    ['that waits for room downstream', true],
  ])(
    'does not count against requestTimeoutMs the time a request with Expect: 100-continue waits behind one %s, only the time after its 100 Continue',
    async (_, noRoom) => {
      // Its 100 Continue is written after the answers owed before it: its client waits, sending
      // nothing. Found late meanwhile, it was cut off, and the request before it (its events in
      // the pipeline) was stopped and lost its answer with the connection.
      const { source, context, port } = await start({ headersTimeoutMs: 200, requestTimeoutMs: 200 })
      let room = (): void => {}
      if (noRoom)
        context.gate = new Promise((resolve) => {
          room = resolve
        })
      /** Past requestTimeoutMs, as the server measures it: a slowloris opened now is cut off. */
      const pastTheLimit = async (): Promise<void> => {
        const slowloris = await open(port)
        slowloris.write('POST / HTTP/1.1\r\n')
        slowloris.trickle('X: 1\r\n', 20)
        expect(parseRawResponse(await slowloris.closed).status).toBe(408)
      }
      const next = context.nextBatch()
      const client = await open(port)
      client.write(
        'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a":1}]' +
          'POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Type: application/json\r\n' +
          'Content-Length: 9\r\nConnection: close\r\n\r\n',
      )
      while (source.counters.requests < 2) await new Promise((r) => setImmediate(r))
      await pastTheLimit()
      room()
      const first = await next
      await pastTheLimit()
      expect(client.received).toBe('')
      first.end('delivered')
      const continued = await client.until(/HTTP\/1\.1 100 Continue\r\n\r\n$/)
      expect(continued.split(/(?=HTTP\/1\.1 )/).map((answer) => answer.slice(0, 12))).toEqual([
        'HTTP/1.1 200',
        'HTTP/1.1 100',
      ])
      context.onBatch = (batch) => batch.end('delivered')
      client.write('[{"a":2}]')
      const answers = (await client.closed)
        .split(/(?=HTTP\/1\.1 )/)
        .filter((a) => !a.startsWith('HTTP/1.1 100 '))
      expect(answers.map(parseRawResponse)).toMatchObject([
        { status: 200, body: { events: 1 } },
        { status: 200, body: { events: 1 } },
      ])
      expect(context.records()).toEqual([[{ a: 1 }], [{ a: 2 }]])
    },
  )

  it('answers in order a request refused with Expect: 100-continue behind one whose batch is pending, however long that takes', async () => {
    // Its refusal, in place of 100 Continue, is written after the answer before it: found late
    // meanwhile, it was cut off with the connection, and so was that answer.
    const { source, context, port } = await start({ headersTimeoutMs: 200, requestTimeoutMs: 200 })
    const next = context.nextBatch()
    const client = await open(port)
    client.write(
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a":1}]' +
        'POST /elsewhere HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\n',
    )
    const first = await next
    while (source.counters.requests < 2) await new Promise((r) => setImmediate(r))
    const slowloris = await open(port)
    slowloris.write('POST / HTTP/1.1\r\n')
    slowloris.trickle('X: 1\r\n', 20)
    expect(parseRawResponse(await slowloris.closed).status).toBe(408)
    first.end('delivered')
    const answers = (await client.closed).split(/(?=HTTP\/1\.1 )/)
    expect(answers.map(parseRawResponse)).toMatchObject([
      { status: 200, body: { events: 1 } },
      { status: 404, body: { code: 'NOT_FOUND' } },
    ])
  })

  it('gives a pipelined request with Expect: 100-continue requestTimeoutMs from its 100 Continue when that came before the limit', async () => {
    // Written after part of requestTimeoutMs, the 100 Continue left its client only the rest: Node's
    // check, counting from the request's headers, cut it off then, its body on the way.
    const { source, context, port } = await start({ headersTimeoutMs: 300, requestTimeoutMs: 500 })
    /** headersTimeoutMs from now, as the server measures it: a slowloris opened now is cut off then. */
    const headersTimeout = async (): Promise<void> => {
      const slowloris = await open(port)
      slowloris.write('POST / HTTP/1.1\r\n')
      slowloris.trickle('X: 1\r\n', 20)
      expect(parseRawResponse(await slowloris.closed).status).toBe(408)
    }
    const next = context.nextBatch()
    const client = await open(port)
    client.write(
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a":1}]' +
        'POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Type: application/json\r\n' +
        'Content-Length: 9\r\nConnection: close\r\n\r\n',
    )
    const first = await next
    while (source.counters.requests < 2) await new Promise((r) => setImmediate(r))
    await headersTimeout()
    first.end('delivered')
    await client.until(/HTTP\/1\.1 100 Continue\r\n\r\n$/)
    // Past requestTimeoutMs since its headers, within it since its 100 Continue.
    await headersTimeout()
    context.onBatch = (batch) => batch.end('delivered')
    client.write('[{"a":2}]')
    const answers = (await client.closed)
      .split(/(?=HTTP\/1\.1 )/)
      .filter((a) => !a.startsWith('HTTP/1.1 100 '))
    expect(answers.map(parseRawResponse)).toMatchObject([
      { status: 200, body: { events: 1 } },
      { status: 200, body: { events: 1 } },
    ])
    expect(context.records()).toEqual([[{ a: 1 }], [{ a: 2 }]])
  })

  it('still cuts off a pipelined request with Expect: 100-continue whose client sends no body within requestTimeoutMs of its 100 Continue', async () => {
    const { source, context, port } = await start({ headersTimeoutMs: 200, requestTimeoutMs: 200 })
    const next = context.nextBatch()
    const client = await open(port)
    client.write(
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a":1}]' +
        'POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Type: application/json\r\n' +
        'Content-Length: 9\r\n\r\n',
    )
    const first = await next
    while (source.counters.requests < 2) await new Promise((r) => setImmediate(r))
    const slowloris = await open(port)
    slowloris.write('POST / HTTP/1.1\r\n')
    slowloris.trickle('X: 1\r\n', 20)
    expect(parseRawResponse(await slowloris.closed).status).toBe(408)
    first.end('delivered')
    // Its timer starts with the 100 Continue: Node's own check reports a request only once.
    const text = await client.closed
    const [answer, go] = text.split(/(?=HTTP\/1\.1 )/)
    expect(parseRawResponse(answer!)).toMatchObject({ status: 200, body: { events: 1 } })
    expect(go).toBe('HTTP/1.1 100 Continue\r\n\r\n')
    expect(context.records()).toEqual([[{ a: 1 }]])
  })

  it('answers a health check sent with Expect: 100-continue on a connection it keeps, serving what follows', async () => {
    // Answered without 100 Continue, Node closed the connection behind the source's back: the
    // request pipelined after it was served, its events sent downstream, its answer lost.
    const { context, port } = await start()
    context.onBatch = (batch) => batch.end('delivered')
    const client = await open(port)
    client.write(
      'GET /health HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n' +
        'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n' +
        'Connection: close\r\n\r\n[{"a":1}]',
    )
    const text = await client.closed
    const answers = text.split(/(?=HTTP\/1\.1 )/).filter((a) => !a.startsWith('HTTP/1.1 100 '))
    expect(answers.map(parseRawResponse)).toMatchObject([
      { status: 200, body: { state: 'running' } },
      { status: 200, body: { status: 'delivered', events: 1 } },
    ])
    expect(context.records()).toEqual([[{ a: 1 }]])
  })
})

describe('httpServer: paths and content types', () => {
  it('ingests on the configured path only, query string aside', async () => {
    const { context, port } = await start({ path: '/events' })
    const next = context.nextBatch()
    const answer = request(port, { ...json([{ n: 1 }]), path: '/events?tenant=a' })
    ;(await next).end('delivered')
    expect((await answer).status).toBe(200)
    const elsewhere = await request(port, { ...json([{ n: 2 }]), path: '/' })
    expect(elsewhere.status).toBe(404)
    expect(elsewhere.body).toMatchObject({ code: 'NOT_FOUND', componentId: 'in' })
    expect(context.batches.length).toBe(1)
  })

  it.each(['/other', '/favicon.ico', '//', '/healthz'])('answers 404 on %s', async (path) => {
    const { port } = await start()
    const answer = await request(port, { ...json([{ n: 1 }]), path })
    expect(answer.status).toBe(404)
    expect(answer.body.code).toBe('NOT_FOUND')
  })

  it.each([
    '/events/',
    '/events/.',
    '/x/../events',
    '//events',
    '/Events',
    '/%45vents',
    '/events%2F',
    '/events%2f',
    '/%2Fevents',
    '/events;a=1',
    '/events#',
    '/%68ealth/',
    '*',
  ])(
    'matches the path exactly but for the spelling of percent-encodings, so a near miss (%s) gets 404 and nothing enters the pipeline',
    async (path) => {
      const { context, port } = await start({ path: '/events' })
      const connection = new RawConnection(port)
      connection.write(
        `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n` +
          `Connection: close\r\n\r\n[{"a":1}]`,
      )
      expect(parseRawResponse(await connection.closed)).toMatchObject({
        status: 404,
        body: { code: 'NOT_FOUND' },
      })
      expect(context.batches).toHaveLength(0)
    },
  )

  it.each([
    ['/%C3%A9v', '/%c3%a9v'],
    ['/%c3%a9v', '/%C3%A9v'],
    ['/%C3%a9v', '/%c3%A9v'],
    ['/~user/events', '/%7Euser/events'],
    ['/%7euser/events', '/~user/events'],
    ['/events', '/%65vents'],
  ])(
    'takes a path configured as %s when a client spells it %s (RFC 3986 6.2.2: the case of percent-encodings, unreserved characters encoded)',
    async (path, sent) => {
      // curl sends what it is given, `%C3` or `%c3`; fetch keeps the case of an encoding it is
      // given; older encoders write `~` as `%7E`. All name the same path: each got 404.
      const { context, port } = await start({ path })
      context.onBatch = (batch) => batch.end('delivered')
      const connection = new RawConnection(port)
      connection.write(
        `POST ${sent}?outcomes=1 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n` +
          `Connection: close\r\n\r\n[{"a":1}]`,
      )
      expect(parseRawResponse(await connection.closed)).toMatchObject({
        status: 200,
        body: { status: 'delivered', records: [{ index: 0, status: 'delivered' }] },
      })
      expect(context.records()).toEqual([[{ a: 1 }]])
    },
  )

  it('answers /health however a client spells it, and refuses a path that spells /health', async () => {
    const { port } = await start({ path: '/events' })
    const answer = await request(port, { method: 'GET', path: '/%68ealth' })
    expect(answer).toMatchObject({ status: 200, body: { state: 'running' } })
    for (const path of ['/%68ealth', '/heal%74h'])
      expect(
        httpServer({ path })
          .validate()
          .map((i) => i.field),
      ).toEqual(['path'])
  })

  it('takes a request whose target is in absolute form (RFC 9112 3.2.2), matching its path as any other', async () => {
    // `POST http://host:port/events HTTP/1.1`, as a client sends to a proxy: the server must take it,
    // and such a request got 404 whatever its path.
    const { context, port } = await start({ path: '/events' })
    context.onBatch = (batch) => batch.end('delivered')
    const send = async (target: string) => {
      const connection = new RawConnection(port)
      connection.write(
        `POST ${target} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n` +
          `Connection: close\r\n\r\n[{"a":1}]`,
      )
      return parseRawResponse(await connection.closed)
    }
    expect(await send(`http://127.0.0.1:${port}/events`)).toMatchObject({ status: 200, body: { events: 1 } })
    expect(await send(`HTTP://x/events?outcomes=1`)).toMatchObject({
      status: 200,
      body: { records: [{ index: 0, status: 'delivered' }] },
    })
    expect(await send('http://x/eventsX')).toMatchObject({ status: 404 })
    expect(await send('http://x/x/../events')).toMatchObject({ status: 404 })
    expect(await send('http://x')).toMatchObject({ status: 404 })
    expect(context.batches).toHaveLength(2)
  })

  it('answers GET /health with 200 and the state while running, 503 while stopping', async () => {
    const { source, context, port } = await start()
    const running = await request(port, { method: 'GET', path: '/health' })
    expect(running).toMatchObject({
      status: 200,
      body: { state: 'running', componentId: 'in', inFlight: 0 },
    })
    // A request in the pipeline shows as in flight; the stop turns health to 503.
    const next = context.nextBatch()
    const answer = request(port, json([{ n: 1 }]))
    const batch = await next
    expect((await request(port, { method: 'GET', path: '/health' })).body.inFlight).toBe(1)
    // The listener closes at the stop (and idle connections with it): ask on a connection that
    // is in the middle of its request headers when the stop begins.
    const settled = async (open: number) => {
      while (source.counters.openConnections !== open) await new Promise((r) => setImmediate(r))
    }
    await settled(1)
    const kept = new RawConnection(port)
    await kept.connected
    kept.write('GET /health HTTP/1.1\r\n')
    await settled(2)
    context.stop()
    kept.write('Host: x\r\n\r\n')
    const { status, body } = parseRawResponse(await kept.closed)
    expect(status).toBe(503)
    expect(body).toMatchObject({ state: 'stopping', componentId: 'in' })
    batch.end('delivered')
    expect((await answer).status).toBe(200)
  })

  it('answers HEAD /health without a body, and other methods with 405', async () => {
    const { port } = await start()
    const head = await request(port, { method: 'HEAD', path: '/health' })
    expect(head).toMatchObject({ status: 200, body: undefined })
    const answer = await request(port, { method: 'POST', path: '/health', body: '{}' })
    expect(answer.status).toBe(405)
    expect(answer.headers.allow).toBe('GET, HEAD')
  })

  it("sniffs other content types by default, so curl -d's form type works", async () => {
    const { context, port } = await start()
    const next = context.nextBatch()
    const answer = request(port, {
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: '[{"message":"hi"}]',
    })
    ;(await next).end('delivered')
    expect((await answer).status).toBe(200)
  })

  it.each([['application/x-www-form-urlencoded'], ['text/plain'], [undefined]])(
    "answers %s with 415 when unknownContentType is 'reject'",
    async (type) => {
      const { context, port } = await start({ unknownContentType: 'reject' })
      const headers: Record<string, string> = type === undefined ? {} : { 'content-type': type }
      const answer = await request(port, { headers, body: '[{"a":1}]' })
      expect(answer.status).toBe(415)
      expect(answer.body.code).toBe('UNSUPPORTED_MEDIA_TYPE')
      expect(answer.headers['accept-post']).toContain('application/json')
      expect(context.batches).toEqual([])
    },
  )

  it("still takes JSON and NDJSON by their types when unknownContentType is 'reject'", async () => {
    const { context, port } = await start({ unknownContentType: 'reject' })
    const next = context.nextBatch()
    const answer = request(port, { headers: { 'content-type': 'application/x-ndjson' }, body: '{"a":1}\n' })
    ;(await next).end('delivered')
    expect((await answer).status).toBe(200)
  })

  it('reports a bad path and content type policy by field', () => {
    expect(
      httpServer({ path: 'events', unknownContentType: 'guess' as 'reject' })
        .validate()
        .map((i) => i.field),
    ).toEqual(['path', 'unknownContentType'])
    expect(
      httpServer({ path: '/health' })
        .validate()
        .map((i) => i.field),
    ).toEqual(['path'])
    expect(
      httpServer({ path: '/a?b' })
        .validate()
        .map((i) => i.field),
    ).toEqual(['path'])
    expect(httpServer({ path: '/v1/events' }).validate()).toEqual([])
  })

  it('refuses a path no client sends as written (not ASCII), and takes it percent-encoded as clients send it', async () => {
    // Such a path was taken, and every request to it got 404: fetch sends '/%C3%A9v', and raw
    // bytes past ASCII in a request line are refused by Node's parser.
    for (const path of ['/év', '/事件', '/a\u00a0b'])
      expect(
        httpServer({ path })
          .validate()
          .map((i) => i.field),
      ).toEqual(['path'])
    const { context, port } = await start({ path: '/%C3%A9v' })
    context.onBatch = (batch) => batch.end('delivered')
    const answer = await fetch(`http://127.0.0.1:${port}/év`, { method: 'POST', body: '{"a":1}' })
    expect(answer.status).toBe(200)
    expect(context.records()).toEqual([[{ a: 1 }]])
  })
})

describe('httpServer: requests refused up front', () => {
  it.each([
    ['no Authorization header', undefined],
    ['a wrong token', 'Bearer wrong'],
    ['another scheme', 'Basic c2VjcmV0'],
  ])('answers 401 to %s', async (_, authorization) => {
    const { context, port } = await start({ authToken: 'secret' })
    const headers: Record<string, string> = authorization === undefined ? {} : { authorization }
    const answer = await request(port, { headers, body: '[{"a":1}]' })
    expect(answer.status).toBe(401)
    expect(answer.headers['www-authenticate']).toBe('Bearer')
    expect(context.batches).toEqual([])
  })

  it('accepts the right bearer token', async () => {
    const { context, port } = await start({ authToken: 'secret' })
    const next = context.nextBatch()
    const answer = request(port, { headers: { authorization: 'Bearer secret' }, body: '[{"a":1}]' })
    ;(await next).end('delivered')
    expect((await answer).status).toBe(200)
  })

  it('refuses a token no client could send: blank at either end, or not printable ASCII', async () => {
    // Such a token was accepted, and then every request got 401: the header is trimmed, and read as latin1.
    const { port } = await start({ authToken: 'secret ' })
    expect((await request(port, { headers: { authorization: 'Bearer secret ' }, body: '{}' })).status).toBe(
      401,
    )
    for (const token of [
      'secret ',
      ' secret',
      '\tsecret',
      'sec\nret',
      'sec\u0000ret',
      'sec\u007fret',
      's€cret',
    ]) {
      expect(
        httpServer({ authToken: token })
          .validate()
          .map((i) => [i.field, i.expected]),
      ).toEqual([
        [
          'authToken',
          'characters a header carries (tab, printable ASCII, latin1 letters), with no blank at either end (what a client can send after "Bearer ")',
        ],
      ])
    }
    expect(httpServer({ authToken: 'a.b-c_d~e+f/g=' }).validate()).toEqual([])
    expect(httpServer({ authToken: 'two words' }).validate()).toEqual([])
    // Latin1 letters and an inner tab are sent and read as they are: such a token matches.
    expect(httpServer({ authToken: 'two\twords' }).validate()).toEqual([])
    const latin1 = await start({ authToken: 'sécret' })
    expect(httpServer({ authToken: 'sécret' }).validate()).toEqual([])
    const next = latin1.context.nextBatch()
    const answer = request(latin1.port, { headers: { authorization: 'Bearer sécret' }, body: '[{"a":1}]' })
    ;(await next).end('delivered')
    expect((await answer).status).toBe(200)
  })

  it('accepts a token that starts or ends with a no-break space (latin1 0xa0), which a header carries', async () => {
    // validate() takes it, and a client sends it as it is; a trim of Unicode blanks dropped it from
    // the header, and every request got 401.
    for (const token of ['secret\u00a0', '\u00a0secret']) {
      expect(httpServer({ authToken: token }).validate()).toEqual([])
      const { context, port } = await start({ authToken: token })
      context.onBatch = (batch) => batch.end('delivered')
      const answer = await request(port, { headers: { authorization: `Bearer ${token}` }, body: '[{"a":1}]' })
      expect(answer.status).toBe(200)
      // The token's own no-break space is part of it: without it, the request is refused.
      const bare = await request(port, { headers: { authorization: 'Bearer secret' }, body: '[{"a":1}]' })
      expect(bare.status).toBe(401)
    }
  })

  it('answers 405 to other methods', async () => {
    const { port } = await start()
    const answer = await request(port, { method: 'GET' })
    expect(answer.status).toBe(405)
    expect(answer.headers.allow).toBe('POST')
  })
})

describe('httpServer: failures of the server itself', () => {
  /** The source's `node:http` server, as Node's diagnostics channel shows it on a request. */
  const serverOf = async (context: FakeSourceContext, port: number): Promise<Server> => {
    let server: Server | undefined
    const seen = (message: unknown): void => {
      server = (message as { server: Server }).server
    }
    subscribe('http.server.request.start', seen)
    try {
      context.onBatch = (batch) => batch.end('delivered')
      expect((await request(port, json([{ n: 0 }]))).status).toBe(200)
    } finally {
      unsubscribe('http.server.request.start', seen)
    }
    return server!
  }
  const acceptFailed = (code: string) =>
    Object.assign(new Error(`accept ${code}`), { code, errno: -24, syscall: 'accept' })

  it('warns, naming the component, when the server reports it failed to accept connections, at the 1st, 2nd, 4th … failure of a run, and serves on', async () => {
    const warnings: string[] = []
    const { source, context, port } = await start({ onWarning: (message) => warnings.push(message) })
    const server = await serverOf(context, port)
    server.emit('error', acceptFailed('EMFILE'))
    server.emit('error', acceptFailed('EMFILE'))
    server.emit('error', acceptFailed('EMFILE'))
    expect(warnings).toEqual([
      expect.stringMatching(/^http_server source 'in': accepting a connection failed: .*EMFILE/),
      expect.stringMatching(
        /^http_server source 'in': accepting connections failed 2 times in this run \(2 in all; said again at 4\).*EMFILE/,
      ),
    ])
    expect(source.counters.acceptFailures).toBe(3)
    // Accepting again: said once.
    expect((await request(port, json([{ n: 1 }]))).status).toBe(200)
    expect((await request(port, json([{ n: 2 }]))).status).toBe(200)
    expect(warnings).toHaveLength(3)
    expect(warnings[2]).toMatch(
      /^http_server source 'in': accepting connections again, after 3 failed in this run \(3 in all\)/,
    )
    server.emit('error', acceptFailed('ENFILE'))
    expect(warnings).toHaveLength(4)
    expect(warnings[3]).toMatch(/failed 4 times in this run.*ENFILE/)
  })

  it('warns thinly when failed accepts and accepted connections alternate, and at once of a run that begins a minute after the last failure', async () => {
    // Short of file descriptors, a server fails some accepts and takes the connections between:
    // each failure began a run, each connection ended it, and every one of them was warned.
    vi.useFakeTimers({ toFake: ['Date'] })
    try {
      const warnings: string[] = []
      const { source, context, port } = await start({ onWarning: (message) => warnings.push(message) })
      const server = await serverOf(context, port)
      for (let i = 1; i <= 16; i++) {
        server.emit('error', acceptFailed('ENFILE'))
        expect((await request(port, json([{ n: i }]))).status).toBe(200)
      }
      expect(source.counters.acceptFailures).toBe(16)
      const said = warnings.map(
        (w) =>
          /accepting (a connection failed|connections failed \d+|connections again, after \d+)/.exec(w)?.[1],
      )
      expect(said).toEqual([
        'a connection failed',
        'connections again, after 1',
        'connections failed 2',
        'connections again, after 2',
        'connections failed 4',
        'connections again, after 4',
        'connections failed 8',
        'connections again, after 8',
        'connections failed 16',
        'connections again, after 16',
      ])
      // Failures a minute apart are two runs: the new one is warned at once, the count begun anew.
      vi.setSystemTime(Date.now() + 60_001)
      server.emit('error', acceptFailed('ENFILE'))
      expect(warnings).toHaveLength(11)
      expect(warnings[10]).toMatch(/accepting a connection failed: .*ENFILE/)
      expect(source.counters.acceptFailures).toBe(17)
    } finally {
      vi.useRealTimers()
    }
  })

  it("warns of a server error that is not a failed accept as the server's, naming no client, and counts no accept failure", async () => {
    const warnings: string[] = []
    const { source, context, port } = await start({ onWarning: (message) => warnings.push(message) })
    const server = await serverOf(context, port)
    server.emit('error', Object.assign(new Error('something broke'), { code: 'EINVAL' }))
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toMatch(/^http_server source 'in': the server reported an error: .*something broke/)
    expect(warnings[0]).not.toMatch(/client|accept/)
    expect(source.counters.acceptFailures).toBe(0)
    expect((await request(port, json([{ n: 1 }]))).status).toBe(200)
    // No run of accept failures was begun: a connection accepted says nothing.
    expect(warnings).toHaveLength(1)
  })

  it('does not crash when onWarning throws on such a failure: the warning goes to process.emitWarning', async () => {
    const emitted = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    try {
      const { context, port } = await start({
        onWarning: () => {
          throw new Error('no log today')
        },
      })
      const server = await serverOf(context, port)
      server.emit('error', acceptFailed('EMFILE'))
      expect(emitted).toHaveBeenCalledWith(expect.stringMatching(/EMFILE.*no log today/), expect.anything())
      expect((await request(port, json([{ n: 1 }]))).status).toBe(200)
    } finally {
      emitted.mockRestore()
    }
  })

  it('warns through process.emitWarning with code ACKLINE_HTTP_SERVER when onWarning is unset', async () => {
    const emitted = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    try {
      const { context, port } = await start()
      const server = await serverOf(context, port)
      server.emit('error', acceptFailed('EMFILE'))
      expect(emitted).toHaveBeenCalledWith(expect.stringMatching(/^http_server source 'in'.*EMFILE/), {
        code: 'ACKLINE_HTTP_SERVER',
      })
    } finally {
      emitted.mockRestore()
    }
  })
})

describe('httpServer: lifecycle', () => {
  it('answers 503 to a request whose body arrives after the stop began', async () => {
    const { context, port, run } = await start()
    const answer = await new Promise<{ status: number; retryAfter: unknown }>((resolve, reject) => {
      const req = httpRequest(
        { host: '127.0.0.1', port, method: 'POST', headers: { expect: '100-continue' }, agent: false },
        (res) => {
          res.resume()
          resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'] })
        },
      )
      req.on('error', reject)
      // The server has the request once it said "continue": stop now, then send the body.
      req.on('continue', () => {
        context.stop()
        req.end('[{"a":1}]')
      })
      req.flushHeaders()
    })
    expect(answer).toEqual({ status: 503, retryAfter: '5' })
    expect(context.batches).toEqual([])
    await run
  })

  it('still cuts off, after the stop, a client that was sending its headers or its body when the stop began', async () => {
    const { source, context, port, run } = await start({ headersTimeoutMs: 200, requestTimeoutMs: 400 })
    const headers = new RawConnection(port)
    const body = new RawConnection(port)
    await Promise.all([headers.connected, body.connected])
    headers.write('POST / HTTP/1.1\r\nHost: x\r\n')
    body.write(
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n[{"a"',
    )
    await new Promise<void>((resolve) => {
      const wait = () => (source.counters.requests === 1 ? resolve() : setTimeout(wait, 5))
      wait()
    })
    context.stop()
    await run
    // Nothing of either is in the pipeline: left open, they would keep the process alive for good.
    const [cutHeaders, cutBody] = await Promise.all([headers.closed, body.closed])
    expect(parseRawResponse(cutHeaders).status).toBe(408)
    expect([408, 503]).toContain(parseRawResponse(cutBody).status)
    expect(context.batches).toEqual([])
  })

  it.each([
    ['waits for its body after its 100 Continue', 'Expect: 100-continue\r\n', ''],
    ['was sending its body', '', '[{"a"'],
  ])(
    'still cuts off, after the stop, a request behind one whose answer was owed when the cut came, whose client %s',
    async (_, expect100, partial) => {
      // The cut after the stop passed over a connection that owed an answer (its events in the
      // pipeline), and never came back: once that answer was written, the request behind it held
      // its connection, and the process, open for good.
      const { source, context, port, run } = await start({ headersTimeoutMs: 200, requestTimeoutMs: 200 })
      const next = context.nextBatch()
      const client = new RawConnection(port)
      const clock = new RawConnection(port)
      await Promise.all([client.connected, clock.connected])
      client.write(
        'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n[{"a":1}]' +
          `POST / HTTP/1.1\r\nHost: x\r\n${expect100}Content-Type: application/json\r\nContent-Length: 9\r\n\r\n${partial}`,
      )
      const first = await next
      while (source.counters.requests < 2) await new Promise((r) => setImmediate(r))
      // Its headers unfinished: the cut after the stop answers it 408, so it says when that came.
      clock.write('POST / HTTP/1.1\r\nHost: x\r\n')
      context.stop()
      await run
      expect(parseRawResponse(await clock.closed).status).toBe(408)
      first.end('delivered')
      const answers = (await client.closed)
        .split(/(?=HTTP\/1\.1 )/)
        .filter((a) => !a.startsWith('HTTP/1.1 100 '))
      expect(parseRawResponse(answers[0]!)).toMatchObject({ status: 200, body: { events: 1 } })
      expect(context.records()).toEqual([[{ a: 1 }]])
    },
  )

  it('gives a request whose 100 Continue came after the stop its time from then, though the cut after the stop looks at its connection meanwhile', async () => {
    // The cut found it late from its headers and timed it afresh from its 100 Continue, then
    // closed its connection anyway: its client, sending its body in time, got no answer at all.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] })
    try {
      const { source, context, port, run } = await start({ headersTimeoutMs: 200, requestTimeoutMs: 200 })
      const next = context.nextBatch()
      const client = new RawConnection(port)
      await client.connected
      const post = 'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n'
      client.write(`${post}\r\n[{"a":1}]${post}Expect: 100-continue\r\n\r\n`)
      const first = await next
      while (source.counters.requests < 2) await new Promise((r) => setImmediate(r))
      context.stop()
      await run
      // The cut, requestTimeoutMs after the stop: an answer is owed there, so it looks again later.
      await vi.advanceTimersByTimeAsync(300)
      first.end('delivered')
      await client.until(/100 Continue/)
      // It looks again, half of requestTimeoutMs after the 100 Continue.
      await vi.advanceTimersByTimeAsync(100)
      client.write('[{"b":2}]')
      const answers = (await client.closed)
        .split(/(?=HTTP\/1\.1 )/)
        .filter((a) => !a.startsWith('HTTP/1.1 100 '))
        .map(parseRawResponse)
      expect(answers).toMatchObject([
        { status: 200, body: { events: 1 } },
        { status: 503, body: { code: 'SHUTTING_DOWN' } },
      ])
      expect(context.records()).toEqual([[{ a: 1 }]])
      // Its connection closed, neither the cut nor its fresh time is left pending.
      while (source.counters.openConnections > 0) await new Promise((r) => setImmediate(r))
      expect(vi.getTimerCount()).toBe(0)
    } finally {
      vi.useRealTimers()
    }
  })

  it('times a request afresh once, not once per cut, while after the stop its 100 Continue waits behind an answer its client does not read', async () => {
    // Each cut after the stop (every requestTimeoutMs while another connection still owed an
    // answer) found the request late again and added a listener for its 100 Continue: past ten,
    // Node warned of a leak (MaxListenersExceededWarning), and once the answer before it was read,
    // each listener timed the request afresh, a close listener and a timer apiece.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] })
    const warnings: Error[] = []
    const warned = (warning: Error): void => void warnings.push(warning)
    process.on('warning', warned)
    const responses: ServerResponse[] = []
    const seen = (message: unknown): void =>
      void responses.push((message as { response: ServerResponse }).response)
    subscribe('http.server.request.start', seen)
    try {
      // Its answer lists every record: far more than the connection's buffers hold unread.
      const events = 300_000
      const { source, context, port, run } = await start({
        headersTimeoutMs: 200,
        requestTimeoutMs: 200,
        maxEventsPerRequest: events,
        outcomes: 'always',
      })
      // A batch left pending on another connection: the cut after the stop comes back while it is.
      const keeperBatch = context.nextBatch()
      void request(port, json([{ k: 1 }])).catch(() => {})
      await keeperBatch
      const bigBatch = context.nextBatch()
      const raw = connect(port, '127.0.0.1')
      raw.on('error', () => {})
      const received: Buffer[] = []
      raw.on('data', (chunk: Buffer) => received.push(chunk))
      await new Promise((resolve) => raw.once('connect', resolve))
      const body = '{}\n'.repeat(events)
      raw.write(
        `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: ${body.length}\r\n\r\n${body}` +
          'POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n',
      )
      const big = await bigBatch
      while (source.counters.requests < 3) await new Promise((r) => setImmediate(r))
      raw.pause()
      context.stop()
      await run
      big.end('delivered')
      const [, first, second] = responses
      while (!first!.headersSent) await new Promise((r) => setImmediate(r))
      for (let cut = 0; cut < 12; cut++) await vi.advanceTimersByTimeAsync(200)
      // The answer before it is still unread: its 100 Continue (or answer) still waits.
      expect(first!.writableFinished).toBe(false)
      expect(second!.socket).toBe(null)
      expect(second!.listenerCount('socket')).toBeLessThanOrEqual(4)
      const closed = new Promise((resolve) => raw.once('close', resolve))
      raw.resume()
      while (second!.socket === null && !second!.destroyed) await new Promise((r) => setImmediate(r))
      const socket = first!.req.socket
      expect(socket.listenerCount('close')).toBeLessThanOrEqual(8)
      // Its client sends no body: cut off once its fresh time is up, after the answer it read.
      await vi.advanceTimersByTimeAsync(200)
      await closed
      const answers = Buffer.concat(received)
        .toString('utf8')
        .split(/(?=HTTP\/1\.1 )/)
        .filter((a) => !a.startsWith('HTTP/1.1 100 '))
        .map(parseRawResponse)
      expect(answers).toHaveLength(1)
      expect(answers[0]).toMatchObject({ status: 200, body: { events } })
      await new Promise((r) => setImmediate(r))
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([])
    } finally {
      unsubscribe('http.server.request.start', seen)
      process.off('warning', warned)
      vi.useRealTimers()
    }
  })

  it('leaves no timer of its own pending once run returned with no connection open, nor once the last connection left after it', async () => {
    // The cut after the stop (#cutOffLate) stayed set for requestTimeoutMs whether or not any
    // connection was left for it to cut, holding the source (and whatever it refers to) that long.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] })
    try {
      const idle = await start({ requestTimeoutMs: 60_000 })
      const answer = request(idle.port, json([{ n: 1 }]))
      const batch = await idle.context.nextBatch()
      batch.end('delivered')
      expect((await answer).status).toBe(200)
      idle.context.stop()
      await idle.run
      while (idle.source.counters.openConnections > 0) await new Promise((r) => setImmediate(r))
      expect(vi.getTimerCount()).toBe(0)

      // A connection still open when run returns keeps the cut: it goes once that connection closes.
      const held = await start({ requestTimeoutMs: 60_000 })
      const client = new RawConnection(held.port)
      await client.connected
      client.write('POST / HTTP/1.1\r\nHost: x\r\n')
      while (held.source.counters.openConnections < 1) await new Promise((r) => setImmediate(r))
      held.context.stop()
      await held.run
      expect(vi.getTimerCount()).toBe(1)
      client.destroy()
      while (held.source.counters.openConnections > 0) await new Promise((r) => setImmediate(r))
      expect(vi.getTimerCount()).toBe(0)
    } finally {
      vi.useRealTimers()
    }
  })

  it('returns from run after a stop, and still answers requests already in the pipeline', async () => {
    const { context, port, run } = await start()
    const next = context.nextBatch()
    const answer = request(port, json([{ n: 1 }]))
    const batch = await next
    context.stop()
    await run
    batch.end('errored')
    const { status, headers } = await answer
    expect(status).toBe(503)
    expect(headers.connection).toBe('close')
  })

  it.each([
    ['in order', [0, 1]],
    ['the later first', [1, 0]],
  ])(
    'answers every request of a connection already in the pipeline when the stop came, closing it after the last, resolved %s',
    async (_, order) => {
      // Closed after the first answer, the connection would lose the later ones: their events were
      // delivered, and their client, left without an answer, would send them again.
      const { context, port, run } = await start()
      const connection = new RawConnection(port)
      const body = '[{"a":1}]'
      const post = `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`
      connection.write(post + post)
      while (context.batches.length < 2) await new Promise((r) => setImmediate(r))
      context.stop()
      await run
      for (const index of order) context.batches[index]!.end('delivered')
      const answers = (await connection.closed).split('HTTP/1.1 ').slice(1)
      expect(answers.map((answer) => answer.slice(0, 3))).toEqual(['200', '200'])
      expect(answers[0]).not.toMatch(/Connection: close/i)
      expect(answers[1]).toMatch(/Connection: close/i)
    },
  )

  it('returns from run only once the sends still waiting for room downstream were accepted', async () => {
    const { context, port, run } = await start()
    let open = (): void => {}
    context.gate = new Promise((resolve) => {
      open = resolve
    })
    const send = context.send.bind(context)
    const sent = new Promise<void>((resolve) => {
      context.send = (records, options) => {
        resolve()
        return send(records, options)
      }
    })
    const answer = request(port, json([{ n: 1 }]))
    await sent
    context.stop()
    let returned = false
    void run.then(() => {
      returned = true
    })
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve))
    expect(returned).toBe(false)
    const next = context.nextBatch()
    open()
    await run
    ;(await next).end('delivered')
    expect((await answer).status).toBe(200)
  })

  it('refuses a second run of one source, which would answer every request 503 SHUTTING_DOWN while /health said 200', async () => {
    const { source, context, run, port } = await start()
    // While the first run goes on (one object in two topologies), and once it returned.
    // Each stopped at once, should it run after all: a run left listening would hold the process.
    const again = new FakeSourceContext({ id: 'again' })
    const concurrent = source.run(again)
    again.stop()
    await expect(concurrent).rejects.toMatchObject({
      name: 'ComponentError',
      code: 'RUNS_ONCE',
      component: 'again',
    })
    context.onBatch = (batch) => batch.end('delivered')
    expect((await request(port, { body: '{"a":1}' })).status).toBe(200)
    context.stop()
    await run
    const after = new FakeSourceContext({ id: 'after' })
    after.onBatch = (batch) => batch.end('delivered')
    const second = source.run(after)
    after.stop()
    const error = await second.then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(ComponentError)
    expect(error).toMatchObject({ code: 'RUNS_ONCE', component: 'after' })
    expect((error as Error).message).toContain('httpServer(')
    expect(after.batches).toEqual([])
    // listening() still tells of the one run there was.
    expect((await source.listening()).port).toBe(port)
  })

  it('rejects run and listening() when the address is taken, naming the address', async () => {
    const { port } = await start()
    const second = httpServer({ address: `127.0.0.1:${port}` })
    const context = new FakeSourceContext()
    await expect(second.run(context)).rejects.toMatchObject({ name: 'HttpServerError', field: 'address' })
    await expect(second.listening()).rejects.toThrow(`127.0.0.1:${port}`)
  })

  it('reports bad options by field', () => {
    expect(
      httpServer({ address: 'localhost', maxBodyBytes: 0, authToken: '', retryAfterSeconds: 1.5 })
        .validate()
        .map((i) => i.field),
    ).toEqual(['address', 'maxBodyBytes', 'authToken', 'retryAfterSeconds'])
    expect(
      httpServer({ address: '127.0.0.1:99999' })
        .validate()
        .map((i) => i.field),
    ).toEqual(['address'])
    expect(httpServer({ address: '[::1]:8686' }).validate()).toEqual([])
    expect(httpServer().validate()).toEqual([])
  })

  it('words every option problem as "must be <expected>, got <got>", misspelt options included', () => {
    const issues = httpServer({
      address: 'localhost',
      maxDepth: 0,
      invalidUtf8: 'drop' as 'reject',
      maxBodyByte: 10,
    } as HttpServerOptions).validate()
    expect(issues).toEqual([
      expect.objectContaining({
        field: 'address',
        message: `must be 'host:port' with a port from 0 to 65535 (like '127.0.0.1:8686'), got "localhost"`,
      }),
      expect.objectContaining({ field: 'maxDepth', message: 'must be a positive integer, got 0' }),
      expect.objectContaining({ field: 'invalidUtf8', message: 'must be "reject" or "replace", got "drop"' }),
      expect.objectContaining({ field: 'maxBodyByte', got: '10' }),
    ])
    expect(HttpServerOptions.jsonSchema()).toMatchObject({
      properties: { maxBodyBytes: { default: 10485760 } },
    })
  })

  it('rejects with an HttpServerError naming the component, the field and the code', async () => {
    const source = httpServer({ address: 'nowhere' })
    const context = new FakeSourceContext()
    const error = await source.run(context).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(HttpServerError)
    expect(error).toBeInstanceOf(ComponentError)
    expect(error).toMatchObject({ code: 'HTTP_SERVER_LISTEN', component: context.id, field: 'address' })
    expect(httpServer().canAcknowledge).toBe(true)
  })
})
