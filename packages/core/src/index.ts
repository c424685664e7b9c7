/**
 * `@ackline/core`: the acknowledgement model of ackline.
 *
 * Events carry finalizers that tie them to the batches their sources read; every copy of an
 * event ends exactly once, with a status or without one; a batch resolves exactly once, when the
 * last handle of its last event has ended, with the worst status any of them reported. See
 * `rfcs/0001-end-to-end-acknowledgements.md`.
 *
 * @module
 */
export { BatchNotifier, type BatchNotifierOptions, type BatchNotifierWithReceiver } from './BatchNotifier.js'
export { BatchStatus } from './BatchStatus.js'
export { type BatchResolvedListener, BatchStatusReceiver } from './BatchStatusReceiver.js'
export { EventArray, type FromRecordsOptions } from './EventArray.js'
export { EventFinalizer } from './EventFinalizer.js'
export { EventFinalizerGroups } from './EventFinalizerGroups.js'
export { EventFinalizers } from './EventFinalizers.js'
export { EventMetadata } from './EventMetadata.js'
export { type DeliveryStatus, EventStatus } from './EventStatus.js'
export { FinalizationError, type FinalizationErrorCode } from './FinalizationError.js'
export { type JsonObject, type JsonPrimitive, JsonValue, type NumberOutOfRange } from './JsonValue.js'
export { LeakDetector, type LeakReport } from './LeakDetector.js'
export { type EndOptions, LogEvent, type LogEventOptions } from './LogEvent.js'
export {
  CappedOffsetTracker,
  type CappedOffsetTrackerOptions,
  OffsetTracker,
  type OffsetTrackerOptions,
} from './OffsetTracker.js'
export { OffsetTrackerError, type OffsetTrackerErrorCode } from './OffsetTrackerError.js'
export { RecordId } from './RecordId.js'
export { type RecordOutcome, RecordOutcomes } from './RecordOutcomes.js'
export { SlotBatches, type SlotBatchOwner, type SlotBlock } from './SlotBatches.js'
