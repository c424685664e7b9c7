// The sink runner's table (see `Sink.ts` of @ackline/topology), as the ledger and the conformance
// suites read a write: what each event's status is, given what the write did.
import type { DeliveryStatus } from '@ackline/core'
import { RejectError, type SinkResult } from '@ackline/topology'

/** How a thrown error (or a per-event `Error`) is read: never retried, or retried. */
export const classifyError = (error: unknown): DeliveryStatus =>
  error instanceof RejectError || error instanceof TypeError || error instanceof RangeError
    ? 'rejected'
    : 'errored'

/** Whether `entry` is a valid per-event entry of a sink result. */
export const isValidEntry = (entry: unknown): entry is DeliveryStatus | Error =>
  entry === 'delivered' || entry === 'errored' || entry === 'rejected' || entry instanceof Error

/** Each event's status from a write that resolved with `result`, for `length` events. */
export function classifyResult(result: SinkResult, length: number): DeliveryStatus[] {
  if (result === undefined) return new Array<DeliveryStatus>(length).fill('delivered')
  return Array.from({ length }, (_, i) => {
    const entry: unknown = Array.isArray(result) && result.length === length ? result[i] : undefined
    if (!isValidEntry(entry)) return 'errored'
    return entry instanceof Error ? classifyError(entry) : entry
  })
}
