// The file source's dead-letter file holds whole entries only, whatever an earlier process left.
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { DeadLetterFile } from '../src/internal/DeadLetterFile.js'
import { fsyncFaults } from './support/FsyncFaults.js'

const dirs: string[] = []
const tempFile = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'ackline-dead-letter-'))
  dirs.push(dir)
  return join(dir, 'dead-letter.ndjson')
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

describe('DeadLetterFile', () => {
  it('cuts away a piece of an entry an earlier process left at the end when it opens the file', async () => {
    const path = tempFile()
    // A whole entry, then a piece of one (a process killed mid-append), over two read chunks.
    writeFileSync(
      path,
      `${JSON.stringify({ n: 1 })}\n${JSON.stringify({ n: 2, text: 'x'.repeat(100_000) }).slice(0, 70_000)}`,
    )
    const file = await DeadLetterFile.open(path)
    await file.append(`${JSON.stringify({ n: 3 })}\n`)
    await file.close()
    const lines = readFileSync(path, 'utf8')
      .split('\n')
      .filter((l) => l !== '')
    expect(lines.map((l) => (JSON.parse(l) as { n: number }).n)).toEqual([1, 3])
  })

  it('writes to the file at its path again once it was deleted or rotated away, instead of to the old inode', async () => {
    const path = tempFile()
    const file = await DeadLetterFile.open(path)
    await file.append(`${JSON.stringify({ n: 1 })}\n`)
    // An operator deletes it: entries written to the unlinked inode would be lost without a trace.
    rmSync(path)
    await file.append(`${JSON.stringify({ n: 2 })}\n`)
    expect(readFileSync(path, 'utf8')).toBe(`${JSON.stringify({ n: 2 })}\n`)
    // Rotated by rename: the old entries stay in the rotated file, new ones go to the path.
    renameSync(path, `${path}.1`)
    await file.append(`${JSON.stringify({ n: 3 })}\n`)
    await file.sync()
    await file.close()
    expect(readFileSync(`${path}.1`, 'utf8')).toBe(`${JSON.stringify({ n: 2 })}\n`)
    expect(readFileSync(path, 'utf8')).toBe(`${JSON.stringify({ n: 3 })}\n`)
  })

  it('keeps a file of whole entries as it is, and an empty one', async () => {
    for (const before of ['', `${JSON.stringify({ n: 1 })}\n`]) {
      const path = tempFile()
      writeFileSync(path, before)
      const file = await DeadLetterFile.open(path)
      await file.append(`${JSON.stringify({ n: 2 })}\n`)
      await file.close()
      expect(readFileSync(path, 'utf8')).toBe(`${before}${JSON.stringify({ n: 2 })}\n`)
    }
  })

  it('is durable once a sync covered every entry appended, and not while one waits for it', async () => {
    const path = tempFile()
    const file = await DeadLetterFile.open(path)
    expect(file.durable).toBe(true)
    await file.append(`${JSON.stringify({ n: 1 })}\n`)
    expect(file.durable).toBe(false)
    await file.sync()
    expect(file.durable).toBe(true)
    await file.close()
  })

  it('trusts no fsync after one failed: sync and append reject with that failure for good, though the next fsync would succeed', async () => {
    const path = tempFile()
    // The first fsync fails and loses the entry (as Linux may); a second one would report success.
    const faults = await fsyncFaults(dirname(path), 'dead-letter.ndjson', { fail: [1] })
    try {
      const file = await DeadLetterFile.open(path)
      await file.append(`${JSON.stringify({ n: 1 })}\n`)
      await expect(file.sync()).rejects.toThrow('EIO: i/o error, fsync')
      expect(file.syncFailure).toMatchObject({ code: 'EIO' })
      // Not tried again: a success would say nothing of the entry, whose pages are gone.
      await expect(file.sync()).rejects.toThrow('EIO: i/o error, fsync')
      await expect(file.append(`${JSON.stringify({ n: 2 })}\n`)).rejects.toThrow('EIO: i/o error, fsync')
      expect(file.durable).toBe(false)
      expect(faults.calls).toBe(1)
      await file.close()
      expect(faults.durableText('dead-letter.ndjson')).toBe('')
    } finally {
      faults.restore()
    }
  })

  it('fails for good when the fsync of a file rotated away fails as it is let go', async () => {
    const path = tempFile()
    const faults = await fsyncFaults(dirname(path), 'dead-letter.ndjson', { fail: [1] })
    try {
      const file = await DeadLetterFile.open(path)
      await file.append(`${JSON.stringify({ n: 1 })}\n`)
      renameSync(path, `${path}.1`)
      // The next append lets the old file go after syncing it: that fsync fails.
      await expect(file.append(`${JSON.stringify({ n: 2 })}\n`)).rejects.toThrow('EIO: i/o error, fsync')
      // Tried again, it would sync the old file (say OK) and write the entry to a new one.
      await expect(file.append(`${JSON.stringify({ n: 2 })}\n`)).rejects.toThrow('EIO: i/o error, fsync')
      await expect(file.sync()).rejects.toThrow('EIO: i/o error, fsync')
      expect(file.durable).toBe(false)
      expect(faults.calls).toBe(1)
      await file.close()
    } finally {
      faults.restore()
    }
  })

  it('counts no sync that succeeded while another fsync of the file failed: a failed write is reported to one of them only', async () => {
    const path = tempFile()
    // The sync's fsync waits; the one that lets the rotated file go meanwhile fails (losing the
    // entry), and then the waiting one succeeds, the error already taken.
    const faults = await fsyncFaults(dirname(path), 'dead-letter.ndjson', { hold: [1], fail: [2] })
    try {
      const file = await DeadLetterFile.open(path)
      await file.append(`${JSON.stringify({ n: 1 })}\n`)
      const synced = file.sync()
      synced.catch(() => {})
      await vi.waitUntil(() => faults.calls === 1)
      renameSync(path, `${path}.1`)
      await expect(file.append(`${JSON.stringify({ n: 2 })}\n`)).rejects.toThrow('EIO: i/o error, fsync')
      faults.release(1)
      await expect(synced).rejects.toThrow('EIO: i/o error, fsync')
      expect(file.durable).toBe(false)
      // The entry is not on disk, though the held fsync said OK.
      expect(faults.durableText('dead-letter.ndjson.1')).toBe('')
      await file.close()
    } finally {
      faults.restore()
    }
  })
})
