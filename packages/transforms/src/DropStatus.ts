/**
 * What a transform's discard means to the sources of the discarded event.
 *
 * Invariant: a discard is never silent. `'delivered'` (the default) says the event was processed
 * as the user asked, so its batch may still be acknowledged; `'rejected'` says the event must not
 * count as delivered, so its batch resolves `rejected`. Either way the runtime counts the discard.
 *
 * @module
 */
import { type ConfigIssue, defineOptions } from '@ackline/topology'
import { z } from 'zod'

const schema = z.enum(['delivered', 'rejected'])

/** How a dropping transform settles what it discards. */
export type DropStatus = z.infer<typeof schema>

const option = schema
  .optional()
  .describe("What a discard means to the event's sources: `delivered` (the default) or `rejected`.")

const DropStatusOption = defineOptions({ dropStatus: option })

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

  /** The `dropStatus` option, for the options schema of a dropping transform (`defineOptions`). */
  option,

  /** Issues with a `dropStatus` option (none when it is unset or one of {@link DropStatus.values}). */
  validate(value: unknown, field = 'dropStatus'): ConfigIssue[] {
    return DropStatusOption.validate({ dropStatus: value }).map((issue) => ({ ...issue, field }))
  },
} as const
