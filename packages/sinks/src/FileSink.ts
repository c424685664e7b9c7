/**
 * `file`: a sink that appends events to a file as NDJSON (one JSON object per line).
 *
 * Invariants:
 * - A write resolves (the events count as delivered) only once its lines are on disk, so an
 *   acknowledged event survives a crash of the machine. On Linux the file is opened for
 *   synchronous writes (`O_SYNC`): an append returns only once its data and the file's metadata
 *   are on disk, the guarantee of an append followed by an fsync, in one system call (and one
 *   trip to the thread pool) instead of two; an array's lines go out in one `write` however large
 *   (after a short write the rest is written, or its error thrown), or in one per string's worth
 *   (2^29 - 24 characters) when they are more than one string can hold. Elsewhere each append is
 *   followed by an fsync (`FileHandle.sync`, which on macOS is `F_FULLFSYNC` and flushes the
 *   drive's cache, where an `O_SYNC` write does not). A file the sink creates has its directory
 *   fsynced too, so the file itself survives. A failed open, write or fsync throws a
 *   `RetryableError` (the runtime retries, then settles the events `errored`), and the next
 *   write reopens the file.
 * - Every line this sink appends starts at the beginning of a line: a file that ends in a partial
 *   line when it is opened (a power loss, a disk that filled up, another writer) gets a newline
 *   first, and what a failed append left behind is cut off (truncated back to where that append
 *   began) before the next one, or at `stop()` when no append came after it. Only bytes certainly
 *   that append's are cut: the file must be the one it wrote to (not one rotated in, nor a new file
 *   given the old inode number), and what follows must be a beginning of what it was to write (no
 *   line of another writer before or after it). Otherwise the fragment stays, a malformed line,
 *   rather than cut lines that are not this sink's. Each is said in a warning.
 * - Writes of this sink never interleave: each array's lines are appended as one contiguous block
 *   (an array of more than one string's worth, as several blocks one after another, between which
 *   another process appending to the same file may write).
 * - Only a regular file is written to: a path that is a FIFO, socket or device (whose data is on
 *   no disk; a FIFO's buffer would take lines it then loses, or block the write for ever) is an
 *   issue of `validate()`, and fails the open if it became one since.
 * - A file removed while the sink holds it open fails the append that finds it gone (its lines
 *   would go with the unlinked file), and the retry creates the file anew. A file renamed (rotated)
 *   while open keeps receiving the lines: they are not lost, and the sink does not follow the path.
 * - An event the format cannot represent (a `BigInt`, a cycle, a value nested too deep for
 *   `JSON.stringify`, a `toJSON()` that returns nothing) fails alone: the others are written, and
 *   the write reports that event's encoding error in its place, which the runtime settles
 *   `rejected`.
 *
 * @module
 */
import { fstatSync, statSync } from 'node:fs'
import { type FileHandle, open } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'
import type { EventArray } from '@ackline/core'
import {
  ConfigIssue,
  codeOption,
  defineOptions,
  type OptionsOf,
  RetryableError,
  type Sink,
  type SinkResult,
  textOf,
  warningsTo,
} from '@ackline/topology'
import { z } from 'zod'
import { JoinedLines, jsonLine } from './internal/jsonLine.js'

/** Options of {@link file}: its schema (`validate`, `jsonSchema`, …). */
export const FileSinkOptions = defineOptions({
  path: z
    .string()
    .min(1)
    .refine((path) => !path.includes('\0'), 'a file path without a NUL character')
    .describe(
      "The file to append to; created when missing. Its directory must exist; its last segment must name a file (not empty, '.' or '..', as in 'logs/'); a path that exists must be a regular file (not a FIFO, socket or device, which keep nothing on disk).",
    ),
  onWarning: codeOption<(message: string) => void>('a function')
    .optional()
    .describe(
      "Where the sink's warnings go: a partial last line it terminated, bytes of a failed append it cut off or left (not certainly its own), a directory it could not fsync, a cut it could not make at stop. Default: process.emitWarning with code ACKLINE_FILE_SINK, where a warning also goes, naming onWarning, when the function throws or its promise rejects (which fails nothing).",
    ),
})
/** Options of {@link file}. */
export type FileSinkOptions = OptionsOf<typeof FileSinkOptions>

