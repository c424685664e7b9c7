/**
 * The dead-letter file of the file source: one JSON object per line, appended.
 *
 * Invariant: the file holds whole entries only, each ending with its newline. Appends run one at a
 * time; one that fails part-way (a short write, then a full disk) is undone by truncating the file
 * back to the length it had before, and while that truncation has not succeeded no other entry is
 * appended (the next append tries it first). So a reader never sees a piece of an entry followed
 * by a whole one. A piece left at the end by an earlier process (killed mid-append) is cut away
 * when the file is opened, and a file shorter than expected (emptied by hand) is taken as it is.
 * Entries always go to the file at the path: one deleted or rotated away (renamed) is replaced by
 * a new file there at the next append, after what was appended to it is synced.
 *
 * Durability: an entry is on disk once a sync called after its append succeeded (`durable` says
 * whether every one is). A file this opened empty (most likely created just now, at the start or
 * after a rotation) has its directory fsynced too by the next sync, before the file's own fsync
 * counts: an fsynced file whose directory entry a crash of the machine lost is lost whole. A failed fsync is final, wherever it happens (in `sync`, or on letting go
 * of a file rotated away): Linux may drop the pages it failed to write and report the next fsync
 * of the file successful (the "fsyncgate" behaviour PostgreSQL answered in 2018 by a PANIC), so
 * the entries appended since the last sync that succeeded may never reach the disk whatever a
 * later sync says. From then on `sync` and `append` reject at once with that failure, and
 * `durable` stays false: no later fsync is trusted for them. Nor is one that succeeded while
 * another was in flight that failed: a failed write is reported to one fsync of a file only, so
 * an fsync counts once none beside it failed.
 */
import { type FileHandle, open, stat } from 'node:fs/promises'
import { dirname } from 'node:path'

export class DeadLetterFile {
  readonly #path: string
  #handle: FileHandle
  /** The device and inode of the open file, to tell that the path now names another (or none). */
  #identity: string
  /** The length of the whole entries: where the file is cut back to after a failed append. */
  #length: number
  /** Whether a failed append may have left bytes past `#length` that are not cut away yet. */
  #torn = false
  /** The last append (settled or not): the next one starts after it. */
  #queue: Promise<unknown> = Promise.resolve()
  /** How many entries were appended, and how many of the first ones a sync that succeeded covered. */
  #appended = 0
  #synced = 0
  /** The first fsync that failed, for good: see the module's invariant. */
  #syncFailure: { readonly error: unknown } | undefined = undefined
  /** The fsyncs of the file in flight. */
  readonly #fsyncs = new Set<Promise<void>>()
  /** Whether the file at the path was opened empty and no sync fsynced its directory since. */
  #entryPending: boolean
  /** The last fsync of the directory (settled or not). */
  #entrySync: Promise<void> | undefined = undefined

  private constructor(path: string, opened: Opened) {
    this.#path = path
    this.#handle = opened.handle
    this.#identity = opened.identity
    this.#length = opened.length
    this.#entryPending = opened.length === 0
  }

  /** Opens (creates) the file at `path` for appending; cuts away a piece of an entry at its end. */
  static async open(path: string): Promise<DeadLetterFile> {
    return new DeadLetterFile(path, await openAt(path))
  }

