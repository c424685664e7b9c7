// The checkpoint directory's lock file when the disk is full, when two runs of this process take
// it at once, and what is said of a stale one taken over. Made at `node:fs/promises` (a full disk cannot be made here without mounting
// one, nor an order of two runs' file operations chosen): a write of a lock-related file fails with
// ENOSPC after its file was created, as a full disk does; an unlink can be held.

import { spawnSync } from 'node:child_process'
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs'
import type * as fsp from 'node:fs/promises'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'

/** Which files' writes fail with ENOSPC (their file made first), whether link is refused, and what an unlink waits for. */
const faults: {
  full: (path: string) => boolean
  noLinks: boolean
  linkReplyLost: boolean
  beforeUnlink: (path: string) => Promise<void>
} = { full: () => false, noLinks: false, linkReplyLost: false, beforeUnlink: async () => {} }

const enospc = () => Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' })
const anyLockFile = (path: string) => path.includes('checkpoints.json.lock')

vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof fsp>()
  const writeFile = async (...args: Parameters<typeof real.writeFile>) => {
    if (!faults.full(String(args[0]))) return real.writeFile(...args)
    const flag = (args[2] as { flag?: string } | undefined)?.flag ?? 'w'
    await (await real.open(args[0] as string, flag)).close()
    throw enospc()
  }
  const open = async (...args: Parameters<typeof real.open>) => {
    const handle = await real.open(...args)
    if (faults.full(String(args[0]))) {
      handle.writeFile = async () => {
        throw enospc()
      }
      handle.write = (async () => {
        throw enospc()
      }) as typeof handle.write
    }
    return handle
  }
  const link = async (...args: Parameters<typeof real.link>) => {
    if (faults.noLinks)
      throw Object.assign(new Error('EPERM: operation not permitted, link'), { code: 'EPERM' })
    if (!faults.linkReplyLost) return real.link(...args)
    // NFS: the link was made, its reply lost, and the call sent again found the link there.
    faults.linkReplyLost = false
    await real.link(...args)
    throw Object.assign(new Error('EEXIST: file already exists, link'), { code: 'EEXIST' })
  }
  const unlink = async (...args: Parameters<typeof real.unlink>) => {
    await faults.beforeUnlink(String(args[0]))
    return real.unlink(...args)
  }
  const fns = { writeFile, open, link, unlink }
  return { ...real, ...fns, default: { ...real, ...fns } }
})

const { CheckpointLock, LOCK_FILE } = await import('../src/internal/CheckpointLock.js')