/** The sink {@link file} returns. */
export interface FileSink extends Sink {
  readonly kind: 'file'
  /** The absolute path written to. */
  readonly path: string
  validate(): readonly ConfigIssue[]
  start(): Promise<void>
  write(events: EventArray): Promise<SinkResult>
  stop(): Promise<void>
}

const RESOLVED: Promise<unknown> = Promise.resolve()

const NOT_REGULAR = 'a regular file, not a FIFO, socket or device'

const NOT_A_DIRECTORY = 'a file path, not a directory'

/** A path whose last segment is empty, `.` or `..` (after a slash, or a backslash on Windows): a directory. */
const NAMES_A_DIRECTORY = process.platform === 'win32' ? /(^|[\\/])\.{0,2}$/ : /(^|\/)\.{0,2}$/

const NEWLINE = 0x0a

class NdjsonFile implements FileSink {
  readonly kind = 'file'
  readonly path: string
  readonly #options: FileSinkOptions
  readonly #warn: (message: string) => void
  #handle: FileHandle | undefined = undefined
  /** The file's size after the last complete append of this sink, as the kernel reported it (known once opened). */
  #size = 0
  /** The identity of the file held open (device and inode), known once opened. */
  #identity = ''
  /**
   * The append that failed last, if nothing cut it off yet: where the file ended before it, in
   * which file, and the texts it was to write. The next open (or the stop) cuts the file back to
   * `at` only if what follows `at` is a beginning of those texts (see `#cutFailed`).
   */
  #failed: { readonly at: number; readonly identity: string; readonly texts: readonly string[] } | undefined =
    undefined
  /** The file is open for synchronous writes (`O_SYNC`, Linux): no fsync after an append. */
  #syncWrites = false
  /** The last write or stop: the next one starts after it, so blocks never interleave. */
  #tail: Promise<unknown> = RESOLVED

