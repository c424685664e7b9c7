/**
 * `file`: tails files the way a log shipper does, and acknowledges like a Kafka consumer: each
 * file's checkpoint is the offset below which every line is finished (delivered, dropped, or
 * rejected and written to the dead-letter file, that write on disk), never more.
 *
 * Invariant: a line is skipped after a restart only if it was finished before the checkpoint
 * that was last written; lines in flight at a crash are read again (at-least-once). No line of a
 * file is sent before the checkpoint file names the file at or before it: a file found without a
 * checkpoint, or truncated, is written there first, so a restart never starts past a line that
 * was sent (at the end of a file it did not know, at the offset of content cut away). Files are
 * identified by device + inode, checked by their birth time (where the file system keeps one) and
 * a fingerprint of their first bytes, so a new file that reuses an inode does not resume at a
 * stale offset, even when it starts with the same bytes. Each file has its own tracker: a slow file
 * never holds back another's checkpoint.
 *
 * Scope of this version: polling (no file-system events); include patterns with wildcards in
 * the last path segment only; rotation by rename + re-create and by copy-truncate.
 *
 * @module
 */
import { constants } from 'node:buffer'
import { type FileHandle, mkdir, open, realpath, stat, unlink } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'
import type { JsonObject, RecordOutcome } from '@ackline/core'
import {
  ConfigIssue,
  MAX_TIMER_MS,
  RecordRetry,
  type Source,
  type SourceContext,
  textOf,
  warningsTo,
} from '@ackline/topology'
import { FileSourceError } from './FileSourceError.js'
import { CheckpointLock } from './internal/CheckpointLock.js'
import { type Checkpoint, Checkpoints, checkpointKey } from './internal/Checkpoints.js'
import { DeadLetterFile } from './internal/DeadLetterFile.js'
import { FINGERPRINT_BYTES, FileTail, fingerprintOf } from './internal/FileTail.js'
import { hasWildcardDirectory, matchFiles } from './internal/matchFiles.js'

/** Where a file never seen before starts: at its first byte, or at its current end. */
export type FileStartAt = 'beginning' | 'end'

/** Options of {@link file}. */
export interface FileSourceOptions {
  /**
   * Paths to tail; the last segment may hold `*` and `?` (`/var/log/app/*.log`). A matched path
   * that is no regular file (a directory, a FIFO) is not tailed, and said once to `onNotice`.
   */
  readonly include: readonly string[]
  /** Paths to leave out, with the same wildcards (`/var/log/app/debug-*.log`). Default none. */
  readonly exclude?: readonly string[]
  /**
   * The directory of the checkpoint file and the dead-letter file; created when missing. Those
   * two files (and their rotations), and the short-lived `.birth-probe-*` file each run makes
   * there to learn whether the file system keeps birth times, are never tailed, even where an
   * include pattern matches them, by the directory's path or another (a symbolic link to the
   * directory, a bind mount). Nor is a link to one of those files (a symbolic or hard link to
   * `dead-letter.ndjson` in a tailed directory): known by the device and inode of the file now at
   * that name, it is skipped, and said once to `onNotice`. A link to a rotation of one (to
   * `dead-letter.ndjson.1`) is not recognised: that inode may be a user's file by now.
   * Runs of one directory (by its real path: a symbolic link to it is the same directory) in one process never overlap: a restart while
   * the run before it still ends (a forced stop does not wait for the source) waits for it to
   * write its last checkpoint, saying so to `onNotice`, for at most 30 s; a source given the
   * directory of one still running (not stopped), or whose stopped run did not end in that time,
   * fails with `FileSourceError` `CHECKPOINTS_IN_USE`, naming both sources.
   * Across processes, a run holds the lock file `checkpoints.json.lock` there (its pid, host and a
   * random token) from before it loads its checkpoints until its last checkpoint is written: a run
   * of another process that finds it held by a live pid fails with `CHECKPOINTS_IN_USE`, naming
   * the directory and that pid. One left by a crash (its pid not running, or this process's pid
   * without a run of it holding the lock, as pid 1 of a restarted container) is taken over, and
   * `onNotice` told. Whether a pid runs is known on this host and in this pid namespace only: a run
   * elsewhere takes over a live run's lock, and that run then fails `CHECKPOINTS_IN_USE` before its
   * next checkpoint write (the lock is checked before each). On Linux the lock also names the boot
   * of the host and its holder's start time, so a pid another process has by now (a daemon after the
   * host restarted, a process of a restarted container) is not taken for its holder; elsewhere, and
   * where that process cannot be looked at, such a lock is taken for held (the message says to
   * remove it then).
   */
  readonly checkpoints: string
  /**
   * Where a file without a checkpoint starts, for files present at a run's first scan (default
   * `'beginning'`). Files that appear later always start at their beginning: they are new.
   * Either way a file is named in the checkpoint file, at the offset it is read from, before any
   * of its lines is sent (one checkpoint write for all the files a scan finds; one again after a
   * truncation, at offset 0): a restart reads on from there every file a run began to read, the
   * lines sent and not finished included, so `'end'` skips only what files no run began to read
   * held at the first scan (those there at the first start, and those made while the source was
   * not running, such as a rotation then).
   */
  readonly startAt?: FileStartAt
  /**
   * Lines longer than this many bytes are rejected (dead-lettered, first bytes only), never cut
   * silently; so are multi-line records (see `multiline`) longer than this many bytes in the file,
   * newlines included. Default 102400; at most the longest string (2^29 - 24 on V8), as a line is
   * decoded into one.
   */
  readonly maxLineBytes?: number
  /**
   * How lines are decoded: `'utf8'` (default), `'latin1'` or `'ascii'`. With `'utf8'`, a line
   * holding bytes that are not UTF-8 is sent with U+FFFD in their place, and `onNotice` is told,
   * naming the file and the line's offset, at the 1st, 10th, 100th... such line of each file.
   */
  readonly encoding?: 'utf8' | 'latin1' | 'ascii'
  /** How often files are scanned for new data, in ms (1 to 2^31 - 1, the longest a timer waits). Default 250. */
  readonly pollIntervalMs?: number
  /**
   * How often checkpoints are written, in ms (they are also written at stop, and before the
   * first lines of a file a scan opened without one are sent: those writes do not move the
   * interval). Gone files' checkpoints are looked at on this interval (`forgetGoneAfterMs`).
   * Default 1000.
   */
  readonly checkpointIntervalMs?: number
  /**
   * The most records in one batch (a multi-line record counts as one), however many lines one
   * read brings. Default 1000.
   */
  readonly maxBatchLines?: number
  /**
   * The most batches in flight (sent, not finished) before reading waits, for all files together.
   * A batch whose rejected lines wait for the dead-letter file stays in flight (and so do overlong
   * lines waiting for it): while that file cannot be written (a full disk), reading goes on until
   * this many are in flight, then reading of every file waits until it can be written again, or
   * the topology stops. Default 16.
   */
  readonly maxInFlightBatches?: number
  /**
   * Back-off between re-sends of errored lines (they are re-sent until delivered or rejected), of
   * lines the pipeline did not accept (its `send` failed: they are sent again, and reported), and
   * between attempts to write a rejected line to a dead-letter file that cannot be written (a
   * full disk: the line stays unfinished meanwhile, other lines are read on, and each failure is
   * reported). A write that failed part-way is cut away before the next one.
   */
  readonly retry?: { readonly initialBackoffMs?: number; readonly maxBackoffMs?: number }
  /**
   * Joins lines into one record: a line matching `startPattern` starts a record, any other line
   * is appended to the open one (after a `\n`). An open record is sent when the next one starts,
   * or when no line joined it for `timeoutMs` (default 1000). Its offset is its first line's; the
   * checkpoint moves past it only once it is finished. One longer than `maxLineBytes` is rejected
   * as an overlong line is. A string is compiled with `new RegExp`
   * (`validate()` reports one that does not compile). Each line is tested on its own, from its
   * first character: the `g` and `y` flags keep no position from one line to the next (so `y`
   * anchors the pattern at the start of the line).
   */
  readonly multiline?: { readonly startPattern: RegExp | string; readonly timeoutMs?: number }
  /**
   * Delete a file once every line of it is finished and it has not grown for this many ms (its
   * checkpoint is dropped with it). Off by default: a file is never deleted with a line that is
   * not finished (delivered, dropped, or rejected and dead-lettered), nor before the dead letters
   * of its rejected lines are on disk (the dead-letter file is synced first; a sync that fails
   * ends the run, `DEAD_LETTER_SYNC_FAILED`, and the file stays). What is removed is the name
   * the file was last listed under, and only while that name still holds it (after a rotation
   * the name holds the new file, which is left alone). For a symbolic link or one of several hard
   * links, that name is the link; the file it named stays, with its checkpoint (a notice says
   * so), and is read on from there if listed.
   */
  readonly removeAfterIdleMs?: number
  /**
   * How long a file renamed to a name no include pattern lists (or one excluded) is read on after
   * it last grew, or after the rename was found if it grew before, in ms (Filebeat's
   * `close_inactive`): its writer may hold it open and append to it after the rename, as a logger
   * does until it reopens its file. Its lines keep the path it was last listed under, its name now
   * being unknown; found deleted, it is read to its end and no longer. Then, or at a stop, it is
   * no longer read: its checkpoint is kept as a gone file's (see `forgetGoneAfterMs`), and a
   * restart reads only what is listed. 0: it is read to its end at the scan that finds it renamed,
   * and no longer. Default 300000 (5 minutes).
   */
  readonly readRenamedForMs?: number
  /**
   * How long the checkpoint of a file that is gone is kept, in ms: a file no scan lists any more
   * whose last path no longer holds it (deleted, or renamed to a name not included), counted from
   * when it is no longer read (see `readRenamedForMs`). Should it
   * come back within that time (renamed back, included again), it is read on from its
   * checkpoint; after, its checkpoint is forgotten (a notice says so) and it would be read from
   * its start. A file still at its last path is never forgotten, listed or not. Default 86400000
   * (a day); without a bound, every file rotated away left its checkpoint behind for good.
   */
  readonly forgetGoneAfterMs?: number
  /**
   * Told about what the source noticed (a truncation, an unreadable file, a dead-letter file it
   * cannot write, lines the pipeline did not accept). Default: `console.warn`. One that throws (or
   * returns a promise that rejects) changes nothing else: that notice goes to
   * `process.emitWarning` (code `ACKLINE_FILE_SOURCE`), with what it threw.
   */
  readonly onNotice?: (message: string) => void
}

