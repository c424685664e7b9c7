/**
 * fast-check arbitraries for delivery tests: records, batches, statuses per event, and failure
 * schedules a {@link faultySink} follows. Random topologies are in {@link RandomTopology}.
 *
 * Invariant: every arbitrary is built from fast-check combinators only, so it shrinks: a failing
 * case shrinks towards fewer, smaller batches, plain values, `delivered` statuses and no faults.
 * Every value drawn is one an event may carry (RFC 0010): JSON that `JSON.stringify` writes and
 * `JSON.parse` reads back deeply equal (no `NaN`, no `-0`, no `undefined`, plain objects only), so
 * what a sink stored can be compared with what was sent.
 *
 * @module
 */
import type { DeliveryStatus, JsonObject, JsonValue } from '@ackline/core'
import { MAX_TIMER_MS } from '@ackline/topology'
import fc from 'fast-check'
import type { FailureSchedule } from './FailureSchedule.js'

/** Options of {@link Arbitraries.jsonValue} and of the text and payload of {@link Arbitraries.record}. */
export interface JsonValueOptions {
  /**
   * How deep objects and arrays nest (default 4; 0: primitives only; a whole number, else a
   * `RangeError` naming it). Deeper values are rarer, as fast-check draws them.
   */
  readonly maxDepth?: number
  /**
   * Whether strings may hold a lone surrogate (an unpaired UTF-16 half, default true). An event
   * can carry one (`JSON.parse('"\\ud800"')` makes it, `JSON.stringify` writes it escaped), but a
   * store that holds only well-formed Unicode (UTF-8 text columns, a `Buffer` written as UTF-8)
   * turns it into U+FFFD without a word: such a sink should reject the record. Set false when your
   * property is not about that.
   */
  readonly loneSurrogates?: boolean
}

/** Options of {@link Arbitraries.record}. */
export interface RecordOptions extends JsonValueOptions {
  /**
   * Whether the record has a `payload` field: any JSON value (deep objects and arrays, numbers of
   * every size, any Unicode text, keys such as `__proto__` or `a.b`). Default true; false gives
   * the small log record alone.
   */
  readonly payload?: boolean
}

/**
 * One UTF-16 code unit or character of a string: mostly ASCII, then any code point (astral ones
 * as surrogate pairs), and, with `loneSurrogates`, now and then an unpaired surrogate.
 */
function stringUnit(loneSurrogates: boolean): fc.Arbitrary<string> {
  const units = [
    { arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 }), weight: 14 },
    { arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }), weight: 5 },
  ]
  if (loneSurrogates)
    units.push({
      arbitrary: fc.integer({ min: 0xd800, max: 0xdfff }).map((u) => String.fromCharCode(u)),
      weight: 1,
    })
  return fc.oneof(...units)
}

/**
 * `value` (option `field` of `Arbitraries.<where>`), or its default when absent; a `RangeError`
 * naming both when it is no whole number from `min` to `max` (checked here: fast-check's own error
 * names no option, and a bound it does not check, such as a depth of NaN, would be drawn past).
 */
function bound(
  where: string,
  field: string,
  value: unknown,
  fallback: number,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
  whole = true,
): number {
  if (value === undefined) return fallback
  if (
    typeof value === 'number' &&
    (whole ? Number.isSafeInteger(value) : Number.isFinite(value)) &&
    value >= min &&
    value <= max
  )
    return value
  throw new RangeError(
    `Arbitraries.${where}: '${field}' must be ${whole ? 'a whole number' : 'a number'} from ${min}${max === Number.MAX_SAFE_INTEGER ? ' up' : ` to ${max}`}, got ${typeof value === 'number' ? String(value) : typeof value}`,
  )
}

/**
 * The arbitraries.
 *
 * @example
 * ```ts
 * fc.assert(fc.asyncProperty(Arbitraries.batches(), Arbitraries.failureSchedule(), async (batches, schedule) => { … }))
 * ```
 */
