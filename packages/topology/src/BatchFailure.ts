/**
 * Why a batch was not delivered, as data a source can pass on to its client (an HTTP source puts
 * it in its error response, a broker source in a dead-letter header).
 *
 * Invariant: a receipt's failure is `undefined` exactly when its status is `delivered`; otherwise
 * it names the first component that gave the batch its final status (the first to make it
 * `errored` when it ended `errored`, the first to make it `rejected` when it ended `rejected`).
 *
 * @module
 */

/**
 * The first failure that gave a batch its status.
 *
 * `code` is one of the runtime's codes below, or the `code` of the error a sink threw:
 * - `WRITE_FAILED`: a sink's write kept failing until its retry policy gave up (`errored`);
 * - `REJECTED`: a sink refused the events (a `RejectError`, or a status it reported per event);
 * - `UNENCODABLE`: a sink could not encode an event (a `TypeError` or `RangeError` from its write,
 *   such as `JSON.stringify` of a `BigInt` or of a too deeply nested value): it would fail the
 *   same way on every retry, so the event is `rejected`;
 * - `BAD_RESULT`: a sink's write returned something that is not one known status per event;
 * - `LEAKED_EVENTS`, `PROCESS_FAILED`: a transform lost track of events, or threw (`errored`);
 * - `DROPPED`: a transform dropped the event with `dropStatus: 'rejected'`;
 * - `BUFFER_FULL`: a full `drop_newest` buffer dropped it (in memory, or on disk);
 * - `RECORD_TOO_LARGE`: a disk buffer could not store it, larger than a segment (`rejected`);
 * - `ACK_TIMEOUT`: the topology's `ackTimeoutMs` passed first (`errored`);
 * - `STOPPED`: the topology stopped (or a stop's deadline passed) before the batch resolved: a
 *   sink's write or a transform's call was still running (its component named), or nothing
 *   had settled it;
 * - `UNEXPLAINED`: no component said why (a leaked handle, or code that ended an event with a
 *   status and no reason).
 *
 * @example
 * ```ts
 * const receipt = await context.send(records)
 * if ((await receipt.status) !== 'delivered') {
 *   const { componentId, code, message } = receipt.failure!
 *   respond(503, { status: 'errored', component: componentId, code, message })
 * }
 * ```
 */
export interface BatchFailure {
  /** The component that decided: a sink, a transform, a buffer's sink, or the source itself (timeouts, stops). */
  readonly componentId: string
  /** A stable code to match on (see above). */
  readonly code: string
  /** What happened, in words for a person. */
  readonly message: string
}