/** The source {@link file} returns. */
export interface FileSource extends Source {
  readonly kind: 'file'
  readonly canAcknowledge: true
  validate(): readonly ConfigIssue[]
}

/**
 * The name of the dead-letter file in the checkpoint directory: one JSON object per rejected line
 * (`{ file, offset, reason, message }`), each line whole (a write that fails part-way is cut away).
 * A line whose entry would be longer than the longest string keeps its first 1024 bytes, its
 * reason saying so.
 * It may be rotated (renamed) or deleted while the source runs: the next entry goes to a new file
 * at this name. It is fsynced before a checkpoint moves past the lines of its entries; an fsync
 * of it that fails ends the run (`FileSourceError` `DEAD_LETTER_SYNC_FAILED`) without a checkpoint
 * past them, since a later fsync may report success though they never reached the disk: a
 * restart reads them again, and dead-letters the rejected ones again.
 */
export const DEAD_LETTER_FILE = 'dead-letter.ndjson'

/**
 * The dead-letter entry of a line, with its newline. A line whose entry would be longer than the
 * longest string (near `maxLineBytes` of control characters, each escaped to 6) keeps the first
 * 1024 bytes of its message (and reason), as an overlong line does, and its reason says so: the
 * throw of `JSON.stringify` made its batch count as not accepted, sent again for ever.
 */
function deadLetterEntry(
  file: string,
  offset: number,
  reason: string,
  message: string,
  encoding: BufferEncoding,
): string {
  try {
    return `${JSON.stringify({ file, offset, reason, message })}\n`
  } catch {
    // Sliced first: the whole string, encoded, could be past the longest buffer.
    const cut = (text: string) => Buffer.from(text.slice(0, 1024), encoding).toString(encoding, 0, 1024)
    const why =
      'its first 1024 bytes only: the entry of the whole line would be longer than the longest string'
    return `${JSON.stringify({ file, offset, reason: `${cut(reason)} (${why})`, message: cut(message) })}\n`
  }
}

class FileSourceImpl implements FileSource {
  readonly kind = 'file'
  readonly canAcknowledge = true
  readonly #o: FileSourceOptions

  constructor(options: FileSourceOptions) {
    this.#o = options
  }

  validate(): readonly ConfigIssue[] {
    const o = this.#o
    // From untyped code: no field of it could be read (the builder would report a TypeError).
    if (typeof o !== 'object' || o === null || Array.isArray(o))
      return [ConfigIssue.of('(options)', 'an object', o)]
    const issues: ConfigIssue[] = []
    if (!Array.isArray(o.include) || o.include.length === 0 || o.include.some((p) => typeof p !== 'string')) {
      issues.push({ field: 'include', message: 'must be a non-empty array of path patterns' })
    } else {
      for (const p of o.include) {
        // No path holds one: the pattern would match nothing, and nothing would say so.
        if (p.includes('\0')) issues.push(ConfigIssue.of('include', NO_NUL, p))
        else if (hasWildcardDirectory(p)) {
          issues.push({
            field: 'include',
            message: `wildcards are allowed in the last path segment only: ${p}`,
          })
        }
      }
    }
    if (
      o.exclude !== undefined &&
      (!Array.isArray(o.exclude) || o.exclude.some((p) => typeof p !== 'string'))
    ) {
      issues.push({ field: 'exclude', message: 'must be an array of path patterns' })
    } else {
      for (const p of o.exclude ?? []) if (p.includes('\0')) issues.push(ConfigIssue.of('exclude', NO_NUL, p))
    }
    if (typeof o.checkpoints !== 'string' || o.checkpoints === '') {
      issues.push({ field: 'checkpoints', message: 'must be the path of a directory' })
    } else if (o.checkpoints.includes('\0')) {
      issues.push(
        ConfigIssue.of('checkpoints', 'the path of a directory, without a NUL character', o.checkpoints),
      )
    }
    if (o.startAt !== undefined && o.startAt !== 'beginning' && o.startAt !== 'end') {
      issues.push({
        field: 'startAt',
        message: `must be 'beginning' or 'end', got ${JSON.stringify(o.startAt)}`,
      })
    }
    if (o.encoding !== undefined && !['utf8', 'latin1', 'ascii'].includes(o.encoding)) {
      issues.push({
        field: 'encoding',
        message: `must be 'utf8', 'latin1' or 'ascii', got ${JSON.stringify(o.encoding)}`,
      })
    }
    if (o.multiline !== undefined) {
      const issue = startPatternIssue(o.multiline?.startPattern)
      if (issue !== undefined) issues.push(issue)
      const timeout = o.multiline?.timeoutMs
      if (timeout !== undefined && !(typeof timeout === 'number' && timeout >= 0))
        issues.push(ConfigIssue.of('multiline.timeoutMs', 'a number of milliseconds, 0 or more', timeout))
    }
    // The poll is a timer: a longer wait would fire after 1 ms, and poll the files in a hot loop.
    const poll = o.pollIntervalMs
    if (poll !== undefined && !(Number.isSafeInteger(poll) && poll >= 1 && poll <= MAX_TIMER_MS)) {
      issues.push(
        ConfigIssue.of('pollIntervalMs', `a whole number of milliseconds from 1 to ${MAX_TIMER_MS}`, poll),
      )
    }
    // NaN would compare as idle at once: every finished file would be deleted as soon as read.
    const idle = o.removeAfterIdleMs
    if (idle !== undefined && !(typeof idle === 'number' && idle >= 0))
      issues.push(ConfigIssue.of('removeAfterIdleMs', 'a number of milliseconds, 0 or more', idle))
    const renamed = o.readRenamedForMs
    if (renamed !== undefined && !(typeof renamed === 'number' && renamed >= 0))
      issues.push(ConfigIssue.of('readRenamedForMs', 'a number of milliseconds, 0 or more', renamed))
    const forget = o.forgetGoneAfterMs
    if (forget !== undefined && !(typeof forget === 'number' && forget >= 0))
      issues.push(ConfigIssue.of('forgetGoneAfterMs', 'a number of milliseconds, 0 or more', forget))
    for (const field of [
      'maxLineBytes',
      'checkpointIntervalMs',
      'maxBatchLines',
      'maxInFlightBatches',
    ] as const) {
      const v = o[field]
      if (v !== undefined && !(Number.isSafeInteger(v) && v > 0)) {
        issues.push({ field, message: `must be a positive integer, got ${String(v)}` })
      }
    }
    // A line is decoded into one string: one past the longest string failed to decode at every
    // scan, and no line after it was ever sent.
    const maxLine = o.maxLineBytes
    if (Number.isSafeInteger(maxLine) && (maxLine as number) > constants.MAX_STRING_LENGTH) {
      issues.push(
        ConfigIssue.of(
          'maxLineBytes',
          `a whole number of bytes from 1 to ${constants.MAX_STRING_LENGTH} (the longest string)`,
          maxLine,
        ),
      )
    }
    issues.push(...retryIssues(o.retry))
    // Else every notice would go to process.emitWarning, each saying that onNotice failed on it.
    if (o.onNotice !== undefined && typeof o.onNotice !== 'function')
      issues.push(ConfigIssue.of('onNotice', 'a function', o.onNotice))
    return issues
  }

