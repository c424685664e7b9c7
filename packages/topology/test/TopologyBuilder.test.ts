import {
  RetryPolicy,
  SinkOptions,
  TopologyBuilder,
  TopologyError,
  TopologyOptions,
  type TopologyProblem,
  type TopologyWarning,
  type Transform,
} from '@ackline/topology'
import { describe, expect, expectTypeOf, it, vi } from 'vitest'
import { Gate, passThrough, routeBy, testSink, testSource } from './support/TestComponents.js'

const problemsOf = (build: () => unknown): TopologyProblem[] => {
  try {
    build()
  } catch (error) {
    expect(error).toBeInstanceOf(TopologyError)
    const e = error as TopologyError
    expect(e.name).toBe('TopologyError')
    expect(e.code).toBe('INVALID_TOPOLOGY')
    return [...e.problems]
  }
  throw new Error('build() did not throw')
}

const brief = (problems: TopologyProblem[]) => problems.map((p) => `${p.code} ${p.component} ${p.field}`)

const quiet = { onWarning: () => {} }

describe('validation', () => {
  it('builds a valid topology', () => {
    const topology = new TopologyBuilder(quiet)
      .source('in', testSource([]))
      .transform('split', ['in'], routeBy({ errors: () => true }))
      .sink('alerts', ['split.errors'], testSink())
      .sink('archive', ['in', 'split._unmatched'], testSink())
      .build()
    expect(topology.warnings).toEqual([])
  })

  it('reports every problem together, each naming the component and the field', () => {
    const problems = problemsOf(() =>
      new TopologyBuilder<string>(quiet)
        .source('in', testSource([]))
        .source('in', testSource([]))
        .transform('a.b', ['in'], passThrough())
        .transform('t', [], passThrough())
        .transform('split', ['in'], routeBy({ errors: () => true }))
        .sink('s1', ['nope'], testSink())
        .sink('s2', ['split.warnings', 'in', 'in'], testSink())
        .sink('s3', ['s2'], testSink())
        .sink('s4', ['in.port'], testSink())
        .build(),
    )
    expect(brief(problems)).toEqual([
      'DUPLICATE_ID in id',
      'INVALID_ID a.b id',
      'NO_INPUTS t inputs',
      'UNKNOWN_INPUT s1 inputs[0]',
      'UNDECLARED_OUTPUT s2 inputs[0]',
      'DUPLICATE_INPUT s2 inputs[2]',
      'INPUT_IS_SINK s3 inputs[0]',
      'UNDECLARED_OUTPUT s4 inputs[0]',
      'UNFED_SINK s1 inputs',
      'UNFED_SINK s3 inputs',
      'UNFED_SINK s4 inputs',
    ])
    const undeclared = problems.find((p) => p.component === 's2' && p.code === 'UNDECLARED_OUTPUT')!
    expect(undeclared.message).toContain("declares no output port 'warnings'")
    expect(undeclared.message).toContain("'errors', '_unmatched'")
  })

  it('refuses one component object declared twice, naming both ids: it would start, stop and hold state twice', () => {
    // One sink object under two ids got start() and stop() twice and one state for two components.
    const sink = testSink()
    const source = testSource([])
    const transform = passThrough()
    const problems = problemsOf(() =>
      new TopologyBuilder<string>(quiet)
        .source('in', source)
        .source('again', source)
        .transform('t1', ['in'], transform)
        .transform('t2', ['in'], transform)
        .sink('a', ['t1'], sink)
        .sink('b', ['t2'], sink)
        .sink('c', ['in'], testSink())
        .build(),
    )
    expect(problems).toEqual([
      expect.objectContaining({ code: 'DUPLICATE_COMPONENT', component: 'again', field: 'source' }),
      expect.objectContaining({ code: 'DUPLICATE_COMPONENT', component: 't2', field: 'transform' }),
      expect.objectContaining({ code: 'DUPLICATE_COMPONENT', component: 'b', field: 'sink' }),
    ])
    expect(problems[2]!.message).toMatch(/sink 'b'.*sink 'a'/)
    expect(problems[0]!.message).toMatch(/source 'again'.*source 'in'/)
    // Across roles too: one object that is both a source and a sink.
    const both = Object.assign(testSource([]), { write: async () => undefined })
    expect(
      brief(
        problemsOf(() => new TopologyBuilder(quiet).source('in', both).sink('out', ['in'], both).build()),
      ),
    ).toEqual(['DUPLICATE_COMPONENT out sink'])
  })

  it('refuses an input that names an empty port (a trailing dot), as it refuses any undeclared port', () => {
    // 'in.' was read as 'in': beside 'in' it made a second edge into the same sink, which then
    // wrote every event twice; alone, a typo in a config ran as if it were right.
    const problems = problemsOf(() =>
      new TopologyBuilder<string>(quiet)
        .source('in', testSource([]))
        .transform('split', ['in'], routeBy({ errors: () => true }))
        .sink('a', ['in', 'in.'], testSink())
        .sink('b', ['split.'], testSink())
        .build(),
    )
    expect(brief(problems)).toEqual([
      'UNDECLARED_OUTPUT a inputs[1]',
      'UNDECLARED_OUTPUT b inputs[0]',
      'UNFED_SINK b inputs',
    ])
    expect(problems[0]!.message).toBe(
      "input 'in.': the port after the dot is empty; source 'in' declares no output ports (read its default output as 'in')",
    )
    expect(problems[1]!.message).toBe(
      "input 'split.': the port after the dot is empty; transform 'split' declares 'errors', '_unmatched' (read its default output as 'split')",
    )
  })

  it('lists every problem in the error message', () => {
    expect(() => new TopologyBuilder<string>().sink('s', ['x'], testSink()).build()).toThrow(
      /invalid topology \(2 problems\):\n {2}- s \(inputs\[0\]\): input 'x' names no component\n {2}- s \(inputs\): nothing feeds sink 's'/,
    )
  })

  it('finds cycles and names every member', () => {
    const problems = problemsOf(() =>
      new TopologyBuilder<string>(quiet)
        .source('in', testSource([]))
        .transform('a', ['in', 'c'], passThrough())
        .transform('b', ['a'], passThrough())
        .transform('c', ['b'], passThrough())
        .transform('self', ['self', 'in'], passThrough())
        .sink('out', ['c', 'self'], testSink())
        .build(),
    )
    expect(brief(problems).sort()).toEqual([
      'CYCLE a inputs',
      'CYCLE b inputs',
      'CYCLE c inputs',
      'CYCLE self inputs',
    ])
    expect(problems.find((p) => p.component === 'b')!.message).toMatch(/cycle through .*'a'.*/)
  })

  it('reports a sink that no source reaches, even through existing transforms', () => {
    const problems = problemsOf(() =>
      new TopologyBuilder<string>(quiet)
        .source('in', testSource([]))
        .transform('orphan', ['missing'], passThrough())
        .sink('out', ['orphan'], testSink())
        .sink('fine', ['in'], testSink())
        .build(),
    )
    expect(brief(problems)).toEqual(['UNKNOWN_INPUT orphan inputs[0]', 'UNFED_SINK out inputs'])
  })

  it("includes each component's own config issues, prefixed by its kind", () => {
    const problems = problemsOf(() =>
      new TopologyBuilder(quiet)
        .source('in', testSource([], { issues: [{ field: 'address', message: 'not an address' }] }))
        .sink('out', ['in'], testSink({ issues: [{ field: 'path', message: 'missing' }] }))
        .build(),
    )
    expect(problems).toEqual([
      { code: 'INVALID_CONFIG', component: 'in', field: 'address', message: 'test_source: not an address' },
      { code: 'INVALID_CONFIG', component: 'out', field: 'path', message: 'test_sink: missing' },
    ])
  })

  it('checks buffer, retry and topology options', () => {
    const problems = problemsOf(() =>
      new TopologyBuilder({ ...quiet, ackTimeoutMs: 0 })
        .source('in', testSource([]))
        .transform('t', ['in'], passThrough(), { buffer: { maxEvents: 0 } })
        .sink('disk', ['t'], testSink(), {
          buffer: {
            kind: 'fake_disk',
            validate: ({ dataDir }) => (dataDir === undefined ? [{ field: 'path', message: 'no path' }] : []),
            open: () => Promise.reject(new Error('not opened at build')),
          },
        })
        .sink('retry', ['t'], testSink(), { retry: { attempts: 0, initialBackoffMs: -1 } })
        .build(),
    )
    expect(brief(problems)).toEqual([
      'INVALID_OPTION (topology) ackTimeoutMs',
      'INVALID_OPTION t buffer.maxEvents',
      'INVALID_OPTION disk buffer.path',
      'INVALID_OPTION retry retry.attempts',
      'INVALID_OPTION retry retry.initialBackoffMs',
    ])
  })

  it('checks the other options of a sink behind a buffer factory also when they are inherited or getters', () => {
    const factory = {
      kind: 'fake_disk',
      open: () => Promise.reject(new Error('not opened at build')),
    }
    // Options made by Object.create(defaults), and options as a class: validate() read both kinds
    // elsewhere, but beside a factory only the own enumerable ones were checked, and the runtime
    // then ran with a concurrency of 0 and a retry of -1 attempts.
    class Options {
      readonly buffer = factory
      get retry() {
        return { attempts: -1 }
      }
    }
    const problems = problemsOf(() =>
      new TopologyBuilder(quiet)
        .source('in', testSource([]))
        .sink(
          'inherited',
          ['in'],
          testSink(),
          Object.assign(Object.create({ concurrency: 0 }), { buffer: factory }),
        )
        .sink('getter', ['in'], testSink(), new Options())
        .build(),
    )
    expect(brief(problems)).toEqual([
      'INVALID_OPTION inherited concurrency',
      'INVALID_OPTION getter retry.attempts',
    ])
  })

  it('checks every enumerated option at build, from untyped code too, and reports every problem at once', () => {
    // What a JavaScript caller or a loosely typed config can hand the builder.
    const untyped = <T>(value: unknown): T => value as T
    const problems = problemsOf(() =>
      new TopologyBuilder({ ...quiet, acknowledgements: untyped<boolean>('yes') })
        .source('in', testSource([]))
        .transform(
          't',
          ['in'],
          passThrough(),
          untyped({ buffer: { whenFull: 'drop_oldest', droppedStatus: 'dropped' }, dropStatus: 'lost' }),
        )
        .transform('u', ['t'], { ...passThrough(), dropStatus: untyped<'rejected'>('bogus') })
        .sink(
          's',
          ['u'],
          testSink(),
          untyped({
            authoritative: 'true',
            buffer: { whenFull: 'spill', droppedStatus: 'ok' },
            retry: { multiplier: 0.5 },
          }),
        )
        .build(),
    )
    expect(brief(problems)).toEqual([
      'INVALID_OPTION (topology) acknowledgements',
      'INVALID_OPTION t buffer.whenFull',
      'INVALID_OPTION t buffer.droppedStatus',
      'INVALID_OPTION t dropStatus',
      'INVALID_CONFIG u dropStatus',
      'INVALID_OPTION s authoritative',
      'INVALID_OPTION s buffer.whenFull',
      'INVALID_OPTION s buffer.droppedStatus',
      'INVALID_OPTION s retry.multiplier',
    ])
    expect(problems.find((p) => p.component === 't' && p.field === 'buffer.whenFull')).toMatchObject({
      expected: '"block" or "drop_newest"',
      got: '"drop_oldest"',
      message: 'must be "block" or "drop_newest", got "drop_oldest"',
    })
    expect(problems.find((p) => p.component === 's' && p.field === 'buffer.droppedStatus')!.message).toBe(
      'must be one of "delivered", "errored", "rejected", got "ok"',
    )
  })

  it("reports a transform's bad dropStatus once, when both its options and its member carry it", () => {
    const problems = problemsOf(() =>
      new TopologyBuilder(quiet)
        .source('in', testSource([]))
        .transform('t', ['in'], {
          ...passThrough(),
          dropStatus: 'lost' as never,
          validate: () => [{ field: 'dropStatus', message: 'must be "delivered" or "rejected", got "lost"' }],
        })
        .transform('u', ['in'], { ...passThrough(), flushIntervalMs: 0 })
        .sink('s', ['t', 'u'], testSink())
        .build(),
    )
    expect(problems).toEqual([
      {
        code: 'INVALID_CONFIG',
        component: 't',
        field: 'dropStatus',
        message: 'pass: must be "delivered" or "rejected", got "lost"',
      },
      {
        code: 'INVALID_CONFIG',
        component: 'u',
        field: 'flushIntervalMs',
        expected: 'a positive number of at most 2147483647',
        got: '0',
        message: 'pass: must be a positive number of at most 2147483647, got 0',
      },
    ])
  })

  it.each([
    [
      'a sink that is undefined',
      (b: TopologyBuilder<string>) => b.sink('out', ['in'], undefined as never),
      [['INVALID_CONFIG', 'out', 'sink']],
    ],
    [
      'an id that is a number',
      (b: TopologyBuilder<string>) => b.sink(5 as never, ['in'], testSink()),
      [['INVALID_ID', '5', 'id']],
    ],
    [
      'inputs given as a string',
      (b: TopologyBuilder<string>) => b.sink('out', 'in' as never, testSink()),
      [['UNKNOWN_INPUT', 'out', 'inputs']],
    ],
    [
      'an input that is a number',
      (b: TopologyBuilder<string>) => b.sink('out', ['in', 5 as never], testSink()),
      [['UNKNOWN_INPUT', 'out', 'inputs[1]']],
    ],
    [
      'options that are null',
      (b: TopologyBuilder<string>) => b.sink('out', ['in'], testSink(), null as never),
      [['INVALID_OPTION', 'out', '(options)']],
    ],
    [
      'a sink without write',
      (b: TopologyBuilder<string>) => b.sink('out', ['in'], { kind: 'half' } as never),
      [['INVALID_CONFIG', 'out', 'write']],
    ],
    [
      'a transform without process, and outputs given as a string',
      (b: TopologyBuilder<string>) =>
        b.transform('t', ['in'], { kind: 'half', outputs: 'ab' } as never).sink('out', ['t'], testSink()),
      [
        ['INVALID_CONFIG', 't', 'process'],
        ['INVALID_CONFIG', 't', 'outputs'],
      ],
    ],
  ])('reports %s from untyped code as a problem naming the component and field', (_, declare, expected) => {
    const builder = new TopologyBuilder<string>(quiet).source('in', testSource([]))
    const problems = problemsOf(() => declare(builder).build())
    expect(problems.map((p) => [p.code, p.component, p.field])).toEqual(expected)
  })

  it('reports topology options that are not an object', () => {
    const problems = problemsOf(() =>
      new TopologyBuilder(null as never).source('in', testSource([])).sink('out', ['in'], testSink()).build(),
    )
    expect(problems.map((p) => [p.code, p.component, p.field])).toEqual([
      ['INVALID_OPTION', '(topology)', '(options)'],
    ])
  })

  it('keeps the metrics of a component named __proto__ as its own key', async () => {
    const topology = new TopologyBuilder(quiet)
      .source('__proto__', testSource([]))
      .sink('out', ['__proto__'], testSink())
      .build()
    const metrics = topology.metrics()
    expect(Object.keys(metrics)).toEqual(['__proto__', 'out'])
    expect(Object.getPrototypeOf(metrics)).toBe(Object.prototype)
  })

  it('reports a delay longer than a timer can wait, which would fire after 1 ms', () => {
    const problems = problemsOf(() =>
      new TopologyBuilder({ ...quiet, ackTimeoutMs: 3_000_000_000 })
        .source('in', testSource([]))
        .transform('t', ['in'], { ...passThrough(), flush() {}, flushIntervalMs: Number.POSITIVE_INFINITY })
        .sink('s', ['t'], testSink())
        .build(),
    )
    expect(problems.map((p) => [p.code, p.component, p.field, p.got])).toEqual([
      ['INVALID_OPTION', '(topology)', 'ackTimeoutMs', '3000000000'],
      ['INVALID_CONFIG', 't', 'flushIntervalMs', 'Infinity'],
    ])
    expect(problems[0]!.message).toContain('2147483647')
  })

  it('takes a retry cap past what a timer can wait (a cap, not a delay), and never waits longer than a timer can', () => {
    expect(() =>
      new TopologyBuilder(quiet)
        .source('in', testSource([]))
        .sink('s', ['in'], testSink(), { retry: { attempts: 40, maxBackoffMs: Number.MAX_VALUE } })
        .build(),
    ).not.toThrow()
    const policy = { attempts: 40, initialBackoffMs: 100, maxBackoffMs: Number.MAX_VALUE, multiplier: 2 }
    expect(RetryPolicy.backoffMs(policy, 5)).toBe(1600)
    expect(RetryPolicy.backoffMs(policy, 39)).toBe(2_147_483_647)
  })

  it("reports a transform's coalesce or synchronous that is not a boolean, rather than reading it as false", () => {
    const problems = problemsOf(() =>
      new TopologyBuilder(quiet)
        .source('in', testSource([]))
        .transform('t', ['in'], { ...passThrough(), coalesce: 'yes' as never, synchronous: 1 as never })
        .sink('s', ['t'], testSink())
        .build(),
    )
    expect(problems.map((p) => [p.code, p.component, p.field])).toEqual([
      ['INVALID_CONFIG', 't', 'coalesce'],
      ['INVALID_CONFIG', 't', 'synchronous'],
    ])
  })

  it('reports a misspelt option instead of ignoring it', () => {
    const problems = problemsOf(() =>
      new TopologyBuilder(quiet)
        .source('in', testSource([]))
        .sink('s', ['in'], testSink(), { buffer: { maxEvents: 10, whenfull: 'drop_newest' } } as never)
        .build(),
    )
    expect(problems).toMatchObject([
      {
        code: 'INVALID_OPTION',
        component: 's',
        field: 'buffer.whenfull',
        message: expect.stringContaining('whenFull'),
      },
    ])
  })

  it("describes the builder's own options as JSON Schema for config files", () => {
    expect(SinkOptions.jsonSchema()).toMatchObject({
      additionalProperties: false,
      properties: {
        acknowledgements: { type: 'boolean' },
        buffer: {
          properties: {
            maxEvents: { type: 'integer', minimum: 1, default: 500 },
            whenFull: { enum: ['block', 'drop_newest'], default: 'block' },
            droppedStatus: { enum: ['delivered', 'errored', 'rejected'], default: 'rejected' },
          },
        },
        retry: { properties: { attempts: { default: 3 }, multiplier: { minimum: 1, default: 2 } } },
      },
    })
    const topology = TopologyOptions.jsonSchema() as { properties: Record<string, unknown> }
    expect(Object.keys(topology.properties).sort()).toEqual(['ackTimeoutMs', 'acknowledgements', 'dataDir'])
  })

  it("refuses a buffer type it does not build in, such as the old { type: 'disk' }, naming the factory to use", () => {
    const problems = problemsOf(() =>
      new TopologyBuilder(quiet)
        .source('in', testSource([]))
        .sink('out', ['in'], testSink(), { buffer: { type: 'disk' } as unknown as { type: 'memory' } })
        .build(),
    )
    expect(problems).toEqual([
      expect.objectContaining({
        code: 'INVALID_OPTION',
        component: 'out',
        field: 'buffer.type',
        message: expect.stringContaining('diskBuffer('),
      }),
    ])
  })

  it('runs with the options build() checked: changing the objects afterwards changes nothing the runtime reads', async () => {
    vi.useFakeTimers()
    try {
      const options = { ...quiet, acknowledgements: true, ackTimeoutMs: 60_000 }
      const sinkOptions = { buffer: { maxEvents: 10 } }
      const gate = new Gate()
      const source = testSource([[{ n: 1 }]], { untilStopped: true })
      const topology = new TopologyBuilder(options)
        .source('in', source)
        .sink('out', ['in'], testSink({ gate }), sinkOptions)
        .build()
      // A config object reused for another topology: a 60 s ack timeout read as -5 at start timed
      // every batch out after 1 ms, and a channel of 0 events was made.
      options.ackTimeoutMs = -5
      sinkOptions.buffer.maxEvents = 0
      await topology.start()
      await vi.waitFor(() => expect(source.receipts).toHaveLength(1))
      await vi.advanceTimersByTimeAsync(10)
      gate.open()
      expect(await source.receipts[0]!.status).toBe('delivered')
      await topology.stop()
    } finally {
      vi.useRealTimers()
    }
  })

  it('reads each option once: a getter that changes between reads runs with the value build() checked', () => {
    // Validation and resolution read options apart: a getter that said false when checked and
    // true (or 0) when read again put the unchecked value in the plan.
    const reads = { topology: 0, sink: 0, concurrency: 0 }
    const options = {
      ...quiet,
      get acknowledgements() {
        return reads.topology++ !== 0
      },
    }
    const sinkOptions = {
      get acknowledgements() {
        return reads.sink++ === 0 ? undefined : true
      },
      get concurrency() {
        return reads.concurrency++ === 0 ? 2 : 0
      },
    }
    const topology = new TopologyBuilder(options)
      .source('in', testSource([]))
      .sink('out', ['in'], testSink(), sinkOptions)
      .build()
    expect(topology.sinkAcknowledgements).toEqual({ out: false })
    expect(topology.sourceAcknowledgements).toEqual({ in: false })
    expect(reads).toEqual({ topology: 1, sink: 1, concurrency: 1 })
  })

  it('reports an option whose getter throws as a problem of its component and field, not a raw error', () => {
    const boom = (): never => {
      throw new Error('no such secret')
    }
    const problems = problemsOf(() =>
      new TopologyBuilder({
        ...quiet,
        get ackTimeoutMs(): number {
          return boom()
        },
      })
        .source('in', testSource([]))
        .transform('t', ['in'], passThrough(), {
          get dropStatus(): 'rejected' {
            return boom()
          },
        })
        .sink('out', ['t'], testSink(), {
          retry: {
            get attempts(): number {
              return boom()
            },
          },
        })
        .build(),
    )
    expect(problems.map((p) => [p.code, p.component, p.field, p.message])).toEqual([
      [
        'INVALID_OPTION',
        '(topology)',
        'ackTimeoutMs',
        'must be a positive number of at most 2147483647, got a getter that threw: no such secret',
      ],
      [
        'INVALID_OPTION',
        't',
        'dropStatus',
        'must be "delivered" or "rejected", got a getter that threw: no such secret',
      ],
      [
        'INVALID_OPTION',
        'out',
        'retry.attempts',
        'must be a positive integer, got a getter that threw: no such secret',
      ],
    ])
  })

  it('types inputs: only declared ids and ports of transforms', () => {
    const builder = new TopologyBuilder(quiet)
      .source('in', testSource([]))
      .transform('split', ['in'], routeBy({ errors: () => true }))
    type Inputs = Parameters<typeof builder.sink>[1][number]
    expectTypeOf<Inputs>().toEqualTypeOf<'in' | 'split' | 'split.errors' | 'split._unmatched'>()
    // @ts-expect-error: 'nope' is not declared
    builder.sink('x', ['nope'], testSink())
  })
})

