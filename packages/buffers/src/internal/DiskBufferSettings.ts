/**
 * A disk buffer's settings: its options checked, with their defaults filled in.
 *
 * Invariant: every number in {@link Settings} is in range (a bad option throws a
 * `DiskBufferError` `INVALID_OPTION` naming it, before any file is touched).
 *
 * @module
 */
import type { DiskBufferOptions, SyncPolicy } from '../DiskBuffer.js'
import { DiskBufferError } from '../DiskBufferError.js'
import { type FileSystem, NodeFileSystem } from './FileSystem.js'
import { Frame } from './Frame.js'

const positiveInt = (path: string, field: string, value: number | undefined, fallback: number): number => {
  const v = value ?? fallback
  if (!Number.isSafeInteger(v) || v <= 0) {
    throw new DiskBufferError('INVALID_OPTION', `${field} must be a positive integer, got ${v}`, path, field)
  }
  return v
}

const nonNegative = (path: string, field: string, value: number): number => {
  if (!Number.isFinite(value) || value < 0) {
    throw new DiskBufferError(
      'INVALID_OPTION',
      `${field} must be a non-negative number, got ${value}`,
      path,
      field,
    )
  }
  return value
}

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
export const settle = (path: string, o: DiskBufferOptions): Settings => {
  const sync = o.sync ?? 'always'
  if (sync !== 'always') {
    nonNegative(path, 'sync.everyMs', sync.everyMs)
    positiveInt(path, 'sync.everyWrites', sync.everyWrites, 1)
  }
  const backoff = o.retryBackoff ?? { initialMs: 100, maxMs: 30_000 }
  const segmentBytes = positiveInt(path, 'segmentBytes', o.segmentBytes, 128 * 1024 * 1024)
  if (segmentBytes <= Frame.HEADER_BYTES) {
    throw new DiskBufferError(
      'INVALID_OPTION',
      `segmentBytes must exceed the ${Frame.HEADER_BYTES}-byte frame header, got ${segmentBytes}`,
      path,
      'segmentBytes',
    )
  }
  return {
    path,
    fs: o.fileSystem ?? NodeFileSystem,
    maxBytes: positiveInt(path, 'maxBytes', o.maxBytes, 1024 * 1024 * 1024),
    segmentBytes,
    sync,
    retryInitialMs: nonNegative(path, 'retryBackoff.initialMs', backoff.initialMs),
    retryMaxMs: nonNegative(path, 'retryBackoff.maxMs', backoff.maxMs),
    maxInFlight: positiveInt(path, 'maxInFlight', o.maxInFlight, 100_000),
    ledgerIntervalMs: nonNegative(path, 'ledgerIntervalMs', o.ledgerIntervalMs ?? 1000),
    ledgerEveryAcks: positiveInt(path, 'ledgerEveryAcks', o.ledgerEveryAcks, 1000),
    log: o.log ?? ((message) => process.emitWarning(message, { code: 'ACKLINE_DISK_BUFFER' })),
    deadLetters: o.deadLetters ?? true,
    lock: o.lock ?? true,
  }
}