  async run(context: SourceContext): Promise<void> {
    // Async: options `validate()` refuses (a start pattern that does not compile) reject the run, not throw.
    await new FileRun(this.#o, context).run()
  }
}

/** What an included path that is no regular file is, and that it is not tailed. */
function notAFile(path: string, s: Awaited<ReturnType<typeof stat>>): string {
  return s.isDirectory()
    ? `a directory, not a file: it is not tailed (to tail the files in it, include ${join(path, '*')})`
    : `not a regular file (${s.isFIFO() ? 'a FIFO' : s.isSocket() ? 'a socket' : 'a device'}): it is not tailed`
}

/** What `include` and `exclude` patterns must be. */
const NO_NUL = 'a path pattern without a NUL character'

/**
 * What is wrong with `retry`: checked here, since a back-off `RecordRetry.send` refuses would
 * make every send fail, and the lines be sent again for ever.
 */
function retryIssues(retry: unknown): ConfigIssue[] {
  // `null`: an empty key in a config file, which means the defaults (as at run time).
  if (retry === undefined || retry === null) return []
  if (typeof retry !== 'object' || Array.isArray(retry)) {
    return [ConfigIssue.of('retry', 'an object ({ initialBackoffMs, maxBackoffMs })', retry)]
  }
  const issues: ConfigIssue[] = []
  for (const key of ['initialBackoffMs', 'maxBackoffMs'] as const) {
    const v: unknown = (retry as Record<string, unknown>)[key]
    if (v !== undefined && !(typeof v === 'number' && v >= 0))
      issues.push(ConfigIssue.of(`retry.${key}`, 'a number of milliseconds, 0 or more', v))
  }
  return issues
}

/**
 * How the birth-time probe's files are named in the checkpoint directory; one a crash left there
 * is one of the source's own files, never tailed.
 */
const BIRTH_PROBE = '.birth-probe-'

/**
 * Whether `birthtimeMs` read through a file handle in `directory` is the file's birth time. Where
 * statx is refused (kernels before 4.11, container seccomp profiles before Docker 18.04), libuv
 * gives the change time in its place on Linux: it moves at every append and chmod, and a checkpoint
 * that kept it would never match its file again (read from its start at every restart). Found by
 * changing a probe file's mode until its change time moves: a birth time that moved with it, or 0,
 * is none. Any error (a read-only directory) says none: the fingerprint alone decides, as before.
 */
async function birthTimesKept(directory: string): Promise<boolean> {
  const path = join(directory, `${BIRTH_PROBE}${process.pid}-${Math.random().toString(36).slice(2)}`)
  let handle: FileHandle | undefined
  try {
    handle = await open(path, 'w', 0o600)
    const first = await handle.stat()
    if (!(first.birthtimeMs > 0)) return false
    // The change time moves by the file system's clock tick (a few ms at most); bounded all the same.
    for (let i = 0; i < 200; i++) {
      await handle.chmod(i % 2 === 0 ? 0o644 : 0o600)
      const now = await handle.stat()
      if (now.ctimeMs !== first.ctimeMs) return now.birthtimeMs === first.birthtimeMs
      await new Promise((resolve) => setTimeout(resolve, 2))
    }
    return false
  } catch {
    return false
  } finally {
    await handle?.close().catch(() => {})
    if (handle !== undefined) await unlink(path).catch(() => {})
  }
}

/**
 * The run of each checkpoint directory (resolved) in this process: its source's id, whether it is
 * still live (reading, its topology not stopping), and a promise settled once it has ended (its
 * last checkpoint written, its files closed) and the run before it too. A forced stop does not
 * wait for a source's run, so a restart in the same process could write the temporary checkpoint
 * file while the run before it still wrote its last checkpoint there (the two writes mixed in one
 * file, or one renamed from under the other), or have its checkpoint replaced by that older one.
 * A run waits for a stopping run before it, for at most `STOPPING_RUN_WAIT_MS`; one that finds a
 * live run there fails: two sources given one directory would write one checkpoint file.
 */
const runsOf = new Map<
  string,
  { readonly id: string; readonly live: () => boolean; readonly ended: Promise<void> }
>()

/**
 * The checkpoint directory's real path (made first when missing): the key of `runsOf`. Two
 * spellings of one directory (a symbolic link to it, `link/..` through a link, a trailing slash)
 * resolve to one path, where `path.resolve` alone told them apart and two live sources wrote over
 * each other's checkpoints. The resolved spelling when it cannot be made or resolved: loading the
 * checkpoints then reports why.
 */
async function realDirectory(checkpoints: string): Promise<string> {
  const directory = resolve(checkpoints)
  try {
    await mkdir(directory, { recursive: true })
    return await realpath(directory)
  } catch {
    return directory
  }
}

/**
 * How long a run waits for a stopping run of its checkpoint directory to end (to write its last
 * checkpoint), in ms: long enough for a checkpoint write on a slow disk, short enough that a
 * run that never ends (a write hung on a dead network file system) is reported, not waited for.
 */
const STOPPING_RUN_WAIT_MS = 30_000

/** One run of the source: the tails, the stored checkpoints, the dead-letter file. */
class FileRun {
  readonly #tails = new Map<string, FileTail>()
  /** Files no longer read whose lines are still in flight. */
  readonly #retired = new Map<string, FileTail>()
  /** Checkpoints loaded for files not (or not yet) open, kept so they are written back. */
  #stored = new Map<string, Checkpoint>()
  readonly #checkpoints: Checkpoints
  /**
   * The source's own files, never tailed though an include pattern matches them (the checkpoint
   * directory among the tailed ones): its dead letters would come back as events, and every
   * checkpoint written would be a new file to tail. Also what a rotation made of them in the
   * checkpoint directory (`dead-letter.ndjson.1`, `dead-letter.ndjson-20261201.gz`): any file
   * there whose name starts with an own file's name.
   */
  readonly #ownFiles: ReadonlySet<string>
  /** The checkpoint directory, resolved, and the names of the source's own files in it. */
  readonly #ownDirectory: { readonly path: string; readonly names: readonly string[] }
  /**
   * The checkpoint directory's device and inode, read at the start of the run: an include pattern
   * may reach it by another path (a symbolic link, a bind mount), where its files are the
   * source's own all the same. `undefined` until read, or when it could not be.
   */
  #ownDirectoryKey: string | undefined = undefined
  /**
   * Included paths that are no regular file, with what they are: said once each, and again when
   * that changes, or when the path left the listing and came back.
   */
  readonly #notFiles = new Map<string, string>()
  /** Included files that could not be opened, with the error last said. */
  readonly #cannotOpen = new Map<string, string>()
  #deadLetter: DeadLetterFile | undefined
  #firstScan = true
  #lastCheckpoint = 0
  readonly #inFlight = new Set<Promise<void>>()
  readonly #notice: (message: string) => void
  readonly #maxLineBytes: number
  readonly #encoding: 'utf8' | 'latin1' | 'ascii'
  readonly #maxBatch: number
  readonly #startPattern: RegExp | undefined
  /** Aborted when the run fails: what is in flight stops retrying, as at a stop, so the failure is reported. */
  readonly #failed = new AbortController()
  /**
   * The runtime's context, with a signal that also aborts when the run fails (a checkpoint it
   * cannot write): sends retrying errored lines for ever would otherwise hold the failure back.
   */
  readonly context: SourceContext