describe('acknowledgement propagation', () => {
  const build = (global: boolean | undefined, sinkSetting: boolean | undefined) =>
    new TopologyBuilder({ ...quiet, ...(global === undefined ? {} : { acknowledgements: global }) })
      .source('in', testSource([]))
      .sink('out', ['in'], testSink(), sinkSetting === undefined ? {} : { acknowledgements: sinkSetting })
      .build()

  it.each([
    [undefined, undefined, false],
    [false, undefined, false],
    [true, undefined, true],
    [false, true, true],
    [true, false, false],
    [undefined, true, true],
  ] as const)(
    'global %s, sink %s: the sink acknowledges = %s (the sink wins both ways)',
    (global, sink, expected) => {
      const topology = build(global, sink)
      expect(topology.sinkAcknowledgements).toEqual({ out: expected })
      expect(topology.sourceAcknowledgements).toEqual({ in: expected })
    },
  )

  it('walks back through every input of every transform, whichever port the sink reads', () => {
    const topology = new TopologyBuilder(quiet)
      .source('a', testSource([]))
      .source('b', testSource([]))
      .source('c', testSource([]))
      .source('d', testSource([]))
      .transform('join', ['a', 'b'], passThrough())
      .transform('split', ['join', 'c'], routeBy({ x: () => true }))
      .sink('acking', ['split.x'], testSink(), { acknowledgements: true })
      .sink('quiet', ['split._unmatched', 'd'], testSink())
      .build()
    expect(topology.sourceAcknowledgements).toEqual({ a: true, b: true, c: true, d: false })
  })

  it('warns of a source or transform whose outputs nobody reads, whose events would be dropped as delivered', async () => {
    const warnings: TopologyWarning[] = []
    const forgotten = testSource([[{ n: 1 }]])
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: (w) => warnings.push(w) })
      .source('in', testSource([]))
      .source('forgotten', forgotten)
      .transform('parse', ['in'], passThrough())
      .transform('dead_end', ['in'], passThrough())
      // A route whose `_unmatched` nobody reads is read through its other port: no warning.
      .transform('split', ['parse'], routeBy({ x: () => true }))
      .sink('out', ['split.x'], testSink())
      .build()
    expect(
      warnings.map((w) => [
        w.code,
        w.code === 'NO_CONSUMERS' ? w.component : w.code === 'ACK_UNSUPPORTED' ? w.source : w.sink,
      ]),
    ).toEqual([
      ['NO_CONSUMERS', 'forgotten'],
      ['NO_CONSUMERS', 'dead_end'],
    ])
    expect(warnings[0]!.message).toContain("nothing reads source 'forgotten'")
    // No acknowledging sink reaches it: acknowledgements are off for it, and it counts as sent.
    expect(warnings[0]!.message).toContain('no sink receives it')
    expect(warnings[0]!.message).toContain('its batches count as delivered once sent')
    expect(warnings[1]!.message).toContain("nothing reads transform 'dead_end'")
    expect(warnings[1]!.message).toContain(
      'which settles delivered: the sources that feed it acknowledge it upstream though no sink received it',
    )
    expect(topology.warnings).toEqual(warnings)
    // What the warning is about: the source's batch is acknowledged though no sink received it.
    await topology.start()
    await topology.stop()
    expect(await forgotten.statuses()).toEqual(['delivered'])
  })

  it('words the NO_CONSUMERS warning for acknowledgements off: nothing is settled, so nothing is acknowledged by the drop', () => {
    // Acknowledgements off everywhere: the warning said the drop settles delivered and a source
    // acknowledges it upstream, where no event carries a batch and nothing is settled.
    const warnings: TopologyWarning[] = []
    new TopologyBuilder({ onWarning: (w) => warnings.push(w) })
      .source('in', testSource([]))
      .source('forgotten', testSource([]))
      .transform('dead_end', ['in'], passThrough())
      .sink('out', ['in'], testSink())
      .build()
    expect(warnings.map((w) => w.message)).toEqual([
      "nothing reads source 'forgotten' (test_source): everything it sends is discarded as dropped, and no sink receives it (acknowledgements are off for it: its batches count as delivered once sent); give a sink or transform 'forgotten' as an input, or remove it",
      "nothing reads transform 'dead_end' (pass): everything it emits is discarded as dropped, and no sink receives it (acknowledgements are off for what it reads: no source hears of it); give a sink or transform 'dead_end' as an input, or remove it",
    ])
  })

  it('warns of an authoritative sink whose acknowledgements are off: what it records reaches no source', () => {
    const warnings: TopologyWarning[] = []
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: (w) => warnings.push(w) })
      .source('in', testSource([]))
      .sink('alerts', ['in'], testSink(), { authoritative: true, acknowledgements: false })
      .sink('pager', ['in'], testSink(), { authoritative: true })
      .build()
    expect(warnings).toEqual([
      {
        code: 'AUTHORITATIVE_IGNORED',
        sink: 'alerts',
        message:
          "sink 'alerts' (test_sink) is authoritative, but its acknowledgements are off (its own acknowledgements: false): what it reports reaches no source, so it records nothing; turn its acknowledgements on, or remove authoritative",
      },
    ])
    expect(topology.warnings).toEqual(warnings)
    const byDefault: TopologyWarning[] = []
    new TopologyBuilder({ onWarning: (w) => byDefault.push(w) })
      .source('in', testSource([]))
      .sink('alerts', ['in'], testSink(), { authoritative: true })
      .build()
    expect(byDefault.map((w) => [w.code, w.code === 'AUTHORITATIVE_IGNORED' && w.sink])).toEqual([
      ['AUTHORITATIVE_IGNORED', 'alerts'],
    ])
    expect(byDefault[0]!.message).toContain("(the topology's default)")
  })

  it('emits each warning with its own code when no onWarning is given', () => {
    const emit = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    try {
      new TopologyBuilder({ acknowledgements: true })
        .source('stdin', testSource([], { canAcknowledge: false }))
        .source('forgotten', testSource([]))
        .sink('out', ['stdin'], testSink())
        .build()
      expect(emit.mock.calls.map((call) => (call[1] as { code: string }).code)).toEqual([
        'ACKLINE_ACK_UNSUPPORTED',
        'ACKLINE_NO_CONSUMERS',
      ])
    } finally {
      emit.mockRestore()
    }
  })

  it('warns once per source and sink that cannot acknowledge, even through a diamond', () => {
    const warnings: TopologyWarning[] = []
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: (w) => warnings.push(w) })
      .source('stdin', testSource([], { canAcknowledge: false }))
      .transform('left', ['stdin'], passThrough())
      .transform('right', ['stdin'], passThrough())
      .transform('join', ['left', 'right'], passThrough())
      .sink('out', ['join'], testSink())
      .sink('other', ['join'], testSink())
      .sink('off', ['join'], testSink(), { acknowledgements: false })
      .build()
    // A NO_CONSUMERS warning among them would show as [code, component] and fail the comparison.
    expect(
      warnings.map((w) =>
        w.code === 'ACK_UNSUPPORTED'
          ? [w.source, w.sink]
          : w.code === 'NO_CONSUMERS'
            ? [w.code, w.component]
            : [w.code, w.sink],
      ),
    ).toEqual([
      ['stdin', 'out'],
      ['stdin', 'other'],
    ])
    expect(warnings[0]!.message).toContain("source 'stdin'")
    expect(warnings[0]!.message).toContain("sink 'out'")
    expect(warnings[0]!.message).toContain('silent data loss could occur')
    expect(topology.warnings).toEqual(warnings)
    // The topology still builds; a source that cannot acknowledge makes no notifiers.
    expect(topology.sourceAcknowledgements).toEqual({ stdin: false })
  })

  it('tells a source no acknowledging sink reaches to create no notifiers', async () => {
    const acked = testSource([[{ n: 1 }]])
    const unacked = testSource([[{ n: 2 }]])
    const topology = new TopologyBuilder({ ...quiet, acknowledgements: true })
      .source('acked', acked)
      .source('unacked', unacked)
      .sink('out', ['acked'], testSink())
      .sink('off', ['unacked'], testSink(), { acknowledgements: false })
      .build()
    await topology.start()
    await topology.done
    expect(acked.acknowledgements).toBe(true)
    expect(unacked.acknowledgements).toBe(false)
    expect(acked.receipts[0]!.batchId).toBeTypeOf('string')
    expect(unacked.receipts[0]!.batchId).toBeUndefined()
    expect(await unacked.statuses()).toEqual(['delivered'])
  })
})

