/**
 * `@ackline/topology`: build pipelines in code, validate them, propagate acknowledgements from
 * sinks back to sources, and run them with back pressure.
 *
 * @module
 */
export type { BatchFailure } from './BatchFailure.js'
export { ComponentError, type ComponentErrorOptions } from './ComponentError.js'
export type { ComponentMetrics } from './ComponentMetrics.js'
export { ConfigIssue } from './ConfigIssue.js'
export { cutToBytes } from './cutToBytes.js'
export type { EdgeBuffer, EdgeBufferContext, EdgeBufferDirectory, EdgeBufferFactory } from './EdgeBuffer.js'
export { MAX_TIMER_MS } from './internal/maxTimerMs.js'
export type { ComponentErrorCode, ComponentRole, LifecycleEvent } from './LifecycleEvent.js'
export { MemoryBufferOptions } from './MemoryBufferOptions.js'
export { nextWarningAt } from './nextWarningAt.js'
export {
  codeOption,
  defineOptions,
  type JsonSchema,
  type OptionsOf,
  type OptionsSchema,
  type ResolvedOptionsOf,
} from './OptionsSchema.js'
export { type EventSettle, type EventStep, keepIf, perEvent } from './perEvent.js'
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
export { SinkOptions } from './SinkOptions.js'
export { type BatchReceipt, NO_RECEIPT, type SendOptions, type Source, type SourceContext } from './Source.js'
export { type StopOptions, Topology } from './Topology.js'
export { TopologyBuilder } from './TopologyBuilder.js'
export { TopologyError, type TopologyProblem, type TopologyProblemCode } from './TopologyError.js'
export { TopologyOptions } from './TopologyOptions.js'
export type {
  AckUnsupportedWarning,
  AuthoritativeIgnoredWarning,
  NoConsumersWarning,
  TopologyWarning,
} from './TopologyWarning.js'
export type { Transform, TransformContext } from './Transform.js'
export { TransformOptions } from './TransformOptions.js'
export { textOf } from './textOf.js'
export { warningsTo } from './warningsTo.js'
