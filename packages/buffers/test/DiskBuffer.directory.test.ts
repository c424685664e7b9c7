// A buffer's directory made now: its entry is on disk only once its parent is fsynced (and so on
// up to the first directory that was there), or a crash of the machine could lose the directory
// with every segment later made and synced in it. Counted at `node:fs/promises` (no crash of the
// machine can be made here): which directories were fsynced, in order.
import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs'
import type * as fsp from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'

/** The directories fsynced, in order. */
const synced: string[] = []
/** Directories whose next fsync fails (EIO), once each. */
const failOnce = new Set<string>()

vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof fsp>()
  const open = async (...args: Parameters<typeof real.open>) => {
    const handle = await real.open(...args)
    if ((await handle.stat()).isDirectory()) {
      const sync = handle.sync.bind(handle)
      handle.sync = async () => {
        if (failOnce.delete(String(args[0]))) {
          throw Object.assign(new Error(`EIO: i/o error, fsync '${String(args[0])}'`), { code: 'EIO' })
        }
        synced.push(String(args[0]))
        return sync()
      }
    }
    return handle
  }
  return { ...real, open, default: { ...real, open } }
})

const { DiskBuffer } = await import('../src/DiskBuffer.js')

const roots: string[] = []
afterEach(() => {
  synced.length = 0
  failOnce.clear()
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true })
})

describe('DiskBuffer.open: the entry of a directory it makes', () => {
  it('fsyncs the parent of every directory it made, from the first that was there down, before it opens', async () => {
    const root = mkdtempSync(join(tmpdir(), 'ackline-buffer-dir-'))
    roots.push(root)
    const path = join(root, 'a', 'b', 'buffer')
    const buffer = await DiskBuffer.open({ path })
    // Only directories outside the buffer's own: its own are synced as it makes files in it.
    const parents = synced.filter((dir) => !dir.startsWith(path))
    expect(parents).toEqual([root, join(root, 'a'), join(root, 'a', 'b')])
    await buffer.close()
  })

  it('fsyncs the real parents of a path that goes up (..) from a symbolic link, and opens', async () => {
    // `lnk/..` is the parent of the link's target (real/), not root: resolved as text, the path
    // named root/q, which does not exist, and the first open failed with ENOENT.
    const root = mkdtempSync(join(tmpdir(), 'ackline-buffer-dir-'))
    roots.push(root)
    mkdirSync(join(root, 'real', 'target'), { recursive: true })
    const link = join(root, 'lnk')
    symlinkSync(join(root, 'real', 'target'), link)
    const path = `${link}/../q/buffer`
    const buffer = await DiskBuffer.open({ path })
    expect(existsSync(join(root, 'real', 'q', 'buffer'))).toBe(true)
    const real = realpathSync(join(root, 'real', 'q', 'buffer'))
    // The lock names the directory by its real path: its own syncs go by either name.
    const parents = synced.filter((dir) => !dir.startsWith(path) && !dir.startsWith(real))
    expect(parents).toEqual([`${link}/..`, `${link}/../q`])
    await buffer.close()
  })

  it('fsyncs again, on the next open, the parents whose fsync failed on the open that made the directory', async () => {
    // The directory was made, so the next mkdir made nothing and synced nothing: its entry, and
    // every segment later synced in it, could go with a crash of the machine.
    const root = mkdtempSync(join(tmpdir(), 'ackline-buffer-dir-'))
    roots.push(root)
    const path = join(root, 'a', 'b', 'buffer')
    failOnce.add(join(root, 'a'))
    await expect(DiskBuffer.open({ path })).rejects.toMatchObject({ code: 'EIO' })
    expect(existsSync(path)).toBe(true)
    expect(synced).toEqual([root])
    synced.length = 0
    const buffer = await DiskBuffer.open({ path })
    // What the failed open did not make durable: a/b's entry in a, buffer's in a/b.
    expect(synced.filter((dir) => !dir.startsWith(path))).toEqual([join(root, 'a'), join(root, 'a', 'b')])
    await buffer.close()
    synced.length = 0
    // Once synced, recorded: the open after that syncs no parent.
    const again = await DiskBuffer.open({ path })
    expect(synced.filter((dir) => !dir.startsWith(path))).toEqual([])
    await again.close()
  })

  it('fsyncs no parent when the directory was there', async () => {
    const root = mkdtempSync(join(tmpdir(), 'ackline-buffer-dir-'))
    roots.push(root)
    const path = join(root, 'buffer')
    mkdirSync(path)
    const buffer = await DiskBuffer.open({ path })
    expect(synced.filter((dir) => !dir.startsWith(path))).toEqual([])
    await buffer.close()
  })
})
