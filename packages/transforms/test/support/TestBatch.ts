/**
 * A source's batch for tests: real events attached to a real `BatchNotifier`, released.
 */
import { BatchNotifier, type BatchStatusReceiver, EventArray, type JsonObject, LogEvent } from '@ackline/core'

export interface TestBatch {
  readonly events: EventArray
  readonly receiver: BatchStatusReceiver
}

/** One batch holding one event per record. */
export function testBatch(records: readonly JsonObject[], sourceId = 'in'): TestBatch {
  const { notifier, receiver } = BatchNotifier.create({ sourceId })
  const events = EventArray.from(records.map((fields) => new LogEvent(fields, { sourceId })))
  events.attach(notifier)
  return { events, receiver }
}

/** Whether every handle of `array` left: ended, or emitted through `context`. */
export function everyHandleLeft(
  array: EventArray,
  emitted: readonly { readonly event: LogEvent }[],
): boolean {
  return array.events.every((event) => event.isEnded || emitted.some((e) => e.event === event))
}
