/**
 * Loads a disk buffer from `@ackline/buffers` on demand (a dynamic import), so a topology without
 * disk buffers never loads that package, and one with them gets a configuration error naming the
 * sink, not a crash, when it cannot be loaded.
 */
import { join } from 'node:path'
import type { EdgeBuffer } from '../EdgeBuffer.js'
import type { DiskBufferOptions } from '../TopologyBuilder.js'

/** A disk buffer, with the extra step a forced stop uses when the buffer offers it. */
export type DiskEdgeBuffer = EdgeBuffer & { dispose?(): Promise<void> }

/** Opens the disk buffer of sink `sinkId`, or resolves a message saying why it cannot. */
export async function openDiskBuffer(
  sinkId: string,
  options: DiskBufferOptions,
  dataDir: string | undefined,
): Promise<DiskEdgeBuffer | string> {
  let buffers: typeof import('@ackline/buffers')
  try {
    buffers = await import('@ackline/buffers')
  } catch (error) {
    return `disk buffers need the package @ackline/buffers, which could not be loaded: ${String(error)}`
  }
  const { type: _type, path, ...rest } = options
  return buffers.openDiskBuffer({ ...rest, path: path ?? join(dataDir ?? '.', sinkId), sinkId })
}
