/**
 * The plumbing of a transform that decides event by event (a map, a filter, a remap), in one
 * helper, so such a transform holds only its own logic.
 *
 * Invariant: every event of the input array reaches the context exactly once and in order,
 * either passed on as it is or handed to the transform's `settle`; while every event so far goes
 * on as it is, nothing is emitted, and if all of them do, the array is passed on whole with one
 * `emitAll` (the runtime then sends it downstream without copying it). When `step` (or
 * `settle`) throws for an event, that event is left as it is (unless `settle` emitted or ended it
 * before it threw: then it goes as it was sent), the others are decided as usual,
 * and the call then throws the first error: the runtime settles the events left `errored` and
 * reports the failure, as it does for any transform that throws. So one event's failure touches
 * no other event, however the input was cut into arrays (a coalesced call holds several batches).
 *
 * @module
 */
import type { EventArray, LogEvent } from '@ackline/core'
import { ComponentError } from './ComponentError.js'
import type { Transform, TransformContext } from './Transform.js'

/**
 * The per-event logic of a transform built with {@link perEvent}: returns `undefined` when the
 * event goes on as it is (after whatever `step` changed in it), anything else for
 * {@link EventSettle} to act on. It must not emit, drop or end the event itself.
 */
export type EventStep<Result> = (event: LogEvent) => Result | undefined

/**
 * What becomes of an event whose {@link EventStep} returned `result` (never `undefined`): it must
 * emit, drop or merge `event` (or emit what replaces it), exactly as a transform's `process` must.
 */
export type EventSettle<Result> = (event: LogEvent, result: Result, context: TransformContext) => void

/**
 * A transform's `process` (see {@link Transform}) built from its per-event logic: `step` runs on each event in order;
 * an event for which it returns `undefined` goes on unchanged, any other result goes to `settle`.
 * What it emits does not depend on where one input array ends and the next begins, so the
 * transform can declare `coalesce: true` (unless its `step` or `settle` looks at the array).
 *
 * @example
 * ```ts
 * // a filter: keep what has a user, drop the rest (what keepIf does)
 * const withUser: Transform = {
 *   kind: 'with_user',
 *   coalesce: true,
 *   process: perEvent(
 *     (event) => (event.get('user') === undefined ? 'drop' : undefined),
 *     (event, _result, context) => context.drop(event),
 *   ),
 * }
 * // a map that edits in place and sometimes splits an event in two
 * const split: Transform = {
 *   kind: 'split',
 *   coalesce: true,
 *   process: perEvent(
 *     (event) => {
 *       event.set('seen', true)
 *       return event.get('pair') === true ? event : undefined
 *     },
 *     (event, _same, context) => {
 *       context.emit(event.clone().set('half', 1))
 *       context.emit(event.set('half', 2))
 *     },
 *   ),
 * }
 * ```
 */
export function perEvent<Result>(
  step: EventStep<Result>,
  settle: EventSettle<Result>,
): (events: EventArray, context: TransformContext) => void {
  return (events, context) => {
    const list = events.events
    const n = list.length
    let i = 0
    let result: Result | undefined
    let failed: { readonly error: unknown } | undefined
    try {
      for (; i < n; i++) {
        result = step(list[i]!)
        if (result !== undefined) break
      }
    } catch (error) {
      failed = { error }
    }
    if (i === n) {
      context.emitAll(events)
      return
    }
    // Stopped early (another result, or a throw): what went on as it was is emitted now, in order.
    for (let j = 0; j < i; j++) context.emit(list[j]!)
    // An event whose step or settle throws is left for the runtime to settle; the others are
    // decided as if it had come alone (a coalesced call holds other batches' events too).
    if (failed === undefined) failed = settleOne(settle, list[i]!, result!, context)
    for (i++; i < n; i++) {
      const event = list[i]!
      try {
        const next = step(event)
        if (next === undefined) context.emit(event)
        else settle(event, next, context)
      } catch (error) {
        failed ??= { error }
      }
    }
    if (failed !== undefined) throw failed.error
  }
}

/** `settle` for one event; what it threw, if it did. */
function settleOne<Result>(
  settle: EventSettle<Result>,
  event: LogEvent,
  result: Result,
  context: TransformContext,
): { readonly error: unknown } | undefined {
  try {
    settle(event, result, context)
    return undefined
  } catch (error) {
    return { error }
  }
}

/** The step's verdict on an event a {@link keepIf} predicate refused. */
const REFUSED = 'refused'

/**
 * A filter-like transform's `process`: events for which `keep` returns exactly `true` go on, every
 * other one goes to `context.drop` (the transform's `dropStatus` says what that means). The array
 * goes on whole while `keep` accepts every event. As with {@link perEvent}, the transform can
 * declare `coalesce: true`. A `keep` that returns a promise (an `async` predicate, from untyped
 * code) throws a `ComponentError` with code `BAD_RESULT` rather than drop every event: its answer
 * is not known yet, and the runtime settles the events `errored` and reports the failure.
 *
 * @example
 * ```ts
 * const withUser: Transform = { kind: 'with_user', coalesce: true, process: keepIf((e) => e.get('user') !== undefined) }
 * ```
 */
export function keepIf(
  keep: (event: LogEvent) => boolean,
): (events: EventArray, context: TransformContext) => void {
  return perEvent(
    (event) => {
      const answer: unknown = keep(event)
      if (answer === true) return undefined
      if (isThenable(answer)) {
        // Refused, the promise is awaited by nobody: its rejection must not go unhandled.
        ignoreRejection(answer)
        throw pendingAnswer()
      }
      return REFUSED
    },
    (event, _refused, context) => context.drop(event),
  )
}

/** Handles the rejection of a refused promise (an unhandled one ends a Node.js process); never throws. */
function ignoreRejection(thenable: unknown): void {
  try {
    ;(thenable as PromiseLike<unknown>).then(undefined, () => {})
  } catch {
    // A `then` that throws has no rejection to leave unhandled.
  }
}

/**
 * Whether `value` is a promise (or any thenable). Never throws: a value whose `then` cannot be read
 * (a Proxy whose `get` trap throws, a revoked Proxy) is no promise anyone can await, so it is an
 * answer other than `true`, and {@link keepIf} drops its event as it says.
 */
function isThenable(value: unknown): boolean {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return false
  try {
    return typeof (value as { then?: unknown }).then === 'function'
  } catch {
    return false
  }
}

/** What {@link keepIf} throws for a predicate that returned a promise. */
function pendingAnswer(): ComponentError<'BAD_RESULT'> {
  return new ComponentError(
    'BAD_RESULT',
    'the predicate returned a promise (an async function?): it must return true or false at once',
    { field: 'predicate' },
  )
}
