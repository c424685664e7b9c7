/**
 * The lock that keeps two processes (or two buffers of one process) off one buffer directory.
 *
 * Invariant: while a buffer is open, its directory's `lock` file names its process, and no other
 * open succeeds; a lock whose holder is gone (a dead pid on this host, or this process with no
 * buffer open on the directory) is stale and taken over.
 *
 * The lock file never exists without its content: it is written whole to a temporary file,
 * fsynced, then given the name `lock` with link(2), which fails when `lock` exists. So a lock that
 * cannot be read (empty, cut short: written by an older version, or damaged) cannot be told
 * apart from one being written by a live process, and is treated as held; the message says how
 * to break it.
 *
 * A live lock is never touched. A stale one is replaced only under the takeover guard, a second
 * file (`lock.takeover`) created exclusively: whoever creates it reads the lock again and
 * replaces it if it is still stale; anyone else who finds the guard held by a live process backs
 * off with `LOCKED`. So two processes that find the same stale lock at the same instant cannot
 * both take it over. A guard left by a process that died during its takeover is removed by the
 * next opener; only two openers removing such a guard at the same instant could still both go
 * on (a takeover interrupted by a crash, then a simultaneous start).
 *
 * @module
 */
import { hostname } from 'node:os'
import { resolve } from 'node:path'
import { DiskBufferError } from '../DiskBufferError.js'
import type { FileSystem, OpenMode } from './FileSystem.js'

/** What a lock file says. */
export interface LockHolder {
  readonly pid: number
  readonly hostname: string
  readonly since: string
}

const FILE = 'lock'
/** The takeover guard: held by whoever is replacing a stale lock, for the few milliseconds it takes. */
const GUARD = 'lock.takeover'
/** Directories locked by buffers open in this process, per file system. */
const held = new WeakMap<FileSystem, Set<string>>()
/** Directories this process is acquiring right now, per file system (one acquire at a time). */
const acquiring = new WeakMap<FileSystem, Set<string>>()
const setOn = (map: WeakMap<FileSystem, Set<string>>, fs: FileSystem): Set<string> => {
  let set = map.get(fs)
  if (set === undefined) {
    set = new Set()
    map.set(fs, set)
  }
  return set
}
const heldOn = (fs: FileSystem): Set<string> => setOn(held, fs)
/**
 * How the sets above name a directory: `/a/b`, `/a/b/` and `b` (from `/a`) are one directory, and
 * one lock. Callers pass the directory as {@link LockFile.canonical} names it, so a symbolic link
 * to it is the same directory too.
 */
const keyOf = (dir: string): string => resolve(dir)

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

/** Writes `body` to a file opened with `mode` and fsyncs it before closing. */
async function writeDurably(fs: FileSystem, path: string, mode: OpenMode, body: Uint8Array): Promise<void> {
  const file = await fs.open(path, mode)
  try {
    await file.writev([body], 0)
    await file.datasync()
  } finally {
    await file.close()
  }
}

/**
 * {@link writeDurably} for a temporary file, which is removed when writing it fails: one of this
 * process is kept while it lives (it may be in use), and a process numbered alike after a restart
 * (pid 1 in a container) keeps it too.
 */
async function writeTemp(fs: FileSystem, temp: string, body: Uint8Array): Promise<void> {
  try {
    await writeDurably(fs, temp, 'truncate', body)
  } catch (error) {
    await fs.unlink(temp).catch(() => undefined)
    throw error
  }
}

let temps = 0

/** The temporary names {@link placeExclusive} and a takeover write before linking or renaming (the writer's pid first). */
const TEMP_NAME = /^lock(?:\.takeover)?\.(\d+)(?:\.\d+)?\.tmp$/

/**
 * Creates `dir/name` holding `body`, atomically: the content is written and fsynced under a
 * temporary name first, then linked into place. Returns `false` when `name` exists already.
 */
async function placeExclusive(fs: FileSystem, dir: string, name: string, body: Uint8Array): Promise<boolean> {
  const temp = `${dir}/${name}.${process.pid}.${temps++}.tmp`
  await writeTemp(fs, temp, body)
  try {
    await fs.link(temp, `${dir}/${name}`)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw error
  } finally {
    await fs.unlink(temp)
  }
  await fs.syncDir(dir)
  return true
}