export const Arbitraries = {
  /**
   * Any value an event may carry in a field (RFC 0010): `null`, booleans, finite numbers (never
   * `-0`, which JSON writes as `0`), strings of any Unicode (lone surrogates unless turned off),
   * arrays and plain objects nested up to `maxDepth`. Shrinks towards a primitive (`false`).
   *
   * @example
   * ```ts
   * fc.sample(Arbitraries.jsonValue({ maxDepth: 2 }), 3) // e.g. [null, { "a": [1.5, "\ud800"] }, "é"]
   * ```
   */
  jsonValue(options: JsonValueOptions = {}): fc.Arbitrary<JsonValue> {
    const maxDepth = bound('jsonValue', 'maxDepth', options.maxDepth, 4, 0)
    const unit = stringUnit(options.loneSurrogates ?? true)
    return (
      fc
        .jsonValue({ maxDepth, stringUnit: unit })
        // Through JSON once, so the value is exactly what a sink that serializes it reads back.
        .map((value) => JSON.parse(JSON.stringify(value)) as JsonValue)
    )
  },

  /**
   * A log record: a sequence number `n`, a `level`, a `message` (any Unicode, as
   * {@link Arbitraries.jsonValue} draws strings) and, unless `payload: false`, a `payload` of any
   * JSON value. Shrinks to `{ n: 0, level: 'info', message: '', payload: false }`.
   */
  record(options: RecordOptions = {}): fc.Arbitrary<JsonObject> {
    bound('record', 'maxDepth', options.maxDepth, 4, 0)
    const base = {
      n: fc.nat(1000),
      level: fc.constantFrom('info', 'warn', 'error'),
      message: fc.string({ maxLength: 20, unit: stringUnit(options.loneSurrogates ?? true) }),
    }
    if (options.payload === false) return fc.record(base)
    return fc.record({ ...base, payload: Arbitraries.jsonValue(options) })
  },

  /**
   * Batches of records, each record's `n` its position across all batches (so keys are distinct
   * and order is checkable). A batch may be empty (a source may send nothing, as a poll that found
   * nothing does) unless `minSize` is 1; there is always at least one batch. Records are drawn by
   * {@link Arbitraries.record} with the same options. Shrinks to fewer and smaller batches.
   * `minSize` (default 0), `maxSize` (default 4, at least `minSize`: a `minSize` above 4 needs a
   * `maxSize`) and `maxBatches` (default 3, at least 1) are whole numbers; anything else is a
   * `RangeError` naming the option.
   */
  batches(
    options: RecordOptions & { maxBatches?: number; minSize?: number; maxSize?: number } = {},
  ): fc.Arbitrary<JsonObject[][]> {
    const minSize = bound('batches', 'minSize', options.minSize, 0, 0)
    if (options.maxSize === undefined && minSize > 4)
      throw new RangeError(
        `Arbitraries.batches: 'minSize' ${minSize} is above the default 'maxSize' (4): pass a 'maxSize' of ${minSize} or more`,
      )
    const maxSize = bound('batches', 'maxSize', options.maxSize, 4, minSize)
    const maxBatches = bound('batches', 'maxBatches', options.maxBatches, 3, 1)
    return fc
      .array(fc.array(Arbitraries.record(options), { minLength: minSize, maxLength: maxSize }), {
        minLength: 1,
        maxLength: maxBatches,
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
   * the event numbered `n`. `length` is a whole number of 1 or more, else a `RangeError` (an empty
   * assignment has no status for any event: `n % 0` is `NaN`).
   */
  statusAssignment(length = 5): fc.Arbitrary<DeliveryStatus[]> {
    if (!Number.isSafeInteger(length) || length < 1)
      throw new RangeError(
        `Arbitraries.statusAssignment: 'length' must be a whole number of 1 or more, got ${String(length)}`,
      )
    return fc.array(Arbitraries.deliveryStatus(), { minLength: length, maxLength: length })
  },

  /**
   * A failure schedule: which write calls throw (1-based), which records a sink rejects (by `n`
   * modulo, from 2 to 5, or 1: every record, unless `rejectAll: false`), and how long writes
   * hang. Shrinks to no fault at all (a rejection shrinks to a modulo of 2 before it goes).
   * `maxCalls` (default 6) is a whole number of 1 or more, `maxHangMs` (default 20, never exceeded)
   * a number from 0 to 2^31 - 1, as {@link faultySink} takes; anything else is a `RangeError`.
   */
  failureSchedule(
    options: { maxCalls?: number; maxHangMs?: number; rejectAll?: boolean } = {},
  ): fc.Arbitrary<FailureSchedule> {
    const maxCalls = bound('failureSchedule', 'maxCalls', options.maxCalls, 6, 1)
    const maxHangMs = bound('failureSchedule', 'maxHangMs', options.maxHangMs, 20, 0, MAX_TIMER_MS, false)
    const modulo =
      options.rejectAll === false
        ? fc.integer({ min: 2, max: 5 })
        : fc.oneof(
            { arbitrary: fc.integer({ min: 2, max: 5 }), weight: 3 },
            { arbitrary: fc.constant(1), weight: 1 },
          )
    return fc.record({
      errorOnCalls: fc.uniqueArray(fc.integer({ min: 1, max: maxCalls }), { maxLength: 3 }),
      rejectWhen: fc.option(fc.record({ field: fc.constant('n'), modulo }), {
        nil: undefined,
      }),
      hangMs: fc.constantFrom(0, 0, Math.min(1, maxHangMs), maxHangMs),
    })
  },
} as const
