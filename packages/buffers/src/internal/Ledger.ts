/**
 * The ledger: the small checkpoint of a buffer directory (next sequence number, acknowledged
 * position, segment list), replaced atomically.
 *
 * Invariant: `ledger.json` is always a whole ledger or absent: a new one is written to
 * `ledger.json.tmp`, fsynced, renamed over the old one and the directory fsynced, so a crash at
 * any point leaves the old ledger or the new one. Its own CRC-32C catches a damaged file, which
 * is then rebuilt by scanning the segments (redelivering rather than losing).
 *
 * @module
 */
import { Crc32c } from './Crc32c.js'
import type { FileSystem } from './FileSystem.js'
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
  | { readonly status: 'ok'; readonly ledger: LedgerState }
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

  /** Parses a ledger's text. */
  decode(bytes: Uint8Array): LedgerRead {
    const text = Buffer.from(bytes).toString('utf8')
    const [body, crc] = text.split('\n')
    if (body === undefined || crc === undefined || crc.length !== 8) {
      return { status: 'corrupt', reason: 'not a ledger (no checksum line)' }
    }
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