const lockedBy = (holder: LockHolder, dir: string): DiskBufferError =>
  new DiskBufferError(
    'LOCKED',
    `locked by process ${holder.pid} on ${holder.hostname} since ${holder.since} (${dir}/${FILE})${
      holder.hostname === hostname()
        ? ''
        : `. That is another host (this is ${hostname()}), so whether the process is alive cannot be checked here. If no process on ${holder.hostname} uses this buffer (say its container was recreated under a new hostname), break the lock with: ackline-buffer ${dir} --repair --break-lock`
    }`,
    dir,
  )

const unreadable = (dir: string): DiskBufferError =>
  new DiskBufferError(
    'LOCKED',
    `the lock file ${dir}/${FILE} is unreadable (empty or cut short): a process may be writing it right now, so it counts as held. If no process uses this buffer, break it with: ackline-buffer ${dir} --repair --break-lock`,
    dir,
  )

/**
 * Takes the takeover guard of `dir`, writing `body` (this process) into it. A guard whose holder
 * is gone is removed and taken once; a live holder, or a guard that cannot be read (its holder
 * may be writing it), is refused with `LOCKED`.
 */
async function takeGuard(fs: FileSystem, dir: string, body: Uint8Array): Promise<void> {
  const path = `${dir}/${GUARD}`
  for (let attempt = 0; ; attempt++) {
    if (await placeExclusive(fs, dir, GUARD, body)) return
    const other = parse(await fs.readFile(path))
    if (attempt > 0 || other === undefined || LockFile.isLive(fs, other, dir)) {
      const who = other === undefined ? 'a process' : `process ${other.pid} on ${other.hostname}`
      throw new DiskBufferError(
        'LOCKED',
        `the stale lock is being taken over by ${who} (${path}; if no process is opening the buffer, remove that file or run ackline-buffer --repair)`,
        dir,
      )
    }
    // Left by a process that died during its takeover.
    await fs.unlink(path)
  }
}

/**
 * Acquiring and releasing the directory lock. Every function takes the directory as
 * {@link LockFile.canonical} gives it (an existing directory's one name), so that two spellings of
 * one directory, a symbolic link included, are one lock in this process.
 */