  constructor(
    readonly o: FileSourceOptions,
    outer: SourceContext,
  ) {
    const context: SourceContext = {
      id: outer.id,
      acknowledgements: outer.acknowledgements,
      signal: AbortSignal.any([outer.signal, this.#failed.signal]),
      send: (records, options) => outer.send(records, options),
      sendEvents: (events) => outer.sendEvents(events),
    }
    this.context = context
    this.#checkpoints = new Checkpoints(o.checkpoints, context.id)
    const own = [
      o.checkpoints,
      this.#checkpoints.path,
      `${this.#checkpoints.path}.tmp`,
      join(o.checkpoints, DEAD_LETTER_FILE),
    ]
    this.#ownFiles = new Set(own.map((path) => resolve(path)))
    this.#ownDirectory = {
      path: resolve(o.checkpoints),
      names: [basename(this.#checkpoints.path), DEAD_LETTER_FILE, BIRTH_PROBE],
    }
    // Guarded: a throwing `onNotice` reached from the send path left lines unsent for good.
    this.#notice = warningsTo(
      o.onNotice ?? ((m) => console.warn(m)),
      context.id,
      'ACKLINE_FILE_SOURCE',
      'onNotice',
    )
    this.#maxLineBytes = o.maxLineBytes ?? 102_400
    this.#encoding = o.encoding ?? 'utf8'
    this.#maxBatch = o.maxBatchLines ?? 1000
    const start = o.multiline?.startPattern
    const issue = start === undefined ? undefined : startPatternIssue(start)
    if (issue !== undefined)
      throw new TypeError(`file source '${context.id}': ${issue.field} ${issue.message}`)
    // A back-off `RecordRetry.send` refuses would fail every send, and the lines go round for ever.
    const [retry] = retryIssues(o.retry)
    if (retry !== undefined)
      throw new TypeError(`file source '${context.id}': ${retry.field} ${retry.message}`)
    // A copy: `lastIndex` is reset before each test, and the caller's object is not ours to move.
    this.#startPattern = start === undefined ? undefined : new RegExp(start)
  }

  /** The checkpoint directory's lock, once taken (see `CheckpointLock`). */
  #lock: CheckpointLock | undefined = undefined

  /** Whether `birthtimeMs` is a birth time here (see birthTimesKept); read at the start of run. */
  #birthTimes = false

  /**
   * Runs once the run before it of the same checkpoint directory in this process has ended (see
   * `runsOf`), or the topology stopped first (then it reads nothing). Rejects with
   * `CHECKPOINTS_IN_USE` when that run is live (another source given the same directory), or does
   * not end within `STOPPING_RUN_WAIT_MS`.
   */
  async run(): Promise<void> {
    const directory = await realDirectory(this.o.checkpoints)
    const before = runsOf.get(directory)
    // Checked before this run takes the directory: a live one there keeps it.
    if (before?.live() === true) {
      throw new FileSourceError(
        'CHECKPOINTS_IN_USE',
        directory,
        `the checkpoint directory ${directory} (option 'checkpoints') is in use by file source '${before.id}', which is running in this process: two sources cannot share one checkpoint directory (they would write over each other's checkpoints); give each its own`,
        { component: this.context.id, field: 'checkpoints' },
      )
    }
    let running = true
    let ended = () => {}
    const entry = {
      id: this.context.id,
      live: () => running && !this.context.signal.aborted,
      ended: new Promise<void>((resolve) => {
        ended = resolve
      }),
    }
    runsOf.set(directory, entry)
    try {
      if (before !== undefined && !(await this.#waitFor(before, directory))) return
      try {
        await this.#run(directory)
      } finally {
        // After the last checkpoint write: the next run (of this process or another) may begin.
        await this.#lock?.release()
      }
    } finally {
      running = false
      // Ended only once the run before it has too: one stopped while it waited (or that gave up
      // on it) leaves that run writing, and the next must wait for it as well.
      void (before?.ended ?? Promise.resolve()).then(() => {
        ended()
        if (runsOf.get(directory) === entry) runsOf.delete(directory)
      })
    }
  }

  /**
   * Waits for the stopping run before this one to end, saying so when it has not yet; `false`
   * when the topology stopped first. Rejects with `CHECKPOINTS_IN_USE` when it does not end within
   * `STOPPING_RUN_WAIT_MS`.
   */
  async #waitFor(
    before: { readonly id: string; readonly ended: Promise<void> },
    directory: string,
  ): Promise<boolean> {
    let ended = false
    const marked = before.ended.then(() => {
      ended = true
    })
    // One turn: a run that ended already has marked it, and no word is said.
    await Promise.resolve()
    if (ended) return true
    this.#notice(
      `file source '${this.context.id}': waits for the run before it of the checkpoint directory ${directory} in this process (file source '${before.id}', stopping) to end (to write its last checkpoint) before reading`,
    )
    const signal = this.context.signal
    let stopped = () => {}
    let timer: ReturnType<typeof setTimeout> | undefined
    let late = false
    await Promise.race([
      marked,
      new Promise<void>((resolve) => {
        stopped = resolve
        signal.addEventListener('abort', stopped, { once: true })
        timer = setTimeout(() => {
          late = true
          resolve()
        }, STOPPING_RUN_WAIT_MS)
      }),
    ])
    signal.removeEventListener('abort', stopped)
    clearTimeout(timer)
    if (ended || signal.aborted || !late) return ended
    throw new FileSourceError(
      'CHECKPOINTS_IN_USE',
      directory,
      `the checkpoint directory ${directory} (option 'checkpoints') is still in use by file source '${before.id}', stopped in this process but not ended after ${STOPPING_RUN_WAIT_MS} ms (its last checkpoint write may hang): this run does not start, as its checkpoints would mix with that one's`,
      { component: this.context.id, field: 'checkpoints' },
    )
  }

  async #run(directory: string): Promise<void> {
    // First for its errors (a directory it cannot make, or read); again once the lock is held: the
    // process that held it before may have written its last checkpoint meanwhile.
    await this.#checkpoints.load()
    this.#lock = await CheckpointLock.take(directory, this.context.id, (message) =>
      this.#notice(`file source '${this.context.id}': ${message}`),
    )
    this.#stored = await this.#checkpoints.load()
    const deadLetterPath = join(this.o.checkpoints, DEAD_LETTER_FILE)
    this.#deadLetter = await DeadLetterFile.open(deadLetterPath).catch((error: unknown) => {
      // Named here: the system's error (EISDIR, EACCES) names neither the source nor what the file is for.
      throw new FileSourceError(
        'DEAD_LETTER_OPEN_FAILED',
        deadLetterPath,
        `cannot open the dead-letter file ${deadLetterPath}: ${(error as Error).message}`,
        { cause: error, component: this.context.id, field: 'deadLetter' },
      )
    })
    this.#birthTimes = await birthTimesKept(this.o.checkpoints)
    const own = await stat(this.o.checkpoints).catch(() => undefined)
    if (own !== undefined) this.#ownDirectoryKey = checkpointKey(own.dev, own.ino)
    const signal = this.context.signal
    try {
      while (!signal.aborted) {
        await this.#scan()
        // Only these writes restart the interval: the ones made before a new file's lines are sent
        // (at every scan while files keep appearing) would put off the pass for gone files for good.
        if (Date.now() - this.#lastCheckpoint >= (this.o.checkpointIntervalMs ?? 1000)) {
          this.#lastCheckpoint = Date.now()
          await this.#forgetGone()
          await this.#writeCheckpoints()
        }
        await sleep(this.o.pollIntervalMs ?? 250, signal)
      }
      // Failed from work in flight (a dead letter whose file's fsync failed): the loop saw only the signal.
      if (this.#failed.signal.aborted) throw this.#failed.signal.reason
    } catch (error) {
      this.#failed.abort(error)
      throw error
    } finally {
      try {
        // Every send settles at stop (the runtime decides what is still pending); then the last
        // checkpoint holds everything that finished.
        await Promise.allSettled([...this.#inFlight])
        await this.#writeCheckpoints()
      } finally {
        // Also when the checkpoint cannot be written: the run rejects, and leaves no file open.
        for (const tail of this.#tails.values()) await tail.handle?.close().catch(() => {})
        await this.#deadLetter.close().catch(() => {})
      }
    }
  }

  /**
   * Whether `path` (resolved) is one of the source's own files, or a rotation of one: named as one
   * in the checkpoint directory, however the path spells the way there. Only a path named as an
   * own file costs a look at its directory, and only when it is not the checkpoint directory's own
   * spelling (tailed back, its dead letters came back as events).
   */
  async #isOwn(path: string): Promise<boolean> {
    if (this.#ownFiles.has(path)) return true
    const own = this.#ownDirectory
    const name = basename(path)
    if (!own.names.some((prefix) => name.startsWith(prefix))) return false
    const directory = dirname(path)
    if (directory === own.path) return true
    if (this.#ownDirectoryKey === undefined) return false
    const s = await stat(directory).catch(() => undefined)
    return s !== undefined && checkpointKey(s.dev, s.ino) === this.#ownDirectoryKey
  }

  /**
   * The device and inode of the dead-letter and checkpoint files as they are now, by what name
   * each is: a link to one of them (symbolic, or hard) elsewhere is no file to tail. Only the
   * files now at those names: an inode one of them had before (rotated away, replaced by a
   * checkpoint write) may be a user's file by now.
   */
  async #ownFileKeys(): Promise<Map<string, string>> {
    const keys = new Map<string, string>()
    for (const path of [join(this.o.checkpoints, DEAD_LETTER_FILE), this.#checkpoints.path]) {
      const s = await stat(path).catch(() => undefined)
      if (s !== undefined) keys.set(checkpointKey(s.dev, s.ino), basename(path))
    }
    return keys
  }

  async #scan(): Promise<void> {
    const paths = await matchFiles(this.o.include, this.o.exclude ?? [])
    const seen = new Set<string>()
    const ownKeys = await this.#ownFileKeys()
    for (const path of paths) {
      if (await this.#isOwn(path)) continue
      let s: Awaited<ReturnType<typeof stat>>
      try {
        s = await stat(path)
      } catch {
        continue // gone between the listing and now
      }
      if (!s.isFile()) {
        this.#notTailed(path, notAFile(path, s))
        continue
      }
      const key = checkpointKey(s.dev, s.ino)
      const own = ownKeys.get(key)
      if (own !== undefined) {
        this.#notTailed(
          path,
          `a link to the source's own ${own} (in ${this.o.checkpoints}): it is not tailed`,
        )
        continue
      }
      seen.add(key)
      const existing = this.#tails.get(key)
      // Retired with lines still in flight (renamed away, and back or listed again since): its
      // checkpoint is known only once they settle; opened now, it would be read from its start.
      if (existing === undefined && this.#retired.has(key)) continue
      if (existing !== undefined) {
        existing.path = path
        existing.renamedAt = undefined
        if (await this.#sameFile(existing)) continue
        // A new file reusing the inode of one we tailed: the old one is gone for good.
        this.#notice(`file source: ${path} reuses the inode of a file read before; reading it from its start`)
        await this.#retire(key, existing)
      }
      await this.#openTail(path, key, s.dev, s.ino, s.size)
    }
    this.#firstScan = false
    // Before any line of a file opened now is sent: one write for all the files this scan found.
    for (const tail of this.#tails.values()) {
      if (!tail.recorded) {
        await this.#writeCheckpoints()
        break
      }
    }
    // A path gone from the listing is forgotten: if it comes back unopenable, or no file, that is
    // said again.
    if (this.#cannotOpen.size > 0 || this.#notFiles.size > 0) {
      const listed = new Set(paths)
      for (const path of this.#cannotOpen.keys()) if (!listed.has(path)) this.#cannotOpen.delete(path)
      for (const path of this.#notFiles.keys()) if (!listed.has(path)) this.#notFiles.delete(path)
    }
    for (const [key, tail] of this.#tails) {
      if (this.context.signal.aborted) return
      await this.#read(tail)
      if (await this.#removeIfDone(key, tail)) continue
      // Renamed away or deleted: what was read is all there is (the rename's new name, if
      // included, is found by its inode next scan).
      if (!seen.has(key)) {
        if ((await this.#stillAt(tail.path, key)) !== true) {
          // Deleted, it can grow no more: its last line, though no newline ended it, is all of it.
          if (await this.#deleted(tail)) {
            await this.#read(tail, true)
            await this.#retire(key, tail)
          } else if (this.#renamedIdle(tail)) await this.#retire(key, tail)
        }
      }
    }
  }

  /**
   * Says once per path that an included path is not tailed, and `what` it is (again if that
   * changes): matched and skipped in silence, a mistyped pattern would tail nothing.
   */
  #notTailed(path: string, what: string): void {
    if (this.#notFiles.get(path) === what) return
    this.#notFiles.set(path, what)
    this.#notice(`file source: ${path} is ${what}`)
  }

  /** Deletes a file that is finished and idle, when `removeAfterIdleMs` asks for it. */
  async #removeIfDone(key: string, tail: FileTail): Promise<boolean> {
    const idle = this.o.removeAfterIdleMs
    if (idle === undefined || tail.held !== undefined || tail.tracker.pending > 0) return false
    if (tail.committed !== tail.readOffset || Date.now() - tail.grewAt < idle) return false
    // Once the file is gone its rejected lines cannot be read again: their dead letters must be
    // on disk first, as before a checkpoint moves past them.
    await this.#syncDeadLetters()
    let linked: boolean
    try {
      if ((await tail.handle!.stat()).size !== tail.readOffset) return false
      // The path must still name this file: after a rotation not seen yet (renamed away, a new
      // file made under the name), it names the new file, which must not be deleted. The scan
      // then finds this one moved.
      if ((await this.#stillAt(tail.path, key)) !== true) return false
      await unlink(tail.path)
      // The path was a link (symbolic, or one of several hard links): the file it named is still
      // there, and may be listed again under its other name. Its checkpoint stays, or it would
      // be read again from its start.
      linked = (await tail.handle!.stat()).nlink > 0
    } catch (error) {
      this.#notice(`file source: cannot remove ${tail.path}: ${(error as Error).message}`)
      return false
    }
    await tail.handle?.close()
    tail.handle = undefined
    this.#tails.delete(key)
    if (linked) {
      this.#stored.set(key, this.#checkpointOf(tail))
      this.#notice(
        `file source: removed ${tail.path}, a link: the file it named is still there under another name, and keeps its checkpoint`,
      )
    } else this.#stored.delete(key)
    return true
  }

  async #sameFile(tail: FileTail): Promise<boolean> {
    const fp = tail.fingerprint
    if (fp === undefined || tail.handle === undefined) return true
    const now = await fingerprintOf(tail.handle, fp.length).catch(() => undefined)
    // A shorter file with the same inode was truncated, not replaced: the read notices that.
    return now === undefined || now.length < fp.length || now.hash === fp.hash
  }

  async #openTail(path: string, key: string, dev: number, ino: number, size: number): Promise<void> {
    let handle: FileHandle
    try {
      handle = await open(path, 'r')
    } catch (error) {
      // Said once until it opens or its error changes: at every scan, it flooded the notices.
      const message = (error as Error).message
      if (this.#cannotOpen.get(path) !== message) {
        this.#cannotOpen.set(path, message)
        this.#notice(
          `file source: cannot open ${path}: ${message}; retrying on the next scan (said once until it opens or its error changes)`,
        )
      }
      return
    }
    this.#cannotOpen.delete(path)
    // The name may have gone to another file since the scan looked it up (a rotation then): opened
    // as the file looked up, that one's checkpoint would be dropped as not matching and its last
    // lines never read (its key taken), and the new file read twice. The next scan looks again.
    const opened = await handle.stat().catch(() => undefined)
    if (opened === undefined || checkpointKey(opened.dev, opened.ino) !== key) {
      await handle.close().catch(() => {})
      return
    }
    // 0 where the file system keeps no birth time; not one at all where Node reads the change
    // time for it (see birthTimesKept).
    const born = this.#birthTimes && opened.birthtimeMs > 0 ? opened.birthtimeMs : undefined
    const stored = this.#stored.get(key)
    let fingerprint: Awaited<ReturnType<typeof fingerprintOf>>
    let storedPrint: Awaited<ReturnType<typeof fingerprintOf>>
    try {
      fingerprint = await fingerprintOf(handle)
      storedPrint =
        stored?.fingerprint === undefined ? undefined : await fingerprintOf(handle, stored.fingerprint.length)
    } catch (error) {
      // Its checkpoint is kept: the next scan tries again.
      await handle.close().catch(() => {})
      this.#notice(`file source: cannot read ${path}: ${(error as Error).message}; retrying on the next scan`)
      return
    }
    let offset = this.#firstScan && (this.o.startAt ?? 'beginning') === 'end' ? size : 0
    // Only a stored checkpoint taken as it is gives a restart the same offset; any other start is
    // written to the checkpoint file before a line of the file is sent (see `FileTail.recorded`).
    let recorded = false
    if (stored !== undefined) {
      this.#stored.delete(key)
      // A later file that reuses the inode and starts with the same bytes (a header, a banner
      // longer than a fingerprint) is told apart by its birth time, where both are known.
      const match =
        (stored.born === undefined || born === undefined || stored.born === born) &&
        (stored.fingerprint === undefined ||
          (fingerprint !== undefined && storedPrint?.hash === stored.fingerprint.hash))
      if (!match) {
        this.#notice(
          `file source: ${path} is not the file its inode held at the checkpoint; reading it from its start`,
        )
        offset = 0
      } else if (stored.offset > size) {
        this.#notice(
          `file source: ${path} is shorter than its checkpoint (${stored.offset} > ${size}): truncated; reading it from its start`,
        )
        offset = 0
      } else {
        offset = stored.offset
        recorded = true
      }
    }
    this.#tails.set(
      key,
      new FileTail(path, dev, ino, handle, offset, fingerprint, this.#maxLineBytes, recorded, born),
    )
  }

  /**
   * Stops reading a file that is gone (renamed away, deleted, replaced). Its lines in flight
   * still settle into its tracker, and its checkpoint is written until they have; then it is
   * kept as a stored checkpoint, since the same file may be found again under another name.
   */
  async #retire(key: string, tail: FileTail): Promise<void> {
    // Nothing more can join an open multi-line record of a file that is gone: it is complete.
    const held = tail.held
    if (held !== undefined) {
      tail.held = undefined
      const ticket = tail.tracker.track(held.end)
      if (held.overlong)
        await this.#rejectOverlong(tail, [{ text: held.text, start: held.start, ticket, record: true }])
      else
        await this.#send(
          tail,
          [{ message: held.text, file: { path: tail.path, offset: held.start } }],
          [ticket],
        )
    }
    await tail.handle?.close()
    tail.handle = undefined
    this.#tails.delete(key)
    this.#retired.set(key, tail)
    void Promise.allSettled([...tail.inFlight]).then(() => {
      if (this.#retired.get(key) !== tail) return
      this.#retired.delete(key)
      this.#stored.set(key, this.#checkpointOf(tail))
    })
  }

  /**
   * Whether a file renamed away (still linked, under a name not listed) has been read on for
   * `readRenamedForMs` since it last grew, or since the rename was first found.
   */
  #renamedIdle(tail: FileTail): boolean {
    const now = Date.now()
    tail.renamedAt ??= now
    return now - Math.max(tail.grewAt, tail.renamedAt) >= (this.o.readRenamedForMs ?? 300_000)
  }

  /** Whether the file of `tail` has no name left (deleted): no writer can make a new one for it. */
  async #deleted(tail: FileTail): Promise<boolean> {
    const s = await tail.handle?.stat().catch(() => undefined)
    return s !== undefined && s.nlink === 0
  }

  /**
   * Reads what `tail`'s file holds past the read offset and sends its lines; `final` (the file was
   * deleted) also sends its last line that no newline ended, once the read reached its end.
   */
  async #read(tail: FileTail, final = false): Promise<void> {
    if (tail.handle === undefined) return
    let size: number
    try {
      size = (await tail.handle.stat()).size
    } catch (error) {
      this.#notice(`file source: cannot stat ${tail.path}: ${(error as Error).message}`)
      return
    }
    if (size < tail.readOffset) {
      this.#notice(
        `file source: ${tail.path} was truncated (${size} < ${tail.readOffset}); reading it from its start`,
      )
      tail.restart()
    }
    // A fingerprint taken while the file was short grows with it (up to FINGERPRINT_BYTES): a few
    // bytes (a banner line) would tell it from no later file that reuses its inode.
    const print = tail.fingerprint
    if (size > 0 && (print === undefined || (print.length < FINGERPRINT_BYTES && size > print.length))) {
      try {
        tail.fingerprint = await fingerprintOf(tail.handle)
      } catch (error) {
        this.#notice(this.#cannotRead(tail.path, error))
        return
      }
    }
    // Truncated: the checkpoint file still holds the old content's offset, which a restart would
    // take for this content's should it start with the same bytes.
    if (!tail.recorded) await this.#writeCheckpoints()
    let records: JsonObject[] = []
    let tickets: number[] = []
    let overlong: Overlong[] = []
    const path = tail.path
    const emit = (text: string, start: number, end: number) => {
      records.push({ message: text, file: { path, offset: start } })
      tickets.push(tail.tracker.track(end))
    }
    const finish = (held: NonNullable<FileTail['held']>) => {
      if (held.overlong)
        overlong.push({
          text: held.text,
          start: held.start,
          ticket: tail.tracker.track(held.end),
          record: true,
        })
      else emit(held.text, held.start, held.end)
    }
    const maxBytes = this.#maxLineBytes
    const encoding = this.#encoding
    const startPattern = this.#startPattern
    const now = Date.now()
    const onLine = (
      text: string,
      start: number,
      end: number,
      tooLong: boolean,
      bytes: number,
      invalid: boolean,
    ) => {
      if (invalid) this.#invalidUtf8(tail, start)
      if (startPattern !== undefined) {
        const held = tail.held
        // A `g` or `y` pattern would go on from where it matched the line before.
        startPattern.lastIndex = 0
        if (!tooLong && held !== undefined && !startPattern.test(text)) {
          // Bounded as a line is (by its bytes in the file): past the limit only its first bytes
          // are kept, and it is rejected once it ends, not held whole however long it grows.
          if (!held.overlong) {
            // The record's bytes in the file run to the end of this line, its line ending (\n or
            // \r\n) not counted, as a single line's is not. Its text's length in the encoding is no
            // measure: a byte that is not UTF-8 decodes to U+FFFD, 3 bytes.
            if (start + bytes - held.start > maxBytes) {
              held.overlong = true
              // Its first 1024 bytes, as an overlong line keeps, this line's among them; taken from
              // the first 1024 characters of each (a character is a byte at least): joined whole,
              // two lines of a maxLineBytes past half the longest string threw mid-read.
              const first = `${held.text.slice(0, 1024)}\n${text.slice(0, 1024)}`
              held.text = Buffer.from(first, encoding).toString(encoding, 0, 1024)
            } else held.text += `\n${text}`
          }
          held.end = end
          held.at = now
          return
        }
        if (held !== undefined) finish(held)
        tail.held = tooLong ? undefined : { text, start, end, at: now, overlong: false }
        if (!tooLong) return
      }
      if (tooLong) {
        overlong.push({ text, start, ticket: tail.tracker.track(end) })
        return
      }
      emit(text, start, end)
    }
    if (size > tail.readOffset) tail.grewAt = now
    // A stop ends the read of a long backlog: the lines read but not sent stay unfinished (the
    // checkpoint stays before them), and are read again after a restart.
    const signal = this.context.signal
    try {
      while (!signal.aborted && (await tail.readChunk(size, this.#encoding, onLine))) {
        if (overlong.length > 0) {
          await this.#rejectOverlong(tail, overlong)
          overlong = []
        }
        // One chunk of short lines holds many batches: send each full one, keep the rest for the next chunk.
        let sent = 0
        for (; !signal.aborted && records.length - sent >= this.#maxBatch; sent += this.#maxBatch) {
          const upTo = sent + this.#maxBatch
          await this.#send(tail, records.slice(sent, upTo), tickets.slice(sent, upTo))
        }
        if (sent > 0) {
          records = records.slice(sent)
          tickets = tickets.slice(sent)
        }
      }
      if (final && !signal.aborted && tail.readOffset === size) tail.endOpenLine(this.#encoding, onLine)
    } catch (error) {
      // A failed read moved nothing: the file is read on from there at the next scan. The lines
      // read before it are sent below (left unsent, they would hold its checkpoint back for good).
      this.#notice(this.#cannotRead(tail.path, error))
    }
    // An open multi-line record that nothing joined for the timeout is complete.
    const held = tail.held
    if (held !== undefined && now - held.at >= (this.o.multiline?.timeoutMs ?? 1000)) {
      tail.held = undefined
      finish(held)
    }
    if (overlong.length > 0) await this.#rejectOverlong(tail, overlong)
    if (records.length > 0 && !signal.aborted) await this.#send(tail, records, tickets)
  }

  /**
   * Counts a line of `tail` that is not valid UTF-8 (sent with U+FFFD in place of its invalid
   * bytes), and says so at the 1st, 10th, 100th... such line of the file: changed data is never
   * sent without a word, nor a notice made per line of a file that is all Latin-1.
   */
  #invalidUtf8(tail: FileTail, start: number): void {
    const count = ++tail.invalidLines
    if (!/^10*$/.test(String(count))) return
    this.#notice(
      `file source '${this.context.id}': ${tail.path}: the line at offset ${start} is not valid UTF-8; its invalid bytes are sent as U+FFFD (${count} line(s) of this file so far; said at the 1st, 10th, 100th... such line; set encoding 'latin1' for a file that is not UTF-8)`,
    )
  }

  #cannotRead(path: string, error: unknown): string {
    return `file source: cannot read ${path}: ${(error as Error).message}; reading it on at the next scan`
  }

