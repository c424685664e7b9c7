// The test file system against the real one, where the buffer's code may meet a difference: a
// test passing on the in-memory file system must mean the same on a disk.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { NodeFileSystem } from '../src/internal/FileSystem.js'
import { type FileSystem, MemoryFileSystem } from './fixtures/MemoryFileSystem.js'

const dir = mkdtempSync(join(tmpdir(), 'ackline-memfs-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe.each([
  ['the real file system', NodeFileSystem, dir],
  ['the in-memory file system', new MemoryFileSystem(), '/memfs'],
] as [string, FileSystem, string][])('%s', (_, fs, root) => {
  it('reads what a file holds up to its end, and 0 bytes at or past it (no error)', async () => {
    await fs.mkdir(root)
    const file = await fs.open(`${root}/past-end`, 'append')
    try {
      await file.writev([Buffer.from('abcd')], 0)
      const buf = Buffer.alloc(8, 0x2e)
      expect(await file.read(buf, 0, 8, 2)).toBe(2)
      expect(buf.toString()).toBe('cd......')
      expect(await file.read(buf, 0, 8, 4)).toBe(0)
      expect(await file.read(buf, 0, 8, 5)).toBe(0)
      expect(await file.read(buf, 4, 4, 1 << 20)).toBe(0)
      expect(buf.toString()).toBe('cd......')
    } finally {
      await file.close()
    }
  })

  it('opens an existing file to append without making a missing one (ENOENT)', async () => {
    await fs.mkdir(root)
    for (const mode of ['append', 'append-dsync'] as const) {
      const missing = `${root}/missing-${mode}`
      await expect(fs.openExisting!(missing, mode)).rejects.toMatchObject({ code: 'ENOENT' })
      expect(await fs.size(missing)).toBeUndefined()
      const existing = `${root}/existing-${mode}`
      await (await fs.open(existing, 'append')).close()
      const file = await fs.openExisting!(existing, mode)
      await file.writev([Buffer.from('ab')], 0)
      expect(await file.size()).toBe(2)
      await file.close()
    }
  })
})
