/**
 * @module @ackline/sinks
 */
export { type BlackholeSink, blackhole } from './BlackholeSink.js'
export { type ConsoleSink, type ConsoleSinkOptions, console } from './ConsoleSink.js'
export { type FileSink, type FileSinkOptions, file } from './FileSink.js'
export { type MemorySink, type MemorySinkOptions, memory } from './MemorySink.js'
