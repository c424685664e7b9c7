/**
 * Loads a disk buffer from `@ackline/buffers` on demand, so a topology without disk buffers runs
 * whether or not that package is built (or installed).
 */
import { join } from 'node:path'
import type { EdgeBuffer } from '../EdgeBuffer.js'
import type { DiskBufferOptions } from '../TopologyBuilder.js'

/** What `@ackline/buffers` is expected to export. */
export interface DiskBufferModule {
  openDiskBuffer(options: {
    readonly path: string
    readonly sinkId: string
    readonly maxBytes?: number
    readonly whenFull?: 'block' | 'drop_newest'
    readonly sync?: boolean
    readonly acknowledgements?: 'on-write' | 'on-delivery'
  }): Promise<EdgeBuffer>
}

/** The module specifier, in a variable so the compiler does not need the package to exist. */
const BUFFERS = '@ackline/buffers'

/** Opens the disk buffer of sink `sinkId`, or resolves a message saying why it cannot. */
export async function openDiskBuffer(
  sinkId: string,
  options: DiskBufferOptions,
  dataDir: string | undefined,
): Promise<EdgeBuffer | string> {
  let module: Partial<DiskBufferModule>
  try {
    module = (await import(BUFFERS)) as Partial<DiskBufferModule>
  } catch (error) {
    return `disk buffers need the package ${BUFFERS}, which could not be loaded: ${String(error)}`
  }
  if (typeof module.openDiskBuffer !== 'function') {
    return `the installed ${BUFFERS} does not export openDiskBuffer(); disk buffers are not available`
  }
  const path = options.path ?? join(dataDir ?? '.', sinkId)
  return module.openDiskBuffer({
    path,
    sinkId,
    ...(options.maxBytes === undefined ? {} : { maxBytes: options.maxBytes }),
    ...(options.whenFull === undefined ? {} : { whenFull: options.whenFull }),
    ...(options.sync === undefined ? {} : { sync: options.sync }),
    acknowledgements: options.acknowledgements ?? 'on-delivery',
  })
}
