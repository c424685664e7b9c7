/**
 * The settings that shape a buffer's files, stored beside them in `settings.json`, so a reopen
 * with other options cannot misread them.
 *
 * Invariant: `settings.json` is a whole file or absent (temp file, fsync, rename, directory
 * fsync), and once present it names the `segmentBytes` every segment of the directory was
 * written with. A buffer made before settings were stored has none; it is opened as before and
 * gets them written.
 *
 * @module
 */
import { Crc32c } from './Crc32c.js'
import type { FileSystem } from './FileSystem.js'
import { Frame } from './Frame.js'
import { replaceFile } from './replaceFile.js'

/** What is stored: the settings that decide how records are laid out in segments. */
export interface StoredSettings {
  /** The largest segment file; no record is larger than this minus its frame header. */
  readonly segmentBytes: number
}

/** What reading the settings found. */
export type SettingsRead =
  | { readonly status: 'ok'; readonly settings: StoredSettings }
  | { readonly status: 'missing' }
  | { readonly status: 'corrupt'; readonly reason: string }

const FILE = 'settings.json'
const TEMP = 'settings.json.tmp'

/** Reading and atomic writing of `settings.json`. */
export const BufferSettings = {
  FILE,
  TEMP,

  /** The file's text: the settings as JSON, then their CRC-32C (as the ledger is written). */
  encode(settings: StoredSettings): Buffer {
    const body = JSON.stringify({ version: 1, segmentBytes: settings.segmentBytes })
    return Buffer.from(`${body}\n${Crc32c.of(Buffer.from(body)).toString(16).padStart(8, '0')}\n`)
  },

  decode(bytes: Uint8Array): SettingsRead {
    const [body, crc] = Buffer.from(bytes).toString('utf8').split('\n')
    if (body === undefined || crc === undefined || crc.length !== 8) {
      return { status: 'corrupt', reason: 'no checksum line' }
    }
    if (Crc32c.of(Buffer.from(body)) !== Number.parseInt(crc, 16)) {
      return { status: 'corrupt', reason: 'checksum mismatch' }
    }
    try {
      const v = JSON.parse(body) as Record<string, unknown>
      const segmentBytes = v.segmentBytes
      // Below a header and one byte no option may be (a tool wrote it): taken, it made every open
      // fail on the dead-letter queue's options, naming an option nobody gave.
      if (
        v.version !== 1 ||
        typeof segmentBytes !== 'number' ||
        !Number.isSafeInteger(segmentBytes) ||
        segmentBytes < Frame.HEADER_BYTES + 1
      ) {
        return { status: 'corrupt', reason: 'unexpected content' }
      }
      return { status: 'ok', settings: { segmentBytes } }
    } catch {
      return { status: 'corrupt', reason: 'not JSON' }
    }
  },

  async read(fs: FileSystem, dir: string): Promise<SettingsRead> {
    const bytes = await fs.readFile(`${dir}/${FILE}`)
    return bytes === undefined ? { status: 'missing' } : BufferSettings.decode(bytes)
  },

  /** Replaces the file atomically: temp file, fsync, rename, directory fsync. */
  async write(fs: FileSystem, dir: string, settings: StoredSettings): Promise<void> {
    await replaceFile(fs, dir, FILE, TEMP, BufferSettings.encode(settings))
  },
} as const
