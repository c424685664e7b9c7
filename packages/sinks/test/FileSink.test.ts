import { constants as bufferConstants } from 'node:buffer'
import { execFileSync } from 'node:child_process'
import {
  appendFileSync,
  constants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs'
import { open } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { EventArray, type JsonObject, LogEvent } from '@ackline/core'
import { file } from '@ackline/sinks'
import { type BatchReceipt, RetryableError, type Source, TopologyBuilder } from '@ackline/topology'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { textLimit } from '../src/internal/jsonLine.js'

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

/** A value nested `depth` levels deep: valid JSON data that `JSON.stringify` cannot walk. */
const deep = (depth: number): JsonObject => {
  let value: JsonObject = { leaf: true }
  for (let i = 0; i < depth; i++) value = { a: value }
  return value
}

/** The FileHandle prototype, to inject failures into every handle the sink opens. */
const handlePrototype = async (): Promise<Record<string, (...args: unknown[]) => Promise<unknown>>> => {
  const probe = await open(join(dir, 'probe'), 'w')
  const proto = Object.getPrototypeOf(probe)
  await probe.close()
  return proto
}

/**
 * Makes the sink's writes fail part-way: the next write after `failNext()` (every write, with
 * `always`) writes all but its last 3 bytes, then throws `code` (EIO by default), as a device that
 * fails mid-line does.
 */
const partialWrites = async (
  options: { always?: boolean; code?: 'EIO' | 'ENOSPC' } = {},
): Promise<{ failNext: () => void }> => {
  const proto = await handlePrototype()
  const write = proto.write!
  let fail = false
  vi.spyOn(proto, 'write').mockImplementation(async function (this: unknown, ...args: unknown[]) {
    if (!fail && options.always !== true) return write.apply(this, args)
    fail = false
    const [bytes, offset, length] = args as [Buffer, number, number]
    await write.call(this, bytes, offset, length - 3, null)
    const code = options.code ?? 'EIO'
    throw Object.assign(new Error(`${code}: the device failed, write`), { code })
  })
  return { failNext: () => (fail = true) }
}

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

  // Durability itself needs a power loss to test; these check the mechanism: the file is open
  // for synchronous writes, and a write resolves only after its append returned.
  it.skipIf(process.platform !== 'linux')(
    'opens the file for synchronous writes (O_SYNC), as the kernel reports (Linux: /proc/self/fdinfo)',
    async () => {
      const path = join(dir, 'out.ndjson')
      const sink = file({ path })
      await sink.start()
      const fds = readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`) === realpathSync(path)
        } catch {
          return false // the directory's own descriptor, gone once listed
        }
      })
      expect(fds).toHaveLength(1)
      const flags = Number.parseInt(
        /^flags:\s+(\d+)/m.exec(readFileSync(`/proc/self/fdinfo/${fds[0]}`, 'utf8'))![1]!,
        8,
      )
      expect(flags & constants.O_SYNC).toBe(constants.O_SYNC)
      expect(flags & constants.O_APPEND).toBe(constants.O_APPEND)
      await sink.stop()
    },
  )

  it('elsewhere than Linux, opens the file without O_SYNC and fsyncs after every append (macOS: a full fsync)', async () => {
    const platform = Object.getOwnPropertyDescriptor(process, 'platform')!
    Object.defineProperty(process, 'platform', { ...platform, value: 'darwin' })
    try {
      const path = join(dir, 'out.ndjson')
      writeFileSync(path, '{"n":0}\n') // not empty: no directory sync to count
      const proto = await handlePrototype()
      const sync = proto.sync!
      const order: string[] = []
      vi.spyOn(proto, 'sync').mockImplementation(async function (this: unknown, ...args: unknown[]) {
        await sync.apply(this, args)
        order.push('synced')
      })
      const sink = file({ path })
      await sink.write(array({ n: 1 })).then(() => order.push('resolved'))
      await sink.write(array({ n: 2 }, { n: 3 })).then(() => order.push('resolved'))
      await sink.stop()
      expect(order).toEqual(['synced', 'resolved', 'synced', 'resolved'])
      expect(lines(path)).toEqual([{ n: 0 }, { n: 1 }, { n: 2 }, { n: 3 }])
    } finally {
      Object.defineProperty(process, 'platform', platform)
    }
  })

  it('fsyncs the directory of a file it creates, once, and not that of a file that holds lines', async () => {
    const proto = await handlePrototype()
    const sync = proto.sync!
    let syncs = 0
    vi.spyOn(proto, 'sync').mockImplementation(async function (this: unknown, ...args: unknown[]) {
      syncs++
      return sync.apply(this, args)
    })
    const fresh = file({ path: join(dir, 'new.ndjson') })
    await fresh.write(array({ n: 1 }))
    await fresh.write(array({ n: 2 }))
    await fresh.stop()
    const linuxOrOther = process.platform === 'linux' ? 1 : 3 // elsewhere, also one per append
    expect(syncs).toBe(linuxOrOther)
    syncs = 0
    const existing = file({ path: join(dir, 'new.ndjson') })
    await existing.write(array({ n: 3 }))
    await existing.stop()
    expect(syncs).toBe(process.platform === 'linux' ? 0 : 1)
  })

  it('appends an array of several MiB in one write, and a short write is finished by another', async () => {
    const proto = await handlePrototype()
    const write = proto.write!
    const lengths: number[] = []
    let short = false
    vi.spyOn(proto, 'write').mockImplementation(async function (this: unknown, ...args: unknown[]) {
      const [bytes, offset, length] = args as [Buffer, number, number]
      lengths.push(length)
      // The second array's first write is cut short, as a signal or a full disk would.
      const asked = short ? length >> 1 : length
      short = false
      return write.call(this, bytes, offset, asked, null)
    })
    const path = join(dir, 'out.ndjson')
    const sink = file({ path })
    const big = 'x'.repeat(1024)
    const events = Array.from({ length: 3000 }, (_, n) => ({ n, big }))
    await sink.write(array(...events))
    expect(lengths).toHaveLength(1) // one call through FileHandle.write, for the whole array
    expect(lengths[0]).toBeGreaterThan(3_000_000)
    short = true
    await sink.write(array({ n: 3000 }, { n: 3001 }))
    await sink.stop()
    expect(lengths).toHaveLength(3)
    expect(lengths[2]).toBe(lengths[1]! - (lengths[1]! >> 1))
    expect(lines(path)).toEqual([...events, { n: 3000 }, { n: 3001 }])
  })

  describe('an array whose lines together pass the longest string (textLimit.max, lowered here)', () => {
    afterEach(() => {
      textLimit.max = bufferConstants.MAX_STRING_LENGTH
    })

    it('appends every line, in order, in one text per limit: no event rejected', async () => {
      textLimit.max = 64
      const path = join(dir, 'out.ndjson')
      const sink = file({ path })
      const s = 'x'.repeat(40) // a line of 49 characters: two do not fit in 64
      await sink.write(array({ n: 0 })) // opened before the count
      const write = vi.spyOn(await handlePrototype(), 'write')
      const result = await sink.write(array({ s, n: 1 }, { s, n: 2 }, { s, n: 3 }))
      await sink.stop()
      expect(result).toBeUndefined() // before the split: ['delivered', RangeError, …], settled rejected
      expect(write).toHaveBeenCalledTimes(3) // one text per line: two lines pass the limit
      expect(lines(path)).toEqual([{ n: 0 }, { s, n: 1 }, { s, n: 2 }, { s, n: 3 }])
    })

    it('appends every line it can encode when one cannot be, and reports that one alone', async () => {
      textLimit.max = 64
      const path = join(dir, 'out.ndjson')
      const sink = file({ path })
      const s = 'x'.repeat(40)
      const events = EventArray.from([
        new LogEvent({ s, n: 1 }),
        new LogEvent({ big: 10n } as never),
        new LogEvent({ s, n: 3 }),
        new LogEvent({ s, n: 4 }),
      ])
      await sink.write(array({ n: 0 })) // opened before the count
      const write = vi.spyOn(await handlePrototype(), 'write')
      const result = (await sink.write(events)) as unknown[]
      await sink.stop()
      expect(write).toHaveBeenCalledTimes(3) // one text per line: two lines pass the limit
      expect(result.map((r) => (r instanceof Error ? 'error' : r))).toEqual([
        'delivered',
        'error',
        'delivered',
        'delivered',
      ])
      expect(lines(path)).toEqual([{ n: 0 }, { s, n: 1 }, { s, n: 3 }, { s, n: 4 }])
    })
  })

  // The same at the engine's own limit: two strings of 268 M characters, about 10 s and 1.7 GB.
  // Run with ACKLINE_BIG_STRINGS=1; the tests above cover the split at a lowered limit.
  it.runIf(process.env.ACKLINE_BIG_STRINGS === '1')(
    'delivers an array whose lines together pass the longest string the engine makes (each line fits): no event rejected',
    async () => {
      const proto = await handlePrototype()
      const write = proto.write!
      // Counted, not stored: 540 MB on disk would only slow the test down.
      let bytes = 0
      let newlines = 0
      vi.spyOn(proto, 'write').mockImplementation(async function (this: unknown, ...args: unknown[]) {
        const [buffer, offset, length] = args as [Buffer, number, number]
        if (length < 1000) return write.apply(this, args)
        bytes += length
        for (
          let i = buffer.indexOf(0x0a, offset);
          i !== -1 && i < offset + length;
          i = buffer.indexOf(0x0a, i + 1)
        )
          newlines++
        return { bytesWritten: length, buffer }
      })
      const s = 'x'.repeat(bufferConstants.MAX_STRING_LENGTH >> 1) // two lines: over the limit by a few bytes
      const sink = file({ path: join(dir, 'out.ndjson') })
      const result = await sink.write(array({ s }, { s }))
      await sink.stop()
      expect(result).toBeUndefined() // before: ['delivered', RangeError('Invalid string length')], settled rejected
      expect(newlines).toBe(2)
      expect(bytes).toBe(2 * (s.length + '{"s":""}\n'.length))
    },
    120_000,
  )

  it('fails a write that writes nothing (rather than loop), cuts the file back, and the retry appends', async () => {
    const path = join(dir, 'out.ndjson')
    writeFileSync(path, '{"n":0}\n')
    const proto = await handlePrototype()
    const write = proto.write!
    let calls = 0
    vi.spyOn(proto, 'write').mockImplementation(async function (this: unknown, ...args: unknown[]) {
      const [bytes, offset, length] = args as [Buffer, number, number]
      calls++
      // Half the block is written, then the file takes nothing more.
      if (calls === 1) return write.call(this, bytes, offset, length >> 1, null)
      if (calls === 2) return { bytesWritten: 0, buffer: bytes }
      return write.apply(this, args)
    })
    const warnings: string[] = []
    const sink = file({ path, onWarning: (m) => warnings.push(m) })
    const failed = await sink.write(array({ n: 1 }, { n: 2 })).catch((e: unknown) => e)
    expect(failed).toBeInstanceOf(RetryableError)
    expect((failed as Error).message).toContain('wrote 0 of')
    await sink.write(array({ n: 1 }, { n: 2 }))
    await sink.stop()
    expect(readFileSync(path, 'utf8')).toBe('{"n":0}\n{"n":1}\n{"n":2}\n')
    expect(warnings).toEqual([expect.stringContaining('cut off')])
  })

  it('resolves a write only after its append returned', async () => {
    const proto = await handlePrototype()
    const write = proto.write!
    const order: string[] = []
    vi.spyOn(proto, 'write').mockImplementation(async function (this: unknown, ...args: unknown[]) {
      const written = await write.apply(this, args)
      order.push('appended')
      return written
    })
    const sink = file({ path: join(dir, 'out.ndjson') })
    await sink.write(array({ n: 1 })).then(() => order.push('resolved'))
    await sink.stop()
    expect(order).toEqual(['appended', 'resolved'])
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

  it('fails the append that finds its file removed, and the retry recreates the file with the lines', async () => {
    const path = join(dir, 'out.ndjson')
    const sink = file({ path })
    await sink.start()
    await sink.write(array({ n: 1 }))
    rmSync(path) // what `rm` or a careless clean-up does while the sink holds the file open
    const failed = await sink.write(array({ n: 2 })).catch((error: unknown) => error)
    expect(failed).toBeInstanceOf(RetryableError)
    expect((failed as Error).message).toMatch(
      /cannot append to .*: the file was removed while the sink had it open/,
    )
    expect(await sink.write(array({ n: 2 }))).toBeUndefined() // the runtime's retry
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
    // A parent that is a file, a name longer than the file system takes: issues, not a throw.
    writeFileSync(join(dir, 'plain'), '')
    const underFile = join(dir, 'plain', 'sub', 'x.ndjson')
    expect(file({ path: underFile }).validate()).toMatchObject([
      {
        field: 'path',
        message: `must be a file path in an existing directory, got ${JSON.stringify(underFile)}`,
      },
    ])
    expect(file({ path: join(dir, 'a'.repeat(300), 'x.ndjson') }).validate()).toMatchObject([
      { field: 'path', expected: 'a file path the file system accepts (ENAMETOOLONG)' },
    ])
    expect(file({ path: join(dir, 'a'.repeat(300)) }).validate()).toMatchObject([
      { field: 'path', expected: 'a file path the file system accepts (ENAMETOOLONG)' },
    ])
    expect(
      file({} as never)
        .validate()
        .map((i) => i.field),
    ).toEqual(['path'])
    expect(file({ path: join(dir, 'ok.ndjson') }).validate()).toEqual([])
  })

  it.each(['logs/', 'logs/.', 'logs//', 'logs/x/..'])(
    'refuses a path that names a directory by its last segment (%j), though nothing is there yet',
    (tail) => {
      // Not join(): it would normalise the tail away, as resolve() in the sink did, which then
      // appended to a file named 'logs' (or 'logs/x/..' made one in the directory's place).
      const path = `${dir}/${tail}`
      expect(file({ path }).validate()).toMatchObject([
        { field: 'path', expected: 'a file path, not a directory (its last segment names one)' },
      ])
    },
  )

  it('reports options that are no object (untyped code) at build, naming the sink, instead of throwing a TypeError', () => {
    // `file()` read `options.path` before anything checked the options: a bare TypeError, naming nothing.
    for (const options of [undefined, null]) {
      const build = () =>
        new TopologyBuilder({ acknowledgements: true })
          .source('in', { kind: 'test_source', canAcknowledge: true, run: async () => {} } satisfies Source)
          .sink('out', ['in'], file(options as never))
          .build()
      expect(build).toThrow(
        expect.objectContaining({
          name: 'TopologyError',
          problems: [
            expect.objectContaining({ code: 'INVALID_CONFIG', component: 'out', field: '(options)' }),
          ],
        }),
      )
      expect(build).toThrow(`must be an object, got ${String(options)}`)
    }
  })

  it.skipIf(process.platform === 'win32')(
    'refuses a path that is no regular file (a FIFO: lines in its buffer would be reported delivered, then lost or hang the write)',
    async () => {
      const path = join(dir, 'fifo')
      execFileSync('mkfifo', [path])
      expect(file({ path }).validate()).toMatchObject([
        {
          field: 'path',
          expected: 'a regular file, not a FIFO, socket or device',
          message: `must be a regular file, not a FIFO, socket or device, got ${JSON.stringify(path)}`,
        },
      ])
      // Made a FIFO after build(): the open fails, retryably and naming the path, and nothing is written.
      const sink = file({ path })
      const failed = await sink.write(array({ n: 1 })).catch((error: unknown) => error)
      expect(failed).toBeInstanceOf(RetryableError)
      expect((failed as Error).message).toBe(
        `file: cannot open ${path}: not a regular file (a FIFO, socket or device)`,
      )
      await expect(sink.start()).rejects.toThrow(/not a regular file/)
      await sink.stop()
    },
  )

  it('rejects an event whose fields encode as no JSON (a toJSON() returning undefined), not write the line "undefined"', async () => {
    const path = join(dir, 'out.ndjson')
    const sink = file({ path })
    const result = await sink.write(
      EventArray.from([new LogEvent({ n: 1 }), new LogEvent({ toJSON: () => undefined } as never)]),
    )
    await sink.stop()
    expect(result).toEqual(['delivered', expect.any(TypeError)])
    expect(readFileSync(path, 'utf8')).toBe('{"n":1}\n')
  })

  it('writes the events it can encode and reports each one it cannot by its own error', async () => {
    const path = join(dir, 'out.ndjson')
    const sink = file({ path })
    const events = EventArray.from([
      new LogEvent({ n: 1 }),
      new LogEvent({ n: 2, big: 10n } as unknown as JsonObject),
      new LogEvent({ n: 3, nested: deep(100_000) }),
      new LogEvent({ n: 4 }),
    ])
    const result = await sink.write(events)
    await sink.stop()
    expect(result).toHaveLength(4)
    expect(result![0]).toBe('delivered')
    expect(result![1]).toBeInstanceOf(TypeError)
    expect(result![2]).toBeInstanceOf(RangeError)
    expect(result![3]).toBe('delivered')
    expect(lines(path)).toEqual([{ n: 1 }, { n: 4 }])
  })

  it('starts a new line, and says so, when the file ends in a partial line', async () => {
    const path = join(dir, 'out.ndjson')
    writeFileSync(path, '{"n":0}\n{"n":1,"tru')
    const warnings: string[] = []
    const sink = file({ path, onWarning: (m) => warnings.push(m) })
    await sink.start()
    await sink.write(array({ n: 2 }))
    await sink.stop()
    expect(readFileSync(path, 'utf8')).toBe('{"n":0}\n{"n":1,"tru\n{"n":2}\n')
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toContain('partial line')
  })

  it('an onWarning that throws (or rejects) fails no write: its warning goes to process.emitWarning, naming onWarning', async () => {
    const emitted: string[] = []
    vi.spyOn(process, 'emitWarning').mockImplementation((warning: string | Error) => {
      emitted.push(String(warning))
    })
    const path = join(dir, 'out.ndjson')
    writeFileSync(path, '{"n":0}\n{"n":1,"tru') // a partial line: a warning on open
    const throwing = file({
      path,
      onWarning: () => {
        throw new Error('the log shipper is down')
      },
    })
    expect(await throwing.write(array({ n: 2 }))).toBeUndefined()
    await throwing.stop()
    expect(readFileSync(path, 'utf8')).toBe('{"n":0}\n{"n":1,"tru\n{"n":2}\n')
    // An async callback's rejection is handled too (unhandled, it would end the process).
    writeFileSync(path, '{"n":3,"tru')
    const rejecting = file({ path, onWarning: async () => Promise.reject(new Error('async shipper down')) })
    expect(await rejecting.write(array({ n: 4 }))).toBeUndefined()
    await rejecting.stop()
    await new Promise<void>((resolve) => setImmediate(resolve))
    expect(emitted).toEqual([
      expect.stringMatching(
        /partial line.*\(the onWarning of file sink .* failed on it: Error: the log shipper is down\)/,
      ),
      expect.stringMatching(
        /partial line.*\(the onWarning of file sink .* failed on it: Error: async shipper down\)/,
      ),
    ])
  })

  it.skipIf(process.platform !== 'linux')(
    'a directory that cannot be fsynced, with an onWarning that throws, still lets the sink create its file',
    async () => {
      vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
      const proto = await handlePrototype()
      // On Linux the only fsync of a new file is its directory's (appends are O_SYNC).
      vi.spyOn(proto, 'sync').mockRejectedValue(Object.assign(new Error('EACCES'), { code: 'EACCES' }))
      const path = join(dir, 'new.ndjson')
      const sink = file({
        path,
        onWarning: () => {
          throw new Error('no')
        },
      })
      // Every attempt failed before: the directory sync's warning threw, so the open did.
      expect(await sink.write(array({ n: 1 }))).toBeUndefined()
      await sink.stop()
      expect(lines(path)).toEqual([{ n: 1 }])
    },
  )

  it('cuts off what a failed append wrote before the retry appends', async () => {
    const path = join(dir, 'out.ndjson')
    writeFileSync(path, '{"n":0}\n')
    const { failNext } = await partialWrites({ code: 'EIO' })
    failNext()
    const warnings: string[] = []
    const sink = file({ path, onWarning: (m) => warnings.push(m) })
    const failed = await sink.write(array({ n: 1 }, { n: 2 })).catch((e: unknown) => e)
    expect(failed).toBeInstanceOf(RetryableError)
    expect(readFileSync(path, 'utf8')).not.toMatch(/\n$/) // the fragment is there
    await sink.write(array({ n: 1 }, { n: 2 }))
    await sink.stop()
    expect(readFileSync(path, 'utf8')).toBe('{"n":0}\n{"n":1}\n{"n":2}\n')
    expect(warnings).toEqual([expect.stringContaining('cut off')])
  })

  it('cuts off what a failed append wrote on a later retry when the cut itself failed once', async () => {
    const path = join(dir, 'out.ndjson')
    writeFileSync(path, '{"n":0}\n')
    const { failNext } = await partialWrites({ code: 'EIO' })
    const proto = await handlePrototype()
    const truncate = proto.truncate!
    let truncates = 0
    vi.spyOn(proto, 'truncate').mockImplementation(async function (this: unknown, ...args: unknown[]) {
      if (++truncates === 1)
        throw Object.assign(new Error('EIO: the device failed, ftruncate'), { code: 'EIO' })
      return truncate.apply(this, args)
    })
    failNext()
    const sink = file({ path, onWarning: () => {} })
    await expect(sink.write(array({ n: 1 }, { n: 2 }))).rejects.toBeInstanceOf(RetryableError)
    // The retry's open cannot cut the fragment: it fails, and the next retry must cut it still.
    await expect(sink.write(array({ n: 1 }, { n: 2 }))).rejects.toBeInstanceOf(RetryableError)
    await sink.write(array({ n: 1 }, { n: 2 }))
    await sink.stop()
    // Before: the fragment stayed, a malformed line '{"n":' and '{"n":1}' twice.
    expect(readFileSync(path, 'utf8')).toBe('{"n":0}\n{"n":1}\n{"n":2}\n')
    expect(truncates).toBe(2)
  })

  it('cuts off at stop what the last failed append wrote, when no write came after it to do so', async () => {
    const path = join(dir, 'out.ndjson')
    writeFileSync(path, '{"n":0}\n')
    // Every append fails after a line and a half: the retries are spent, the events errored.
    await partialWrites({ always: true, code: 'ENOSPC' })
    const warnings: string[] = []
    const sink = file({ path, onWarning: (m) => warnings.push(m) })
    await expect(sink.write(array({ n: 1 }, { n: 2 }))).rejects.toBeInstanceOf(RetryableError)
    await sink.stop()
    // Before: the file kept '{"n":1}\n{"n":' — a line of an event settled errored, and a fragment.
    expect(readFileSync(path, 'utf8')).toBe('{"n":0}\n')
    expect(warnings).toEqual([expect.stringContaining('cut off 13 byte(s)')])
  })

  it('cuts back only the file the failed append wrote to, not another file found at the path on the retry (rotated)', async () => {
    const path = join(dir, 'out.ndjson')
    writeFileSync(path, '{"n":0}\n')
    const { failNext } = await partialWrites({ code: 'ENOSPC' })
    failNext()
    const warnings: string[] = []
    const sink = file({ path, onWarning: (m) => warnings.push(m) })
    await expect(sink.write(array({ n: 1 }, { n: 2 }))).rejects.toBeInstanceOf(RetryableError)
    // Before the retry, the file is rotated and another writer's file takes the path.
    renameSync(path, `${path}.1`)
    const other = '{"other":"writer","lines":["kept"]}\n'
    writeFileSync(path, other)
    await sink.write(array({ n: 1 }, { n: 2 }))
    await sink.stop()
    expect(readFileSync(path, 'utf8')).toBe(`${other}{"n":1}\n{"n":2}\n`)
    expect(readFileSync(`${path}.1`, 'utf8')).toMatch(/^\{"n":0\}\n\{"n":1\}\n\{"n":$/) // the fragment stays where it was
    expect(warnings).toEqual([
      expect.stringMatching(
        /left the 28 byte\(s\) after byte 8 as they are: the file at the path is not the file the failed append wrote to/,
      ),
    ])
  })

  it('cuts back to where the failed append began, not over lines another writer appended since the last one', async () => {
    const path = join(dir, 'out.ndjson')
    const { failNext } = await partialWrites()
    const warnings: string[] = []
    const sink = file({ path, onWarning: (m) => warnings.push(m) })
    await sink.write(array({ n: 1 }))
    appendFileSync(path, '{"from":"another writer"}\n') // `echo >>`, a second process
    await sink.write(array({ n: 2 }))
    failNext()
    await expect(sink.write(array({ n: 3 }))).rejects.toBeInstanceOf(RetryableError)
    await sink.write(array({ n: 3 }))
    await sink.stop()
    expect(lines(path)).toEqual([{ n: 1 }, { from: 'another writer' }, { n: 2 }, { n: 3 }])
    expect(warnings).toEqual([expect.stringContaining('cut off 5 byte(s)')])
  })

  it('cuts nothing when another writer appended between the last good append and the failed one: its line stays', async () => {
    const path = join(dir, 'out.ndjson')
    const { failNext } = await partialWrites()
    const warnings: string[] = []
    const sink = file({ path, onWarning: (m) => warnings.push(m) })
    await sink.write(array({ n: 1 }))
    appendFileSync(path, '{"from":"other"}\n') // after the last good append: before the failed one
    failNext()
    await expect(sink.write(array({ n: 2 }))).rejects.toBeInstanceOf(RetryableError)
    await sink.write(array({ n: 2 }))
    await sink.stop()
    // The fragment of the failed append stays, as a malformed line; the other writer's line too.
    expect(readFileSync(path, 'utf8')).toBe('{"n":1}\n{"from":"other"}\n{"n":\n{"n":2}\n')
    expect(warnings).toEqual([
      expect.stringMatching(
        /left the 22 byte\(s\) after byte 8 as they are: they are not only what the failed append wrote/,
      ),
      expect.stringContaining('partial line'),
    ])
  })

  it('cuts nothing in a new file at the path, even one given the old inode number: its lines stay', async () => {
    const path = join(dir, 'out.ndjson')
    const { failNext } = await partialWrites()
    const warnings: string[] = []
    const sink = file({ path, onWarning: (m) => warnings.push(m) })
    await sink.write(array({ n: 1 }))
    failNext()
    await expect(sink.write(array({ n: 2 }))).rejects.toBeInstanceOf(RetryableError)
    // Removed and made again by another program: ext4 may give the new file the same inode.
    unlinkSync(path)
    const other = '{"other":"program","line":1}\n{"other":"program","line":2}\n'
    writeFileSync(path, other)
    await sink.write(array({ n: 2 }))
    await sink.stop()
    expect(readFileSync(path, 'utf8')).toBe(`${other}{"n":2}\n`)
    expect(warnings).toEqual([expect.stringMatching(/left the 50 byte\(s\) after byte 8 as they are/)])
  })

  it('at a stop, cuts off a failed append only in the file it wrote to, and makes no file at a path left empty', async () => {
    const path = join(dir, 'out.ndjson')
    const { failNext } = await partialWrites()
    const warnings: string[] = []
    const sink = file({ path, onWarning: (m) => warnings.push(m) })
    await sink.write(array({ n: 1 }))
    failNext()
    await expect(sink.write(array({ n: 2 }, { n: 3 }))).rejects.toBeInstanceOf(RetryableError)
    await sink.stop()
    expect(readFileSync(path, 'utf8')).toBe('{"n":1}\n')
    expect(warnings).toEqual([expect.stringContaining('cut off 13 byte(s)')])

    const rotated = file({ path, onWarning: (m) => warnings.push(m) })
    await rotated.write(array({ n: 4 }))
    failNext()
    await expect(rotated.write(array({ n: 5 }))).rejects.toBeInstanceOf(RetryableError)
    renameSync(path, `${path}.1`) // rotated before the stop: nothing is left at the path
    await rotated.stop()
    expect(existsSync(path)).toBe(false)
    expect(readFileSync(`${path}.1`, 'utf8')).toBe('{"n":1}\n{"n":4}\n{"n":')
  })

  it('an onWarning that throws a value no String can print fails nothing either', async () => {
    const path = join(dir, 'out.ndjson')
    writeFileSync(path, '{"partial":') // a warning at open
    const emitted: string[] = []
    const onEmit = (w: Error) => emitted.push(w.message)
    process.on('warning', onEmit)
    try {
      const sink = file({
        path,
        onWarning: () => {
          throw Object.create(null)
        },
      })
      expect(await sink.write(array({ n: 1 }))).toBeUndefined()
      await sink.stop()
      await new Promise<void>((resolve) => setImmediate(resolve))
    } finally {
      process.off('warning', onEmit)
    }
    expect(emitted).toEqual([expect.stringMatching(/partial line.*cannot be converted to a string/)])
  })

  it('in a topology, a 100,000-level-deep body is rejected, not retried as errored forever', async () => {
    const path = join(dir, 'out.ndjson')
    const receipts: BatchReceipt[] = []
    const source: Source = {
      kind: 'test',
      canAcknowledge: true,
      async run(context) {
        receipts.push(await context.send([{ n: 1 }]))
        receipts.push(await context.send([{ n: 2, body: deep(100_000) }, { n: 3 }]))
      },
    }
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('http', source)
      .sink('archive', ['http'], file({ path }), { retry: { attempts: 3, initialBackoffMs: 1 } })
      .build()
    await topology.start()
    await topology.done
    expect(await Promise.all(receipts.map((r) => r.status))).toEqual(['delivered', 'rejected'])
    expect(receipts[1]!.failure).toMatchObject({ componentId: 'archive', code: 'UNENCODABLE' })
    expect(lines(path)).toEqual([{ n: 1 }, { n: 3 }])
    expect(topology.metrics().archive).toMatchObject({ rejectedEvents: 1, failures: { UNENCODABLE: 1 } })
  })

  it('in a topology, arrays that queued while a write was on its way go out in one append', async () => {
    const path = join(dir, 'out.ndjson')
    const proto = await handlePrototype()
    const handleWrite = proto.write!
    let appends = 0
    let openGate = (): void => {}
    const gate = new Promise<void>((resolve) => {
      openGate = resolve
    })
    vi.spyOn(proto, 'write').mockImplementation(async function (this: unknown, ...args: unknown[]) {
      appends++
      await gate // the first write cannot finish before every batch has been sent
      return handleWrite.apply(this, args)
    })
    const sink = file({ path })
    const write = sink.write.bind(sink)
    const written: number[] = []
    sink.write = (events: EventArray) => {
      written.push(events.length)
      return write(events)
    }
    const receipts: BatchReceipt[] = []
    const source: Source = {
      kind: 'test',
      canAcknowledge: true,
      async run(context) {
        for (let n = 0; n < 50; n++) receipts.push(await context.send([{ n }]))
        openGate()
      },
    }
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('archive', ['in'], sink)
      .build()
    await topology.start()
    await topology.done
    expect((await Promise.all(receipts.map((r) => r.status))).every((s) => s === 'delivered')).toBe(true)
    expect(lines(path)).toEqual(Array.from({ length: 50 }, (_, n) => ({ n })))
    // One append (one synchronous write) per array the sink was handed, and the 50 batches were
    // handed over in at most two.
    expect(written.reduce((a, b) => a + b, 0)).toBe(50)
    expect(written.length).toBeLessThanOrEqual(2)
    expect(appends).toBe(written.length)
  })
})
