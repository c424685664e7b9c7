// How the buffer writes and reads back at the tail: under sync 'always' a segment's writes are
// durable by themselves (O_DSYNC, no fdatasync of their own), and a reader at the tail takes what
// was just written from memory, byte for byte what the file holds, never a byte that failed.
import { constants, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { NodeFileSystem } from '../src/internal/FileSystem.js'
import { CrashableDiskBuffer, drain, PATH, records, setup, text } from './fixtures/MemoryBuffer.js'
import { type FileLike, MemoryFileSystem, type OpenMode, reopening } from './fixtures/MemoryFileSystem.js'

/**
 * `fs` with every segment open and segment datasync noted; with `durable: false`, as a system
 * without durable writes, segments are opened plain (and say so).
 */
function noting(fs: MemoryFileSystem, options: { durable?: boolean } = {}) {
  const opens: OpenMode[] = []
  let segmentSyncs = 0
  const wrapped = reopening(fs, async (path, mode) => {
    // A file system with no durable writes opens the file plain: only a datasync makes it durable.
    const file = await fs.open(path, options.durable === false && mode === 'append-dsync' ? 'append' : mode)
    if (!path.endsWith('.seg')) return file
    opens.push(mode)
    return {
      ...file,
      datasync: () => {
        segmentSyncs++
        return file.datasync()
      },
    }
  })
  return { wrapped, opens, syncs: () => segmentSyncs }
}

describe("DiskBuffer: writes under sync 'always'", () => {
  it('opens segments for durable writes and answers an append without an fdatasync of its own; a crash right after loses nothing', async () => {
    const fs = new MemoryFileSystem()
    const { wrapped, opens, syncs } = noting(fs)
    const buffer = await CrashableDiskBuffer.open({
      path: PATH,
      fileSystem: wrapped,
      segmentBytes: 1024,
      log: () => {},
    })
    for (let i = 0; i < 5; i++) expect((await buffer.append(records(2, 2 * i))).status).toBe('written')
    expect(opens).toEqual(['append-dsync'])
    expect(syncs()).toBe(0)
    fs.crash() // only what was durable survives
    const reopened = await CrashableDiskBuffer.open({ path: PATH, fileSystem: fs, log: () => {} })
    expect(await drain(reopened)).toEqual(records(10).map(text))
    await reopened.close()
  })

  it('fsyncs each write when the file does not say its writes are durable, so nothing answered is lost', async () => {
    const fs = new MemoryFileSystem()
    const { wrapped, syncs } = noting(fs, { durable: false })
    const buffer = await CrashableDiskBuffer.open({ path: PATH, fileSystem: wrapped, log: () => {} })
    for (let i = 0; i < 3; i++) expect((await buffer.append(records(1, i))).status).toBe('written')
    expect(syncs()).toBe(3)
    fs.crash()
    const reopened = await CrashableDiskBuffer.open({ path: PATH, fileSystem: fs, log: () => {} })
    expect(await drain(reopened)).toEqual(['r0', 'r1', 'r2'])
    await reopened.close()
  })

  it('opens segments for plain writes under group commit, whose fsyncs come by the policy', async () => {
    const fs = new MemoryFileSystem()
    const { wrapped, opens } = noting(fs)
    const buffer = await CrashableDiskBuffer.open({
      path: PATH,
      fileSystem: wrapped,
      sync: { everyMs: 60_000, everyWrites: 1 },
      log: () => {},
    })
    const result = await buffer.append(records(1))
    if (result.status !== 'written') throw new Error(result.status)
    expect(await result.durable).toBe('durable')
    expect(opens).toEqual(['append'])
    await buffer.close()
  })

  // What the descriptor really carries, read from /proc (the file's word is what the writer trusts).
  const flagsOf = (file: FileLike): number => {
    const fd = (file as unknown as { handle: { fd: number } }).handle.fd
    const line = /flags:\s*(\d+)/.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))
    return Number.parseInt(line![1]!, 8)
  }
  const onPlatform = async <T>(platform: NodeJS.Platform, run: () => Promise<T>): Promise<T> => {
    const real = Object.getOwnPropertyDescriptor(process, 'platform')!
    Object.defineProperty(process, 'platform', { ...real, value: platform })
    try {
      return await run()
    } finally {
      Object.defineProperty(process, 'platform', real)
    }
  }

  it.runIf(process.platform === 'linux')(
    'on Linux a segment opened for durable writes carries O_DSYNC and says so; a plain one neither',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'ackline-dsync-'))
      try {
        const durable = await NodeFileSystem.open(join(dir, 'a'), 'append-dsync')
        const plain = await NodeFileSystem.open(join(dir, 'b'), 'append')
        expect(durable.durableWrites).toBe(true)
        expect(flagsOf(durable) & constants.O_DSYNC).toBe(constants.O_DSYNC)
        expect(plain.durableWrites).toBe(false)
        expect(flagsOf(plain) & constants.O_DSYNC).toBe(0)
        await durable.close()
        await plain.close()
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    },
  )

  it.runIf(process.platform === 'linux')(
    "elsewhere (macOS: an O_DSYNC write does not flush the drive's cache) it is opened plain and says its writes need a datasync",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'ackline-dsync-'))
      try {
        for (const platform of ['darwin', 'win32', 'freebsd'] as const) {
          const file = await onPlatform(platform, () =>
            NodeFileSystem.open(join(dir, platform), 'append-dsync'),
          )
          expect(file.durableWrites).toBe(false)
          expect(flagsOf(file) & constants.O_DSYNC).toBe(0)
          await file.close()
        }
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    },
  )
})

