/**
 * Tells a sink's `buffer` option apart: a factory of some kind of buffer, or the in-memory
 * channel's options. A factory is whatever has an `open` function, so a plain options object
 * from a config file (`{ maxEvents: 1000 }`) is never mistaken for one.
 */
import type { EdgeBufferFactory } from '../EdgeBuffer.js'
import type { MemoryBufferOptions } from '../MemoryBufferOptions.js'

export function isEdgeBufferFactory(
  buffer: MemoryBufferOptions | EdgeBufferFactory,
): buffer is EdgeBufferFactory {
  return typeof (buffer as { open?: unknown }).open === 'function'
}
