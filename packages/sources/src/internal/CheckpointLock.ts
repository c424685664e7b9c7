/**
 * The lock file of a checkpoint directory: which process's file source writes its checkpoints.
 *
 * Invariant: the lock file, when there, is a whole document naming one holder (its pid, host and
 * a random token); it is made by a hard link from a file already written (atomic: never seen half
 * written), taken over only from a holder whose pid is not alive (or, on Linux, is another
 * process's now: one of another boot, or of another start time), and checked before each
 * checkpoint write: a run whose token is no longer there (taken over by another host's run, or
 * by one that found its pid dead in another pid namespace) stops writing checkpoints.
 */
import { randomUUID } from 'node:crypto'
import { link, open, readFile, rename, unlink } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { FileSourceError } from '../FileSourceError.js'

/** The lock file's name in the checkpoint directory (it starts with the checkpoint file's: never tailed). */
export const LOCK_FILE = 'checkpoints.json.lock'

/**
 * Who holds a lock. On Linux also this boot of the kernel and the holder's start time in it (clock
 * ticks since boot), which tell it apart from a later process given its pid: after a restart of
 * the host (a power loss), a daemon started at boot; after a container's, its new pid namespace's
 * process. Locks without them (another system's) are judged by the pid alone.
 */
interface Holder {
  readonly pid: number
  readonly host: string
  readonly token: string
  readonly boot?: string | undefined
  readonly start?: string | undefined
}

/** This boot of the kernel (Linux), or `undefined`. */
async function bootId(): Promise<string | undefined> {
  return (
    (await readFile('/proc/sys/kernel/random/boot_id', 'utf8').catch(() => undefined))?.trim() || undefined
  )
}

/** When process `pid` started (Linux: field 22 of its stat, after a name that may hold spaces and parentheses), or `undefined`. */
async function startTime(pid: number): Promise<string | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined)
  return stat?.slice(stat.lastIndexOf(')') + 2).split(' ')[19]
}

/** The tokens of the locks this process holds, or is taking: a lock naming this pid and none of them is stale. */
const heldHere = new Set<string>()

const code = (error: unknown) => (error as NodeJS.ErrnoException).code

/**
 * Makes the file `path` (exclusively: rejects with `EEXIST` when there is one) holding `text`, or
 * none: one made but not written (a full disk: ENOSPC, EDQUOT) is removed, as an empty lock would
 * be taken over, and a temporary one left for good.
 */
async function writeNew(path: string, text: string): Promise<void> {
  const handle = await open(path, 'wx')
  try {
    await handle.writeFile(text)
    await handle.close()
  } catch (error) {
    await handle.close().catch(() => {})
    await unlink(path).catch(() => {})
    throw error
  }
}

function parse(text: string): Holder | undefined {
  try {
    const h = JSON.parse(text) as Partial<Holder>
    if (Number.isSafeInteger(h.pid) && typeof h.host === 'string' && typeof h.token === 'string') {
      const known = (v: unknown) => (typeof v === 'string' ? v : undefined)
      return { pid: h.pid!, host: h.host, token: h.token, boot: known(h.boot), start: known(h.start) }
    }
  } catch {}
  return undefined
}

/**
 * What is known of a stale `holder`, for the notice; `undefined` when it may be running: a pid of
 * this process counts only with a token it holds (a lock a crashed process left under the pid this
 * one has now, as pid 1 of a container, is stale); another pid while a process has it (`EPERM`: one
 * of another user) and, where both are known, that process started when the holder did, in this
 * boot (`boot` being this one's). A pid is looked up on this host only; of another host's, nothing
 * is known (two hosts given one directory on a network file system, two containers that each run
 * as pid 1). A file that is no lock this source wrote holds nothing.
 */
async function staleness(holder: Holder | undefined, boot: string | undefined): Promise<string | undefined> {
  if (holder === undefined) return 'no process (not a lock this source wrote)'
  const here = holder.host === hostname()
  const gone = here
    ? `process ${holder.pid}, which is not running`
    : `process ${holder.pid} on host ${holder.host}, which this host cannot see: if it still runs, it fails CHECKPOINTS_IN_USE at its next checkpoint write`
  if (holder.pid === process.pid) {
    if (heldHere.has(holder.token)) return undefined
    return here ? `process ${holder.pid}, an earlier process that had this process's pid` : gone
  }
  if (holder.pid <= 0) return gone
  if (here && holder.boot !== undefined && boot !== undefined && holder.boot !== boot)
    return `${gone} (this host has restarted since)`
  try {
    process.kill(holder.pid, 0)
  } catch (error) {
    if (code(error) !== 'EPERM') return gone
  }
  if (holder.start !== undefined && boot !== undefined && holder.boot === boot) {
    const start = await startTime(holder.pid)
    if (start !== undefined && start !== holder.start)
      return here ? `${gone} (its pid is another process's now)` : gone
  }
  return undefined
}

export class CheckpointLock {
  readonly path: string
  readonly #directory: string
  readonly #text: string
  readonly #token: string
  readonly #names: { readonly component: string; readonly field: 'checkpoints' }
  #released = false

  readonly #boot: string | undefined

  private constructor(
    directory: string,
    component: string,
    boot: string | undefined,
    start: string | undefined,
  ) {
    this.#directory = directory
    this.path = join(directory, LOCK_FILE)
    this.#token = randomUUID()
    this.#boot = boot
    this.#text = JSON.stringify({ pid: process.pid, host: hostname(), token: this.#token, boot, start })
    this.#names = { component, field: 'checkpoints' }
  }