const dirs: string[] = []
const tempDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'ackline-checkpoint-lock-'))
  dirs.push(dir)
  return dir
}
afterEach(() => {
  faults.full = () => false
  faults.noLinks = false
  faults.linkReplyLost = false
  faults.beforeUnlink = async () => {}
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (error: unknown) => error,
  )

describe('CheckpointLock on a full disk', () => {
  it('leaves no file of its own when it cannot write the lock at start, and names the source and the field', async () => {
    const dir = tempDir()
    faults.full = anyLockFile
    const error = await failure(CheckpointLock.take(dir, 'src', () => {}))
    expect(error).toMatchObject({ code: 'CHECKPOINT_WRITE_FAILED', component: 'src', field: 'checkpoints' })
    expect((error as Error).message).toContain(join(dir, LOCK_FILE))
    expect((error as Error).message).toContain('ENOSPC')
    // It used to leave `checkpoints.json.lock.<uuid>`, one more at each start a supervisor retried.
    expect(readdirSync(dir)).toEqual([])
  })

  it('leaves no file of its own where hard links are refused (made in place), and names the source and the field', async () => {
    const dir = tempDir()
    faults.noLinks = true
    const taken = await CheckpointLock.take(dir, 'src', () => {})
    await taken.release()
    expect(readdirSync(dir)).toEqual([])
    // Full once its own file is written: the lock made in place cannot be. It used to stay, empty.
    faults.full = (path) => path === join(dir, LOCK_FILE)
    const error = await failure(CheckpointLock.take(dir, 'src', () => {}))
    expect(error).toMatchObject({ code: 'CHECKPOINT_WRITE_FAILED', component: 'src', field: 'checkpoints' })
    expect(readdirSync(dir)).toEqual([])
  })

  it('fails a check before a checkpoint write on a full disk with the write error, leaving no empty lock, once its lock file was removed', async () => {
    const dir = tempDir()
    const lock = await CheckpointLock.take(dir, 'src', () => {})
    // An operator removed it; the check makes it again, but the disk is full.
    unlinkSync(join(dir, LOCK_FILE))
    faults.full = anyLockFile
    const error = await failure(lock.verify())
    // It used to leave an empty lock file, and the next check (the stop's) said the lock was taken over.
    expect(error).toMatchObject({ code: 'CHECKPOINT_WRITE_FAILED', component: 'src', field: 'checkpoints' })
    expect(readdirSync(dir)).toEqual([])
    const again = await failure(lock.verify())
    expect(again).toMatchObject({ code: 'CHECKPOINT_WRITE_FAILED' })
    // Room again: the check makes it again, whole.
    faults.full = () => false
    await lock.verify()
    expect(existsSync(join(dir, LOCK_FILE))).toBe(true)
    await lock.release()
    expect(readdirSync(dir)).toEqual([])
  })
})

describe('CheckpointLock taken by two runs of this process at once', () => {
  it('fails the second while the first still removes its temporary file, instead of taking over a lock it took for stale', async () => {
    const dir = tempDir()
    // The first run's lock is made; its temporary file's unlink is held until the second settles.
    let second: Promise<unknown> | undefined
    const notices: string[] = []
    faults.beforeUnlink = async (path) => {
      if (second === undefined && path.startsWith(join(dir, `${LOCK_FILE}.`))) {
        faults.beforeUnlink = async () => {}
        second = failure(CheckpointLock.take(dir, 'second', (m) => notices.push(m)))
        await second
      }
    }
    const first = await CheckpointLock.take(dir, 'first', () => {})
    // It used to take the first's lock for one a crash left under this pid (its token not yet
    // known held), and take it over: both held it, until the first's next check.
    expect(await second).toMatchObject({ code: 'CHECKPOINTS_IN_USE', component: 'second' })
    expect(notices).toEqual([])
    await first.verify()
    await first.release()
    expect(readdirSync(dir)).toEqual([])
  })
})

describe('CheckpointLock taking over a stale lock', () => {
  it('says a process of this host is not running, but not that one of another host is not (it cannot be seen from here)', async () => {
    const dir = tempDir()
    const gone = spawnSync(process.execPath, ['-e', '']).pid!
    const said = async (host: string, pid = gone) => {
      writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid, host, token: 't' }))
      const notices: string[] = []
      const lock = await CheckpointLock.take(dir, 'src', (m) => notices.push(m))
      await lock.release()
      return notices
    }
    expect(await said(hostname())).toEqual([
      `took over the lock ${join(dir, LOCK_FILE)} of process ${gone}, which is not running`,
    ])
    // A restarted container's pid 1: this pid, of an earlier process (it used to say this pid was not running).
    expect(await said(hostname(), process.pid)).toEqual([
      `took over the lock ${join(dir, LOCK_FILE)} of process ${process.pid}, an earlier process that had this process's pid`,
    ])
    // It used to say `which is not running` of a process this host cannot see (two hosts given one
    // directory on a network file system, two containers): that one may still run, and fail.
    expect(await said('elsewhere')).toEqual([
      `took over the lock ${join(dir, LOCK_FILE)} of process ${gone} on host elsewhere, which this host cannot see: if it still runs, it fails CHECKPOINTS_IN_USE at its next checkpoint write`,
    ])
  })
})

