/**
 * What a filter or a route throws for a predicate that answered neither `true` nor `false`, or
 * that ended the event it was asked about.
 *
 * Invariant: a predicate's answer is taken only when it is a boolean. A truthy non-boolean (`1`,
 * `'yes'`, an object) read as a no dropped (or misrouted) an event the user meant to keep, and
 * `undefined` (a function that forgot to `return`) dropped every event: the call fails instead,
 * and the runtime settles the event `errored` and reports it. A promise (an `async` predicate)
 * is refused the same way, its rejection handled. A predicate that ends the event fails the call
 * too, whatever it answered: passed on, the ended event was reported as ended after it was
 * emitted, and dropped, as ended twice, neither naming the predicate.
 *
 * @module
 */
import { ComponentError } from '@ackline/topology'
import { ignoreRejection } from './ignoreRejection.js'
import { isThenable } from './isThenable.js'

/**
 * The `BAD_RESULT` error for a predicate (`what`, as the message names it) that returned
 * `answer`, a value that is no boolean, naming the component `id` and `field`.
 */
export function badAnswer(
  id: string,
  field: string,
  what: string,
  answer: unknown,
): ComponentError<'BAD_RESULT'> {
  if (isThenable(answer)) {
    // Refused, the promise is awaited by nobody: its rejection must not go unhandled.
    ignoreRejection(answer)
    return new ComponentError(
      'BAD_RESULT',
      `${what} returned a promise (an async function?): it must return true or false at once`,
      { component: id, field },
    )
  }
  return new ComponentError(
    'BAD_RESULT',
    `${what} returned ${describe(answer)}: it must return true or false (any other value is not taken for a yes or a no)`,
    { component: id, field },
  )
}

/**
 * Handles the rejection of `answer` when it is a promise a predicate that ended its event
 * returned (an `async` one that ended it before its first `await`): the call fails for the end,
 * and nobody awaits the promise, whose rejection must not go unhandled. Anything else: nothing.
 */
export function dropAnswer(answer: unknown): void {
  if (isThenable(answer)) ignoreRejection(answer)
}

/**
 * The `BAD_RESULT` error for a predicate (`what`) that ended the event it was asked about, naming
 * the component `id` and `field`. The event's status stays what the predicate ended it with.
 */
export function predicateEnded(id: string, field: string, what: string): ComponentError<'BAD_RESULT'> {
  return new ComponentError(
    'BAD_RESULT',
    `${what} ended the event it was asked about; it must only answer true or false (the event keeps the status it was ended with)`,
    { component: id, field },
  )
}

/** A short description of a value: its type, and the value itself for a primitive. */
function describe(value: unknown): string {
  if (value === null || value === undefined) return String(value)
  switch (typeof value) {
    case 'string':
      return `a string (${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)})`
    case 'number':
    case 'bigint':
      return `a ${typeof value} (${String(value)})`
    case 'object':
      return isArray(value) ? 'an array' : 'an object'
    default:
      return `a ${typeof value}`
  }
}

/** `Array.isArray`, false for what it throws on (a revoked Proxy). */
function isArray(value: unknown): boolean {
  try {
    return Array.isArray(value)
  } catch {
    return false
  }
}
