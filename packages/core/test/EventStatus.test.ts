import { spawnSync } from 'node:child_process'
import { EventStatus, FinalizationError } from '@ackline/core'
import { afterEach, describe, expect, it } from 'vitest'

// Every pair of the lattice: [current, next, result]; `invalid` marks an update to 'dropped'.
const table: readonly [EventStatus, EventStatus, EventStatus | 'invalid'][] = [
  ['dropped', 'dropped', 'dropped'],
  ['dropped', 'delivered', 'delivered'],
  ['dropped', 'errored', 'errored'],
  ['dropped', 'rejected', 'rejected'],
  ['dropped', 'recorded', 'recorded'],
  ['delivered', 'dropped', 'invalid'],
  ['delivered', 'delivered', 'delivered'],
  ['delivered', 'errored', 'errored'],
  ['delivered', 'rejected', 'rejected'],
  ['delivered', 'recorded', 'recorded'],
  ['errored', 'dropped', 'invalid'],
  ['errored', 'delivered', 'errored'],
  ['errored', 'errored', 'errored'],
  ['errored', 'rejected', 'rejected'],
  ['errored', 'recorded', 'recorded'],
  ['rejected', 'dropped', 'invalid'],
  ['rejected', 'delivered', 'rejected'],
  ['rejected', 'errored', 'rejected'],
  ['rejected', 'rejected', 'rejected'],
  ['rejected', 'recorded', 'recorded'],
  ['recorded', 'dropped', 'recorded'],
  ['recorded', 'delivered', 'recorded'],
  ['recorded', 'errored', 'recorded'],
  ['recorded', 'rejected', 'recorded'],
  ['recorded', 'recorded', 'recorded'],
]

describe('EventStatus.update', () => {
  const strict = EventStatus.isStrict()
  afterEach(() => {
    EventStatus.setStrict(strict)
  })

  it('the table lists all 25 pairs once', () => {
    expect(new Set(table.map(([c, n]) => `${c}>${n}`)).size).toBe(25)
  })

  it.each(table)('update(%s, %s) is %s in strict mode', (current, next, result) => {
    EventStatus.setStrict(true)
    if (result === 'invalid') {
      expect(() => EventStatus.update(current, next)).toThrow(FinalizationError)
    } else {
      expect(EventStatus.update(current, next)).toBe(result)
    }
  })

  it.each(table)(
    'update(%s, %s) outside strict mode leaves an invalid update unchanged',
    (current, next, result) => {
      EventStatus.setStrict(false)
      expect(EventStatus.update(current, next)).toBe(result === 'invalid' ? current : result)
    },
  )

  it('the invalid update throws with code INVALID_STATUS_UPDATE', () => {
    EventStatus.setStrict(true)
    expect(() => EventStatus.update('delivered', 'dropped')).toThrow(
      expect.objectContaining({ code: 'INVALID_STATUS_UPDATE', name: 'FinalizationError' }),
    )
  })

  it.each([
    ['dropped', 'bogus'],
    ['recorded', 'bogus'],
    ['bogus', 'recorded'],
    ['bogus', 'errored'],
    ['delivered', undefined],
    [null, 'dropped'],
  ])('update(%j, %j) from untyped code throws INVALID_STATUS, strict or not', (current, next) => {
    for (const mode of [true, false]) {
      EventStatus.setStrict(mode)
      expect(() => EventStatus.update(current as EventStatus, next as EventStatus)).toThrow(
        expect.objectContaining({ name: 'FinalizationError', code: 'INVALID_STATUS' }),
      )
    }
  })

  it('strict mode is on in this suite, because the vitest config asks for it with ACKLINE_STRICT=1', () => {
    expect(process.env.ACKLINE_STRICT).toBe('1')
    expect(strict).toBe(true)
  })

  // A fresh process, since strictness is read once when the package loads.
  const strictIn = (env: Record<string, string>): string => {
    const { ACKLINE_STRICT: _, NODE_ENV: __, ...rest } = process.env
    const child = spawnSync(
      process.execPath,
      [
        '--conditions=source',
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        "import { EventStatus } from '@ackline/core'; console.log(EventStatus.isStrict())",
      ],
      { env: { ...rest, ...env }, encoding: 'utf8' },
    )
    expect(child.stderr).toBe('')
    return child.stdout.trim()
  }

  it('does not behave differently under NODE_ENV=test than in production', () => {
    expect(strictIn({ NODE_ENV: 'test' })).toBe('false')
    expect(strictIn({ NODE_ENV: 'test', ACKLINE_STRICT: '1' })).toBe('true')
  })
})
