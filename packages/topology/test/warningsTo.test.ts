import { warningsTo } from '@ackline/topology'
import { afterEach, describe, expect, it, vi } from 'vitest'

afterEach(() => {
  vi.restoreAllMocks()
})

describe('warningsTo', () => {
  it('hands warnings to onWarning, or to process.emitWarning with the code when unset', () => {
    const seen: string[] = []
    warningsTo((m) => seen.push(m), 'in', 'ACKLINE_TEST')('lost the connection')
    expect(seen).toEqual(['lost the connection'])
    const emit = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    warningsTo(undefined, 'in', 'ACKLINE_TEST')('lost the connection')
    expect(emit).toHaveBeenCalledWith('lost the connection', { code: 'ACKLINE_TEST' })
  })

  it('never throws: what a throwing or rejecting onWarning failed on goes to process.emitWarning, naming the component', async () => {
    const emit = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const throwing = warningsTo(
      () => {
        throw new Error('boom')
      },
      'in',
      'ACKLINE_TEST',
    )
    expect(() => throwing('first')).not.toThrow()
    const rejecting = warningsTo(
      (() => Promise.reject(new Error('later'))) as () => void,
      'in',
      'ACKLINE_TEST',
    )
    rejecting('second')
    await new Promise((resolve) => setImmediate(resolve))
    expect(emit.mock.calls.map(([message]) => message)).toEqual([
      'first (the onWarning of in failed on it: Error: boom)',
      'second (the onWarning of in failed on it: Error: later)',
    ])
  })

  it('never throws when onWarning throws a value without a string form (Object.create(null))', () => {
    const emit = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const throwing = warningsTo(
      () => {
        throw Object.create(null)
      },
      'in',
      'ACKLINE_TEST',
    )
    expect(() => throwing('first')).not.toThrow()
    expect(emit.mock.calls.map(([message]) => message)).toEqual([
      'first (the onWarning of in failed on it: a value that cannot be converted to a string)',
    ])
  })
})
