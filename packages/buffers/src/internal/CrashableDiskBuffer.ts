/**
 * A factory of disk buffers that a test can crash: the buffer it opens is a plain
 * {@link DiskBuffer} with one more method, `_abandon()`, which stops it without writing anything
 * (as SIGKILL would), so the test can then drop unsynced data from its in-memory file system and
 * reopen. Tests only; production code opens buffers with `DiskBuffer.open` and never reaches this.
 *
 * @module
 */
import { DiskBuffer } from '../DiskBuffer.js'
import type { DiskBufferOptions } from '../DiskBufferOptions.js'
import { DiskBufferHooks } from './DiskBufferHooks.js'

/** A disk buffer with its crash hook. */
export type Crashable = DiskBuffer & {
  /** Stops the buffer as a crash would: no file is written, closed or unlocked. */
  _abandon(): void
}

/** Opens buffers that tests can crash. */
export const CrashableDiskBuffer = {
  /** {@link DiskBuffer.open}, with `_abandon()` on the result. */
  async open(options: DiskBufferOptions): Promise<Crashable> {
    const buffer = await DiskBuffer.open(options)
    const { abandon } = DiskBufferHooks.get()
    return Object.assign(buffer, { _abandon: (): void => abandon(buffer) })
  },
} as const
