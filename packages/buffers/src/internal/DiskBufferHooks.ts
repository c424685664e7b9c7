/**
 * The one door from tests into a buffer's internals: {@link DiskBuffer} registers its crash hook
 * here when its module loads, and only {@link CrashableDiskBuffer} (a test factory) calls it.
 * Production code never imports this module.
 *
 * @module
 */
import type { DiskBuffer } from '../DiskBuffer.js'

/** What a buffer lets tests do that production code never does. */
export interface DiskBufferTestHooks {
  /** Stops the buffer without writing anything, as a crash would: no file is touched again. */
  readonly abandon: (buffer: DiskBuffer) => void
}

let hooks: DiskBufferTestHooks | undefined

/** Registration (by `DiskBuffer`) and use (by the test factory) of the test hooks. */
export const DiskBufferHooks = {
  register(registered: DiskBufferTestHooks): void {
    hooks = registered
  },
  get(): DiskBufferTestHooks {
    if (hooks === undefined) throw new Error('DiskBuffer has not registered its test hooks')
    return hooks
  },
} as const