describe("a transform's context.acknowledgements", () => {
  /** A pass-through transform that notes what its context said. */
  const noting = () => {
    const said: boolean[] = []
    const transform: Transform = {
      kind: 'noting',
      process(events, context) {
        said.push(context.acknowledgements)
        context.emitAll(events)
      },
    }
    return { said, transform }
  }

  it('is true only where its output reaches an acknowledging sink from an acknowledging source', async () => {
    const toAcked = noting() // feeds an acknowledging sink
    const toBoth = noting() // feeds one sink that acknowledges and one that does not
    const toUnacked = noting() // feeds only a sink declared without acknowledgements
    const upstream = noting() // feeds toAcked: what is downstream of it counts too
    const fromDeaf = noting() // fed only by a source that cannot acknowledge
    const topology = new TopologyBuilder({ ...quiet, acknowledgements: true })
      .source('in', testSource([[{ n: 1 }]]))
      .source('deaf', testSource([[{ n: 2 }]], { canAcknowledge: false }))
      .transform('upstream', ['in'], upstream.transform)
      .transform('toAcked', ['upstream'], toAcked.transform)
      .transform('toBoth', ['in'], toBoth.transform)
      .transform('toUnacked', ['in'], toUnacked.transform)
      .transform('fromDeaf', ['deaf'], fromDeaf.transform)
      .sink('acked', ['toAcked', 'toBoth', 'fromDeaf'], testSink())
      .sink('unacked', ['toBoth', 'toUnacked'], testSink(), { acknowledgements: false })
      .build()
    await topology.start()
    await topology.done
    expect({
      upstream: upstream.said,
      toAcked: toAcked.said,
      toBoth: toBoth.said,
      toUnacked: toUnacked.said,
      fromDeaf: fromDeaf.said,
    }).toEqual({ upstream: [true], toAcked: [true], toBoth: [true], toUnacked: [false], fromDeaf: [false] })
  })

  it('is true where another transform follows it, even if only a sink without acknowledgements is after that', async () => {
    // The second transform may throw or drop 'rejected': that status reaches the source.
    const first = noting()
    const last = noting()
    const topology = new TopologyBuilder({ ...quiet, acknowledgements: true })
      .source('in', testSource([[{ n: 1 }]]))
      .transform('first', ['in'], first.transform)
      .transform('last', ['first'], last.transform)
      .sink('unacked', ['last'], testSink(), { acknowledgements: false })
      .sink('acked', ['in'], testSink())
      .build()
    await topology.start()
    await topology.done
    expect({ first: first.said, last: last.said }).toEqual({ first: [true], last: [false] })
  })

  it('is false for every transform of a topology without acknowledgements', async () => {
    const t = noting()
    const topology = new TopologyBuilder(quiet)
      .source('in', testSource([[{ n: 1 }], [{ n: 2 }]]))
      .transform('t', ['in'], t.transform)
      .sink('out', ['t'], testSink())
      .build()
    await topology.start()
    await topology.done
    expect(t.said).toEqual([false, false])
  })
})