describe('CheckpointLock taken over by two runs at once', () => {
  it('says it took a stale lock over only once the lock is its own: the run another took it from under fails, and says nothing of it', async () => {
    const dir = tempDir()
    const gone = spawnSync(process.execPath, ['-e', '']).pid!
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: gone, host: hostname(), token: 't' }))
    // The first moves the stale lock aside; while it removes it, the second finds none and takes it.
    let second: Promise<unknown> | undefined
    const secondNotices: string[] = []
    faults.beforeUnlink = async (path) => {
      if (second === undefined && path.startsWith(join(dir, `${LOCK_FILE}.stale.`))) {
        faults.beforeUnlink = async () => {}
        second = CheckpointLock.take(dir, 'second', (m) => secondNotices.push(m))
        await second
      }
    }
    const firstNotices: string[] = []
    const first = await failure(CheckpointLock.take(dir, 'first', (m) => firstNotices.push(m)))
    expect(first).toMatchObject({ code: 'CHECKPOINTS_IN_USE', component: 'first' })
    // It used to say it took the lock over, then fail: the log told of two runs holding it.
    expect(firstNotices).toEqual([])
    expect(secondNotices).toEqual([])
    await ((await second) as { release(): Promise<void> }).release()
    expect(readdirSync(dir)).toEqual([])
  })
})

describe('CheckpointLock of a pid another process has now', () => {
  // Linux only: a process is told apart from a later one of its pid by this boot and its start time.
  const linux = existsSync('/proc/self/stat')
  const boot = () => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()
  const startOf = (pid: number) =>
    readFileSync(`/proc/${pid}/stat`, 'utf8').split(')').at(-1)!.trim().split(' ')[19]!
  // A live process that is no file source: this one's parent.
  const other = process.ppid

  it.skipIf(!linux)(
    'takes over a lock whose pid is another live process now (the host restarted, or the pid was reused)',
    async () => {
      const dir = tempDir()
      const said = async (holder: object) => {
        writeFileSync(
          join(dir, LOCK_FILE),
          JSON.stringify({ pid: other, host: hostname(), token: 't', ...holder }),
        )
        const notices: string[] = []
        const lock = await CheckpointLock.take(dir, 'src', (m) => notices.push(m))
        await lock.release()
        return notices
      }
      // A service restarted after a power loss found its old pid taken by a daemon started at boot,
      // and failed CHECKPOINTS_IN_USE at every start until an operator removed the lock file.
      expect(await said({ boot: 'an-earlier-boot', start: startOf(other) })).toEqual([
        `took over the lock ${join(dir, LOCK_FILE)} of process ${other}, which is not running (this host has restarted since)`,
      ])
      expect(await said({ boot: boot(), start: '1' })).toEqual([
        `took over the lock ${join(dir, LOCK_FILE)} of process ${other}, which is not running (its pid is another process's now)`,
      ])
      expect(readdirSync(dir)).toEqual([])
    },
  )

  it.skipIf(!linux)('fails while that process, the very one that wrote it, runs', async () => {
    const dir = tempDir()
    writeFileSync(
      join(dir, LOCK_FILE),
      JSON.stringify({ pid: other, host: hostname(), token: 't', boot: boot(), start: startOf(other) }),
    )
    const error = await failure(CheckpointLock.take(dir, 'src', () => {}))
    expect(error).toMatchObject({ code: 'CHECKPOINTS_IN_USE', component: 'src' })
    expect((error as Error).message).toContain(
      `is held by process ${other} (lock file ${join(dir, LOCK_FILE)})`,
    )
  })

  it.skipIf(!linux)('writes the boot and start time of this process in its lock', async () => {
    const dir = tempDir()
    const lock = await CheckpointLock.take(dir, 'src', () => {})
    expect(JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8'))).toMatchObject({
      pid: process.pid,
      boot: boot(),
      start: startOf(process.pid),
    })
    await lock.release()
  })
})

describe('CheckpointLock on NFS', () => {
  it('takes the lock whose link was made though the call failed EEXIST (its reply lost, the call sent again)', async () => {
    const dir = tempDir()
    faults.linkReplyLost = true
    const notices: string[] = []
    // It used to find its own lock there, held by a run of this process, and fail CHECKPOINTS_IN_USE
    // naming its own pid, leaving that lock behind.
    const lock = await CheckpointLock.take(dir, 'src', (m) => notices.push(m))
    expect(notices).toEqual([])
    await lock.verify()
    await lock.release()
    expect(readdirSync(dir)).toEqual([])
  })
})
