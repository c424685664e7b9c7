// Known errors: a full disk, failing fsyncs and rollbacks, bad options, use after close.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DiskBuffer, DiskBufferError } from '@ackline/buffers'
import { describe, expect, it } from 'vitest'
import { CrashableDiskBuffer, drain, Ledger, PATH, records, setup, text } from './fixtures/MemoryBuffer.js'
import { type FileLike, type FileSystem, MemoryFileSystem, reopening } from './fixtures/MemoryFileSystem.js'

const enospc = (): NodeJS.ErrnoException =>
  Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' })
const eio = (): NodeJS.ErrnoException => Object.assign(new Error('EIO: i/o error'), { code: 'EIO' })

describe('DiskBuffer known errors', () => {
  it('reports ENOSPC as a failed write, rolls it back, and works again once space returns', async () => {
    const { fs, open } = setup()
    const buffer = await open()
    await buffer.append(records(2))
    fs.capacity = fs.used() + 30 // room for one 22-byte frame and a torn part of the next
    const result = await buffer.append(records(3, 2))
    expect(result.status).toBe('failed')
    if (result.status !== 'failed') return
    expect(result.error).toBeInstanceOf(DiskBufferError)
    expect(result.error.code).toBe('NO_SPACE')
    expect(buffer.metrics().writeFailures).toBe(1)
    fs.capacity = Number.POSITIVE_INFINITY
    expect(await buffer.append(records(1, 5))).toMatchObject({ status: 'written', firstSeq: 2 })
    expect(await drain(buffer)).toEqual(['r0', 'r1', 'r5'])
    await buffer.close()
  })

  it('leaves a consistent buffer after ENOSPC: a restart reads exactly what was written', async () => {
    const { fs, logs, open } = setup()
    const buffer = await open()
    await buffer.append(records(2))
    fs.capacity = fs.used() + 10
    expect((await buffer.append(records(1, 2))).status).toBe('failed')
    buffer._abandon()
    fs.crash()
    fs.capacity = Number.POSITIVE_INFINITY
    const reopened = await open()
    expect(reopened.metrics().tornBytesTruncated).toBe(0)
    expect(await drain(reopened)).toEqual(['r0', 'r1'])
    expect(logs.some((m) => m.includes('checksum failure'))).toBe(false)
    await reopened.close()
  })

  it("reports a failed fsync under 'always' as a failed write and never hands its records out", async () => {
    const { fs, open } = setup()
    const buffer = await open()
    await buffer.append(records(1))
    let failures = 1
    fs.fault = (op, path) =>
      op === 'datasync' && path.endsWith('.seg') && failures-- > 0 ? eio() : undefined
    const result = await buffer.append(records(2, 1))
    expect(result).toMatchObject({ status: 'failed', error: { code: 'WRITE_FAILED' } })
    fs.fault = undefined
    expect(await buffer.append(records(1, 3))).toMatchObject({ status: 'written', firstSeq: 1 })
    expect(await drain(buffer)).toEqual(['r0', 'r3'])
    await buffer.close()
  })

  it('seals a segment whose rollback failed, writes on in a new one and never reuses its numbers', async () => {
    const { fs, open } = setup()
    const buffer = await open()
    await buffer.append(records(1))
    fs.fault = (op) => (op === 'write' || op === 'truncate' ? eio() : undefined)
    expect((await buffer.append(records(2, 1))).status).toBe('failed')
    fs.fault = undefined
    expect(await buffer.append(records(1, 3))).toMatchObject({ status: 'written', firstSeq: 3 })
    expect(fs.files(PATH).filter((p) => p.endsWith('.seg'))).toHaveLength(2)
    expect(await drain(buffer)).toEqual(['r0', 'r3'])
    await buffer.close()
  })

  it('does not make again, zero-filled, the segment a failed roll cuts back when it was deleted from outside: the rollback fails, seals it and writes on in a new one', async () => {
    const { fs, logs, open } = setup({ segmentBytes: 100 })
    const buffer = await open()
    await buffer.append(records(4)) // 4 frames of 22 bytes: segment 0 is full
    const first = `${PATH}/00000000000000000000.seg`
    fs.fault = (op, path) => {
      if (op !== 'open' || !path.endsWith('00000000000000000004.seg')) return undefined
      void fs.unlink(first) // deleted from outside while the write rolls
      return enospc()
    }
    expect((await buffer.append(records(1, 4))).status).toBe('failed')
    fs.fault = undefined
    expect(fs.bytes(first)).toBeUndefined()
    expect(logs).toContainEqual(expect.stringContaining('rollback failed (ENOENT'))
    expect(await buffer.append(records(1, 5))).toMatchObject({ status: 'written', firstSeq: 5 })
    expect(fs.files(PATH).filter((p) => p.endsWith('.seg'))).toEqual([`${PATH}/00000000000000000005.seg`])
    buffer._abandon()
  })

  /** A buffer whose first write to segment 8 waits until let go, then fails (EIO). */
  /**
   * `mem` where the first write to the file `failing` fails (EIO), once `before` (if any)
   * resolved; `close` (if any) closes that file in its place.
   */
  function firstWriteFails(
    mem: MemoryFileSystem,
    failing: string,
    hooks: { before?: () => Promise<void>; close?: (file: FileLike) => Promise<void> } = {},
  ): FileSystem {
    let failed = false
    return reopening(mem, async (path, mode) => {
      const file = await mem.open(path, mode)
      if (path !== failing) return file
      const { close } = hooks
      return {
        ...file,
        writev: async (buffers, position) => {
          if (failed) return file.writev(buffers, position)
          failed = true
          await hooks.before?.()
          throw eio()
        },
        ...(close === undefined ? {} : { close: () => close(file) }),
      }
    })
  }

  /** A buffer whose first write to segment 8 waits until let go, then fails (EIO). */
  async function failingThirdSegment() {
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    let reached!: () => void
    const atWrite = new Promise<void>((resolve) => (reached = resolve))
    const fs = firstWriteFails(new MemoryFileSystem(), `${PATH}/00000000000000000008.seg`, {
      before: async () => {
        reached()
        await gate
      },
    })
    const logs: string[] = []
    const open = () =>
      CrashableDiskBuffer.open({ path: PATH, fileSystem: fs, segmentBytes: 100, log: (m) => logs.push(m) })
    return { open, atWrite, release: () => release(), logs }
  }

  it('rolls back the segments its group wrote when acknowledgements freed a segment meanwhile (not by counting the list)', async () => {
    const { open, atWrite, release } = await failingThirdSegment()
    const buffer = await open()
    await buffer.append(records(4)) // segment 0: r0..r3 (88 bytes)
    await buffer.append(records(2, 4)) // segment 4: r4, r5
    const got = (await buffer.read(10))!
    expect(got.map((r) => text(r.payload))).toEqual(['r0', 'r1', 'r2', 'r3', 'r4', 'r5'])
    // r6 and r7 go into segment 4, r8 rolls segment 8, whose write fails...
    const failing = buffer.append(records(4, 6))
    await atWrite
    for (const r of got.slice(0, 4)) buffer.ack(r.seq) // ...after segment 0 was freed
    release()
    expect((await failing).status).toBe('failed')
    expect(await buffer.append([Buffer.from('x100'), Buffer.from('x101')])).toMatchObject({
      status: 'written',
    })
    for (const r of got.slice(4)) buffer.ack(r.seq)
    // Segment 4 was cut back to r4 r5: the reader goes on to what was written after.
    expect((await buffer.read(10, { wait: false }))?.map((r) => text(r.payload))).toEqual(['x100', 'x101'])
    await buffer.close()
    const reopened = await open()
    expect(await drain(reopened)).toEqual(['x100', 'x101']) // never the failed append's r6, r7
    await reopened.close()
  })

  it('rolls back a group that only wrote a new segment when every older one was freed meanwhile', async () => {
    const { open, atWrite, release, logs } = await failingThirdSegment()
    const buffer = await open()
    await buffer.append(records(4)) // segment 0: r0..r3
    await buffer.append(records(4, 4)) // segment 4: r4..r7, full
    const got = (await buffer.read(10))!
    const failing = buffer.append(records(2, 8)) // rolls segment 8 at once; its write fails...
    await atWrite
    for (const r of got) buffer.ack(r.seq) // ...after segments 0 and 4 were both freed
    release()
    expect((await failing).status).toBe('failed')
    expect(await buffer.append([Buffer.from('x100')])).toMatchObject({ status: 'written', firstSeq: 8 })
    expect((await buffer.read(10, { wait: false }))?.map((r) => text(r.payload))).toEqual(['x100'])
    // Nothing was cut or padded that should not have been: no damage found, now or after a restart.
    expect(buffer.metrics().corruptRegions).toBe(0)
    await buffer.close()
    const reopened = await open()
    expect(await drain(reopened)).toEqual(['x100'])
    expect(reopened.metrics().corruptRegions).toBe(0)
    await reopened.close()
    expect(logs.filter((m) => !m.includes('writing'))).toEqual([])
  })

  it('rolls back every segment its group wrote when acknowledgements free one during the rollback itself', async () => {
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    let reached!: () => void
    const atClose = new Promise<void>((resolve) => (reached = resolve))
    // Segment 12's first write fails; closing it (in the rollback) waits until let go.
    const fs = firstWriteFails(new MemoryFileSystem(), `${PATH}/00000000000000000012.seg`, {
      close: async (file) => {
        reached()
        await gate
        return file.close()
      },
    })
    const open = () =>
      CrashableDiskBuffer.open({ path: PATH, fileSystem: fs, segmentBytes: 100, log: () => {} })
    const buffer = await open()
    await buffer.append(records(4)) // segment 0: r0..r3
    await buffer.append(records(4, 4)) // segment 4: r4..r7
    const got = (await buffer.read(10))!
    const failing = buffer.append(records(8, 8)) // r8..r11 in a new segment 8, r12 rolls segment 12: fails
    await atClose // the rollback is closing segment 12...
    for (const r of got.slice(0, 4)) buffer.ack(r.seq) // ...when segment 0 is freed
    release()
    expect((await failing).status).toBe('failed')
    for (const r of got.slice(4)) buffer.ack(r.seq)
    expect(await buffer.append([Buffer.from('x100')])).toMatchObject({ status: 'written', firstSeq: 8 })
    const x = (await buffer.read(10, { wait: false }))!
    expect(x.map((r) => text(r.payload))).toEqual(['x100'])
    buffer.ack(x[0]!.seq)
    expect(await buffer.append([Buffer.from('y0'), Buffer.from('y1')])).toMatchObject({ status: 'written' })
    await buffer.close()
    const reopened = await open()
    expect(await drain(reopened)).toEqual(['y0', 'y1']) // answered written: never lost
    await reopened.close()
  })

  it('after a rollback that failed, seals every segment the group touched, so the reader goes on past them', async () => {
    const fourth = `${PATH}/00000000000000000012.seg`
    let unlinkFailed = false
    const base = firstWriteFails(new MemoryFileSystem(), fourth)
    // The rollback cannot remove segment 12: it fails.
    const fs = {
      ...base,
      unlink: async (path: string) => {
        if (path === fourth && !unlinkFailed) {
          unlinkFailed = true
          throw eio()
        }
        return base.unlink(path)
      },
    }
    const buffer = await CrashableDiskBuffer.open({
      path: PATH,
      fileSystem: fs,
      segmentBytes: 100,
      log: () => {},
    })
    await buffer.append(records(4)) // segment 0: r0..r3
    await buffer.append(records(2, 4)) // segment 4: r4, r5
    expect(await buffer.read(10)).toHaveLength(6)
    // r6, r7 into segment 4, r8..r11 into a new segment 8, r12 rolls segment 12: fails, and so does its removal
    expect((await buffer.append(records(10, 6))).status).toBe('failed')
    expect(await buffer.append([Buffer.from('x100')])).toMatchObject({ status: 'written', firstSeq: 16 })
    expect((await buffer.read(10, { wait: false }))?.map((r) => text(r.payload))).toEqual(['x100'])
    await buffer.close()
  })

  it('lets an append waiting for room go on once a failed write gave its room back', async () => {
    const { fs, open } = setup({ maxBytes: 30 }) // room for one 25-byte frame
    const buffer = await open()
    let failures = 1
    fs.fault = (op, path) => (op === 'write' && path.endsWith('.seg') && failures-- > 0 ? eio() : undefined)
    const first = buffer.append([Buffer.from('first')])
    const second = buffer.append([Buffer.from('again')]) // waits: the first holds the room
    expect((await first).status).toBe('failed')
    // Nothing is left to acknowledge, so only the failed write's room can let it go on.
    expect(await second).toMatchObject({ status: 'written', firstSeq: 0 })
    expect(await drain(buffer)).toEqual(['again'])
    await buffer.close()
  })

  describe('a segment acknowledged whole that cannot be deleted (a directory made read-only)', () => {
    const eacces = (): NodeJS.ErrnoException =>
      Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES' })
    /** `fs` whose unlink of a segment fails while `failing` says so. */
    const unlinkFails = (fs: MemoryFileSystem, failing: () => boolean): FileSystem => ({
      ...reopening(fs, (path, mode) => fs.open(path, mode)),
      unlink: async (path) => {
        if (failing() && path.endsWith('.seg')) throw eacces()
        await fs.unlink(path)
      },
    })

    it('is logged and its room counted free: the buffer reads on, and the next open deletes it', async () => {
      let failing = true
      const memory = new MemoryFileSystem()
      const { logs, open } = setup({ fileSystem: unlinkFails(memory, () => failing), segmentBytes: 46 })
      const buffer = await open()
      await buffer.append(records(4)) // two segments of two 22-byte frames
      for (const r of (await buffer.read(2))!) buffer.ack(r.seq)
      await buffer.flush() // the lane ran the deletion
      // Its bytes stayed counted against maxBytes for the run, and it failed without a word.
      expect(buffer.metrics()).toMatchObject({ segments: 1, bytesOnDisk: 44 })
      const logged = logs.filter((m) => m.includes('00000000000000000000.seg') && m.includes('EACCES'))
      expect(logged).toHaveLength(1)
      expect(await drain(buffer)).toEqual(['r2', 'r3'])
      await buffer.close()
      failing = false
      const reopened = await open()
      await reopened.flush()
      expect(memory.files(PATH).filter((f) => f.endsWith('.seg'))).toEqual([
        `${PATH}/00000000000000000002.seg`,
      ])
      expect(await drain(reopened)).toEqual([])
      await reopened.close()
    })

    it('when it is the segment being written, reclaimed for an append waiting for room, lets the append go on', async () => {
      const memory = new MemoryFileSystem()
      const { logs, open } = setup({ fileSystem: unlinkFails(memory, () => true), maxBytes: 50 })
      const buffer = await open()
      await buffer.append(records(2))
      const blocked = buffer.append(records(2, 2)) // waits for room
      for (const r of (await buffer.read(2))!) buffer.ack(r.seq)
      await buffer.flush() // the lane ran the reclaim
      // It failed without a word, its room was never given back, and the append waited for ever.
      const logged = logs.filter((m) => m.includes('00000000000000000000.seg') && m.includes('EACCES'))
      expect(logged).toHaveLength(1)
      expect(await blocked).toMatchObject({ status: 'written', firstSeq: 2 })
      expect(await drain(buffer)).toEqual(['r2', 'r3'])
      await buffer.close()
    })
  })

  it("reports a failed group-commit fsync on the writes' durable promise", async () => {
    const { fs, open } = setup({ sync: { everyMs: 60_000, everyWrites: 100 } })
    const buffer = await open()
    const result = await buffer.append(records(1))
    if (result.status !== 'written') throw new Error('not written')
    fs.fault = (op) => (op === 'datasync' ? eio() : undefined)
    await buffer.flush()
    expect(await result.durable).toBe('failed')
    expect(buffer.metrics().syncFailures).toBe(1)
    fs.fault = undefined
    await buffer.close()
  })

  it('names the option at fault', async () => {
    const fs = new MemoryFileSystem()
    const attempt = (o: object) =>
      CrashableDiskBuffer.open({ path: PATH, fileSystem: fs, ...o }).catch((e: unknown) => e)
    expect(await attempt({ maxBytes: 0 })).toMatchObject({ code: 'INVALID_OPTION', field: 'maxBytes' })
    expect(await attempt({ segmentBytes: 10 })).toMatchObject({
      code: 'INVALID_OPTION',
      field: 'segmentBytes',
    })
    expect(await attempt({ sync: { everyMs: -1, everyWrites: 1 } })).toMatchObject({ field: 'sync.everyMs' })
    expect(await attempt({ sync: { everyMs: 1, everyWrites: 0 } })).toMatchObject({
      field: 'sync.everyWrites',
    })
    const error = (await attempt({ maxBytes: -5 })) as DiskBufferError
    expect(error.name).toBe('DiskBufferError')
    expect(error.message).toBe(`disk buffer ${PATH}: maxBytes must be a positive integer, got -5`)
  })

  it('names the options as the fault when untyped code passes none (undefined, null), as openDiskBuffer does', async () => {
    // They were read for their path before they were checked: a TypeError naming nothing.
    for (const options of [undefined, null]) {
      const error = await DiskBuffer.open(options as never).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(DiskBufferError)
      expect(error).toMatchObject({ code: 'INVALID_OPTION', field: '(options)' })
    }
  })

  it('names the path when it is a file, not a directory', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ackline-file-'))
    try {
      const file = join(dir, 'not-a-dir')
      writeFileSync(file, 'x')
      for (const path of [file, join(file, 'below')]) {
        const error = await DiskBuffer.open({ path }).catch((e: unknown) => e)
        expect(error).toBeInstanceOf(DiskBufferError)
        expect(error).toMatchObject({ code: 'NOT_A_DIRECTORY', path, field: 'path' })
        expect((error as DiskBufferError).message).toContain(path)
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('closes, unlocks and can be opened again when the disk is full at close (the checkpoint that failed is logged)', async () => {
    // One file system object for both opens, as NodeFileSystem is for a process: its lock is
    // the one the second open must find released.
    const fs = new MemoryFileSystem()
    const logs: string[] = []
    const options = { path: PATH, fileSystem: fs, log: (m: string) => logs.push(m) }
    const buffer = await DiskBuffer.open(options)
    await buffer.append(records(2))
    // The ledger's next checkpoint, appended to it or replacing it, finds no room.
    fs.fault = (op, path) =>
      (op === 'open' || op === 'write') && path.includes('ledger') ? enospc() : undefined
    await buffer.close()
    expect(logs.some((m) => m.includes('checkpoint') && m.includes('ENOSPC'))).toBe(true)
    expect(fs.files(PATH)).not.toContain(`${PATH}/lock`)
    fs.fault = undefined
    const reopened = await DiskBuffer.open(options)
    const got = await reopened.read(10, { wait: false })
    expect(got?.map((r) => Buffer.from(r.payload).toString())).toEqual(['r0', 'r1'])
    await reopened.close()
  })

  it('leaves no file open and the directory unlocked when opening fails half-way (a full disk, a torn tail it cannot cut)', async () => {
    const fs = new MemoryFileSystem()
    const options = { path: PATH, fileSystem: fs, log: () => {} }
    const buffer = await DiskBuffer.open(options)
    await buffer.append(records(2))
    await buffer.close()
    for (const failing of [
      `${PATH}/ledger.json.tmp`, // the ledger, rebuilt at open since it is missing
      `${PATH}/dead-letter/settings.json.tmp`, // the dead-letter queue's first settings
    ]) {
      await fs.unlink(`${PATH}/ledger.json`)
      for (const file of fs.files(`${PATH}/dead-letter`)) await fs.unlink(file)
      fs.fault = (op, path) => (op === 'open' && path === failing ? enospc() : undefined)
      await expect(DiskBuffer.open(options)).rejects.toMatchObject({ code: 'ENOSPC' })
      expect(fs.openFiles).toBe(0)
      fs.fault = undefined
      const reopened = await DiskBuffer.open(options)
      await reopened.close()
      expect(fs.openFiles).toBe(0)
    }
    // A torn tail that cannot be cut.
    const segment = `${PATH}/00000000000000000000.seg`
    fs.put(segment, Buffer.concat([fs.bytes(segment)!, Buffer.from('torn')]))
    fs.fault = (op) => (op === 'truncate' ? eio() : undefined)
    await expect(DiskBuffer.open(options)).rejects.toMatchObject({ code: 'EIO' })
    expect(fs.openFiles).toBe(0)
    fs.fault = undefined
    await (await DiskBuffer.open(options)).close()
  })

  it('writes every append made before close, then closes every file: none is written or left open after', async () => {
    for (const sync of ['always', { everyMs: 60_000, everyWrites: 1000 }] as const) {
      const { fs, open } = setup({ sync, segmentBytes: 1 << 20 })
      const buffer = await open()
      // More appends than one write takes (512): the rest wait for the next write on the lane.
      const appends = Array.from({ length: 600 }, (_, i) => buffer.append(records(1, i)))
      await buffer.close()
      expect(fs.openFiles).toBe(0)
      const read = await Ledger.read(fs, PATH)
      expect(read).toMatchObject({ status: 'ok', ledger: { nextSeq: 600, segments: [0] } })
      const results = await Promise.all(appends)
      expect(results.every((r) => r.status === 'written')).toBe(true)
      expect(await Promise.all(results.map((r) => (r.status === 'written' ? r.durable : r.status)))).toEqual(
        Array(600).fill('durable'),
      )
      expect(fs.openFiles).toBe(0)
      const reopened = await open()
      expect(await drain(reopened)).toHaveLength(600)
      await reopened.close()
    }
  })

  it('names the entry that is a directory where a file belongs (ledger, settings, lock, a segment)', async () => {
    for (const entry of ['ledger.json', 'settings.json', 'lock', '00000000000000000000.seg']) {
      const path = mkdtempSync(join(tmpdir(), 'ackline-entry-'))
      try {
        const buffer = await DiskBuffer.open({ path, segmentBytes: 60, log: () => {} })
        await buffer.append(records(4)) // 22-byte frames, two a segment: segments 0 and 2
        await buffer.close()
        rmSync(join(path, entry), { force: true })
        mkdirSync(join(path, entry))
        const error = await DiskBuffer.open({ path, segmentBytes: 60, log: () => {} }).then(
          async (opened) => {
            // A segment is opened when it is read.
            const failed = await opened.read(10).then(
              () => undefined,
              (e: unknown) => e,
            )
            await opened.close()
            return failed
          },
          (e: unknown) => e,
        )
        expect((error as Error).message).toContain(join(path, entry))
      } finally {
        rmSync(path, { recursive: true, force: true })
      }
    }
  })

  it('hands out the records a read took before a segment failed to open, and reads on once it opens', async () => {
    const { fs, open } = setup({ segmentBytes: 60 }) // two 22-byte frames a segment
    const buffer = await open()
    await buffer.append(records(4)) // r0 r1 in segment 0, r2 r3 in segment 2
    const second = `${PATH}/00000000000000000002.seg`
    fs.fault = (op, path) => (op === 'open' && path === second ? eio() : undefined)
    const first = await buffer.read(10)
    expect(first?.map((r) => text(r.payload))).toEqual(['r0', 'r1'])
    await expect(buffer.read(10, { wait: false })).rejects.toMatchObject({ code: 'EIO' })
    fs.fault = undefined
    expect((await buffer.read(10))?.map((r) => text(r.payload))).toEqual(['r2', 'r3'])
    for (const r of first ?? []) buffer.ack(r.seq)
    await buffer.close()
  })

  it('hands out the records due for redelivery when the read then fails on a segment, and reads on once it opens', async () => {
    const { fs, open } = setup({ segmentBytes: 60, retryBackoff: { initialMs: 0, maxMs: 0 } })
    const buffer = await open()
    await buffer.append(records(4)) // r0 r1 in segment 0, r2 r3 in segment 2
    const first = (await buffer.read(2))!
    buffer.ack(first[1]!.seq)
    buffer.nack(first[0]!.seq) // r0: due again at once
    fs.fault = (op, path) =>
      op === 'open' && path === `${PATH}/00000000000000000002.seg` ? eio() : undefined
    expect((await buffer.read(10))?.map((r) => text(r.payload))).toEqual(['r0'])
    await expect(buffer.read(10, { wait: false })).rejects.toMatchObject({ code: 'EIO' })
    fs.fault = undefined
    expect((await buffer.read(10))?.map((r) => text(r.payload))).toEqual(['r2', 'r3'])
    expect(buffer.metrics()).toMatchObject({ inFlight: 3, retryPending: 0 })
    await buffer.close()
  })

  it('hands out the records a read took before a load of their segment failed, and reads on after', async () => {
    const { fs, open } = setup({ segmentBytes: 4 << 20 })
    // Written by an earlier run, so the records are read from the file (not from what the writer
    // just wrote, held in memory).
    const earlier = await open()
    // More than one load (1 MiB) holds: the second record needs a load of its own.
    const large = [Buffer.alloc(700_000, 'a'), Buffer.alloc(700_000, 'b')]
    await earlier.append(large)
    await earlier.close()
    const buffer = await open()
    let reads = 0
    fs.fault = (op) => (op === 'read' && ++reads >= 2 ? eio() : undefined) // from the second load on
    const first = await buffer.read(10)
    expect(first?.map((r) => r.payload[0])).toEqual([0x61])
    fs.fault = undefined
    expect((await buffer.read(10))?.map((r) => r.payload[0])).toEqual([0x62])
    await buffer.close()
  })

  it('lets a read that is loading records finish before close closes its file', async () => {
    const fs = new MemoryFileSystem()
    let reached!: () => void
    const atDisk = new Promise<void>((resolve) => (reached = resolve))
    let letGo!: () => void
    const slowDisk = new Promise<void>((resolve) => (letGo = resolve))
    // The reader's loads of the segment wait until let go (a slow disk).
    const slow = reopening(fs, async (path, mode) => {
      const file = await fs.open(path, mode)
      if (mode !== 'read' || !path.endsWith('.seg')) return file
      return {
        ...file,
        read: async (buffer, offset, length, position) => {
          reached()
          await slowDisk
          return file.read(buffer, offset, length, position)
        },
      }
    })
    // Written by an earlier run, so the records are read from the file.
    const earlier = await DiskBuffer.open({ path: PATH, fileSystem: slow, log: () => {} })
    await earlier.append(records(2))
    await earlier.close()
    const buffer = await DiskBuffer.open({ path: PATH, fileSystem: slow, log: () => {} })
    const reading = buffer.read(10)
    await atDisk // the read is loading the segment
    const closing = buffer.close()
    await new Promise((resolve) => setImmediate(resolve)) // everything not waiting for the disk ran
    letGo()
    expect((await reading)?.length).toBe(2)
    await closing
    expect(fs.openFiles).toBe(0)
  })

  it('throws CLOSED on an append after close, and close twice is harmless', async () => {
    const { open } = setup()
    const buffer = await open()
    await buffer.close()
    await buffer.close()
    await expect(buffer.append(records(1))).rejects.toMatchObject({ code: 'CLOSED' })
    expect(await buffer.read()).toBeUndefined()
  })

  describe('bad arguments from untyped code: a RangeError naming the method and the argument', () => {
    const bad = [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '3' as unknown as number]
    it.each(bad)("read(%s) rejects at once, naming 'max', instead of waiting for ever", async (max) => {
      const { open } = setup()
      const buffer = await open()
      await buffer.append(records(2))
      const read = buffer.read(max)
      await expect(read).rejects.toThrow(RangeError)
      await expect(read).rejects.toThrow(
        /disk buffer \/buf: read's max must be a whole number of 1 or more, got/,
      )
      // Nothing was taken: the records are all there for a good read.
      expect((await buffer.read(10))?.map((r) => text(r.payload))).toEqual(['r0', 'r1'])
      await buffer.close()
    })

    const badSeqs = [-1, 0.5, Number.NaN, Number.POSITIVE_INFINITY, '0' as unknown as number]
    it.each(badSeqs)('ack(%s), nack and deadLetter refuse it, and the counters stay right', async (seq) => {
      const { open } = setup()
      const buffer = await open()
      await buffer.append(records(2))
      const got = (await buffer.read(10))!
      expect(() => buffer.ack(seq)).toThrow(
        /disk buffer \/buf: ack's seq must be a sequence number \(a whole number of 0 or more\), got/,
      )
      expect(() => buffer.nack(seq)).toThrow(RangeError)
      await expect(buffer.deadLetter(seq)).rejects.toThrow(/deadLetter's seq/)
      // A fractional acknowledgement was counted as acknowledging a record above the prefix.
      expect(buffer.metrics()).toMatchObject({ unackedRecords: 2, acked: 0, inFlight: 2 })
      for (const r of got) buffer.ack(r.seq)
      expect(buffer.metrics()).toMatchObject({ unackedRecords: 0, acked: 2, inFlight: 0 })
      await buffer.close()
    })

    it('refuses a bad argument after close too (a programming error whatever the state)', async () => {
      const { open } = setup()
      const buffer = await open()
      await buffer.close()
      await expect(buffer.read(0)).rejects.toThrow(RangeError)
      expect(() => buffer.ack(0.5)).toThrow(RangeError)
      buffer.ack(0) // a good one after close does nothing, as documented
    })
  })
})
