import { EventEmitter } from 'node:events'
import { PassThrough, Readable } from 'node:stream'
import { stdin } from '@ackline/sources'
import { type LifecycleEvent, perEvent, type Sink, TopologyBuilder, type Transform } from '@ackline/topology'
import { describe, expect, it, vi } from 'vitest'
import { FakeSourceContext } from './support/FakeSourceContext.js'

const runOn = async (chunks: (string | Buffer)[], options: Parameters<typeof stdin>[0] = {}) => {
  const context = new FakeSourceContext({ acknowledgements: false })
  await stdin({ input: Readable.from(chunks, { objectMode: false }), ...options }).run(context)
  return context.records()
}

describe('stdin', () => {
  it('turns JSON-object lines into those objects and other lines into { message }', async () => {
    const records = await runOn(['{"a":1}\nplain text\n[1, 2]\n{"broken": \n"quoted"\n'])
    expect(records.flat()).toEqual([
      { a: 1 },
      { message: 'plain text' },
      { message: '[1, 2]' },
      { message: '{"broken": ' },
      { message: '"quoted"' },
    ])
  })

  it('asks for no receipt: standard input has no upstream to tell', async () => {
    const context = new FakeSourceContext({ acknowledgements: true })
    context.onBatch = (batch) => batch.end('delivered')
    await stdin({ input: Readable.from(['a\nb\n'], { objectMode: false }), maxBatchLines: 1 }).run(context)
    expect(context.sendOptions).toEqual([{ receipt: false }, { receipt: false }])
  })

  it('skips a byte order mark at the start of the input, whole or split between chunks, and keeps one anywhere else', async () => {
    const bom = Buffer.from([0xef, 0xbb, 0xbf])
    expect((await runOn([Buffer.concat([bom, Buffer.from('{"a":1}\n\uFEFF{"b":2}\n')])])).flat()).toEqual([
      { a: 1 },
      { message: '\uFEFF{"b":2}' },
    ])
    expect((await runOn([bom.subarray(0, 1), bom.subarray(1), '{"a":1}\n'])).flat()).toEqual([{ a: 1 }])
    expect((await runOn(['\uFEFFplain'])).flat()).toEqual([{ message: 'plain' }])
  })

  it('takes a JSON object with blanks before it as that object, as with blanks after it', async () => {
    // Blanks after it were taken; before it, the line was kept as text.
    expect(
      (await runOn(['{"a":1}  \n  {"b":2}\n\t{"c":3}\r\n \t {"d": 4} \n  not {json}\n'])).flat(),
    ).toEqual([{ a: 1 }, { b: 2 }, { c: 3 }, { d: 4 }, { message: '  not {json}' }])
  })

  it("keeps every line as a message with format 'text'", async () => {
    expect((await runOn(['{"a":1}\n'], { format: 'text' })).flat()).toEqual([{ message: '{"a":1}' }])
  })

  it('reassembles lines split across chunks, strips CR, skips blank lines and sends a last line without newline', async () => {
    const euro = Buffer.from('€')
    const records = await runOn([
      'hel',
      'lo\r\n\n',
      Buffer.from('price: '),
      euro.subarray(0, 1),
      euro.subarray(1),
      '\nlast',
    ])
    expect(records.flat()).toEqual([{ message: 'hello' }, { message: 'price: €' }, { message: 'last' }])
  })

  it('reads a line of many chunks in time linear in its length (64 MiB in 1024 chunks)', async () => {
    // Rescanning the open line on every chunk took minutes here (past the suite's timeout); one
    // scan of each chunk takes well under a second.
    const chunk = Buffer.alloc(64 * 1024, 'x')
    const chunks = [...Array.from({ length: 1024 }, () => chunk), Buffer.from('\nnext\n')]
    const records = (await runOn(chunks, { maxLineBytes: 64 * 1024 * 1024 })).flat()
    expect(records.map((r) => (r.message as string).length)).toEqual([64 * 1024 * 1024, 4])
  })

  it('cuts a line longer than maxLineBytes to its first maxLineBytes bytes, says so, and reads on', async () => {
    const warnings: string[] = []
    const long = `{"a":"${'y'.repeat(30)}"}`
    const records = (
      await runOn([`short\n${'x'.repeat(25)}\n\n${long}\nlast ${'z'.repeat(30)}`], {
        maxLineBytes: 20,
        onWarning: (m) => warnings.push(m),
      })
    ).flat()
    expect(records).toEqual([
      { message: 'short' },
      { message: 'x'.repeat(20) },
      // A JSON line cut is no longer JSON: it is text, as any line that does not parse.
      { message: long.slice(0, 20) },
      { message: `last ${'z'.repeat(15)}` },
    ])
    expect(warnings).toEqual([
      "stdin source 'in': line 2 of the input is 25 bytes, longer than maxLineBytes (20): its first 20 bytes (whole characters) are sent as { message }, the rest is dropped",
      "stdin source 'in': line 4 of the input is 38 bytes, longer than maxLineBytes (20): its first 20 bytes (whole characters) are sent as { message }, the rest is dropped",
      "stdin source 'in': line 5 of the input is 35 bytes, longer than maxLineBytes (20): its first 20 bytes (whole characters) are sent as { message }, the rest is dropped",
    ])
  })

  it('holds no more than maxLineBytes of a line that never ends: 520 MiB without a newline, past the longest string', async () => {
    // Before the limit, the open line was joined once it ended: past 2^29 characters that join
    // threw (Invalid string length) and the run failed, after holding the whole line in memory.
    const chunk = Buffer.alloc(1024 * 1024, 'x')
    let chunks = 0
    const input = new Readable({
      read() {
        this.push(chunks++ < 520 ? chunk : chunks === 522 ? null : Buffer.from('\nnext\n'))
      },
    })
    const warnings: string[] = []
    const context = new FakeSourceContext({ acknowledgements: false })
    await stdin({ input, onWarning: (m) => warnings.push(m) }).run(context)
    expect(context.records().flat()).toEqual([{ message: 'x'.repeat(102_400) }, { message: 'next' }])
    expect(warnings).toEqual([expect.stringContaining(`line 1 of the input is ${520 * 1024 * 1024} bytes`)])
  })

  it('cuts at a character boundary and measures UTF-8 bytes; a CRLF at the limit is not a cut', async () => {
    const warnings: string[] = []
    const onWarning = (m: string) => warnings.push(m)
    // '€' is 3 bytes: 10 bytes hold three of them, not three and a third.
    expect((await runOn([`${'€'.repeat(5)}\n`], { maxLineBytes: 10, onWarning })).flat()).toEqual([
      { message: '€€€' },
    ])
    expect((await runOn([`${'€'.repeat(3)}\n`], { maxLineBytes: 9, onWarning })).flat()).toEqual([
      { message: '€€€' },
    ])
    expect(warnings).toHaveLength(1)
    // Split over chunks, the euros' bytes too, and across the limit.
    const euro = Buffer.from('€')
    const split = [
      euro.subarray(0, 2),
      Buffer.concat([euro.subarray(2), euro, euro.subarray(0, 1)]),
      euro.subarray(1),
      Buffer.from('\n'),
    ]
    expect((await runOn(split, { maxLineBytes: 8, onWarning })).flat()).toEqual([{ message: '€€' }])
    expect(warnings[1]).toContain('line 1 of the input is 9 bytes')
    // Exactly maxLineBytes before a CRLF, in one chunk and in three.
    const exact = 'x'.repeat(10)
    expect((await runOn([`${exact}\r\n`], { maxLineBytes: 10, onWarning })).flat()).toEqual([
      { message: exact },
    ])
    expect((await runOn([exact, '\r', '\nnext'], { maxLineBytes: 10, onWarning })).flat()).toEqual([
      { message: exact },
      { message: 'next' },
    ])
    expect((await runOn([`${exact}y`, '\r', '\n'], { maxLineBytes: 10, onWarning })).flat()).toEqual([
      { message: exact },
    ])
    expect(warnings.slice(2)).toEqual([expect.stringContaining('line 1 of the input is 11 bytes')])
  })

  it('keeps a JSON line nested deeper than maxDepth as text, and takes one exactly maxDepth deep', async () => {
    const deep = `{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}`
    const atLimit = `{"a":${'['.repeat(3)}${']'.repeat(3)}}`
    const records = (await runOn([`${deep}\n${atLimit}\n`], { maxDepth: 4, maxLineBytes: 300_000 })).flat()
    expect(records).toEqual([{ message: deep }, { a: [[[]]] }])
    expect((await runOn([`{"a":${'['.repeat(64)}${']'.repeat(64)}}\n`])).flat()[0]).toHaveProperty('message')
  })

  it('keeps a JSON line holding a number too large for a double as text: parsed, it would be Infinity', async () => {
    const lines = ['{"a":1e400}', `{"a":[1, -${'9'.repeat(400)}]}`, '{"a":"1e400","b":1e308}']
    const records = (await runOn([`${lines.join('\n')}\n`])).flat()
    expect(records).toEqual([{ message: lines[0] }, { message: lines[1] }, { a: '1e400', b: 1e308 }])
  })

  it('lets a line of 100 000 nested arrays through a fan-out whose transform edits it, as text', async () => {
    const deep = `{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}`
    const facts: LifecycleEvent[] = []
    const seen: Record<string, unknown[]> = { edited: [], plain: [] }
    const keep = (name: string): Sink => ({
      kind: 'keep',
      async write(events) {
        for (const event of events.events) seen[name]!.push(event.fields)
        return events.events.map(() => 'delivered' as const)
      },
    })
    // Setting a field copies the shared fields first (copy on write), recursively.
    const edit: Transform = {
      kind: 'edit',
      process: perEvent(
        (event) => {
          event.set('edited', true)
          return undefined
        },
        () => {},
      ),
    }
    const topology = new TopologyBuilder()
      .source('in', stdin({ input: Readable.from([`${deep}\n`]), maxLineBytes: 300_000 }))
      .transform('edit', ['in'], edit)
      .sink('edited', ['edit'], keep('edited'))
      .sink('plain', ['in'], keep('plain'))
      .build()
    topology.lifecycle.subscribe((fact) => facts.push(fact))
    await topology.start()
    await topology.done
    expect(facts.filter((fact) => fact.type === 'component_error')).toEqual([])
    expect(seen).toEqual({ edited: [{ message: deep, edited: true }], plain: [{ message: deep }] })
  })

  it('sends the lines of one chunk as one batch, at most maxBatchLines each', async () => {
    const records = await runOn(['a\nb\nc\nd\ne\n', 'f\n'], { maxBatchLines: 2 })
    expect(records.map((batch) => batch.map((r) => r.message))).toEqual([
      ['a', 'b'],
      ['c', 'd'],
      ['e'],
      ['f'],
    ])
  })

  it('returns when the topology stops while the input is idle', async () => {
    const input = new PassThrough()
    const context = new FakeSourceContext({ acknowledgements: false })
    const run = stdin({ input }).run(context)
    const next = context.nextBatch()
    input.write('one\n')
    await next
    context.stop()
    await run
    expect(context.records()).toEqual([[{ message: 'one' }]])
    expect(input.destroyed).toBe(true)
  })

  it('sends a batch the pipeline did not accept again after a back-off, reads on, and says so', async () => {
    const context = new FakeSourceContext({ id: 'in', acknowledgements: false })
    const accept = context.send.bind(context)
    let refusals = 2
    context.send = (records, options) => {
      const list = [...records]
      return list.some((r) => r.n === 2) && refusals-- > 0
        ? Promise.reject(new RangeError('Maximum call stack size exceeded'))
        : accept(list, options)
    }
    const warnings: string[] = []
    const input = Readable.from(['{"n":1}\n{"n":2}\n', '{"n":3}\n'], { objectMode: false })
    await stdin({ input, maxBatchLines: 1, onWarning: (m) => warnings.push(m) }).run(context)
    expect(context.records()).toEqual([[{ n: 1 }], [{ n: 2 }], [{ n: 3 }]])
    expect(warnings).toHaveLength(2)
    expect(warnings[0]).toMatch(
      /^stdin source 'in': the pipeline did not accept 1 line\(s\) \(records 2 to 2 of the input\): RangeError: Maximum call stack size exceeded; sending them again in \d+ ms$/,
    )
  })

  it('sends a refused batch again when onWarning throws, and reports the warning to process.emitWarning', async () => {
    const context = new FakeSourceContext({ id: 'in', acknowledgements: false })
    const accept = context.send.bind(context)
    let refusals = 1
    context.send = (records, options) =>
      refusals-- > 0 ? Promise.reject(new RangeError('not now')) : accept(records, options)
    const warnings: string[] = []
    const onWarning = (w: Error) => warnings.push(w.message)
    process.on('warning', onWarning)
    try {
      const input = Readable.from(['{"n":1}\n', '{"n":2}\n'], { objectMode: false })
      await stdin({
        input,
        onWarning: () => {
          throw new Error('warning sink down')
        },
      }).run(context)
    } finally {
      process.off('warning', onWarning)
    }
    // Standard input cannot be read again: a line lost here is lost for good.
    expect(context.records().flat()).toEqual([{ n: 1 }, { n: 2 }])
    expect(warnings.some((w) => w.includes('did not accept') && w.includes('warning sink down'))).toBe(true)
  })

  it('stops sending a batch the pipeline never accepts when the topology stops', async () => {
    const context = new FakeSourceContext({ id: 'in', acknowledgements: false })
    context.send = () => Promise.reject(new Error('refused'))
    const warnings: string[] = []
    const input = new PassThrough()
    const run = stdin({ input, onWarning: (m) => warnings.push(m) }).run(context)
    input.write('one\n')
    await vi.waitUntil(() => warnings.length === 1)
    context.stop()
    await run
    expect(input.destroyed).toBe(true)
    expect(warnings).toHaveLength(1)
  })

  it('sends a line cut to no whole character as an empty message wherever it is in its chunk, and says how many bytes it sent', async () => {
    // Cut to '', it was dropped at the start or end of a chunk and sent in its middle; the
    // warning said maxLineBytes bytes were sent where the cut had backed off to a character.
    const warnings: string[] = []
    const onWarning = (m: string) => warnings.push(m)
    expect((await runOn(['€€\nok\n'], { maxLineBytes: 2, onWarning })).flat()).toEqual([
      { message: '' },
      { message: 'ok' },
    ])
    expect((await runOn(['a\n€€\nb\n'], { maxLineBytes: 2, onWarning })).flat()).toEqual([
      { message: 'a' },
      { message: '' },
      { message: 'b' },
    ])
    expect((await runOn(['€€€€€\n'], { maxLineBytes: 10, onWarning })).flat()).toEqual([{ message: '€€€' }])
    expect(warnings).toEqual([
      "stdin source 'in': line 1 of the input is 6 bytes, longer than maxLineBytes (2): its first 0 bytes (whole characters) are sent as { message }, the rest is dropped",
      "stdin source 'in': line 2 of the input is 6 bytes, longer than maxLineBytes (2): its first 0 bytes (whole characters) are sent as { message }, the rest is dropped",
      "stdin source 'in': line 1 of the input is 15 bytes, longer than maxLineBytes (10): its first 9 bytes (whole characters) are sent as { message }, the rest is dropped",
    ])
  })

  it('measures a surrogate pair split between string chunks as the one 4-byte character it is', async () => {
    // Measured apart, each half counted 3 bytes: a false cut, and a wrong size in the warning.
    const pair = '😀'
    const warnings: string[] = []
    const context = new FakeSourceContext({ acknowledgements: false })
    // Object mode: the strings arrive as they are, the pair split between two of them.
    const input = Readable.from([
      pair[0]!,
      `${pair[1]!}\n`,
      `x${pair[0]!}`,
      `${pair[1]!}y${pair}z\n`,
      pair[0]!,
      pair[1]!,
    ])
    await stdin({ input, maxLineBytes: 4, onWarning: (m) => warnings.push(m) }).run(context)
    expect(context.records().flat()).toEqual([{ message: pair }, { message: 'x' }, { message: pair }])
    expect(warnings).toEqual([
      expect.stringContaining(
        'line 2 of the input is 11 bytes, longer than maxLineBytes (4): its first 1 bytes',
      ),
    ])
  })

  it('cannot acknowledge, and reports bad options by field', () => {
    expect(stdin().canAcknowledge).toBe(false)
    expect(
      stdin({
        format: 'xml' as never,
        maxBatchLines: 0,
        maxLineBytes: 0,
        input: {} as never,
        onWarning: 'log' as never,
      })
        .validate()
        .map((i) => i.field),
    ).toEqual(['input', 'format', 'maxBatchLines', 'maxLineBytes', 'onWarning'])
    expect(
      stdin({ maxLineBytes: 2 ** 30 })
        .validate()
        .map((i) => i.field),
    ).toEqual(['maxLineBytes'])
    expect(stdin({ maxBatchLines: 2.5 }).validate()[0]!.message).toBe('must be a positive integer, got 2.5')
    expect(stdin({ input: new PassThrough() }).validate()).toEqual([])
    expect(
      stdin({ input: new EventEmitter() as never })
        .validate()
        .map((i) => i.message),
    ).toEqual(['must be a readable stream, got an instance of EventEmitter'])
  })
})
