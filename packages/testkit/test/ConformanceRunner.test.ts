// The options every conformance suite shares, refused before any rule runs when no rule could
// check anything with them.
import {
  bufferConformance,
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