describe('a validate() that throws a value without a string form', () => {
  it('is reported as INVALID_CONFIG naming the component, not thrown on', () => {
    const sink = {
      ...testSink(),
      validate: () => {
        throw Object.create(null)
      },
    }
    const problems = problemsOf(() =>
      new TopologyBuilder(quiet).source('in', testSource([])).sink('out', ['in'], sink).build(),
    )
    expect(brief(problems)).toEqual(['INVALID_CONFIG out (validate)'])
  })

  it('reports the issues of a component whose kind is a Symbol (untyped code), not a TypeError', () => {
    const sink = {
      ...testSink(),
      kind: Symbol('odd') as unknown as string,
      validate: () => [{ field: 'x', message: 'bad' }],
    }
    const problems = problemsOf(() =>
      new TopologyBuilder(quiet).source('in', testSource([])).sink('out', ['in'], sink).build(),
    )
    expect(problems.map((p) => p.message)).toContainEqual(expect.stringContaining('Symbol(odd): bad'))
  })
})

describe('a validate() that returns no list of issues (untyped code)', () => {
  it('is reported as INVALID_CONFIG on (validate), saying what it returned, rather than an issue of no field and no message', () => {
    const problems = problemsOf(() =>
      new TopologyBuilder(quiet)
        // Messages where issues are due: they were filed under field undefined as "test_source: undefined".
        .source('in', { ...testSource([]), validate: () => ['port must be set'] as never })
        // A validate that forgot its return: "validate() threw: TypeError: … is not iterable".
        .sink('out', ['in'], { ...testSink(), validate: () => undefined as never })
        .sink('disk', ['in'], testSink(), {
          buffer: {
            kind: 'fake_disk',
            validate: () => [{ field: 'path', message: 'no path' }, 'segment too small'] as never,
            open: () => Promise.reject(new Error('not opened at build')),
          },
        })
        .build(),
    )
    expect(problems.map((p) => [p.code, p.component, p.field])).toEqual([
      ['INVALID_CONFIG', 'in', '(validate)'],
      ['INVALID_CONFIG', 'out', '(validate)'],
      ['INVALID_OPTION', 'disk', 'buffer.path'],
      ['INVALID_OPTION', 'disk', 'buffer'],
    ])
    expect(problems[0]!.message).toBe(
      'test_source: validate() returned "port must be set" where an issue ({ field, message }) is due',
    )
    expect(problems[1]!.message).toBe(
      'test_sink: validate() returned undefined where an array of issues ({ field, message }) is due',
    )
    expect(problems[3]!.message).toContain('"segment too small"')
  })

  it("reports a buffer factory's validate() that forgot its return, as a component's is", () => {
    const problems = problemsOf(() =>
      new TopologyBuilder(quiet)
        .source('in', testSource([]))
        .sink('disk', ['in'], testSink(), {
          buffer: {
            kind: 'fake_disk',
            // Taken for "no issues": the buffer's options went unchecked until open() at start.
            validate: () => undefined as never,
            open: () => Promise.reject(new Error('not opened at build')),
          },
        })
        .build(),
    )
    expect(problems.map((p) => [p.code, p.component, p.field])).toEqual([
      ['INVALID_OPTION', 'disk', 'buffer'],
    ])
    expect(problems[0]!.message).toContain('returned undefined')
  })
})

