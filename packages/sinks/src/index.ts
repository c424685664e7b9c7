/**
 * @module @ackline/sinks
 */
export { type BlackholeSink, blackhole } from './BlackholeSink.js'
export { type ConsoleSink, ConsoleSinkOptions, console } from './ConsoleSink.js'
export { type FileSink, FileSinkOptions, file } from './FileSink.js'
export { type MemorySink, MemorySinkOptions, memory } from './MemorySink.js'
