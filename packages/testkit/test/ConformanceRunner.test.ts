// The options every conformance suite shares, refused before any rule runs when no rule could
// check anything with them.
import {
  bufferConformance,
  ConformanceError,
  type ConformanceRunner,
  checkBuffer,
  checkSink,
  checkSource,
  checkTransform,
  sinkConformance,
  sourceConformance,
  transformConformance,
} from '@ackline/testkit'
import type { Sink, Source, Transform } from '@ackline/topology'
import { describe, expect, it } from 'vitest'

// A sink that stores nothing, a transform that forgets every event, a source that sends nothing:
// each breaks its suite, so a suite that passed them would have checked nothing.
const storesNothing = (): Sink => ({ kind: 'stores_nothing', write: async () => undefined })
const forgets = (): Transform => ({ kind: 'forgets', process: () => undefined })
const sendsNothing = (): Source => ({
  kind: 'sends_nothing',
  canAcknowledge: true,
  run: async () => undefined,
})
const noBuffer = () => Promise.reject(new Error('make should not be called'))
const runner = { describe: () => {}, it: () => {} }

describe('a suite refuses records it cannot check anything with', () => {
  for (const records of [[], [null], [[1]], 'abc'] as unknown as never[]) {
    it(`records: ${JSON.stringify(records)} is a RangeError naming the option, before any rule runs`, async () => {
      const options = { records, read: () => [] }
      await expect(checkSink(storesNothing, options)).rejects.toThrow(
        /the sink conformance check: 'records' must be/,
      )
      await expect(checkTransform(forgets, { records })).rejects.toThrow(
        /the transform conformance check: 'records' must be/,
      )
      await expect(checkSource(() => ({ source: sendsNothing() }), { records })).rejects.toThrow(
        /the source conformance check: 'records' must be/,
      )
      await expect(checkBuffer(noBuffer, { records })).rejects.toThrow(
        /the buffer conformance check: 'records' must be/,
      )
      expect(() => sinkConformance('s', storesNothing, { ...options, runner })).toThrow(RangeError)
      expect(() => transformConformance('t', forgets, { records, runner })).toThrow(RangeError)
      expect(() => sourceConformance('s', () => ({ source: sendsNothing() }), { records, runner })).toThrow(
        RangeError,
      )
      expect(() => bufferConformance('b', noBuffer, { records, runner })).toThrow(RangeError)
    })
  }

  it('an empty records option made every sink rule pass a sink that stores nothing', async () => {
    // The message says what was given and why it cannot be checked.
    await expect(checkSink(storesNothing, { records: [], read: () => [] })).rejects.toThrow(
      "the sink conformance check: 'records' must be a non-empty array of records (JSON objects), got []: with no record no rule checks anything",
    )
  })
})

describe('a step of the component under test that throws', () => {
  // Before, every suite reported it as "the check threw", naming no step, and for a sink the
  // suite ('sink') rather than the sink's kind; under a runner the test failed with the bare error.
  const firstLines = (found: readonly ConformanceError[]) => found.map((f) => f.message.split('\n')[0])
  const store = (over: Partial<Sink> = {}): Sink => ({
    kind: 'store',
    write: async () => undefined,
    ...over,
  })
  const boom = new Error('boom')
  const throws = () => {
    throw boom
  }

  it("a sink's make(), start() or stop(): each rule names the step, and the sink's kind once it has one", async () => {
    const made = await checkSink(throws, { read: () => [] })
    expect(made.length).toBe(6)
    for (const failure of made) expect(failure.cause).toBe(boom)
    expect(firstLines(made)).toContain('sink.never-ends-events (sink): make() threw: Error: boom')
    const started = await checkSink(() => store({ start: throws }), { read: () => [] })
    expect(firstLines(started)).toContain('sink.never-ends-events (store): start() threw: Error: boom')
    expect(started.every((f) => f.message.includes('start() threw') && f.cause === boom)).toBe(true)
    const stopped = await checkSink(() => store({ stop: throws }), { read: () => [] })
    expect(firstLines(stopped)).toContain('sink.never-ends-events (store): stop() threw: Error: boom')
  })

  it("a source's make() or feed(): each rule names the step and the source's kind", async () => {
    const made = await checkSource(throws)
    expect(firstLines(made)).toEqual([
      'source.run-waits-for-accepted (source): make() threw: Error: boom',
      'source.acknowledges-only-delivered (source): make() threw: Error: boom',
    ])
    const fed = await checkSource(
      () => ({ source: sendsNothing(), feed: throws, upstream: () => ({ acked: [], failed: [] }) }),
      { timeoutMs: 200 },
    )
    expect(firstLines(fed)).toEqual([
      'source.run-waits-for-accepted (sends_nothing): feed() threw: Error: boom',
      'source.acknowledges-only-delivered (sends_nothing): feed() threw: Error: boom',
    ])
    expect(fed.every((f) => f.cause === boom)).toBe(true)
  })

  it("a buffer's make() or push(): each rule names the step", async () => {
    const made = await checkBuffer(() => Promise.reject(boom))
    expect(new Set(firstLines(made))).toEqual(
      new Set([
        'buffer.hands-out-what-it-accepts (buffer): make() threw: Error: boom',
        'buffer.never-acknowledges-before-the-sink (buffer): make() threw: Error: boom',
        'buffer.pull-waits (buffer): make() threw: Error: boom',
      ]),
    )
    const refuses = async () => ({
      buffer: { push: () => Promise.reject(boom), pull: async () => undefined, close: async () => {} },
    })
    const pushed = await checkBuffer(refuses, { timeoutMs: 200 })
    expect(firstLines(pushed)).toContain(
      'buffer.hands-out-what-it-accepts (buffer): push() threw: Error: boom',
    )
  })

  it("a transform's make(): each rule names the step", async () => {
    const made = await checkTransform(throws)
    expect(made.length).toBeGreaterThan(0)
    for (const failure of made) {
      expect(failure.message).toMatch(/^transform\.[a-z-]+ \(transform\): make\(\) threw: Error: boom/)
      expect(failure.cause).toBe(boom)
    }
  })

  it("under a test runner, the test fails with the rule's ConformanceError, not the bare error", async () => {
    const tests: (() => Promise<void>)[] = []
    const collect: ConformanceRunner = {
      describe: (_, body) => body(),
      it: (_, body) => {
        tests.push(body)
      },
    }
    sinkConformance('s', () => store({ start: throws }), { read: () => [], runner: collect })
    const failure = await tests[0]!().then(
      () => undefined,
      (error: unknown) => error,
    )
    expect(failure).toBeInstanceOf(ConformanceError)
    expect((failure as ConformanceError).message.split('\n')[0]).toBe(
      'sink.never-ends-events (store): start() threw: Error: boom',
    )
    expect((failure as ConformanceError).cause).toBe(boom)
  })
})
