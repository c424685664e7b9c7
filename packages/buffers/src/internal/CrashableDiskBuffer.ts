/**
 * A factory of disk buffers that a test can crash: the buffer it opens is a plain
 * {@link DiskBuffer} with one more method, `_abandon()`, which stops it as SIGKILL would, so the
 * test can then drop unsynced data from its in-memory file system and reopen. Tests only;
 * production code opens buffers with `DiskBuffer.open` and never reaches this.
 *
 * A killed process touches no file again, but an abandoned buffer still has work in flight (a
 * write group half done, a roll, a rollback). So the buffer runs on a fused view of the file
 * system: once abandoned, every operation of it fails with `EBADF`, as a dead process's would,
 * and none of its later writes can reach the files the reopened buffer recovers.
 *
 * @module
 */
import { DiskBuffer } from '../DiskBuffer.js'
import type { DiskBufferOptions } from '../DiskBufferOptions.js'
import { DiskBufferHooks } from './DiskBufferHooks.js'
import { type FileLike, type FileSystem, NodeFileSystem } from './FileSystem.js'

/** A disk buffer with its crash hook. */
export type Crashable = DiskBuffer & {
  /** Stops the buffer as a crash would: no file is written, closed or unlocked, now or later. */
  _abandon(): void
}

/** `fs`, failing every operation with EBADF once `blow` was called. */
function fused(fs: FileSystem): { readonly fs: FileSystem; readonly blow: () => void } {
  let blown = false
  const check = (path: string): void => {
    if (blown) {
      throw Object.assign(new Error(`EBADF: the process was killed ('${path}')`), { code: 'EBADF', path })
    }
  }
  // Async, so a blown fuse rejects rather than throws, as a failed system call does.
  const guarded = async <T>(path: string, run: () => Promise<T>): Promise<T> => {
    check(path)
    return run()
  }
  const file = (path: string, f: FileLike): FileLike => ({
    durableWrites: f.durableWrites === true,
    writev: (buffers, position) => guarded(path, () => f.writev(buffers, position)),
    read: (buffer, offset, length, position) => guarded(path, () => f.read(buffer, offset, length, position)),
    datasync: () => guarded(path, () => f.datasync()),
    truncate: (length) => guarded(path, () => f.truncate(length)),
    size: () => guarded(path, () => f.size()),
    close: () => guarded(path, () => f.close()),
  })
  return {
    fs: {
      mkdir: (path) => guarded(path, () => fs.mkdir(path)),
      readdir: (path) => guarded(path, () => fs.readdir(path)),
      open: (path, mode) => guarded(path, async () => file(path, await fs.open(path, mode))),
      // Only where `fs` has it: without it, opening falls back to `open`, as on `fs` itself.
      ...(fs.openExisting === undefined
        ? {}
        : {
            openExisting: (path: string, mode: 'append' | 'append-dsync') =>
              guarded(path, async () => file(path, await fs.openExisting!(path, mode))),
          }),
      readFile: (path) => guarded(path, () => fs.readFile(path)),
      size: (path) => guarded(path, () => fs.size(path)),
      rename: (from, to) => guarded(from, () => fs.rename(from, to)),
      link: (existing, target) => guarded(existing, () => fs.link(existing, target)),
      unlink: (path) => guarded(path, () => fs.unlink(path)),
      syncDir: (path) => guarded(path, () => fs.syncDir(path)),
    },
    blow: () => {
      blown = true
    },
  }
}

/** Opens buffers that tests can crash. */
export const CrashableDiskBuffer = {
  /** {@link DiskBuffer.open}, with `_abandon()` on the result. */
  async open(options: DiskBufferOptions): Promise<Crashable> {
    const disk = fused(options.fileSystem ?? NodeFileSystem)
    const buffer = await DiskBuffer.open({ ...options, fileSystem: disk.fs })
    const { abandon } = DiskBufferHooks.get()
    return Object.assign(buffer, {
      _abandon: (): void => {
        abandon(buffer)
        disk.blow()
      },
    })
  },
} as const
