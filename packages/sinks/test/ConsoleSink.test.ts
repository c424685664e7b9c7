import { constants as bufferConstants } from 'node:buffer'
import { spawn } from 'node:child_process'
import { EventEmitter, once } from 'node:events'
import { PassThrough, Writable } from 'node:stream'
import { EventArray, LogEvent } from '@ackline/core'
import { console } from '@ackline/sinks'
import { RetryableError, TopologyBuilder } from '@ackline/topology'
import { describe, expect, it } from 'vitest'
import { textLimit } from '../src/internal/jsonLine.js'

const print = async (format: 'json' | 'text' | undefined) => {
  const stream = new PassThrough()
  let out = ''
  stream.on('data', (chunk: Buffer) => {
    out += chunk.toString()
  })
  const topology = new TopologyBuilder({ acknowledgements: true })
    .source('in', {
      kind: 'batches',
      canAcknowledge: true,
      async run(context) {
        await (await context.send([{ message: 'hello' }, { n: 2 }])).status
      },
    })
    .sink('out', ['in'], console({ stream, ...(format === undefined ? {} : { format }) }))
    .build()
  await topology.start()
  await topology.done
  return out
}

describe('console', () => {
  it('prints one JSON line per event by default', async () => {
    expect(await print(undefined)).toBe('{"message":"hello"}\n{"n":2}\n')
  })

  it("prints the message field with format 'text'", async () => {
    expect(await print('text')).toBe('hello\n{"n":2}\n')
  })

  it('reports a bad format through the builder', () => {
    expect(() =>
      new TopologyBuilder()
        .source('in', { kind: 'x', canAcknowledge: true, run: async () => {} })
        .sink('out', ['in'], console({ format: 'yaml' as 'json' }))
        .build(),
    ).toThrow(/out \(format\): console: must be "json" or "text", got "yaml"/)
  })

  it('reports a stream that cannot be written to', () => {
    expect(console({ stream: 'stdout' as never }).validate()).toMatchObject([
      { field: 'stream', message: 'must be a writable stream, got "stdout"' },
    ])
    // A write function alone is not a stream: the sink needs its events to see a failed write.
    expect(console({ stream: { write: () => true } as never }).validate()).toMatchObject([
      { field: 'stream', message: expect.stringMatching(/^must be a writable stream/) },
    ])
    expect(console({ stream: process.stderr }).validate()).toEqual([])
  })

  it('settles events errored, and does not crash, when stdout is a pipe whose reader went away (EPIPE)', async () => {
    const script = new URL('./fixtures/consoleToClosedPipe.ts', import.meta.url).pathname
    const root = new URL('../../..', import.meta.url).pathname
    const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', script], {
      cwd: root,
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    const [first] = (await once(child.stdout, 'data')) as [Buffer]
    expect(first.toString()).toBe('{"n":1}\n')
    child.stdout.destroy() // what `| head -1` does after its line
    child.stdin.write('next\n')
    const [code, signal] = (await once(child, 'exit')) as [number | null, string | null]
    expect({ code, signal, stderr }).toEqual({
      code: 0,
      signal: null,
      stderr: 'status delivered -\nstatus errored WRITE_FAILED\ndone\n',
    })
  })

  it('throws a RetryableError naming the stream when the stream fails the write', async () => {
    const stream = new Writable({
      write: (_chunk, _encoding, callback) => callback(new Error('disk on fire')),
    })
    const failed = await console({ stream })
      .write(EventArray.from([new LogEvent({ n: 1 })]))
      .catch((error: unknown) => error)
    expect(failed).toBeInstanceOf(RetryableError)
    expect(failed).toMatchObject({
      field: 'stream',
      message: 'console (stream): cannot write to its stream: disk on fire',
    })
    // The stream is destroyed now: a later write fails too, rather than wait for a 'drain' that never comes.
    await expect(console({ stream }).write(EventArray.from([new LogEvent({ n: 2 })]))).rejects.toThrow(
      /cannot write to its stream: .*destroyed/,
    )
  })

  it('throws, rather than hang, when the stream closes while it is full', async () => {
    const stream = new Writable({ highWaterMark: 1, write: () => {} }) // never takes a chunk
    const write = console({ stream }).write(EventArray.from([new LogEvent({ n: 1 })]))
    stream.destroy()
    await expect(write).rejects.toThrow(/console \(stream\): cannot write to its stream/)
  })

  it('listens to a stream once however many writes wait on it, and fails every waiting write when it closes', async () => {
    const taken: (() => void)[] = []
    // Takes a chunk only when the test says so: every write waits.
    const stream = new Writable({
      highWaterMark: 1,
      write: (_chunk, _encoding, callback) => {
        taken.push(callback)
      },
    })
    const sink = console({ stream })
    const writes = Array.from({ length: 20 }, (_, n) => sink.write(EventArray.from([new LogEvent({ n })])))
    expect(stream.listenerCount('error')).toBe(1)
    expect(stream.listenerCount('close')).toBe(1)
    let settled = 0
    for (const write of writes)
      void write.then(
        () => settled++,
        () => settled++,
      )
    // The stream takes the first chunk: that write, and only it, resolves.
    await new Promise<void>((resolve) => setImmediate(resolve))
    expect(taken).toHaveLength(1)
    taken.shift()!()
    await expect(writes[0]).resolves.toBeUndefined()
    expect(settled).toBe(1)
    stream.destroy()
    const rest = await Promise.allSettled(writes.slice(1))
    expect(rest.map((r) => r.status)).toEqual(Array(19).fill('rejected'))
  })

  it('writes to a stream that is no Node.js Writable and never calls back (sonic-boom, as pino.destination() returns): taken once write() says so, or at drain', async () => {
    class SonicBoomLike extends EventEmitter {
      lines: string[] = []
      full = false
      write(data: string): boolean {
        this.lines.push(data)
        return !this.full
      }
    }
    const stream = new SonicBoomLike()
    const sink = console({ stream: stream as never })
    expect(sink.validate?.()).toEqual([])
    await expect(sink.write(EventArray.from([new LogEvent({ n: 1 })]))).resolves.toBeUndefined()
    stream.full = true
    let settled = false
    const waiting = sink.write(EventArray.from([new LogEvent({ n: 2 })])).then(() => {
      settled = true
    })
    await new Promise<void>((resolve) => setImmediate(resolve))
    expect(settled).toBe(false) // full: it waits for drain
    stream.full = false
    stream.emit('drain')
    await waiting
    stream.full = true
    // Full from this write on: it waits for a drain that never comes, and the stream's error fails it.
    const stuck = sink.write(EventArray.from([new LogEvent({ n: 3 })]))
    stream.emit('error', new Error('EBADF'))
    await expect(stuck).rejects.toThrow(/cannot write to its stream: EBADF/)
    expect(stream.lines).toEqual(['{"n":1}\n', '{"n":2}\n', '{"n":3}\n'])
    // sonic-boom past its maxLength emits `drop` from within write() and still returns true.
    stream.full = false
    stream.write = (data: string): boolean => {
      stream.emit('drop', data)
      return true
    }
    await expect(sink.write(EventArray.from([new LogEvent({ n: 4 })]))).rejects.toThrow(
      /cannot write to its stream: the stream dropped the lines/,
    )
  })

  it("with format 'text', an event whose message cannot be read (a getter that throws) fails alone, the others are printed", async () => {
    const stream = new PassThrough()
    let out = ''
    stream.on('data', (chunk: Buffer) => {
      out += chunk.toString()
    })
    const broken = {
      get message(): string {
        throw new TypeError('message is not ready')
      },
    }
    const result = await console({ stream, format: 'text' }).write(
      EventArray.from([
        new LogEvent({ message: 'one' }),
        new LogEvent(broken as never),
        new LogEvent({ message: 'three' }),
      ]),
    )
    // Before: the getter's TypeError left the write, and the whole array was rejected as unencodable.
    expect(result).toEqual(['delivered', expect.any(TypeError), 'delivered'])
    expect(out).toBe('one\nthree\n')
  })

  it("prints a text message holding line breaks on one line, each break written as JSON writes it ('\\n', '\\r')", async () => {
    // Printed as is, a message 'a\nb' made two lines of one event, where the docs promise one line
    // each event: a reader (or a line-based collector) took it for two events.
    const stream = new PassThrough()
    let out = ''
    stream.on('data', (chunk: Buffer) => {
      out += chunk.toString()
    })
    const result = await console({ stream, format: 'text' }).write(
      EventArray.from([
        new LogEvent({ message: 'first\nsecond\r\nthird' }),
        new LogEvent({ message: 'plain \\n' }),
      ]),
    )
    expect(result).toBeUndefined()
    expect(out).toBe('first\\nsecond\\r\\nthird\nplain \\n\n')
    expect(out.split('\n')).toHaveLength(3)
  })

  it('prints a text message on one line and drives no terminal: every other line break (VT, FF, NEL, U+2028, U+2029) and control character (ESC, C0, DEL, C1) escaped', async () => {
    // Before, only LF and CR were escaped: a VT, FF, NEL or U+2028 forged a line for a reader that
    // breaks there, and ESC sequences (colours, cursor moves, a window title) reached the terminal.
    const stream = new PassThrough()
    let out = ''
    stream.on('data', (chunk: Buffer) => {
      out += chunk.toString()
    })
    const message =
      'a\vb\fc\u0085d\u2028e\u2029f \u001b[2J\u001b]0;pwned\u0007 \u0000\u0008\u007f\u0080\u009b\u009f tab\tkept é'
    const result = await console({ stream, format: 'text' }).write(
      EventArray.from([new LogEvent({ message })]),
    )
    expect(result).toBeUndefined()
    expect(out).toBe(
      'a\\u000bb\\fc\\u0085d\\u2028e\\u2029f \\u001b[2J\\u001b]0;pwned\\u0007 \\u0000\\b\\u007f\\u0080\\u009b\\u009f tab\tkept é\n',
    )
    // Nothing left that a terminal or a line reader acts on but the one line end and the tab.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: looking for control characters is the point.
    expect(out.slice(0, -1)).not.toMatch(/[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u2028\u2029]/)
  })

  it("in format 'json' (and a 'text' event with no message) escapes what JSON leaves raw that a terminal acts on or breaks a line at (DEL, C1 such as NEL and CSI, U+2028, U+2029), the line still parsing to the same fields", async () => {
    // Before: JSON.stringify escapes C0 (ESC) but writes DEL, C1 and U+2028/U+2029 as they are, so
    // an 8-bit CSI (U+009B) or a NEL reached the terminal.
    const fields = { message: 'a\u0085b\u009b2Jc\u2028d\u2029e\u007ff\u001bg é' }
    for (const [format, event] of [
      ['json', fields],
      ['text', { msg: fields.message }],
    ] as const) {
      const stream = new PassThrough()
      let out = ''
      stream.on('data', (chunk: Buffer) => {
        out += chunk.toString()
      })
      const result = await console({ stream, format }).write(EventArray.from([new LogEvent(event)]))
      expect(result).toBeUndefined()
      expect(JSON.parse(out)).toEqual(event)
      // biome-ignore lint/suspicious/noControlCharactersInRegex: looking for control characters is the point.
      expect(out.slice(0, -1)).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/)
      expect(out).toContain('\\u0085b\\u009b2Jc\\u2028d\\u2029e\\u007ff\\u001bg é')
    }
  })

  it('prints every line of an array whose lines together pass the longest string (textLimit.max, lowered here), in order', async () => {
    textLimit.max = 64
    try {
      const chunks: string[] = []
      const stream = new Writable({
        write: (chunk: Buffer, _encoding, callback) => {
          chunks.push(chunk.toString())
          callback()
        },
      })
      const s = 'x'.repeat(40) // a line of 49 characters: two do not fit in 64
      const result = await console({ stream }).write(
        EventArray.from([new LogEvent({ s, n: 1 }), new LogEvent({ s, n: 2 }), new LogEvent({ s, n: 3 })]),
      )
      expect(result).toBeUndefined() // before the split: ['delivered', RangeError, …], settled rejected
      expect(chunks.length).toBe(3)
      expect(chunks.join('')).toBe([1, 2, 3].map((n) => `${JSON.stringify({ s, n })}\n`).join(''))
    } finally {
      textLimit.max = bufferConstants.MAX_STRING_LENGTH
    }
  })

  // The same at the engine's own limit: two strings of 268 M characters, about 10 s and 1.7 GB.
  // Run with ACKLINE_BIG_STRINGS=1; the test above covers the split at a lowered limit.
  it.runIf(process.env.ACKLINE_BIG_STRINGS === '1')(
    'prints an array whose lines together pass the longest string the engine makes (each line fits): no event rejected',
    async () => {
      let bytes = 0
      let newlines = 0
      const stream = new Writable({
        write: (chunk: Buffer, _encoding, callback) => {
          bytes += chunk.length
          for (let i = chunk.indexOf(0x0a); i !== -1; i = chunk.indexOf(0x0a, i + 1)) newlines++
          callback()
        },
      })
      const s = 'x'.repeat(bufferConstants.MAX_STRING_LENGTH >> 1) // two lines: over the limit by a few bytes
      const result = await console({ stream }).write(
        EventArray.from([new LogEvent({ s }), new LogEvent({ s })]),
      )
      expect(result).toBeUndefined() // before: ['delivered', RangeError('Invalid string length')], settled rejected
      expect(newlines).toBe(2)
      expect(bytes).toBe(2 * (s.length + '{"s":""}\n'.length))
    },
    120_000,
  )

  it('prints the events it can encode and reports each one it cannot by its own error', async () => {
    const stream = new PassThrough()
    let out = ''
    stream.on('data', (chunk: Buffer) => {
      out += chunk.toString()
    })
    const cyclic: Record<string, unknown> = {}
    cyclic.self = cyclic
    const events = EventArray.from([
      new LogEvent({ n: 1 }),
      new LogEvent({ n: 2, big: 10n } as never),
      new LogEvent({ n: 3 }),
      new LogEvent({ n: 4, cyclic } as never),
      new LogEvent({ toJSON: () => undefined } as never), // would print the line `undefined`
    ])
    const result = await console({ stream }).write(events)
    expect(result).toEqual([
      'delivered',
      expect.any(TypeError),
      'delivered',
      expect.any(TypeError),
      expect.any(TypeError),
    ])
    expect(out).toBe('{"n":1}\n{"n":3}\n')
  })
})