  async #send(tail: FileTail, records: JsonObject[], tickets: number[]): Promise<void> {
    const tracker = tail.tracker
    await this.#startInFlight(tail, () => this.#deliver(tracker, records, tickets))
  }

  /**
   * Dead-letters lines longer than `maxLineBytes` in flight, as a send: reading goes on (this
   * file's and the others') while a dead-letter file that cannot be written is tried again.
   */
  async #rejectOverlong(tail: FileTail, lines: readonly Overlong[]) {
    const { tracker, path } = tail
    const limit = `longer than maxLineBytes (${this.#maxLineBytes})`
    await this.#startInFlight(tail, async () => {
      for (const line of lines) {
        const reason = `${line.record === true ? 'record' : 'line'} ${limit}`
        // Not written only when the topology stopped first: the line stays unfinished.
        if (await this.#deadLetterLine(path, line.start, line.text, reason))
          tracker.resolve(line.ticket, 'rejected')
      }
    })
  }

  /** Starts `work` (which never rejects) once fewer than `maxInFlightBatches` are in flight, and tracks it until it settles. */
  async #startInFlight(tail: FileTail, work: () => Promise<void>): Promise<void> {
    while (this.#inFlight.size >= (this.o.maxInFlightBatches ?? 16)) await Promise.race(this.#inFlight)
    const settled = work().finally(() => {
      this.#inFlight.delete(settled)
      tail.inFlight.delete(settled)
    })
    this.#inFlight.add(settled)
    tail.inFlight.add(settled)
  }

  /** The back-off of {@link FileSourceOptions.retry}, as `RecordRetry` takes it. */
  get #retry(): { attempts: number; initialBackoffMs: number; maxBackoffMs: number } {
    const retry = this.o.retry ?? {}
    return {
      attempts: Number.POSITIVE_INFINITY,
      initialBackoffMs: retry.initialBackoffMs ?? 100,
      maxBackoffMs: retry.maxBackoffMs ?? 5000,
    }
  }

  /**
   * Sends lines until each one is finished, or the topology stops: what is not finished then
   * stays so, and is read again after a restart. Never rejects: a send the pipeline does not
   * accept is reported and made again after a back-off, as an errored line is.
   */
  async #deliver(tracker: FileTail['tracker'], records: JsonObject[], tickets: number[]): Promise<void> {
    const policy = this.#retry
    // What a dead-letter entry and a notice name, read before the send: the events' fields are
    // these records, not copies, and a transform may remove or change `file` and `message` (reading
    // `file.path` of one whose `file` was removed threw, the batch sent again for ever). The lines
    // of one send come from one read of one file, so they share its path.
    const path = (records[0]!.file as { path: string }).path
    const offsets = new Array<number>(records.length)
    const texts = new Array<string>(records.length)
    for (let i = 0; i < records.length; i++) {
      offsets[i] = (records[i]!.file as { offset: number }).offset
      texts[i] = records[i]!.message as string
    }
    // What each send sends: `records` at first. A send the pipeline did not accept may have made
    // events of them already (a buffer refused a retry's copies after the first attempt's events
    // were changed in place): a send made again sends the lines as read, built anew from the path,
    // offsets and texts, or a component changed them twice.
    const remake = (i: number): JsonObject => ({ message: texts[i]!, file: { path, offset: offsets[i]! } })
    let sending = records
    for (let refusals = 1; ; refusals++) {
      // Rejected lines the dead-letter file did not take (the topology stopped first).
      const unwritten = new Set<number>()
      let outcomes: readonly RecordOutcome[]
      try {
        ;({ outcomes } = await RecordRetry.send(this.context, sending, {
          ...policy,
          // A retry's lines built anew from what was read, not copies kept of every record of
          // every send (about a third of the source's rate, `pnpm bench file`).
          remake,
          onRejected: async (rejected) => {
            for (const { index, failure } of rejected) {
              const reason =
                failure === undefined
                  ? 'rejected'
                  : `rejected by ${failure.componentId} (${failure.code}): ${failure.message}`
              if (!(await this.#deadLetterLine(path, offsets[index]!, texts[index]!, reason)))
                unwritten.add(index)
            }
          },
          // Only reached at stop: the lines stay unfinished and are read again after a restart.
          onExhausted: () => 'nack',
        }))
      } catch (error) {
        // Not accepted: which lines a sink finished before is unknown, so all are sent again
        // (at-least-once), or left unfinished at stop.
        const what = `${records.length} line(s) of ${path} from offset ${offsets[0]}`
        const stopped = this.context.signal.aborted
        const wait = RecordRetry.delayMs(policy, refusals, Math.random())
        this.#notice(
          `file source '${this.context.id}': the pipeline did not accept ${what}: ${textOf(error)}; ${
            stopped
              ? 'they stay unfinished and are read again after a restart'
              : `sending them again in ${Math.round(wait)} ms`
          }`,
        )
        if (stopped) return
        await sleep(wait, this.context.signal)
        if (this.context.signal.aborted) return
        sending = offsets.map((_, i) => remake(i))
        continue
      }
      for (let i = 0; i < tickets.length; i++) {
        const outcome = outcomes[i]
        if (outcome === 'errored' || unwritten.has(i)) continue
        tracker.resolve(tickets[i]!, outcome === 'rejected' ? 'rejected' : 'delivered')
      }
      return
    }
  }

  /**
   * Appends a rejected line to the dead-letter file. A write that fails (a full disk) is reported
   * and tried again after a back-off, the line unfinished meanwhile; resolves `false`, the line
   * not written, only when the topology stopped first.
   */
  async #deadLetterLine(path: string, offset: number, message: string, reason: string): Promise<boolean> {
    const entry = deadLetterEntry(path, offset, reason, message, this.#encoding)
    const signal = this.context.signal
    const source = `file source '${this.context.id}'`
    for (let failures = 1; ; failures++) {
      try {
        await this.#deadLetter?.append(entry)
        return true
      } catch (error) {
        if (this.#deadLetter?.syncFailure !== undefined) {
          // An fsync of the file failed (of one rotated away, as this append let it go, or an
          // earlier one): the run ends, as when a checkpoint's sync fails. The line stays unfinished.
          this.#failed.abort(this.#syncFailed(this.#deadLetter.syncFailure))
          return false
        }
        if (!signal.aborted) {
          const wait = RecordRetry.delayMs(this.#retry, failures, Math.random())
          this.#notice(
            `${source}: cannot write the dead-letter file ${join(this.o.checkpoints, DEAD_LETTER_FILE)} for the line of ${path} at offset ${offset}: ${(error as Error).message}; the line stays unfinished, trying again in ${Math.round(wait)} ms`,
          )
          await sleep(wait, signal)
        }
        if (signal.aborted) {
          this.#notice(
            `${source}: the topology stopped before the line of ${path} at offset ${offset} was dead-lettered; it stays unfinished and is read again after a restart`,
          )
          return false
        }
      }
    }
  }

  #checkpointOf(tail: FileTail): Checkpoint {
    tail.tracker.takeRejected()
    return {
      path: tail.path,
      dev: tail.dev,
      ino: tail.ino,
      fingerprint: tail.fingerprint,
      ...(tail.born === undefined ? {} : { born: tail.born }),
      offset: tail.committed,
    }
  }

  /**
   * Forgets the stored checkpoints of files gone for `forgetGoneAfterMs`: not listed (a listed
   * file is open, and its checkpoint no longer stored) and not at their last path either.
   */
  async #forgetGone(): Promise<void> {
    const after = this.o.forgetGoneAfterMs ?? 86_400_000
    const now = Date.now()
    for (const [key, stored] of this.#stored) {
      const since = stored.goneAt
      // Only the clock while it is gone; its last path is looked at before it is marked, and
      // again before it is forgotten (a file renamed back there, and not listed, is not gone).
      if (since !== undefined && now - since < after) continue
      const there = await this.#stillAt(stored.path, key)
      // Not known (EACCES, EIO, a mount that is down): neither marked nor forgotten this time.
      if (there === undefined) continue
      if (there) {
        if (since !== undefined) {
          const { goneAt: _, ...back } = stored
          this.#stored.set(key, back)
        }
        continue
      }
      if (since === undefined) {
        // Kept in the checkpoint file: the time counts across restarts.
        this.#stored.set(key, { ...stored, goneAt: now })
        if (after > 0) continue
      }
      this.#stored.delete(key)
      this.#notice(
        `file source: forgot the checkpoint of ${stored.path} (offset ${stored.offset}): the file is gone (not listed, not at that path) ` +
          `for forgetGoneAfterMs (${after} ms); if it comes back, it is read from its start`,
      )
    }
  }

  /** Whether `path` holds the file `key` names: `undefined` when that cannot be told (an error other than its absence). */
  async #stillAt(path: string, key: string): Promise<boolean | undefined> {
    try {
      const s = await stat(path)
      return checkpointKey(s.dev, s.ino) === key
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      return code === 'ENOENT' || code === 'ENOTDIR' ? false : undefined
    }
  }

  async #writeCheckpoints(): Promise<void> {
    // Taken before the sync: a line dead-lettered while it runs is not covered by it.
    const all = new Map(this.#stored)
    for (const [key, tail] of this.#retired) all.set(key, this.#checkpointOf(tail))
    for (const [key, tail] of this.#tails) all.set(key, this.#checkpointOf(tail))
    // With the generation each was in: one a truncation began while the save ran is not covered.
    const begun = [...this.#tails.values()].filter((t) => !t.recorded).map((t) => [t, t.tracker] as const)
    // The dead letters of the lines a checkpoint moves past must be on disk first.
    await this.#syncDeadLetters()
    // Not written over the checkpoints of a run that took the directory over (see CheckpointLock).
    await this.#lock?.verify()
    await this.#checkpoints.save(all.values())
    for (const [tail, tracker] of begun) if (tail.tracker === tracker) tail.recorded = true
  }

  /**
   * Puts the dead letters appended so far on disk (nothing to do when they are). Throws
   * `DEAD_LETTER_SYNC_FAILED` when an fsync of the dead-letter file fails, and from then on at
   * every call, never trying again: a later fsync may succeed without the letters written before
   * the failure ever reaching the disk (see `DeadLetterFile`). So the run ends, and no checkpoint
   * is written past them, not even the last one at the stop.
   */
  async #syncDeadLetters(): Promise<void> {
    const deadLetter = this.#deadLetter
    if (deadLetter === undefined || deadLetter.durable) return
    try {
      await deadLetter.sync()
    } catch (error) {
      throw this.#syncFailed(error)
    }
  }

  #syncFailed(error: unknown): FileSourceError {
    const path = join(this.o.checkpoints, DEAD_LETTER_FILE)
    return new FileSourceError(
      'DEAD_LETTER_SYNC_FAILED',
      path,
      `cannot sync the dead-letter file ${path}: ${(error as Error).message}. The dead letters written since its last sync may never reach the disk, whatever a later sync says (the system may drop what it failed to write), so the source stops and writes no checkpoint past their lines: after a restart they are read again from the last checkpoint and dead-lettered again (some may then be in the file twice)`,
      { cause: error, component: this.context.id, field: 'deadLetter' },
    )
  }
}

