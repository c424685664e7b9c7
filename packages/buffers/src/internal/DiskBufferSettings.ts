/**
 * A disk buffer's settings: its options checked, with their defaults filled in.
 *
 * Invariant: every number in {@link Settings} is in range (a bad option throws a
 * `DiskBufferError` `INVALID_OPTION` naming it, before any file is touched). The rules are the
 * {@link DiskBufferOptions} schema's.
 *
 * @module
 */
import type { SyncPolicy } from '../DiskBuffer.js'
import { DiskBufferError } from '../DiskBufferError.js'
import { DiskBufferOptions } from '../DiskBufferOptions.js'
import { type FileSystem, NodeFileSystem } from './FileSystem.js'

/** The options of a buffer, checked and completed. */
export interface Settings {
  readonly path: string
  readonly fs: FileSystem
  readonly maxBytes: number
  readonly segmentBytes: number
  readonly sync: SyncPolicy
  readonly retryInitialMs: number
  readonly retryMaxMs: number
  readonly maxInFlight: number
  readonly ledgerIntervalMs: number
  readonly ledgerEveryAcks: number
  readonly log: (message: string) => void
  readonly deadLetters: boolean
  readonly lock: boolean
}

/** Checks `o` and fills in the defaults; throws `INVALID_OPTION` naming the first bad option. */
export const settle = (path: string, options: DiskBufferOptions): Settings => {
  const invalid = DiskBufferOptions.validate(options)
  // Checked by the schema, which `diskBuffer(...).validate` shares, so `build()` words it the same.
  const error = DiskBufferError.ofIssues(invalid, path)
  if (error !== undefined) throw error
  const o = DiskBufferOptions.resolve(options)
  return {
    path,
    fs: o.fileSystem ?? NodeFileSystem,
    maxBytes: o.maxBytes,
    segmentBytes: o.segmentBytes,
    sync: o.sync,
    retryInitialMs: o.retryBackoff.initialMs,
    retryMaxMs: o.retryBackoff.maxMs,
    maxInFlight: o.maxInFlight,
    ledgerIntervalMs: o.ledgerIntervalMs,
    ledgerEveryAcks: o.ledgerEveryAcks,
    log: o.log ?? ((message) => process.emitWarning(message, { code: 'ACKLINE_DISK_BUFFER' })),
    deadLetters: o.deadLetters ?? true,
    lock: o.lock ?? true,
  }
}