  constructor(options: FileSinkOptions) {
    this.#options = options
    // Read through `?.`: options that are no object (untyped code) are for `validate()` to report.
    this.path = typeof options?.path === 'string' && options.path !== '' ? resolve(options.path) : ''
    // The user's callback: a throw (or an async one's rejection) must not fail the open or the
    // append that warned, nor end the process unhandled; the warning then goes to emitWarning.
    this.#warn = warningsTo(
      typeof options?.onWarning === 'function' ? options.onWarning : undefined,
      `file sink ${this.path}`,
      'ACKLINE_FILE_SINK',
    )
  }

  validate(): readonly ConfigIssue[] {
    const issues = FileSinkOptions.validate(this.#options)
    if (issues.length > 0) return issues
    const path = this.#options.path
    // A last segment that names a directory ('logs/', 'logs/.', 'x/..'), whatever is there now:
    // resolve() drops it, and the open would make a file of the name before it.
    if (NAMES_A_DIRECTORY.test(path))
      return [ConfigIssue.of('path', `${NOT_A_DIRECTORY} (its last segment names one)`, path)]
    // What the schema cannot know: the file system as it is when the topology is built.
    try {
      const dirStat = statSync(dirname(this.path), { throwIfNoEntry: false })
      if (dirStat?.isDirectory() !== true) {
        return [ConfigIssue.of('path', 'a file path in an existing directory', path)]
      }
      const stat = statSync(this.path, { throwIfNoEntry: false })
      if (stat?.isDirectory() === true) return [ConfigIssue.of('path', NOT_A_DIRECTORY, path)]
      // A FIFO, socket or device keeps nothing on disk: a pipe's buffer took the lines (then lost
      // them with no reader, or blocked the write for ever once full).
      if (stat !== undefined && !stat.isFile()) return [ConfigIssue.of('path', NOT_REGULAR, path)]
    } catch (error) {
      // Not a missing entry (that is `undefined` above) but a path no open can take: a parent that
      // is a file (ENOTDIR), a name too long, a loop of links. Reported by field, never thrown.
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'ENOTDIR') return [ConfigIssue.of('path', 'a file path in an existing directory', path)]
      return [ConfigIssue.of('path', `a file path the file system accepts (${code ?? String(error)})`, path)]
    }
    return []
  }

  start(): Promise<void> {
    return this.#serial(async () => {
      await this.#open()
    })
  }

  write(events: EventArray): Promise<SinkResult> {
    if (events.length === 0) return Promise.resolve(undefined)
    const joined = new JoinedLines()
    /** Made at the first event that cannot be encoded: the others are written, it reports its own error. */
    let results: ('delivered' | Error)[] | undefined
    const list = events.events
    for (let i = 0; i < list.length; i++) {
      let line: string
      try {
        line = jsonLine(list[i]!.fields)
      } catch (error) {
        // A `TypeError` or `RangeError` for that event alone: the ones before it are written.
        results ??= new Array<'delivered' | Error>(i).fill('delivered')
        results.push(error instanceof Error ? error : new TypeError(textOf(error)))
        continue
      }
      joined.add(line)
      results?.push('delivered')
    }
    const texts = joined.texts
    if (results === undefined) return this.#serial(() => this.#append(texts))
    const told = results
    return this.#serial(async () => {
      if (texts.length > 0) await this.#append(texts)
      return told
    })
  }

  stop(): Promise<void> {
    return this.#serial(async () => {
      // The last append failed and no write came after to cut off what it left: cut it off now,
      // or the file would keep a fragment and the lines of events that were settled errored.
      if (this.#handle === undefined && this.#failed !== undefined) await this.#cutAtStop()
      const handle = this.#handle
      this.#handle = undefined
      await handle?.close()
    })
  }

  #serial<T>(step: () => Promise<T>): Promise<T> {
    const run = this.#tail.then(step)
    this.#tail = run.catch(() => undefined)
    return run
  }

  async #open(): Promise<FileHandle> {
    if (this.#handle !== undefined) return this.#handle
    let handle: FileHandle | undefined
    try {
      // Read and append: the last byte is read to see whether the file ends a line. On Linux
      // synchronous (`O_SYNC`): each append is on disk when it returns, with no fsync after it
      // (the module header says why), and only a truncation, which is not a write, is fsynced.
      this.#syncWrites = process.platform === 'linux'
      handle = await open(this.path, this.#syncWrites ? 'as+' : 'a+')
      this.#size = await this.#repair(handle)
      // Empty: created just now, most likely. Its directory entry is fsynced, or a crash of the
      // machine could lose the file with everything appended to it; a directory that cannot be
      // opened to sync it (no read permission) is said, not fatal.
      if (this.#size === 0) {
        await syncDirectory(dirname(this.path)).catch((error: unknown) => {
          this.#warn(
            `file sink ${this.path}: could not fsync its directory (${textOf(error)}); a crash of the machine may lose the new file`,
          )
        })
      }
      this.#handle = handle
      return handle
    } catch (error) {
      await handle?.close().catch(() => undefined)
      throw this.#failure('cannot open', error)
    }
  }

  /** Cuts off what a failed append left, then makes sure the file ends a line; returns its size. */
  async #repair(handle: FileHandle): Promise<number> {
    const stat = await handle.stat()
    // Made a FIFO, socket or device since validate(): what it takes is not on disk (see validate).
    if (!stat.isFile()) throw new Error('not a regular file (a FIFO, socket or device)')
    const identity = `${stat.dev}:${stat.ino}`
    const size = await this.#cutFailed(handle, stat.size, identity)
    this.#identity = identity
    if (size === 0) return 0
    const last = Buffer.alloc(1)
    await handle.read(last, 0, 1, size - 1)
    if (last[0] === NEWLINE) return size
    await writeAll(handle, Buffer.from('\n'))
    if (!this.#syncWrites) await handle.sync()
    this.#warn(
      `file sink ${this.path}: the file ended in a partial line (no newline after byte ${size}); started a new line before appending`,
    )
    return size + 1
  }

  /**
   * Cuts off what the last failed append left in the file open as `handle` (`size` bytes long,
   * `identity` its device and inode), and returns the file's size after. Only bytes that are
   * certainly that append's are cut: the file must be the one it wrote to, and what follows `at`
   * a beginning of the texts it was to write. Otherwise (rotated or replaced, an inode number
   * given to a new file, another writer's lines before or after the fragment) nothing is cut, and
   * a warning says so: a fragment left is a malformed line, where a cut would take lines that are
   * not this sink's to take. Forgotten only once decided and cut: a read or a truncation that
   * throws (failing the open) leaves it to the next open, or the retry would append after it.
   */
  async #cutFailed(handle: FileHandle, size: number, identity: string): Promise<number> {
    const failed = this.#failed
    if (failed === undefined) return size
    if (size <= failed.at) {
      this.#failed = undefined
      return size
    }
    const why =
      identity !== failed.identity
        ? 'the file at the path is not the file the failed append wrote to (rotated or replaced)'
        : !(await holdsPrefixOf(handle, failed.at, size - failed.at, failed.texts))
          ? 'they are not only what the failed append wrote (another writer appended too)'
          : undefined
    if (why !== undefined) {
      this.#failed = undefined
      this.#warn(
        `file sink ${this.path}: left the ${size - failed.at} byte(s) after byte ${failed.at} as they are: ${why}`,
      )
      return size
    }
    await handle.truncate(failed.at)
    // Cut: a failed fsync after it fails this open, and the next finds the file ends at `at`.
    this.#failed = undefined
    await handle.sync()
    this.#warn(
      `file sink ${this.path}: cut off ${size - failed.at} byte(s) a failed append had written (the file now ends at byte ${failed.at})`,
    )
    return failed.at
  }

  /**
   * At a stop, cuts off what the last failed append left: the path is opened without creating
   * it (a file gone from the path has nothing of this sink's to cut) and closed again; what
   * fails is said in a warning, never thrown (the stop goes on).
   */
  async #cutAtStop(): Promise<void> {
    let handle: FileHandle
    try {
      handle = await open(this.path, 'r+')
    } catch (error) {
      this.#failed = undefined
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return
      this.#warn(
        `file sink ${this.path}: could not cut off what a failed append wrote, at stop (${textOf(error)})`,
      )
      return
    }
    try {
      const stat = await handle.stat()
      if (stat.isFile()) await this.#cutFailed(handle, stat.size, `${stat.dev}:${stat.ino}`)
    } catch (error) {
      this.#warn(
        `file sink ${this.path}: could not cut off what a failed append wrote, at stop (${textOf(error)})`,
      )
    } finally {
      this.#failed = undefined
      await handle.close().catch(() => undefined)
    }
  }

  /** Appends one array's text (several texts when it is longer than one string can be) as one block. */
  async #append(text: string | readonly string[]): Promise<undefined> {
    // Opened already (the common case): no call and no wait for it.
    const handle = this.#handle ?? (await this.#open())
    const before = this.#size
    try {
      // on disk once each returns where the file is opened O_SYNC
      if (typeof text === 'string') await appendText(handle, text)
      else for (const piece of text) await appendText(handle, piece)
      if (!this.#syncWrites) await handle.sync()
    } catch (error) {
      // Part of the text may be on disk: the next open cuts the file back to where it began, so
      // the retry does not glue its first line onto a fragment. Reopen then: the handle may be
      // what broke (a file moved, a disk remounted).
      this.#failed = { at: before, identity: this.#identity, texts: typeof text === 'string' ? [text] : text }
      this.#handle = undefined
      await handle.close().catch(() => undefined)
      throw this.#failure('cannot append to', error)
    }
    // A file removed while open (no link left) took the lines into an inode no one can read and
    // that goes with the handle: reported delivered, they would be lost. The append failed, then;
    // the retry reopens the path, which makes a new file. Nothing is cut off (the file now at the
    // path, if any, is not the one appended to). `fstatSync` of an open descriptor reads the
    // inode the kernel holds: no trip to the thread pool on the hot path.
    const stat = fstatSync(handle.fd)
    if (stat.nlink === 0) {
      this.#handle = undefined
      await handle.close().catch(() => undefined)
      throw this.#failure('cannot append to', new Error('the file was removed while the sink had it open'))
    }
    // The file's end as the kernel has it, not as this sink counts its own appends: lines another
    // writer appended meanwhile are before it, so a later cut-back keeps them (and the lines after).
    this.#size = stat.size
    return undefined
  }

  #failure(action: string, cause: unknown): RetryableError {
    const reason = cause instanceof Error ? cause.message : String(cause)
    return new RetryableError('file', `${action} ${this.path}: ${reason}`, { cause })
  }
}