describe('DiskBuffer: reading at the tail', () => {
  it('reads what was just written from memory, not the file; a later run reads the same records from the file', async () => {
    const { fs, open } = setup({ segmentBytes: 200 })
    const buffer = await open()
    for (let i = 0; i < 6; i++) await buffer.append(records(3, 3 * i)) // several segments
    const before = fs.counts.read
    const read = await buffer.read(100)
    expect(read?.map((r) => text(r.payload))).toEqual(records(18).map(text))
    expect(fs.counts.read).toBe(before)
    await buffer.close() // nothing acknowledged: a later run reads them all again
    const reopened = await open()
    const again = await reopened.read(100)
    expect(fs.counts.read).toBeGreaterThan(before)
    expect(again?.map((r) => [r.seq, text(r.payload)])).toEqual(read?.map((r) => [r.seq, text(r.payload)]))
    await reopened.close()
  })

  it('after a failed write (ENOSPC) and its rollback, the reader at the tail gets from memory what a later run reads from the file', async () => {
    const { fs, open } = setup()
    const buffer = await open()
    await buffer.append(records(2))
    fs.capacity = fs.used() + 30 // one frame fits, the next is torn: the write fails
    expect((await buffer.append(records(3, 2))).status).toBe('failed')
    fs.capacity = Number.POSITIVE_INFINITY
    await buffer.append(records(1, 5))
    const before = fs.counts.read
    const read = (await buffer.read(10))!
    expect(fs.counts.read).toBe(before)
    expect(read.map((r) => [r.seq, text(r.payload)])).toEqual([
      [0, 'r0'],
      [1, 'r1'],
      [2, 'r5'],
    ])
    await buffer.close()
    const reopened = await open()
    expect((await reopened.read(10))!.map((r) => [r.seq, text(r.payload)])).toEqual(
      read.map((r) => [r.seq, text(r.payload)]),
    )
    await reopened.close()
  })

  it('reads from the file what is no longer held (a reader that fell behind)', async () => {
    const { fs, open } = setup({ segmentBytes: 8 << 20 })
    const buffer = await open()
    // Three appends of about 1 MiB each: more than is held, so the first is read from the file.
    for (let i = 0; i < 3; i++) await buffer.append([Buffer.alloc(1 << 20, 0x61 + i)])
    const before = fs.counts.read
    const read = (await buffer.read(10))!
    expect(read.map((r) => r.payload[0])).toEqual([0x61, 0x62, 0x63])
    expect(read.every((r) => r.payload.length === 1 << 20)).toBe(true)
    expect(fs.counts.read).toBeGreaterThan(before)
    await buffer.close()
  })
})
