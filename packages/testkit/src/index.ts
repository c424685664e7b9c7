/**
 * `@ackline/testkit`: test the delivery semantics of your own topologies and components — a
 * reference model of the acknowledgement lattice, a delivery ledger, conformance suites,
 * fast-check arbitraries, fault injection and crash loops. See `docs/testing.md`.
 *
 * @module
 */

export { Arbitraries, type JsonValueOptions, type RecordOptions } from './Arbitraries.js'
export {
  type BufferConformanceOptions,
  type BufferUnderTest,
  bufferConformance,
  bufferRules,
  checkBuffer,
} from './BufferConformance.js'
export { ConformanceError } from './ConformanceError.js'
export type { ConformanceRule, ConformanceRunner } from './ConformanceRunner.js'
export { CrashLoopError, type CrashLoopErrorCode } from './CrashLoopError.js'
export {
  CRASH_FINISHED_LINE,
  CRASH_REPORT_PREFIX,
  CrashReporter,
  type CrashReportingSinkOptions,
} from './CrashReporter.js'
export {
  type CrashLastRun,
  type CrashLoopOptions,
  CrashLoopReport,
  type CrashProgress,
  type CrashRound,
  crashLoop,
} from './crashLoop.js'
export {
  type CopyFate,
  DeliveryLedger,
  type DeliveryLedgerOptions,
  type LedgerBatch,
  type LedgerCheckOptions,
  type LedgerRecord,
  type LedgerSinkOptions,
  type RecordKey,
} from './DeliveryLedger.js'
export { type CopyReport, DeliveryModel, type RecordVerdict } from './DeliveryModel.js'
export { DeliveryViolation, type DeliveryViolationCode } from './DeliveryViolation.js'
export { describeSchedule, type FailureSchedule, faultySink, NO_FAULTS } from './FailureSchedule.js'
export {
  type RandomInput,
  type RandomRun,
  type RandomSink,
  type RandomSinkKind,
  RandomTopology,
  type RandomTopologyOptions,
  type RandomTopologySpec,
  type RandomTransform,
  type RandomTransformKind,
} from './RandomTopology.js'
export { type RunTopologyOptions, runTopology } from './runTopology.js'
export { checkSink, type SinkConformanceOptions, sinkConformance, sinkRules } from './SinkConformance.js'
export {
  checkSource,
  type SourceConformanceOptions,
  type SourceUnderTest,
  sourceConformance,
  sourceRules,
} from './SourceConformance.js'
export { type TcpDirection, type TcpProxy, type TcpProxyOptions, tcpProxy } from './TcpProxy.js'
export {
  checkTransform,
  type TransformConformanceOptions,
  transformConformance,
  transformRules,
} from './TransformConformance.js'
