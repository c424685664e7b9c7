// Known errors: a full disk, failing fsyncs and rollbacks, bad options, use after close.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DiskBuffer, DiskBufferError } from '@ackline/buffers'
import { describe, expect, it } from 'vitest'
import { CrashableDiskBuffer, drain, PATH, records, setup } from './fixtures/MemoryBuffer.js'
import { MemoryFileSystem } from './fixtures/MemoryFileSystem.js'

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

  it('throws CLOSED on an append after close, and close twice is harmless', async () => {
    const { open } = setup()
    const buffer = await open()
    await buffer.close()
    await buffer.close()
    await expect(buffer.append(records(1))).rejects.toMatchObject({ code: 'CLOSED' })
    expect(await buffer.read()).toBeUndefined()
  })
})