describe('a transform whose outputs are no array of strings (untyped code)', () => {
  it('is reported as INVALID_CONFIG on outputs, with the input naming its port as undeclared, not a TypeError', () => {
    const untyped = (outputs: unknown): Transform => ({ ...passThrough(), outputs }) as unknown as Transform
    const problems = problemsOf(() =>
      new TopologyBuilder<string>(quiet)
        .source('in', testSource([]))
        .transform('five', ['in'], untyped(5))
        .transform('symbols', ['in'], untyped([Symbol('x')]))
        .sink('a', ['five.x'], testSink())
        .sink('b', ['symbols.y'], testSink())
        .build(),
    )
    expect(brief(problems)).toEqual([
      'INVALID_CONFIG five outputs',
      'INVALID_CONFIG symbols outputs[0]',
      'UNDECLARED_OUTPUT a inputs[0]',
      'UNDECLARED_OUTPUT b inputs[0]',
      'UNFED_SINK a inputs',
      'UNFED_SINK b inputs',
    ])
    expect(problems.find((p) => p.component === 'b')!.message).toContain("(declared: 'Symbol(x)')")
  })
})

describe('a component whose member getter throws (untyped code, a proxy)', () => {
  it('is reported as INVALID_CONFIG naming the component and the member, not thrown raw', () => {
    const throwing = <T extends object>(component: T, member: string): T =>
      Object.defineProperty(component, member, {
        get() {
          throw new Error(`no ${member}`)
        },
      })
    const problems = problemsOf(() =>
      new TopologyBuilder<string>({ ...quiet, acknowledgements: true })
        .source('in', throwing(testSource([]), 'canAcknowledge'))
        .transform('kindless', ['in'], throwing(passThrough(), 'kind'))
        .transform('portless', ['in'], throwing(passThrough(), 'outputs'))
        .transform('unchecked', ['in'], throwing(passThrough(), 'validate'))
        .sink('out', ['kindless', 'portless.x', 'unchecked'], throwing(testSink(), 'canAcknowledge'))
        .build(),
    )
    expect(problems.map((p) => [p.code, p.component, p.field, p.message])).toEqual([
      [
        'INVALID_CONFIG',
        'in',
        'canAcknowledge',
        "source 'in': reading its canAcknowledge threw: no canAcknowledge",
      ],
      ['INVALID_CONFIG', 'kindless', 'kind', "transform 'kindless': reading its kind threw: no kind"],
      [
        'INVALID_CONFIG',
        'portless',
        'outputs',
        "transform 'portless': reading its outputs threw: no outputs",
      ],
      [
        'INVALID_CONFIG',
        'unchecked',
        'validate',
        "transform 'unchecked': reading its validate threw: no validate",
      ],
      [
        'INVALID_CONFIG',
        'out',
        'canAcknowledge',
        "sink 'out': reading its canAcknowledge threw: no canAcknowledge",
      ],
    ])
  })
})

