/**
 * The ledger: the small checkpoint of a buffer directory (next sequence number, acknowledged
 * position, segment list), one checkpoint a line pair (its JSON, then its CRC-32C).
 *
 * Invariant: `ledger.json` holds at least one whole checkpoint, or is absent, and the last whole
 * one is the truth. A file is replaced atomically (written to `ledger.json.tmp`, fsynced, renamed
 * over the old one, the directory fsynced), so a crash at any point leaves the old file or the new
 * one; an open buffer then appends each checkpoint to it ({@link LedgerFile}: one durable write,
 * no rename and no directory fsync), so a crash during an append leaves a torn last checkpoint,
 * which reading passes over for the one before. A file without any whole checkpoint is damaged,
 * and rebuilt by scanning the segments (redelivering rather than losing).
 *
 * @module
 */
import { Crc32c } from './Crc32c.js'
import type { FileLike, FileSystem } from './FileSystem.js'
import { replaceFile } from './replaceFile.js'

/** What the ledger records. */
export interface LedgerState {
  /** Every sequence number below this one was handed out (never reuse one). */
  readonly nextSeq: number
  /** Every record below this sequence number was acknowledged (the contiguous prefix). */
  readonly ackedBelow: number
  /** The first sequence number of each segment, in order. */
  readonly segments: readonly number[]
}

/** What reading the ledger found. */
export type LedgerRead =
  | {
      readonly status: 'ok'
      readonly ledger: LedgerState
      /** Why what follows the checkpoint read is not a whole checkpoint (a crash tore it, or it is damaged), if anything follows. */
      readonly passedOver?: string
    }
  | { readonly status: 'missing' }
  | { readonly status: 'corrupt'; readonly reason: string }

const FILE = 'ledger.json'
const TEMP = 'ledger.json.tmp'

const isCount = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0

/** Reading and atomic replacement of the ledger. */
export const Ledger = {
  FILE,
  TEMP,

  /** The ledger's text: the state as JSON, then its checksum. */
  encode(state: LedgerState): Buffer {
    const body = JSON.stringify({
      version: 1,
      nextSeq: state.nextSeq,
      ackedBelow: state.ackedBelow,
      segments: state.segments,
    })
    return Buffer.from(`${body}\n${Crc32c.of(Buffer.from(body)).toString(16).padStart(8, '0')}\n`)
  },

  /**
   * Parses a ledger's text: its last whole checkpoint (a torn or damaged one after it is passed
   * over), or why none is whole (the reason of the last one tried).
   */
  decode(bytes: Uint8Array): LedgerRead {
    const lines = Buffer.from(bytes).toString('utf8').split('\n')
    let failed: Extract<LedgerRead, { status: 'corrupt' }> | undefined
    for (let i = lines.length - 2; i >= 0; i--) {
      if (!CRC_LINE.test(lines[i + 1]!) || CRC_LINE.test(lines[i]!)) continue
      const read = decodeOne(lines[i]!, lines[i + 1]!)
      if (read.status !== 'ok') {
        failed ??= read
        continue
      }
      const after = lines.slice(i + 2).some((line) => line.length > 0)
      if (!after) return read
      return { ...read, passedOver: failed?.reason ?? 'torn' }
    }
    return failed ?? { status: 'corrupt', reason: 'not a ledger (no checksum line)' }
  },

  async read(fs: FileSystem, dir: string): Promise<LedgerRead> {
    const bytes = await fs.readFile(`${dir}/${FILE}`)
    return bytes === undefined ? { status: 'missing' } : Ledger.decode(bytes)
  },

  /** Replaces the ledger atomically: temp file, fsync, rename, directory fsync. */
  async write(fs: FileSystem, dir: string, state: LedgerState): Promise<void> {
    await replaceFile(fs, dir, FILE, TEMP, Ledger.encode(state))
  },
} as const

/** A checkpoint's checksum line: eight hex digits (written in lower case; read in either, as before). */
const CRC_LINE = /^[0-9a-f]{8}$/i

/** One checkpoint: its JSON line and its checksum line. */
function decodeOne(
  body: string,
  crc: string,
): Extract<LedgerRead, { status: 'ok' }> | Extract<LedgerRead, { status: 'corrupt' }> {
  if (Crc32c.of(Buffer.from(body)) !== Number.parseInt(crc, 16)) {
    return { status: 'corrupt', reason: 'checksum mismatch' }
  }
  try {
    const v = JSON.parse(body) as Record<string, unknown>
    const segments = v.segments
    if (
      v.version !== 1 ||
      !isCount(v.nextSeq) ||
      !isCount(v.ackedBelow) ||
      !Array.isArray(segments) ||
      !segments.every(isCount)
    ) {
      return { status: 'corrupt', reason: 'unexpected content' }
    }
    return { status: 'ok', ledger: { nextSeq: v.nextSeq, ackedBelow: v.ackedBelow, segments } }
  } catch {
    return { status: 'corrupt', reason: 'not JSON' }
  }
}

/**
 * The ledger of an open buffer: the first checkpoint replaces the file (atomically, as
 * {@link Ledger.write}), each later one is appended to it, a single durable write (`O_DSYNC` on
 * Linux, else a write and an fdatasync) where a replacement costs a file's write and fsync, a
 * rename and a directory fsync; once the file passes {@link LedgerFile.COMPACT_BYTES} the next
 * checkpoint replaces it again. An append that fails may leave a torn checkpoint: the file is
 * closed, and the next checkpoint replaces it. Once closed, each checkpoint replaces the file and
 * nothing is kept open. One checkpoint at a time (the caller's turn).
 */
export class LedgerFile {
  /** The file's size past which the next checkpoint replaces it (some 600 checkpoints). */
  static readonly COMPACT_BYTES = 64 * 1024

  readonly #fs: FileSystem
  readonly #dir: string
  /** The ledger, open for appending after a replacement; `undefined`: the next write replaces. */
  #file: FileLike | undefined
  #size = 0
  #closed = false

  constructor(fs: FileSystem, dir: string) {
    this.#fs = fs
    this.#dir = dir
  }

  /** Saves `state` durably: once this resolves, a crash leaves it (or a later one) the last whole checkpoint. */
  async write(state: LedgerState): Promise<void> {
    const bytes = Ledger.encode(state)
    const file = this.#file
    if (file === undefined || this.#size + bytes.length > LedgerFile.COMPACT_BYTES) {
      await this.#replace(bytes)
      return
    }
    try {
      await file.writev([bytes], this.#size)
      if (file.durableWrites !== true) await file.datasync()
      this.#size += bytes.length
    } catch (error) {
      // Its tail is unknown now: the next checkpoint starts a new file.
      this.#file = undefined
      await file.close().catch(() => undefined)
      throw error
    }
  }

  /** Closes the file (the checkpoints after this replace it whole, keeping nothing open). */
  async close(): Promise<void> {
    this.#closed = true
    const file = this.#file
    this.#file = undefined
    await file?.close()
  }

  async #replace(bytes: Buffer): Promise<void> {
    const old = this.#file
    this.#file = undefined
    await old?.close().catch(() => undefined)
    await replaceFile(this.#fs, this.#dir, FILE, TEMP, bytes)
    if (this.#closed) return
    try {
      this.#file = await this.#fs.open(`${this.#dir}/${FILE}`, 'append-dsync')
      this.#size = bytes.length
    } catch {
      // Saved all the same; the next checkpoint replaces the file again.
    }
  }
}
