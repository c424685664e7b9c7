/**
 * The disk buffer's options, declared once (with `defineOptions` of `@ackline/topology`): those of
 * the record store ({@link DiskBufferOptions}, `DiskBuffer.open`), of the buffer in front of a
 * sink ({@link DiskEdgeBufferOptions}, `openDiskBuffer`) and of its factory
 * ({@link DiskBufferFactoryOptions}, `diskBuffer`), which share one declaration of each option.
 *
 * Invariant: one rule per option, wherever it is given. `diskBuffer(...).validate` reports every
 * problem at once, so `build()` lists them with the rest (enumerations included); a direct open
 * throws a `DiskBufferError` `INVALID_OPTION` naming the first, before any file is touched.
 *
 * @module
 */
import { codeOption, defineOptions, MAX_TIMER_MS, type OptionsOf } from '@ackline/topology'
import { z } from 'zod'
import type { FileSystem } from './internal/FileSystem.js'
import { Frame } from './internal/Frame.js'

/** The options the store and the edge buffer share, each with its rule and its default. */
const shared = {
  maxBytes: z
    .int()
    .min(1)
    .default(1024 * 1024 * 1024)
    .describe(
      'The most bytes the segments may take on disk (default 1 GiB). When reached, an append waits until acknowledgements free a segment (or, in front of a sink, `whenFull` decides).',
    ),
  segmentBytes: z
    // A record never spans two segments, and each starts with a frame header.
    .int()
    .min(Frame.HEADER_BYTES + 1)
    .default(128 * 1024 * 1024)
    .describe(
      'The largest segment file (default 128 MiB); no record may be larger. Stored with the buffer: a buffer with segments keeps the stored value when reopened with another.',
    ),
  sync: z
    .union([
      z.literal('always'),
      z.strictObject({
        everyMs: z
          .number()
          .min(0)
          // Longer than a timer can wait: it would fire after 1 ms, after every write.
          .max(MAX_TIMER_MS)
          .describe('Fsync at least this often, in ms (at most 2147483647, the longest a timer waits).'),
        everyWrites: z.int().min(1).describe('Fsync after this many appends.'),
      }),
    ])
    .default('always')
    .describe(
      "When writes are fsynced: 'always' (each append, the default), or group commit with write-behind `{ everyMs, everyWrites }` (see `SyncPolicy`).",
    ),
  retryBackoff: z
    .strictObject({ initialMs: z.number().min(0), maxMs: z.number().min(0) })
    .default({ initialMs: 100, maxMs: 30_000 })
    .describe(
      'Back-off before a negatively acknowledged record is handed out again: doubles from `initialMs` up to `maxMs` (a longer wait than 2147483647 ms, the longest a timer waits, is waited out in several).',
    ),
  ledgerIntervalMs: z
    .number()
    .min(0)
    // Longer than a timer can wait: it would fire after 1 ms, after every acknowledgement.
    .max(MAX_TIMER_MS)
    .default(1000)
    .describe(
      'How long after an acknowledgement the checkpoint of what was acknowledged (the ledger) is saved (at most 2147483647 ms, the longest a timer waits); also after `ledgerEveryAcks` acknowledgements and at close. A later checkpoint only means more redelivery after a crash, never loss: what comes again is at most the acknowledgements not yet saved (fewer than `ledgerEveryAcks` plus those made while that checkpoint waited its turn, none older than `ledgerIntervalMs`), the records acknowledged above the first unacknowledged one, and the records in flight (both bounded by `maxInFlight`).',
    ),
  ledgerEveryAcks: z
    .int()
    .min(1)
    .default(1000)
    .describe(
      "Save the checkpoint as soon as this many records were acknowledged since the last one (like Logstash's `queue.checkpoint.acks`). Lower: fewer duplicates after a crash, more checkpoint writes (each one durable write appended to the ledger, and every 64 KiB of them a replacement: a write, an fsync, a rename and a directory fsync; under `sync: 'always'` beside the appends, otherwise on the write lane, where appends wait behind them).",
    ),
  log: codeOption<(message: string) => void>('a function')
    .optional()
    .describe(
      'Where corruption and recovery are reported (default: a process warning with code `ACKLINE_DISK_BUFFER`).',
    ),
}

/** What only the buffer in front of a sink has. */
const edge = {
  whenFull: z
    .enum(['block', 'drop_newest'])
    .default('block')
    .describe(
      "What a push does at `maxBytes`: 'block' waits until acknowledgements free a segment (back pressure reaches the source); 'drop_newest' settles the pushed events `rejected` at once.",
    ),
  acknowledgements: z
    .enum(['on-write', 'on-delivery'])
    .default('on-delivery')
    .describe(
      "When the sources' batches are settled: 'on-write' once the records are durable; 'on-delivery' (the default) once the sink delivered them.",
    ),
  maxEventsPerPull: z.int().min(1).default(1000).describe('The most events one pull returns.'),
}

