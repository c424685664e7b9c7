/**
 * `@ackline/buffers`: a durable disk buffer that never acknowledges what it may lose.
 *
 * {@link DiskBuffer} is the record store (segments, checksums, ledger, lock, recovery);
 * {@link openDiskBuffer} puts it in front of a sink as the topology's edge buffer, settling the
 * sources' batches on write or on delivery; {@link diskBuffer} is the factory a sink's `buffer`
 * option takes (`sink('out', ['in'], s, { buffer: diskBuffer({ maxBytes }) })`). The topology
 * defines the `EdgeBuffer` contract this package implements and knows nothing of disks. See
 * `rfcs/0003-disk-buffer.md`.
 *
 * @module
 */
export { BufferCheck, type BufferCheckReport, type SegmentCheck } from './BufferCheck.js'
export {
  type AppendResult,
  type DeadLetter,
  DiskBuffer,
  type DiskBufferMetrics,
  type DurableStatus,
  type ReplayResult,
  type StoredRecord,
  type SyncPolicy,
} from './DiskBuffer.js'
export { DiskBufferError, type DiskBufferErrorCode } from './DiskBufferError.js'
export { type DiskBufferFactory, diskBuffer } from './DiskBufferFactory.js'
export { DiskBufferFactoryOptions, DiskBufferOptions, DiskEdgeBufferOptions } from './DiskBufferOptions.js'
export {
  type DeadLetterEvent,
  type DiskEdgeBuffer,
  type DiskEdgeBufferMetrics,
  openDiskBuffer,
} from './DiskEdgeBuffer.js'
