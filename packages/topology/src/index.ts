/**
 * `@ackline/topology`: build pipelines in code, validate them, propagate acknowledgements from
 * sinks back to sources, and run them with back pressure.
 *
 * @module
 */
export type { ComponentMetrics } from './ComponentMetrics.js'
export type { ConfigIssue } from './ConfigIssue.js'
export type { EdgeBuffer } from './EdgeBuffer.js'
export type { ComponentErrorCode, ComponentRole, LifecycleEvent } from './LifecycleEvent.js'
export {
  type ExhaustedReason,
  type IndexedRecord,
  RecordRetry,
  type RecordRetryOptions,
  type RecordRetryResult,
  type RetryDecision,
} from './RecordRetry.js'
export { RejectError } from './RejectError.js'
export { RetryableError } from './RetryableError.js'
export { RetryPolicy } from './RetryPolicy.js'
export type { Sink, SinkResult } from './Sink.js'
export type { BatchReceipt, SendOptions, Source, SourceContext } from './Source.js'
export { type StopOptions, Topology } from './Topology.js'
export {
  type DiskBufferOptions,
  type MemoryBufferOptions,
  type SinkOptions,
  TopologyBuilder,
  type TopologyOptions,
  type TopologyWarning,
  type TransformOptions,
} from './TopologyBuilder.js'
export { TopologyError, type TopologyProblem, type TopologyProblemCode } from './TopologyError.js'
export type { Transform, TransformContext } from './Transform.js'
