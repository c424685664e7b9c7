// The dead-letter file's directory entry: a file made now is on disk only once its directory is
// fsynced, so a sync fsyncs the directory of a file it opened empty before it counts. Counted at
// `node:fs/promises` (a crash of the machine cannot be made here): which directories were
// fsynced, and when.
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import type * as fsp from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'

/** What happened to directories, in order: `sync <dir>` as each fsync of one is called. */
const log: string[] = []
/** Directories whose fsync fails with EIO. */
const failing = new Set<string>()

vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof fsp>()
  const open = async (...args: Parameters<typeof real.open>) => {
    const handle = await real.open(...args)
    const path = String(args[0])
    if ((await handle.stat()).isDirectory()) {
      const sync = handle.sync.bind(handle)
      handle.sync = async () => {
        log.push(`sync ${path}`)
        if (failing.has(path)) throw Object.assign(new Error(`EIO: i/o error, fsync`), { code: 'EIO' })
        return sync()
      }
    }
    return handle
  }
  return { ...real, open, default: { ...real, open } }
})

const { DeadLetterFile } = await import('../src/internal/DeadLetterFile.js')

const dirs: string[] = []
const tempFile = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'ackline-dead-letter-entry-'))
  dirs.push(dir)
  return join(dir, 'dead-letter.ndjson')
}
afterEach(() => {
  log.length = 0
  failing.clear()
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

const entry = (n: number): string => `${JSON.stringify({ n })}\n`

describe('DeadLetterFile: the entry of a file made now', () => {
  it('fsyncs the directory of a file it created at the first sync, once, before the sync counts', async () => {
    const path = tempFile()
    const file = await DeadLetterFile.open(path)
    await file.append(entry(1))
    expect(log).toEqual([])
    await file.sync()
    expect(log).toEqual([`sync ${dirname(path)}`])
    expect(file.durable).toBe(true)
    await file.append(entry(2))
    await file.sync()
    expect(log).toHaveLength(1)
    await file.close()
  })

  it('fsyncs no directory for a file that held entries already', async () => {
    const path = tempFile()
    writeFileSync(path, entry(1))
    const file = await DeadLetterFile.open(path)
    await file.append(entry(2))
    await file.sync()
    expect(file.durable).toBe(true)
    expect(log).toEqual([])
    await file.close()
  })

  it('fsyncs the directory again for the file made after a rotation', async () => {
    const path = tempFile()
    const file = await DeadLetterFile.open(path)
    await file.append(entry(1))
    await file.sync()
    renameSync(path, `${path}.1`)
    await file.append(entry(2))
    await file.sync()
    expect(log).toEqual([`sync ${dirname(path)}`, `sync ${dirname(path)}`])
    await file.close()
  })

  it('holds every sync begun meanwhile until the directory is fsynced', async () => {
    const path = tempFile()
    const file = await DeadLetterFile.open(path)
    await file.append(entry(1))
    const first = file.sync()
    await file.append(entry(2))
    // Begun while the first still waits for the directory: it must not count before it.
    const second = file.sync()
    await Promise.all([first, second])
    expect(log).toEqual([`sync ${dirname(path)}`])
    expect(file.durable).toBe(true)
    await file.close()
  })

  it('fails for good when the fsync of the directory fails: the entry may never reach the disk', async () => {
    const path = tempFile()
    failing.add(dirname(path))
    const file = await DeadLetterFile.open(path)
    await file.append(entry(1))
    await expect(file.sync()).rejects.toThrow(/EIO/)
    expect(file.durable).toBe(false)
    // A later directory fsync would succeed; it is not trusted, as a file's is not.
    failing.clear()
    await expect(file.sync()).rejects.toThrow(/EIO/)
    await expect(file.append(entry(2))).rejects.toThrow(/EIO/)
    expect(file.durable).toBe(false)
    expect(file.syncFailure).toBeInstanceOf(Error)
    await file.close()
  })
})
