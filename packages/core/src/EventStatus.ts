/**
 * The status of one event, folded over every copy of it.
 *
 * Invariant: statuses only move up the lattice
 * `dropped → delivered < errored < rejected → recorded`. `recorded` absorbs everything (an
 * authoritative sink already told the source); `dropped` (no sink has spoken yet) takes whatever
 * comes. Moving back *to* `dropped` is a programming error.
 *
 * @module
 */
import { FinalizationError } from './FinalizationError.js'
import { EVENT_STATUS_NAMES, EVENT_UPDATE, eventStatusCode } from './internal/statusCodes.js'

/**
 * What became of one event.
 * - `dropped`: no sink has reported anything (a transform discarded every copy, or none ended yet);
 * - `delivered`: a sink delivered it;
 * - `errored`: a sink failed to deliver it and the upstream may retry;
 * - `rejected`: a sink refused it and no retry will help;
 * - `recorded`: its status was already sent to its batches by an authoritative sink, and later
 *   updates are ignored.
 */
export type EventStatus = 'dropped' | 'delivered' | 'errored' | 'rejected' | 'recorded'

/** The status a sink reports for an event it handled: the three outcomes of delivery. */
export type DeliveryStatus = 'delivered' | 'errored' | 'rejected'

let strict = defaultStrictness()

function defaultStrictness(): boolean {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env
  // Only an explicit request: a library that checked NODE_ENV would behave differently in tests than
  // in production, which is what tests are meant to rule out.
  return env?.ACKLINE_STRICT === '1'
}

/**
 * Companion of the {@link EventStatus} type.
 *
 * @example
 * ```ts
 * EventStatus.update('delivered', 'errored') // 'errored'
 * EventStatus.update('dropped', 'rejected')  // 'rejected'
 * EventStatus.update('recorded', 'errored')  // 'recorded'
 * ```
 */
export const EventStatus = {
  /** Every status, in lattice order. */
  values: [
    'dropped',
    'delivered',
    'errored',
    'rejected',
    'recorded',
  ] as const satisfies readonly EventStatus[],

  /**
   * Folds `next` into `current`: `recorded` on either side gives `recorded`; from `dropped`, `next`
   * wins; otherwise the worse of the two (delivered < errored < rejected).
   *
   * An update *to* `dropped` from any other status is a programming error: the status stays
   * `current`, and in strict mode (see {@link EventStatus.setStrict}) a {@link FinalizationError}
   * with code `INVALID_STATUS_UPDATE` is thrown. A `current` or `next` that is no status (from
   * untyped code) throws a `FinalizationError` with code `INVALID_STATUS`, in either mode.
   */
  update(current: EventStatus, next: EventStatus): EventStatus {
    // Codes first: a value that is no status throws, never passed on as if it were one. The
    // table is the lattice's (derived from its one exhaustive match), without the match's cost.
    const result = EVENT_UPDATE[eventStatusCode(current) * 5 + eventStatusCode(next)]!
    if (result >= 0) return EVENT_STATUS_NAMES[result]!
    if (strict) {
      throw new FinalizationError(
        'INVALID_STATUS_UPDATE',
        `cannot update an event's status from '${current}' back to 'dropped'`,
      )
    }
    return current
  },

  /**
   * Whether invalid updates throw. Off unless `ACKLINE_STRICT=1` was set when `@ackline/core` loaded
   * (`NODE_ENV` plays no part) or {@link EventStatus.setStrict} turned it on.
   */
  isStrict(): boolean {
    return strict
  },

  /** Turns strict mode on or off for the whole process; returns the previous setting. */
  setStrict(enabled: boolean): boolean {
    const previous = strict
    strict = enabled
    return previous
  },
} as const
