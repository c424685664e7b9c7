/**
 * The file source's checkpoints: for each file (device + inode, checked by a fingerprint of its
 * first bytes), the byte offset below which every line is finished.
 *
 * Invariant: the checkpoint file on disk is always a whole, parsable document: it is written to a
 * temporary file, fsynced, renamed over the old one, and the directory fsynced, so a crash leaves
 * either the old document or the new one.
 */
import { mkdir, open, readFile, rename } from 'node:fs/promises'
import { join } from 'node:path'
import { FileSourceError } from '../FileSourceError.js'
import { FINGERPRINT_BYTES } from './FileTail.js'

/** The first bytes of a file, hashed: tells a file from a later one that reuses its inode. */
export interface Fingerprint {
  readonly length: number
  readonly hash: string
}

/** One file's checkpoint. */
export interface Checkpoint {
  readonly path: string
  readonly dev: number
  readonly ino: number
  readonly fingerprint: Fingerprint | undefined
  /**
   * The file's birth time (`stat().birthtimeMs`), where the file system keeps one (ext4, XFS,
   * Btrfs, tmpfs on recent kernels): a later file that reuses the inode was born later, whatever
   * its first bytes. Absent where the file system does not tell it (Node then reads 0), and in
   * checkpoints written before it was kept, and where Node reads the change time for it (no
   * statx: see `birthTimesKept` in FileSource); the fingerprint alone decides then.
   */
  readonly born?: number
  readonly offset: number
  /**
   * When the file was first found gone (not listed, not at `path`), in ms since the epoch; kept
   * across restarts, so that `forgetGoneAfterMs` counts from then however often the source restarts.
   */
  readonly goneAt?: number
}

const FILE = 'checkpoints.json'
const VERSION = 1

export const checkpointKey = (dev: number, ino: number): string => `${dev}:${ino}`

export class Checkpoints {
  readonly path: string
  /** What its errors name: the source (when known) and its field `checkpoints`. */
  readonly #names: { readonly component?: string; readonly field: 'checkpoints' }

  /** `component`: the id of the source the file is of, named by its errors. */
  constructor(
    readonly directory: string,
    component?: string,
  ) {
    this.path = join(directory, FILE)
    this.#names = component === undefined ? { field: 'checkpoints' } : { component, field: 'checkpoints' }
  }

  /**
   * The stored checkpoints by key; none when the file does not exist. Throws a `FileSourceError`
   * when it is corrupt, or cannot be read (nor its directory made).
   */
  async load(): Promise<Map<string, Checkpoint>> {
    // Named here: some of these errors (EISDIR) do not name the file.
    const unreadable = (error: unknown): never => {
      throw new FileSourceError(
        'CHECKPOINT_READ_FAILED',
        this.path,
        `cannot read the checkpoint file ${this.path}: ${(error as Error).message}`,
        { cause: error, ...this.#names },
      )
    }
    await mkdir(this.directory, { recursive: true }).catch(unreadable)
    let text: string
    try {
      text = await readFile(this.path, 'utf8')
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return new Map()
      return unreadable(error)
    }
    const corrupt = (why: string, cause?: unknown): never => {
      throw new FileSourceError(
        'CORRUPT_CHECKPOINT',
        this.path,
        `the checkpoint file ${this.path} is corrupt (${why}). Repair: move it aside to re-read every file from its start (duplicates downstream), or restore it from a backup`,
        cause === undefined ? this.#names : { cause, ...this.#names },
      )
    }
    let document: unknown
    try {
      document = JSON.parse(text)
    } catch (error) {
      corrupt('not JSON', error)
    }
    const d = document as { version?: unknown; files?: unknown }
    if (typeof d !== 'object' || d === null || d.version !== VERSION || !Array.isArray(d.files)) {
      corrupt(`expected { version: ${VERSION}, files: [...] }`)
    }
    const out = new Map<string, Checkpoint>()
    for (const [i, entry] of (d.files as unknown[]).entries()) {
      const e = entry as Partial<Checkpoint>
      // `?.`: an entry of `null` (as JSON writes one left undefined) is refused below as corrupt.
      const fp = e?.fingerprint as Partial<Fingerprint> | undefined | null
      if (
        typeof e !== 'object' ||
        e === null ||
        typeof e.path !== 'string' ||
        !Number.isSafeInteger(e.dev) ||
        !Number.isSafeInteger(e.ino) ||
        !Number.isSafeInteger(e.offset) ||
        (e.offset as number) < 0 ||
        (fp != null && (!Number.isSafeInteger(fp.length) || typeof fp.hash !== 'string')) ||
        (e.goneAt !== undefined && !(Number.isSafeInteger(e.goneAt) && e.goneAt >= 0)) ||
        (e.born !== undefined && !(typeof e.born === 'number' && Number.isFinite(e.born) && e.born > 0))
      ) {
        corrupt(`entry ${i} is not { path, dev, ino, fingerprint, born?, offset, goneAt? }`)
      }
      // A fingerprint covers 1 to FINGERPRINT_BYTES first bytes; any other length is not one this source wrote.
      if (fp != null && (fp.length! < 1 || fp.length! > FINGERPRINT_BYTES)) {
        corrupt(`entry ${i} has a fingerprint length of ${fp.length}, not 1 to ${FINGERPRINT_BYTES}`)
      }
      out.set(checkpointKey(e.dev!, e.ino!), {
        path: e.path!,
        dev: e.dev!,
        ino: e.ino!,
        fingerprint: fp == null ? undefined : { length: fp.length!, hash: fp.hash! },
        ...(e.born === undefined ? {} : { born: e.born }),
        offset: e.offset!,
        ...(e.goneAt === undefined ? {} : { goneAt: e.goneAt }),
      })
    }
    return out
  }

  /** Writes `checkpoints` atomically: temporary file, fsync, rename, directory fsync. */
  async save(checkpoints: Iterable<Checkpoint>): Promise<void> {
    const files = [...checkpoints].map((c) => ({ ...c, fingerprint: c.fingerprint ?? null }))
    const temporary = `${this.path}.tmp`
    try {
      const handle = await open(temporary, 'w')
      try {
        await handle.writeFile(JSON.stringify({ version: VERSION, files }))
        await handle.sync()
      } finally {
        await handle.close()
      }
      await rename(temporary, this.path)
      const dir = await open(this.directory, 'r')
      try {
        await dir.sync()
      } finally {
        await dir.close()
      }
    } catch (error) {
      throw new FileSourceError(
        'CHECKPOINT_WRITE_FAILED',
        this.path,
        `cannot write the checkpoint file ${this.path}: ${(error as Error).message}`,
        { cause: error, ...this.#names },
      )
    }
  }
}
