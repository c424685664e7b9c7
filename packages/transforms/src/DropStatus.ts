/**
 * What a transform's discard means to the sources of the discarded event.
 *
 * Invariant: a discard is never silent. `'delivered'` (the default) says the event was processed
 * as the user asked, so its batch may still be acknowledged; `'rejected'` says the event must not
 * count as delivered, so its batch resolves `rejected`. Either way the runtime counts the discard.
 *
 * @module
 */
import type { ConfigIssue } from '@ackline/topology'

/** How a dropping transform settles what it discards. */
export type DropStatus = 'delivered' | 'rejected'

/**
 * Companion of the {@link DropStatus} type.
 *
 * @example
 * ```ts
 * DropStatus.default                       // 'delivered'
 * DropStatus.validate('lost', 'dropStatus') // [{ field: 'dropStatus', message: … }]
 * ```
 */
export const DropStatus = {
  /** Every drop status. */
  values: ['delivered', 'rejected'] as const satisfies readonly DropStatus[],

  /** The status of a discard when a transform's options do not say. */
  default: 'delivered' as DropStatus,

  /** Issues with a `dropStatus` option (none when it is unset or one of {@link DropStatus.values}). */
  validate(value: unknown, field = 'dropStatus'): ConfigIssue[] {
    if (value === undefined || value === 'delivered' || value === 'rejected') return []
    return [
      { field, message: `must be 'delivered' or 'rejected', got ${JSON.stringify(value) ?? String(value)}` },
    ]
  },
} as const