/** A line (or multi-line record) past `maxLineBytes`: its first bytes, where it starts, its ticket. */
interface Overlong {
  readonly text: string
  readonly start: number
  readonly ticket: number
  readonly record?: boolean
}

/** Why `startPattern` cannot be used, or `undefined` when it can. */
function startPatternIssue(start: unknown): ConfigIssue | undefined {
  const field = 'multiline.startPattern'
  if (start instanceof RegExp) return undefined
  if (typeof start !== 'string') return ConfigIssue.of(field, 'a regular expression or its source', start)
  try {
    new RegExp(start)
    return undefined
  } catch (error) {
    const issue = ConfigIssue.of(field, 'a valid regular expression', start)
    return { ...issue, message: `${issue.message}: ${(error as Error).message}` }
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve()
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer)
      signal.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal.addEventListener('abort', done, { once: true })
  })
}

/**
 * A source that tails files and checkpoints, per file, the offset below which every line is
 * finished. Each line becomes `{ message, file: { path, offset } }`, sent once its newline is read.
 * A last line that no newline ends waits while its file is there (the newline may yet come); once
 * the file is deleted and read to its end, it is sent as a line (its checkpoint then the file's size).
 *
 * @example
 * ```ts
 * new TopologyBuilder({ acknowledgements: true })
 *   .source('logs', file({ include: ['/var/log/app/*.log'], checkpoints: './data/checkpoints' }))
 * ```
 */
export function file(options: FileSourceOptions): FileSource {
  return new FileSourceImpl(options)
}
