/**
 * Faults in the fsync of dead-letter files, injected at the file handle (below `DeadLetterFile`),
 * and the image a crash would leave of those files.
 *
 * A failed fsync behaves as Linux's does since the 2018 "fsyncgate" reports: the writes it was
 * to make durable are lost (the kernel marked their pages clean, and they never reach the disk),
 * and the next fsync of the same file succeeds, as nothing is left for it to fail on. A crash
 * keeps of each dead-letter file what a successful fsync covered, less what a failed one lost; the
 * rest (written, never synced) is gone too. Other handles (the checkpoint file) are not touched.
 * An fsync can also be held until the test lets it go on, so that another one overlaps it.
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { type FileHandle, open } from 'node:fs/promises'
import { join } from 'node:path'
import { vi } from 'vitest'

/** What one dead-letter file (an inode) has on disk. */
interface Disk {
  /** The length a successful fsync covered. */
  synced: number
  /** Byte ranges a failed fsync lost: never on disk, whatever a later fsync says. */
  readonly lost: [number, number][]
}

/** The fault plan in force; see {@link fsyncFaults}. */
export interface FsyncFaults {
  /** How many fsyncs of dead-letter files were called so far, the failed ones included. */
  readonly calls: number
  /** What a crash now would leave of the dead-letter file `name` in the directory, as text. */
  durableText(name: string): string
  /** Rewrites every dead-letter file in the directory to what a crash now would leave of it. */
  crash(): void
  /** Lets the held fsync numbered `call` go on (it fails if `fail` lists it, else it succeeds). */
  release(call: number): void
  /** Takes the fault plan away: fsyncs work as before. */
  restore(): void
}

/** Which fsyncs of dead-letter files (numbered from 1, in the order they are called) to fail or hold. */
export interface FsyncPlan {
  /** These fail with EIO, losing what they were to make durable. */
  readonly fail?: readonly number[]
  /** These wait for `release(call)` before they go on. */
  readonly hold?: readonly number[]
}

/** Applies `plan` to the fsyncs of the files in `directory` whose name starts with `prefix`. */
export async function fsyncFaults(directory: string, prefix: string, plan: FsyncPlan): Promise<FsyncFaults> {
  const held = new Map<number, () => void>()
  const released = new Set<number>()
  const disks = new Map<number, Disk>()
  const diskOf = (ino: number): Disk => {
    let disk = disks.get(ino)
    if (disk === undefined) {
      disk = { synced: 0, lost: [] }
      disks.set(ino, disk)
    }
    return disk
  }
  const files = () =>
    readdirSync(directory)
      .filter((name) => name.startsWith(prefix))
      .map((name) => ({ name, path: join(directory, name), ino: statSync(join(directory, name)).ino }))
  const image = (path: string, ino: number): Buffer => {
    const disk = diskOf(ino)
    const bytes = readFileSync(path).subarray(0, disk.synced)
    const kept: Buffer[] = []
    let at = 0
    for (const [from, to] of [...disk.lost].sort((x, y) => x[0] - y[0])) {
      if (from > at) kept.push(bytes.subarray(at, Math.min(from, bytes.length)))
      at = Math.max(at, to)
    }
    if (at < bytes.length) kept.push(bytes.subarray(at))
    return Buffer.concat(kept)
  }
  let calls = 0
  const probe = await open(directory, 'r')
  const proto = Object.getPrototypeOf(probe) as FileHandle
  await probe.close()
  const sync = proto.sync
  const spy = vi.spyOn(proto, 'sync').mockImplementation(async function (this: FileHandle) {
    const { ino, size } = await this.stat()
    if (!files().some((f) => f.ino === ino)) return sync.call(this)
    const call = ++calls
    if (plan.hold?.includes(call) && !released.has(call))
      await new Promise<void>((resolve) => held.set(call, resolve))
    const disk = diskOf(ino)
    if (plan.fail?.includes(call)) {
      // Lost, and the pages clean: a later fsync has nothing left to fail on.
      if (size > disk.synced) disk.lost.push([disk.synced, size])
      disk.synced = Math.max(disk.synced, size)
      throw Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO', syscall: 'fsync' })
    }
    await sync.call(this)
    // The length before the fsync: what was written while it ran may not be covered.
    disk.synced = Math.max(disk.synced, size)
  })
  return {
    get calls() {
      return calls
    },
    durableText(name) {
      const path = join(directory, name)
      return image(path, statSync(path).ino).toString('utf8')
    },
    crash() {
      for (const { path, ino } of files()) {
        const left = image(path, ino)
        writeFileSync(path, left)
        disks.set(ino, { synced: left.length, lost: [] })
      }
    },
    release(call) {
      released.add(call)
      held.get(call)?.()
    },
    restore() {
      spy.mockRestore()
    },
  }
}