  /** Opens the file at the path anew when the open one is no longer there (deleted, rotated away). */
  async #follow(): Promise<void> {
    const now = await stat(this.#path).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined
      throw error
    })
    if (now !== undefined && `${now.dev}:${now.ino}` === this.#identity) return
    // What went to the old file must be on disk before it is let go (a rotated one is kept).
    await this.#fsync(this.#handle)
    // Every entry so far went to the old file (appends run one at a time, and this is one).
    this.#synced = this.#appended
    const opened = await openAt(this.#path)
    const old = this.#handle
    this.#handle = opened.handle
    this.#identity = opened.identity
    this.#length = opened.length
    if (opened.length === 0) this.#entryPending = true
    // A piece left in the old file can no longer be cut away: it is not where entries go.
    this.#torn = false
    await old.close().catch(() => {})
  }

  /**
   * Appends `entry` (one line, its newline included), after the appends called before it. Rejects
   * when it could not be written whole; the file then holds none of it (or it is cut away before
   * the next append is written).
   */
  append(entry: string): Promise<void> {
    const appended = this.#queue.then(() => this.#append(Buffer.from(entry)))
    this.#queue = appended.catch(() => {})
    return appended
  }

  async #append(bytes: Buffer): Promise<void> {
    if (this.#syncFailure !== undefined) throw this.#syncFailure.error
    try {
      await this.#follow()
      if (this.#torn) await this.#cutBack()
      await this.#handle.appendFile(bytes)
      this.#length += bytes.length
      this.#appended++
    } catch (error) {
      // The fsync of a file let go failed: nothing of this entry was written.
      if (this.#syncFailure !== undefined) throw error
      this.#torn = true
      // At once, so a stop between two attempts leaves no piece behind; on failure the next append retries it.
      await this.#cutBack().catch(() => {})
      throw error
    }
  }

  async #cutBack(): Promise<void> {
    // Never longer than the file is: one emptied meanwhile is not grown back with zeros.
    const size = (await this.#handle.stat()).size
    if (size > this.#length) await this.#handle.truncate(this.#length)
    else this.#length = size
    this.#torn = false
  }

  /**
   * Puts every entry appended before the call on disk (nothing to do when a sync covered them
   * already). Once an fsync of the file failed, rejects at once with that failure, for good.
   */
  async sync(): Promise<void> {
    if (this.#syncFailure !== undefined) throw this.#syncFailure.error
    const covered = this.#appended
    if (covered === this.#synced) return
    if (this.#entryPending) {
      // A rotation while this runs sets it again, for the new file, whose sync then does its own.
      this.#entryPending = false
      this.#entrySync = this.#syncEntry()
    }
    // Every sync waits for it, not only the one that began it: none counts before the entry is on disk.
    if (this.#entrySync !== undefined) await this.#entrySync
    await this.#fsync(this.#handle)
    // Syncs may overlap: a later one may have covered more already.
    if (covered > this.#synced) this.#synced = covered
  }

  /**
   * Whether every entry appended is known to be on disk: false while some wait for a sync, and
   * for good once an fsync of the file failed.
   */
  get durable(): boolean {
    return this.#syncFailure === undefined && this.#synced === this.#appended
  }

  /** The error of the first fsync of the file that failed; `undefined` while none did. */
  get syncFailure(): unknown {
    return this.#syncFailure?.error
  }

  /**
   * Fsyncs the directory, so the entry of a file made now is on disk. A failure is final, as a
   * failed fsync of the file is: the entry may be lost whatever a later fsync says.
   */
  async #syncEntry(): Promise<void> {
    try {
      await syncDirectory(dirname(this.#path))
    } catch (error) {
      this.#syncFailure ??= { error }
      throw error
    }
  }

  async #fsync(handle: FileHandle): Promise<void> {
    const fsync = handle.sync()
    this.#fsyncs.add(fsync)
    try {
      await fsync
    } catch (error) {
      this.#syncFailure ??= { error }
      throw error
    } finally {
      this.#fsyncs.delete(fsync)
    }
    // An fsync beside this one (the sync, and the one that lets a rotated file go) may have been
    // told of a failed write this one covered: this one says OK only once none of them failed.
    while (this.#fsyncs.size > 0) await Promise.allSettled([...this.#fsyncs])
    if (this.#syncFailure !== undefined) throw this.#syncFailure.error
  }

  /** Closes the file once the appends called before have settled. */
  async close(): Promise<void> {
    await this.#queue
    await this.#handle.close()
  }
}

interface Opened {
  readonly handle: FileHandle
  readonly identity: string
  readonly length: number
}

/** Opens (creates) the file at `path` for appending, a piece of an entry at its end cut away. */
async function openAt(path: string): Promise<Opened> {
  const handle = await open(path, 'a+')
  try {
    const s = await handle.stat()
    const whole = await wholeLength(handle, s.size)
    if (whole < s.size) await handle.truncate(whole)
    return { handle, identity: `${s.dev}:${s.ino}`, length: whole }
  } catch (error) {
    await handle.close()
    throw error
  }
}

/** The length of the whole lines of a file of `size` bytes: up to and with its last newline. */
async function wholeLength(handle: FileHandle, size: number): Promise<number> {
  const chunk = Buffer.alloc(64 * 1024)
  for (let end = size; end > 0; ) {
    const start = Math.max(0, end - chunk.length)
    const { bytesRead } = await handle.read(chunk, 0, end - start, start)
    const at = chunk.subarray(0, bytesRead).lastIndexOf(0x0a)
    if (at >= 0) return start + at + 1
    end = start
  }
  return 0
}

/**
 * Fsyncs the directory at `path`, so an entry made in it survives a crash of the machine. Windows
 * cannot open a directory for that (and persists entries with the file's own flush): skipped there.
 */
async function syncDirectory(path: string): Promise<void> {
  if (process.platform === 'win32') return
  const directory = await open(path, 'r')
  try {
    await directory.sync()
  } finally {
    await directory.close()
  }
}