  /**
   * Takes the lock of `directory` (which exists) for the source `component`, taking over one whose
   * holder is not alive (`onStale` told of it). Throws `CHECKPOINTS_IN_USE` when a live process
   * holds it, naming the directory and that pid; `CHECKPOINT_WRITE_FAILED` when it cannot be written.
   */
  static async take(
    directory: string,
    component: string,
    onStale: (message: string) => void,
  ): Promise<CheckpointLock> {
    const boot = await bootId()
    const lock = new CheckpointLock(directory, component, boot, boot && (await startTime(process.pid)))
    // Known held before the lock file can be seen: another run of this process that read it
    // meanwhile (the first still removing its temporary file) took it for one a crash left.
    heldHere.add(lock.#token)
    try {
      await lock.#acquire(onStale)
    } catch (error) {
      heldHere.delete(lock.#token)
      throw error
    }
    return lock
  }

  async #acquire(onStale: (message: string) => void): Promise<void> {
    const mine = await this.#written()
    // Said once the lock is this run's: another run may take it first, and this one then fails.
    let removed: string | undefined
    try {
      // Bounded: each turn either takes the lock, finds it held, or moved away a stale one.
      for (let turn = 0; turn < 20; turn++) {
        if (await this.#create(mine)) {
          if (removed !== undefined) onStale(`took over the lock ${this.path} of ${removed}`)
          return
        }
        const text = await readFile(this.path, 'utf8').catch((error: unknown) => {
          if (code(error) === 'ENOENT') return undefined
          throw this.#writeFailed(error)
        })
        if (text === undefined) continue
        const holder = parse(text)
        const stale = await staleness(holder, this.#boot)
        if (stale === undefined) throw this.#inUse(holder!, 'is held by')
        // Moved aside, then compared: another run may have taken it over since it was read, and
        // that run's live lock must not be removed.
        const aside = `${this.path}.stale.${this.#token}`
        try {
          await rename(this.path, aside)
        } catch (error) {
          if (code(error) === 'ENOENT') continue
          throw this.#writeFailed(error)
        }
        const moved = await readFile(aside, 'utf8').catch(() => undefined)
        if (moved !== text) await link(aside, this.path).catch(() => {})
        else removed = stale
        await unlink(aside).catch(() => {})
      }
      throw this.#inUse(undefined, 'is being taken by')
    } finally {
      await unlink(mine).catch(() => {})
    }
  }

  /** This run's lock, written whole to a temporary file beside the lock file: its path. */
  async #written(): Promise<string> {
    const mine = `${this.path}.${this.#token}`
    try {
      await writeNew(mine, this.#text)
    } catch (error) {
      throw this.#writeFailed(error)
    }
    return mine
  }

  /** Makes the lock file from `mine`: `false` when another run's is there. */
  async #create(mine: string): Promise<boolean> {
    try {
      await link(mine, this.path)
      return true
    } catch (error) {
      // On NFS a link whose reply was lost is sent again, and fails EEXIST on the link it made.
      if (code(error) === 'EEXIST')
        return (await readFile(this.path, 'utf8').catch(() => undefined)) === this.#text
      // A file system without hard links: made exclusively, written at once (a reader that finds
      // it empty meanwhile takes it for stale, and the check before each checkpoint write tells).
      if (!['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS', 'EXDEV'].includes(code(error) ?? ''))
        throw this.#writeFailed(error)
    }
    try {
      await writeNew(this.path, this.#text)
      return true
    } catch (error) {
      if (code(error) === 'EEXIST') return false
      throw this.#writeFailed(error)
    }
  }

  /**
   * Throws `CHECKPOINTS_IN_USE` when the lock is no longer this run's (taken over by a run that
   * could not tell this one was alive: on another host, in another pid namespace). A lock file
   * removed meanwhile is made again, as at the start (never seen half written); `CHECKPOINT_WRITE_FAILED`
   * when it cannot be.
   */
  async verify(): Promise<void> {
    const text = await readFile(this.path, 'utf8').catch((error: unknown) => {
      if (code(error) === 'ENOENT') return undefined
      throw this.#writeFailed(error)
    })
    if (text === this.#text) return
    if (text === undefined) {
      const mine = await this.#written()
      try {
        if (await this.#create(mine)) return
      } finally {
        await unlink(mine).catch(() => {})
      }
    }
    const now = parse((await readFile(this.path, 'utf8').catch(() => '')) ?? '')
    throw this.#inUse(now, 'was taken over by')
  }

  /** Removes the lock file, if it is still this run's. Idempotent; never throws. */
  async release(): Promise<void> {
    if (this.#released) return
    this.#released = true
    heldHere.delete(this.#token)
    const text = await readFile(this.path, 'utf8').catch(() => undefined)
    if (text === this.#text) await unlink(this.path).catch(() => {})
  }

  #inUse(holder: Holder | undefined, how: string): FileSourceError {
    const directory = this.#directory
    const who =
      holder === undefined
        ? 'another run'
        : `process ${holder.pid}${holder.host === hostname() ? '' : ` on host ${holder.host}`}`
    return new FileSourceError(
      'CHECKPOINTS_IN_USE',
      directory,
      `the checkpoint directory ${directory} (option 'checkpoints') ${how} ${who} (lock file ${this.path}): two processes cannot share one checkpoint directory (they would write over each other's checkpoints); give each its own. If ${who} is no file source, remove the lock file`,
      this.#names,
    )
  }

  #writeFailed(error: unknown): FileSourceError {
    return new FileSourceError(
      'CHECKPOINT_WRITE_FAILED',
      this.path,
      `cannot write the lock file ${this.path}: ${(error as Error).message}`,
      { cause: error, ...this.#names },
    )
  }
}