describe('a source whose validate getter throws (untyped code, a proxy)', () => {
  it('is reported as INVALID_CONFIG naming the source and validate, not thrown raw', () => {
    // Planning calls a source's validate() too (checkConfig), but only a transform's and a sink's
    // were read first: a source's getter threw out of build() raw.
    const source = Object.defineProperty(testSource([]), 'validate', {
      get() {
        throw new Error('no validate')
      },
    })
    const problems = problemsOf(() =>
      new TopologyBuilder<string>(quiet).source('in', source).sink('out', ['in'], testSink()).build(),
    )
    expect(problems.map((p) => [p.code, p.component, p.field, p.message])).toEqual([
      ['INVALID_CONFIG', 'in', 'validate', "source 'in': reading its validate threw: no validate"],
    ])
  })
})

describe('options that cannot be read at all (a proxy whose traps throw)', () => {
  it('are an INVALID_OPTION problem of the declaration, not a TypeError out of build()', () => {
    // The snapshot of options whose keys cannot be listed is undefined: planning then read
    // `undefined.buffer` and threw a TypeError naming neither the component nor the option.
    const sealed = (): never =>
      new Proxy(
        {},
        {
          ownKeys() {
            throw new Error('sealed vault')
          },
        },
      ) as never
    const problems = problemsOf(() =>
      new TopologyBuilder<string>(quiet)
        .source('in', testSource([]))
        .transform('t', ['in'], passThrough(), sealed())
        .sink('out', ['t'], testSink(), sealed())
        .build(),
    )
    expect(problems.map((p) => [p.code, p.component, p.field])).toEqual([
      ['INVALID_OPTION', 't', '(options)'],
      ['INVALID_OPTION', 'out', '(options)'],
    ])
    expect(problems[1]!.message).toContain('sealed vault')
  })
})

