/**
 * `diskBuffer`: the disk buffer as a buffer kind of `@ackline/topology`, named by a sink's
 * `buffer` option. The disk buffer's options are declared in `DiskBufferOptions.ts` only; the
 * topology knows the factory by its `EdgeBufferFactory` contract and nothing else.
 *
 * Invariant: `validate` reports every problem of the options at once, by the
 * {@link DiskBufferFactoryOptions} schema (the topology files them under `buffer.`), so `build()` catches them before anything opens; `open` puts the buffer in
 * `<path>`, or in `<dataDir>/<sinkId>` when no path is given.
 *
 * @module
 */
import { join, resolve } from 'node:path'
import type {
  ConfigIssue,
  EdgeBuffer,
  EdgeBufferContext,
  EdgeBufferDirectory,
  EdgeBufferFactory,
} from '@ackline/topology'
import { DiskBufferFactoryOptions } from './DiskBufferOptions.js'
import { openDiskBuffer } from './DiskEdgeBuffer.js'
import { DeadLetterSet } from './internal/DeadLetterSet.js'

/** The factory {@link diskBuffer} returns. */
export interface DiskBufferFactory extends EdgeBufferFactory {
  readonly kind: 'disk'
  /** The options it was made with. */
  readonly options: DiskBufferFactoryOptions
}

/**
 * A disk buffer in front of a sink: its events survive a restart of the process, and with
 * `acknowledgements: 'on-write'` their sources are told `delivered` once they are durable.
 *
 * @example
 * ```ts
 * import { diskBuffer } from '@ackline/buffers'
 * new TopologyBuilder({ acknowledgements: true, dataDir: '/var/lib/ackline' })
 *   .source('in', source)
 *   .sink('s3', ['in'], s3Sink, { buffer: diskBuffer({ maxBytes: 1 << 30 }) }) // in /var/lib/ackline/s3
 * ```
 */
export function diskBuffer(options: DiskBufferFactoryOptions = {}): DiskBufferFactory {
  return {
    kind: 'disk',
    options,
    validate: (context) => validate(options, context),
    directories: (context) => directories(options, context),
    open: (context): Promise<EdgeBuffer> =>
      openDiskBuffer({
        ...options,
        path: options.path ?? join(context.dataDir ?? '.', context.componentId),
        sinkId: context.componentId,
      }),
  }
}

function validate(options: DiskBufferFactoryOptions, context: EdgeBufferContext): ConfigIssue[] {
  const issues: ConfigIssue[] = []
  const path = (options as { path?: unknown } | null | undefined)?.path
  if (path === undefined && context.dataDir === undefined) {
    issues.push({
      field: 'path',
      message:
        'a disk buffer needs a path, or a dataDir on the topology (it then lives in <dataDir>/<sinkId>)',
    })
  }
  // The schema's rules are the ones a direct open throws on: one wording, every problem at once.
  issues.push(...DiskBufferFactoryOptions.validate(options))
  return issues
}

/**
 * The buffer's directory and its dead-letter queue's: a buffer opened on another's `dead-letter/`
 * would write records there that the other reads as its dead letters (and the reverse).
 */
function directories(options: DiskBufferFactoryOptions, context: EdgeBufferContext): EdgeBufferDirectory[] {
  const given = (options as { path?: unknown } | null | undefined)?.path
  // A path `validate` refuses (or none, without a dataDir) is reported there.
  if (given !== undefined && typeof given !== 'string') return []
  if (given === undefined && context.dataDir === undefined) return []
  const path = resolve(given ?? join(context.dataDir!, context.componentId))
  return [
    { path, holds: 'its records', field: 'path' },
    { path: join(path, DeadLetterSet.DIR), holds: 'its dead-letter queue', field: 'path' },
  ]
}
