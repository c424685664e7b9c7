/**
 * The lock that keeps two processes (or two buffers of one process) off one buffer directory.
 *
 * Invariant: while a buffer is open, its directory's `lock` file names its process, and no other
 * open succeeds; a lock whose holder is gone (a dead pid on this host, or this process with no
 * buffer open on the directory) is stale and taken over.
 *
 * @module
 */
import { hostname } from 'node:os'
import { DiskBufferError } from '../DiskBufferError.js'
import type { FileSystem } from './FileSystem.js'

/** What a lock file says. */
export interface LockHolder {
  readonly pid: number
  readonly hostname: string
  readonly since: string
}

const FILE = 'lock'
/** Directories locked by buffers open in this process, per file system. */
const held = new WeakMap<FileSystem, Set<string>>()
const heldOn = (fs: FileSystem): Set<string> => {
  let set = held.get(fs)
  if (set === undefined) {
    set = new Set()
    held.set(fs, set)
  }
  return set
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

const parse = (bytes: Uint8Array | undefined): LockHolder | undefined => {
  try {
    const v = JSON.parse(Buffer.from(bytes ?? []).toString('utf8')) as LockHolder
    return Number.isSafeInteger(v.pid) && typeof v.hostname === 'string' ? v : undefined
  } catch {
    return undefined
  }
}

/** Acquiring and releasing the directory lock. */
export const LockFile = {
  FILE,

  /** What the lock file of `dir` says, if anything. */
  async holder(fs: FileSystem, dir: string): Promise<LockHolder | undefined> {
    return parse(await fs.readFile(`${dir}/${FILE}`))
  },

  /** Whether `holder` still holds the lock of `dir` (is alive and, if it is us, has it open). */
  isLive(fs: FileSystem, holder: LockHolder, dir: string): boolean {
    if (holder.hostname !== hostname()) return true // cannot check another host: assume live
    if (holder.pid === process.pid) return heldOn(fs).has(dir)
    return alive(holder.pid)
  },

  /**
   * Takes the lock of `dir`. Throws a `DiskBufferError` `LOCKED` naming the holder when it is
   * live; returns the stale holder it took over from, if any.
   */
  async acquire(fs: FileSystem, dir: string): Promise<{ readonly tookOverFrom: LockHolder | undefined }> {
    const heldHere = heldOn(fs)
    if (heldHere.has(dir)) {
      throw new DiskBufferError('LOCKED', `already open in this process (pid ${process.pid})`, dir)
    }
    const me: LockHolder = { pid: process.pid, hostname: hostname(), since: new Date().toISOString() }
    const body = Buffer.from(JSON.stringify(me))
    let tookOverFrom: LockHolder | undefined
    try {
      const file = await fs.open(`${dir}/${FILE}`, 'create-exclusive')
      try {
        await file.writev([body], 0)
        await file.datasync()
      } finally {
        await file.close()
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      const holder = await LockFile.holder(fs, dir)
      if (holder !== undefined && LockFile.isLive(fs, holder, dir)) {
        throw new DiskBufferError(
          'LOCKED',
          `locked by process ${holder.pid} on ${holder.hostname} since ${holder.since} (${dir}/${FILE})`,
          dir,
        )
      }
      tookOverFrom = holder ?? { pid: -1, hostname: 'unknown', since: 'unknown' }
      // Replace the stale lock in one rename, so a reader never sees a half-written one.
      const temp = `${dir}/${FILE}.${process.pid}.tmp`
      const file = await fs.open(temp, 'truncate')
      try {
        await file.writev([body], 0)
        await file.datasync()
      } finally {
        await file.close()
      }
      await fs.rename(temp, `${dir}/${FILE}`)
      // Two processes taking over at once: whoever renamed last holds it; the other backs off.
      const now = await LockFile.holder(fs, dir)
      if (now?.pid !== me.pid || now.hostname !== me.hostname) {
        throw new DiskBufferError('LOCKED', `taken over by process ${now?.pid} at the same moment`, dir)
      }
    }
    heldHere.add(dir)
    return { tookOverFrom }
  },

  /** Releases the lock of `dir` and removes the file. Releasing twice is harmless. */
  async release(fs: FileSystem, dir: string): Promise<void> {
    if (!heldOn(fs).delete(dir)) return
    await fs.unlink(`${dir}/${FILE}`)
  },

  /** Forgets the lock without removing the file, as a crashed process would (for tests). */
  abandon(fs: FileSystem, dir: string): void {
    heldOn(fs).delete(dir)
  },
} as const
