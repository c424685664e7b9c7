/**
 * The dead-letter file of the file source: one JSON object per line, appended.
 *
 * Invariant: the file holds whole entries only, each ending with its newline. Appends run one at a
 * time; one that fails part-way (a short write, then a full disk) is undone by truncating the file
 * back to the length it had before, and while that truncation has not succeeded no other entry is
 * appended (the next append tries it first). So a reader never sees a piece of an entry followed
 * by a whole one. A piece left at the end by an earlier process (killed mid-append) is cut away
 * when the file is opened, and a file shorter than expected (emptied by hand) is taken as it is.
 */
import { type FileHandle, open } from 'node:fs/promises'

export class DeadLetterFile {
  readonly #handle: FileHandle
  /** The length of the whole entries: where the file is cut back to after a failed append. */
  #length: number
  /** Whether a failed append may have left bytes past `#length` that are not cut away yet. */
  #torn = false
  /** The last append (settled or not): the next one starts after it. */
  #queue: Promise<unknown> = Promise.resolve()

  private constructor(handle: FileHandle, length: number) {
    this.#handle = handle
    this.#length = length
  }

  /** Opens (creates) the file at `path` for appending; cuts away a piece of an entry at its end. */
  static async open(path: string): Promise<DeadLetterFile> {
    const handle = await open(path, 'a+')
    try {
      const size = (await handle.stat()).size
      const whole = await wholeLength(handle, size)
      if (whole < size) await handle.truncate(whole)
      return new DeadLetterFile(handle, whole)
    } catch (error) {
      await handle.close()
      throw error
    }
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
    try {
      if (this.#torn) await this.#cutBack()
      await this.#handle.appendFile(bytes)
      this.#length += bytes.length
    } catch (error) {
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

  /** Flushes what was appended to the disk. */
  async sync(): Promise<void> {
    await this.#handle.sync()
  }

  /** Closes the file once the appends called before have settled. */
  async close(): Promise<void> {
    await this.#queue
    await this.#handle.close()
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
