/**
 * The few file operations the disk buffer needs, behind one interface, so tests can run the
 * buffer on a file system that forgets unsynced writes, tears the last one, flips bytes or runs
 * out of space.
 *
 * Invariant: nothing written is durable until `datasync`/`sync` on its file resolved, and no
 * directory change (create, rename, unlink) is durable until `syncDir` on its directory resolved.
 *
 * @module
 */
import { constants } from 'node:fs'
import {
  type FileHandle,
  link,
  mkdir,
  open,
  readdir,
  readFile,
  realpath,
  rename,
  stat,
  unlink,
} from 'node:fs/promises'
import { dirname } from 'node:path'

/** An open file. Positions are absolute; the buffer never relies on a file offset. */
export interface FileLike {
  /**
   * Whether every `writev` is durable once it resolves (opened `'append-dsync'` where that makes
   * writes durable: see {@link OpenMode}). Absent or false: durable only after `datasync`, which
   * the caller must call.
   */
  readonly durableWrites?: boolean
  /** Writes `buffers` one after the other at `position`; resolves with the bytes written. */
  writev(buffers: readonly Uint8Array[], position: number): Promise<number>
  /** Reads up to `length` bytes at `position` into `buffer` at `offset`; resolves with the count read. */
  read(buffer: Uint8Array, offset: number, length: number, position: number): Promise<number>
  /** Makes the data durable (fdatasync). */
  datasync(): Promise<void>
  /** Cuts the file to `length` bytes. */
  truncate(length: number): Promise<void>
  /** The file's size. */
  size(): Promise<number>
  close(): Promise<void>
}

/**
 * How to open a file. `'append-dsync'` is `'append'` with every write durable once it resolves
 * where the system makes it so, as the file's `durableWrites` tells: on Linux the file is opened
 * `O_DSYNC` (the data and what is needed to read it back, as a write followed by `datasync`, in
 * one call). Elsewhere it is opened for appending and needs its `datasync`: macOS has `O_DSYNC`,
 * but its writes do not flush the drive's cache, where libuv's `datasync` there does
 * (`F_FULLFSYNC`). What `truncate` does always needs a `datasync`.
 */
export type OpenMode = 'read' | 'append' | 'append-dsync' | 'create-exclusive' | 'truncate'

/** The file-system operations the disk buffer uses. */
export interface FileSystem {
  /**
   * Makes the directory, and any missing above it; once it resolves their entries are durable
   * (each parent of one it made was synced), as a crash of the machine could otherwise lose the
   * new directory with every file later made and synced in it. When a sync fails (the call
   * rejects), the next call for the same path, or one below it, syncs again what was not synced,
   * although it makes nothing.
   */
  mkdir(path: string): Promise<void>
  /** Names in `path`, or an empty list when it does not exist. */
  readdir(path: string): Promise<string[]>
  open(path: string, mode: OpenMode): Promise<FileLike>
  /**
   * Opens the file at `path` as `open` does with `mode`, but never makes it: rejects with an
   * `ENOENT` error when it does not exist. Every open of an existing segment to write to it goes
   * this way ({@link openExisting}), so that one deleted from outside is taken as gone, not made
   * again: opening a buffer (its last segment), a failed write's rollback (the segment it cuts
   * back, once the write closed it) and `ackline-buffer --repair` (a segment whose torn tail it
   * cuts). Optional (added after `open`): without it they open with `open`, which makes a missing
   * segment again, empty (opening then reports its records as a torn write cut off; a rollback or
   * a repair cutting it fills it with zeros to the length it cuts to).
   */
  openExisting?(path: string, mode: 'append' | 'append-dsync'): Promise<FileLike>
  /** The whole file, or `undefined` when it does not exist. */
  readFile(path: string): Promise<Uint8Array | undefined>
  /** The file's size, or `undefined` when it does not exist. */
  size(path: string): Promise<number | undefined>
  rename(from: string, to: string): Promise<void>
  /** Gives the file `existing` a second name `target`; fails with `EEXIST` when `target` exists (never replaces it). */
  link(existing: string, target: string): Promise<void>
  /** Removes a file; a missing file is not an error. */
  unlink(path: string): Promise<void>
  /** Makes the directory's entries (creations, renames, removals) durable. */
  syncDir(path: string): Promise<void>
  /**
   * The path with symbolic links resolved (the directory's one name), for the in-process lock:
   * optional, a file system without links (a test's, in memory) leaves it out.
   */
  realpath?(path: string): Promise<string>
}

const FLAGS: Record<OpenMode, number> = {
  read: constants.O_RDONLY,
  append: constants.O_RDWR | constants.O_CREAT,
  // Off Linux (see `OpenMode`) the file is opened for appending, and says its writes need a datasync.
  'append-dsync': constants.O_RDWR | constants.O_CREAT,
  'create-exclusive': constants.O_RDWR | constants.O_CREAT | constants.O_EXCL,
  truncate: constants.O_RDWR | constants.O_CREAT | constants.O_TRUNC,
}

/**
 * `error` with `path` in front of its message when the message does not name it (`EISDIR: illegal
 * operation on a directory, read` says nothing of which entry is one).
 */
