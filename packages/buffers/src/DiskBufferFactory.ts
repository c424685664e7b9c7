/**
 * `diskBuffer`: the disk buffer as a buffer kind of `@ackline/topology`, named by a sink's
 * `buffer` option. The disk buffer's options live here and in `DiskEdgeBuffer.ts` only; the
 * topology knows the factory by its `EdgeBufferFactory` contract and nothing else.
 *
 * Invariant: `validate` reports every problem of the options at once (the topology files them
 * under `buffer.`), so `build()` catches them before anything opens; `open` puts the buffer in
 * `<path>`, or in `<dataDir>/<sinkId>` when no path is given.
 *
 * @module
 */
import { join } from 'node:path'
import type { ConfigIssue, EdgeBuffer, EdgeBufferContext, EdgeBufferFactory } from '@ackline/topology'
import { type DiskEdgeBufferOptions, openDiskBuffer } from './DiskEdgeBuffer.js'

/**
 * Options of {@link diskBuffer}: those of {@link openDiskBuffer}, except that the sink id comes
 * from the topology, and the path may be left to the topology's `dataDir`.
 */
export interface DiskBufferFactoryOptions
  extends Omit<DiskEdgeBufferOptions, 'path' | 'sinkId' | 'type' | 'fileSystem'> {
  /** The buffer's directory (default `<dataDir>/<sinkId>`, with the topology's `dataDir`). */
  readonly path?: string | undefined
}

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
  if (typeof options !== 'object' || options === null) {
    return [{ field: '', message: `the disk buffer's options must be an object, got ${String(options)}` }]
  }
  const { path } = options
  if (path === undefined && context.dataDir === undefined) {
    issues.push({
      field: 'path',
      message:
        'a disk buffer needs a path, or a dataDir on the topology (it then lives in <dataDir>/<sinkId>)',
    })
  } else if (path !== undefined && (typeof path !== 'string' || path === '')) {
    issues.push({ field: 'path', message: `path must be a non-empty string, got ${String(path)}` })
  }
  for (const field of ['maxBytes', 'segmentBytes', 'maxEventsPerPull'] as const) {
    const value = options[field]
    if (value !== undefined && !(Number.isSafeInteger(value) && value > 0)) {
      issues.push({ field, message: `${field} must be a positive integer, got ${String(value)}` })
    }
  }
  oneOf(issues, 'whenFull', options.whenFull, ['block', 'drop_newest'])
  oneOf(issues, 'acknowledgements', options.acknowledgements, ['on-write', 'on-delivery'])
  const sync = options.sync
  if (sync !== undefined && sync !== 'always') {
    if (typeof sync !== 'object' || sync === null) {
      issues.push({
        field: 'sync',
        message: `sync must be 'always' or { everyMs, everyWrites }, got ${String(sync)}`,
      })
    } else {
      if (!(Number.isFinite(sync.everyMs) && sync.everyMs >= 0))
        issues.push({
          field: 'sync.everyMs',
          message: `everyMs must be a non-negative number, got ${String(sync.everyMs)}`,
        })
      if (!(Number.isSafeInteger(sync.everyWrites) && sync.everyWrites > 0))
        issues.push({
          field: 'sync.everyWrites',
          message: `everyWrites must be a positive integer, got ${String(sync.everyWrites)}`,
        })
    }
  }
  return issues
}

function oneOf(issues: ConfigIssue[], field: string, value: unknown, allowed: readonly string[]): void {
  if (value !== undefined && !allowed.includes(value as string)) {
    issues.push({
      field,
      message: `${field} must be ${allowed.map((a) => `'${a}'`).join(' or ')}, got ${typeof value === 'string' ? `'${value}'` : String(value)}`,
    })
  }
}