describe('options given by a proxy with a get trap alone', () => {
  it('are read as the proxy answers each declared option, and checked', () => {
    // The snapshot took a declared option only when `key in options` said so, which such a proxy
    // (over an empty target) never does: its options were read as none, so a concurrency of 0
    // built without a word and ran as the default.
    const options = new Proxy({}, { get: (_target, key) => (key === 'concurrency' ? 0 : undefined) })
    const problems = problemsOf(() =>
      new TopologyBuilder<string>(quiet)
        .source('in', testSource([]))
        .sink('out', ['in'], testSink(), options as never)
        .build(),
    )
    expect(problems.map((p) => [p.code, p.component, p.field])).toEqual([
      ['INVALID_OPTION', 'out', 'concurrency'],
    ])
  })
})

describe('a component with a getter of its own that planning never reads', () => {
  it('builds without reading it: only the members the runtime reads are checked', () => {
    // The member check read every enumerable key of a component once (e09e13f's snapshot), so a
    // sink whose own `client` getter throws until it is started failed to build (INVALID_CONFIG on
    // `client`), though nothing reads that member before start().
    let reads = 0
    const sink = Object.defineProperty(testSink(), 'client', {
      enumerable: true,
      get() {
        reads++
        throw new Error('not started yet')
      },
    })
    new TopologyBuilder<string>(quiet).source('in', testSource([])).sink('out', ['in'], sink).build()
    expect(reads).toBe(0)
  })
})