const { maxBytes, segmentBytes, sync, retryBackoff, ledgerIntervalMs, ledgerEveryAcks, log } = shared
/** The store's options, in the order they are documented and reported. */
const store = { maxBytes, segmentBytes, sync, retryBackoff, ledgerIntervalMs, ledgerEveryAcks, log }
/** The edge buffer's options, in the order they are documented and reported. */
const inFrontOfSink = {
  maxBytes,
  segmentBytes,
  whenFull: edge.whenFull,
  sync,
  acknowledgements: edge.acknowledgements,
  maxEventsPerPull: edge.maxEventsPerPull,
  retryBackoff,
  ledgerIntervalMs,
  ledgerEveryAcks,
  log,
}

/** Tests substitute a file system that forgets unsynced writes; never in a config file. */
const fileSystem = codeOption<FileSystem>(
  'a file system',
  (value) => typeof value === 'object' && value !== null,
).optional()

/** A directory path: not empty. */
const directory = z.string().min(1)

/**
 * Options of `DiskBuffer.open`, the record store: its directory (created if missing; one buffer
 * per directory, which it locks), limits, fsync policy and checkpointing.
 *
 * @example
 * ```ts
 * await DiskBuffer.open({ path: '/var/lib/ackline/http-out', maxBytes: 1 << 30, sync: { everyMs: 50, everyWrites: 1000 } })
 * DiskBufferOptions.validate({ path: '/x', maxBytes: 0 }) // [{ field: 'maxBytes', message: 'must be a positive integer, got 0', … }]
 * ```
 */
export const DiskBufferOptions = defineOptions({
  path: directory.describe("The buffer's directory; created if missing, and locked while open."),
  ...store,
  maxInFlight: z
    .int()
    .min(1)
    .default(100_000)
    .describe(
      'The most records handed out by `read` and not yet settled (those waiting for their redelivery after a `nack` included); `read` waits beyond it.',
    ),
  fileSystem,
  /** Internal: whether this buffer has a dead-letter queue of its own (its dead-letter queue has not). */
  deadLetters: codeOption<boolean>('a boolean', (value) => typeof value === 'boolean').optional(),
  /** Internal: whether to take the directory lock (a dead-letter queue lives under its parent's). */
  lock: codeOption<boolean>('a boolean', (value) => typeof value === 'boolean').optional(),
})
/** Options of `DiskBuffer.open`: see the {@link DiskBufferOptions} schema for each option. */
export type DiskBufferOptions = OptionsOf<typeof DiskBufferOptions>

/**
 * Options of `openDiskBuffer`: the disk buffer in front of one sink.
 *
 * @example
 * ```ts
 * await openDiskBuffer({ path: '/var/lib/ackline/s3', sinkId: 's3', acknowledgements: 'on-write' })
 * ```
 */
export const DiskEdgeBufferOptions = defineOptions({
  type: z
    .literal('disk')
    .optional()
    .describe("The buffer kind, as a topology config writes it; only 'disk' (or nothing)."),
  path: directory.describe(
    "The buffer's directory (one per sink); created if missing and locked while open.",
  ),
  sinkId: z
    .string()
    .min(1)
    .describe(
      "The id of the sink the buffer feeds; names the buffer's own notifiers (`<sinkId>:buffer`) and its messages.",
    ),
  ...inFrontOfSink,
  fileSystem,
})
/** Options of `openDiskBuffer`: see the {@link DiskEdgeBufferOptions} schema for each option. */
export type DiskEdgeBufferOptions = OptionsOf<typeof DiskEdgeBufferOptions>

/**
 * Options of `diskBuffer`: those of `openDiskBuffer`, except that the sink id comes from the
 * topology and the path may be left to the topology's `dataDir` (`<dataDir>/<sinkId>`).
 *
 * @example
 * ```ts
 * builder.sink('s3', ['in'], s3Sink, { buffer: diskBuffer({ maxBytes: 1 << 30, whenFull: 'block' }) })
 * ```
 */
export const DiskBufferFactoryOptions = defineOptions({
  path: directory
    .optional()
    .describe("The buffer's directory (default `<dataDir>/<sinkId>`, with the topology's `dataDir`)."),
  ...inFrontOfSink,
})
/** Options of `diskBuffer`: see the {@link DiskBufferFactoryOptions} schema for each option. */
export type DiskBufferFactoryOptions = OptionsOf<typeof DiskBufferFactoryOptions>
