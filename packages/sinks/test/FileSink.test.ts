import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { EventArray, LogEvent } from '@ackline/core'
import { file } from '@ackline/sinks'
import { RetryableError } from '@ackline/topology'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'

let dir: string
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ackline-file-sink-'))
})
afterEach(() => {
  vi.restoreAllMocks()
  rmSync(dir, { recursive: true, force: true })
})

const array = (...records: Record<string, number | string>[]) =>
  EventArray.from(records.map((fields) => new LogEvent(fields)))
const lines = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l))

describe('file', () => {
  it('appends one JSON line per event after what the file held', async () => {
    const path = join(dir, 'out.ndjson')
    writeFileSync(path, '{"old":true}\n')
    const sink = file({ path })
    await sink.start()
    expect(await sink.write(array({ n: 1 }, { n: 2, s: 'a\nb' }))).toBeUndefined()
    await sink.write(array({ n: 3 }))
    await sink.stop()
    expect(lines(path)).toEqual([{ old: true }, { n: 1 }, { n: 2, s: 'a\nb' }, { n: 3 }])
  })

  it('keeps the lines of concurrent writes in contiguous blocks, in call order', async () => {
    const path = join(dir, 'out.ndjson')
    const sink = file({ path })
    await Promise.all([sink.write(array({ w: 1 }, { w: 1 })), sink.write(array({ w: 2 }, { w: 2 }))])
    await sink.stop()
    expect(lines(path).map((l) => l.w)).toEqual([1, 1, 2, 2])
  })

  it('fsyncs before a write resolves', async () => {
    const probe = await open(join(dir, 'probe'), 'w')
    const proto = Object.getPrototypeOf(probe) as { sync: () => Promise<void> }
    await probe.close()
    const order: string[] = []
    const sync = proto.sync
    vi.spyOn(proto, 'sync').mockImplementation(async function (this: unknown) {
      await sync.call(this)
      order.push('synced')
    })
    const sink = file({ path: join(dir, 'out.ndjson') })
    await sink.write(array({ n: 1 })).then(() => order.push('resolved'))
    await sink.stop()
    expect(order).toEqual(['synced', 'resolved'])
  })

  it('throws a RetryableError naming the path when it cannot write, and recovers on a later write', async () => {
    const path = join(dir, 'later', 'out.ndjson')
    const sink = file({ path })
    const failure = await sink.write(array({ n: 1 })).catch((e: unknown) => e)
    expect(failure).toBeInstanceOf(RetryableError)
    expect((failure as RetryableError).message).toContain(path)
    mkdirSync(join(dir, 'later'))
    await sink.write(array({ n: 2 }))
    await sink.stop()
    expect(lines(path)).toEqual([{ n: 2 }])
  })

  it('reports a bad path by field', () => {
    expect(file({ path: '' }).validate()).toEqual([
      {
        field: 'path',
        expected: 'a non-empty string',
        got: '""',
        message: 'must be a non-empty string, got ""',
      },
    ])
    expect(file({ path: 'a\0b' }).validate()[0]?.message).toBe(
      'must be a file path without a NUL character, got "a\\u0000b"',
    )
    const missing = join(dir, 'missing', 'x.ndjson')
    expect(file({ path: missing }).validate()[0]?.message).toBe(
      `must be a file path in an existing directory, got ${JSON.stringify(missing)}`,
    )
    expect(file({ path: dir }).validate()[0]?.message).toBe(
      `must be a file path, not a directory, got ${JSON.stringify(dir)}`,
    )
    expect(
      file({} as never)
        .validate()
        .map((i) => i.field),
    ).toEqual(['path'])
    expect(file({ path: join(dir, 'ok.ndjson') }).validate()).toEqual([])
  })
})