/**
 * Fsyncs a directory, so an entry just made in it survives a crash of the machine. Windows cannot
 * open a directory for that (and persists entries with the file's own flush): skipped there.
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

/**
 * Appends every event as one JSON line to `path`; a write counts as delivered once its lines are
 * on disk (on Linux the file is opened for synchronous writes; elsewhere each append is fsynced).
 * Failures are retryable; what a failed attempt wrote is cut off before the retry, and an event
 * that cannot be encoded is rejected on its own.
 *
 * @example
 * ```ts
 * builder.sink('archive', ['parse'], file({ path: './data/events.ndjson' }))
 * ```
 */
export function file(options: FileSinkOptions): FileSink {
  return new NdjsonFile(options)
}

/**
 * Whether the `length` bytes of the file at `from` are a beginning of `texts` (encoded as UTF-8):
 * read back in pieces of at most 1 MiB, one text encoded at a time. Bytes past the end of the
 * texts, or a short read, are no beginning.
 */
async function holdsPrefixOf(
  handle: FileHandle,
  from: number,
  length: number,
  texts: readonly string[],
): Promise<boolean> {
  const chunk = Buffer.allocUnsafe(Math.min(length, 1 << 20))
  let position = from
  let left = length
  for (const text of texts) {
    if (left === 0) break
    const bytes = Buffer.from(text, 'utf8')
    for (let offset = 0; left > 0 && offset < bytes.length; ) {
      const n = Math.min(chunk.length, left, bytes.length - offset)
      const { bytesRead } = await handle.read(chunk, 0, n, position)
      if (bytesRead !== n || chunk.compare(bytes, offset, offset + n, 0, n) !== 0) return false
      position += n
      offset += n
      left -= n
    }
  }
  return left === 0
}

/** Appends `text`, encoded once. */
function appendText(handle: FileHandle, text: string): Promise<void> {
  return writeAll(handle, Buffer.from(text, 'utf8'))
}

/** The most one `write` is asked to write: Node refuses a length over 2^31 - 1. */
const MAX_WRITE = 0x7fff_f000

/**
 * Appends `bytes` to a file opened for appending: one `write` of the whole block (not
 * `appendFile`, which cuts it into 512 KiB writes, each its own flush under `O_SYNC`), then more
 * writes for whatever a short write left (the kernel stops short only on an error such as a full
 * disk, which the next write then throws). A write that writes nothing throws.
 */
async function writeAll(handle: FileHandle, bytes: Buffer): Promise<void> {
  let offset = 0
  while (offset < bytes.length) {
    const length = Math.min(bytes.length - offset, MAX_WRITE)
    const { bytesWritten } = await handle.write(bytes, offset, length, null)
    if (bytesWritten === 0) throw new Error(`wrote 0 of ${bytes.length - offset} bytes`)
    offset += bytesWritten
  }
}
