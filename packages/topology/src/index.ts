/**
 * `@ackline/topology`: build pipelines in code, validate them, propagate acknowledgements from
 * sinks back to sources, and run them with back pressure.
 *
 * @module
 */
export type { ConfigIssue } from './ConfigIssue.js'
export type { EdgeBuffer } from './EdgeBuffer.js'
export { RejectError } from './RejectError.js'
export { RetryableError } from './RetryableError.js'
export type { Sink, SinkResult } from './Sink.js'
export type { BatchReceipt, Source, SourceContext } from './Source.js'
export type { Transform, TransformContext } from './Transform.js'
