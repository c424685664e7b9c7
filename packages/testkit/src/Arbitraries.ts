/**
 * fast-check arbitraries for delivery tests: records, batches, statuses per event, and failure
 * schedules a {@link faultySink} follows. Random topologies are in {@link RandomTopology}.
 *
 * Invariant: every arbitrary is built from fast-check combinators only, so it shrinks: a failing
 * case shrinks towards fewer, smaller batches, `delivered` statuses and no faults.
 *
 * @module
 */
import type { DeliveryStatus, JsonObject } from '@ackline/core'
import fc from 'fast-check'
import type { FailureSchedule } from './FailureSchedule.js'

/**
 * The arbitraries.
 *
 * @example
 * ```ts
 * fc.assert(fc.asyncProperty(Arbitraries.batches(), Arbitraries.failureSchedule(), async (batches, schedule) => { … }))
 * ```
 */
export const Arbitraries = {
  /** A small log record: a sequence number `n`, a `level` and a `message` (shrinks to `{ n: 0, … }`). */
  record(): fc.Arbitrary<JsonObject> {
    return fc.record({
      n: fc.nat(1000),
      level: fc.constantFrom('info', 'warn', 'error'),
      message: fc.string({ maxLength: 20 }),
    })
  },

  /**
   * Batches of records, each record's `n` its position across all batches (so keys are distinct
   * and order is checkable). Shrinks to fewer and smaller batches.
   */
  batches(options: { maxBatches?: number; maxSize?: number } = {}): fc.Arbitrary<JsonObject[][]> {
    return fc
      .array(fc.array(Arbitraries.record(), { minLength: 1, maxLength: options.maxSize ?? 4 }), {
        minLength: 1,
        maxLength: options.maxBatches ?? 3,
      })
      .map((batches) => {
        let n = 0
        return batches.map((batch) => batch.map((record) => ({ ...record, n: n++ })))
      })
  },

  /** A delivery status, `delivered` twice as likely (shrinks to `delivered`). */
  deliveryStatus(): fc.Arbitrary<DeliveryStatus> {
    return fc.constantFrom<DeliveryStatus>('delivered', 'delivered', 'errored', 'rejected')
  },

  /**
   * A status per event position, cycled: `assignment[n % length]` is what a sink reports for
   * the event numbered `n`.
   */
  statusAssignment(length = 5): fc.Arbitrary<DeliveryStatus[]> {
    return fc.array(Arbitraries.deliveryStatus(), { minLength: length, maxLength: length })
  },

  /**
   * A failure schedule: which write calls throw (1-based), which records a sink rejects (by `n`
   * modulo), and how long writes hang. Shrinks to no fault at all.
   */
  failureSchedule(options: { maxCalls?: number; maxHangMs?: number } = {}): fc.Arbitrary<FailureSchedule> {
    return fc.record({
      errorOnCalls: fc.uniqueArray(fc.integer({ min: 1, max: options.maxCalls ?? 6 }), { maxLength: 3 }),
      rejectWhen: fc.option(fc.record({ field: fc.constant('n'), modulo: fc.integer({ min: 2, max: 5 }) }), {
        nil: undefined,
      }),
      hangMs: fc.constantFrom(0, 0, 1, options.maxHangMs ?? 20),
    })
  },
} as const