const naming = (error: unknown, path: string): unknown => {
  if (error instanceof Error && !error.message.includes(path)) error.message = `${path}: ${error.message}`
  return error
}

class NodeFile implements FileLike {
  constructor(
    readonly handle: FileHandle,
    readonly path: string,
    readonly durableWrites: boolean,
  ) {}
  async writev(buffers: readonly Uint8Array[], position: number): Promise<number> {
    let written = 0
    let pending = buffers as Uint8Array[]
    // writev may write less than asked (a signal, a full pipe); finish the rest ourselves.
    for (;;) {
      const { bytesWritten } = await this.handle.writev(pending, position + written)
      written += bytesWritten
      let skip = bytesWritten
      let i = 0
      while (i < pending.length && skip >= pending[i]!.length) skip -= pending[i++]!.length
      if (i === pending.length) return written
      pending = [pending[i]!.subarray(skip), ...pending.slice(i + 1)]
    }
  }
  async read(buffer: Uint8Array, offset: number, length: number, position: number): Promise<number> {
    try {
      return (await this.handle.read(buffer, offset, length, position)).bytesRead
    } catch (error) {
      throw naming(error, this.path)
    }
  }
  datasync(): Promise<void> {
    return this.handle.datasync()
  }
  truncate(length: number): Promise<void> {
    return this.handle.truncate(length)
  }
  async size(): Promise<number> {
    return (await this.handle.stat()).size
  }
  close(): Promise<void> {
    return this.handle.close()
  }
}

/** `path` opened with `flags`, and `O_DSYNC` where `mode` asks for durable writes and they are (see {@link OpenMode}). */
async function openFile(path: string, mode: OpenMode, flags: number): Promise<NodeFile> {
  // Decided at each open (not at load), as the file sink decides its O_SYNC.
  const durableWrites = mode === 'append-dsync' && process.platform === 'linux'
  return new NodeFile(
    await open(path, flags | (durableWrites ? constants.O_DSYNC : 0), 0o644),
    path,
    durableWrites,
  )
}

/**
 * `path` opened with `mode` but never made, through `fs.openExisting` (rejects with `ENOENT` when
 * it does not exist); with `fs.open` on a file system without it, which makes a missing one.
 */
export function openExisting(
  fs: FileSystem,
  path: string,
  mode: 'append' | 'append-dsync',
): Promise<FileLike> {
  return fs.openExisting === undefined ? fs.open(path, mode) : fs.openExisting(path, mode)
}

const isMissing = (error: unknown): boolean => (error as NodeJS.ErrnoException).code === 'ENOENT'

/**
 * Directories `NodeFileSystem.mkdir` made (spelled as in the path it was given) whose entry in
 * their parent is not known durable: each is added when made and removed only once its parent's
 * fsync succeeded, so a failed fsync is tried again by the next mkdir on the way to it (which
 * finds the directory there and makes nothing).
 */
const unsynced = new Set<string>()

/** The real file system, through `node:fs/promises`. */
export const NodeFileSystem: FileSystem = {
  async mkdir(path) {
    // The first directory it made (a leading part of `path`, as given), or undefined when there
    // was nothing to make.
    const first = await mkdir(path, { recursive: true })
    // Each made directory's entry is in its parent: sync from the first one's parent down to the
    // new directory's parent (its own entries are synced as files are made in it). Walked on the
    // path as given, not resolved: after a symbolic link, `..` is its target's parent, which only
    // the system knows (resolved, `link/../new` named a directory that does not exist).
    if (first !== undefined) {
      for (let dir = path; ; dir = dirname(dir)) {
        unsynced.add(dir)
        if (dir === first || dir === dirname(dir)) break
      }
    }
    if (unsynced.size === 0) return
    // Made now, or by an earlier call whose sync failed: from the top down, each forgotten only
    // once its parent's sync succeeded.
    const onTheWay = [...unsynced]
      .filter((dir) => dir === path || path.startsWith(`${dir}/`))
      .sort((a, b) => a.length - b.length)
    for (const dir of onTheWay) {
      await NodeFileSystem.syncDir(dirname(dir))
      unsynced.delete(dir)
    }
  },
  async readdir(path) {
    try {
      return await readdir(path)
    } catch (error) {
      if (isMissing(error)) return []
      throw error
    }
  },
  open(path, mode) {
    return openFile(path, mode, FLAGS[mode])
  },
  openExisting(path, mode) {
    return openFile(path, mode, FLAGS[mode] & ~constants.O_CREAT)
  },
  async readFile(path) {
    try {
      return await readFile(path)
    } catch (error) {
      if (isMissing(error)) return undefined
      throw naming(error, path)
    }
  },
  async size(path) {
    try {
      return (await stat(path)).size
    } catch (error) {
      if (isMissing(error)) return undefined
      throw error
    }
  },
  rename,
  link,
  realpath,
  async unlink(path) {
    try {
      await unlink(path)
    } catch (error) {
      if (!isMissing(error)) throw error
    }
  },
  async syncDir(path) {
    const dir = await open(path, constants.O_RDONLY)
    try {
      await dir.sync()
    } finally {
      await dir.close()
    }
  },
}