export const LockFile = {
  FILE,
  GUARD,

  /**
   * The one name of the existing directory `dir`: links resolved where the file system can
   * (`realpath`), else the path made absolute. Two spellings of a directory, one through a
   * symbolic link, would otherwise both be opened in one process, each taking the other's lock
   * for a stale one of its own: two writers numbering records from the same place.
   */
  async canonical(fs: FileSystem, dir: string): Promise<string> {
    if (fs.realpath === undefined) return resolve(dir)
    try {
      return await fs.realpath(dir)
    } catch {
      return resolve(dir)
    }
  },

  /** What the lock file of `dir` says, if anything. */
  async holder(fs: FileSystem, dir: string): Promise<LockHolder | undefined> {
    return parse(await fs.readFile(`${dir}/${FILE}`))
  },

  /** What the lock file of `dir` says: `undefined` when there is none, `'unreadable'` when it cannot be parsed. */
  async read(fs: FileSystem, dir: string): Promise<LockHolder | 'unreadable' | undefined> {
    const bytes = await fs.readFile(`${dir}/${FILE}`)
    if (bytes === undefined) return undefined
    return parse(bytes) ?? 'unreadable'
  },

  /** What the takeover guard of `dir` says: `undefined` when there is none, `'unreadable'` when it cannot be parsed. */
  async guardHolder(fs: FileSystem, dir: string): Promise<LockHolder | 'unreadable' | undefined> {
    const bytes = await fs.readFile(`${dir}/${GUARD}`)
    if (bytes === undefined) return undefined
    return parse(bytes) ?? 'unreadable'
  },

  /**
   * The temporary files among `names` (entries of `dir`) that a process that is gone left while
   * placing or replacing the lock or its takeover guard (`lock.<pid>….tmp`): a crash between
   * writing one and linking or renaming it. One whose writer may be alive (it says this host's live
   * process, this process, or another host's) is not named: it may be in use. One that cannot be
   * read (empty or cut short: its writer died between creating it and writing it whole) is judged
   * by the pid in its name, taken for this host's: named when that process is gone. Its writer
   * could be another host's only while trying for a lock that opening (or a repair) holds when it
   * removes such a file, which fails all the same.
   */
  async strayTemps(fs: FileSystem, dir: string, names: readonly string[]): Promise<string[]> {
    const stray: string[] = []
    for (const name of names) {
      const match = TEMP_NAME.exec(name)
      if (match === null) continue
      const bytes = await fs.readFile(`${dir}/${name}`)
      if (bytes === undefined) continue // gone meanwhile
      const holder = parse(bytes)
      const pid = holder?.pid ?? Number(match[1])
      // This process's own may belong to an open of it now taking the lock (another spelling of `dir`).
      if (pid === process.pid) continue
      if (holder !== undefined ? !LockFile.isLive(fs, holder, dir) : !alive(pid)) stray.push(name)
    }
    return stray
  },

  /** Whether `holder` still holds the lock of `dir` (is alive and, if it is us, has it open). */
  isLive(fs: FileSystem, holder: LockHolder, dir: string): boolean {
    if (holder.hostname !== hostname()) return true // cannot check another host: assume live
    if (holder.pid === process.pid) return heldOn(fs).has(keyOf(dir))
    return alive(holder.pid)
  },

  /**
   * Takes the lock of `dir`. Throws a `DiskBufferError` `LOCKED` naming the holder when it is
   * live; returns the stale holder it took over from, if any.
   */
  async acquire(fs: FileSystem, dir: string): Promise<{ readonly tookOverFrom: LockHolder | undefined }> {
    const heldHere = heldOn(fs)
    const key = keyOf(dir)
    if (heldHere.has(key)) {
      throw new DiskBufferError('LOCKED', `already open in this process (pid ${process.pid})`, dir)
    }
    const busy = setOn(acquiring, fs)
    if (busy.has(key)) {
      throw new DiskBufferError('LOCKED', `already being opened in this process (pid ${process.pid})`, dir)
    }
    busy.add(key)
    try {
      const tookOverFrom = await take(fs, dir)
      heldHere.add(key)
      return { tookOverFrom }
    } finally {
      busy.delete(key)
    }
  },

  /** Releases the lock of `dir` and removes the file. Releasing twice is harmless. */
  async release(fs: FileSystem, dir: string): Promise<void> {
    if (!heldOn(fs).delete(keyOf(dir))) return
    await fs.unlink(`${dir}/${FILE}`)
  },

  /**
   * Removes the lock (and a takeover guard) of `dir` whoever holds it, for an operator who knows
   * its holder is gone (`ackline-buffer --repair --break-lock`). Never used by `open`.
   */
  async breakLock(fs: FileSystem, dir: string): Promise<void> {
    await fs.unlink(`${dir}/${FILE}`)
    await fs.unlink(`${dir}/${GUARD}`)
    await fs.syncDir(dir)
  },

  /** Forgets the lock without removing the file, as a crashed process would (for tests). */
  abandon(fs: FileSystem, dir: string): void {
    heldOn(fs).delete(keyOf(dir))
  },
} as const

/** Creates the lock of `dir`, or takes a stale one over; returns the stale holder, if any. */
async function take(fs: FileSystem, dir: string): Promise<LockHolder | undefined> {
  const me: LockHolder = { pid: process.pid, hostname: hostname(), since: new Date().toISOString() }
  const body = Buffer.from(JSON.stringify(me))
  let tookOverFrom: LockHolder | undefined
  if (!(await placeExclusive(fs, dir, FILE, body))) {
    const holder = await LockFile.read(fs, dir)
    if (holder === 'unreadable') throw unreadable(dir)
    if (holder !== undefined && LockFile.isLive(fs, holder, dir)) throw lockedBy(holder, dir)
    await takeGuard(fs, dir, body)
    try {
      // Read again under the guard: another process may have taken the lock over meanwhile.
      const now = await LockFile.read(fs, dir)
      if (now === 'unreadable') throw unreadable(dir)
      if (now !== undefined && LockFile.isLive(fs, now, dir)) throw lockedBy(now, dir)
      tookOverFrom = now ?? holder ?? { pid: -1, hostname: 'unknown', since: 'unknown' }
      // Replace the stale lock in one rename, so a reader never sees a half-written one.
      const temp = `${dir}/${FILE}.${process.pid}.tmp`
      await writeTemp(fs, temp, body)
      try {
        await fs.rename(temp, `${dir}/${FILE}`)
      } catch (error) {
        await fs.unlink(temp).catch(() => undefined)
        throw error
      }
    } finally {
      await fs.unlink(`${dir}/${GUARD}`)
    }
  }
  return tookOverFrom
}
