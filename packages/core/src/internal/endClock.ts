/**
 * One clock reading for every batch resolved inside one `endRuns` call: a sink that ends a
 * coalesced array of many source batches resolves each of them in that call, and a runtime that
 * times its batches (the tracker's ack latency) reads the clock once for all of them instead of
 * once per batch.
 *
 * Invariant: a reading is shared only while an `endRuns` call is on the stack (nested calls share
 * the outermost one's); outside one, {@link endClockNow} reads the clock. So a reading is never
 * older than the synchronous call that resolved the batch. A batch opened after the reading (by
 * code a listener ran inside the call) would see it as earlier than its opening: the receiver
 * that tells a listener reads the clock again then (`BatchStatusReceiver`).
 */

let depth = 0
let reading = -1

/** An `endRuns` call begins. */
export function enterEnd(): void {
  depth++
}

/** An `endRuns` call is over (whether it returned or threw): the outermost one forgets the reading. */
export function leaveEnd(): void {
  if (--depth === 0) reading = -1
}

/** `Date.now()`, read at most once per outermost `endRuns` call. */
export function endClockNow(): number {
  if (depth === 0) return Date.now()
  if (reading < 0) reading = Date.now()
  return reading
}
