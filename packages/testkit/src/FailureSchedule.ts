/**
 * A failure schedule and the sink wrapper that follows it: make any sink slow, flaky or failing
 * on a schedule, deterministically (the schedule counts calls and reads fields; no randomness).
 *
 * Invariant: the wrapper never ends events and never changes what the inner sink reports for a
 * write it lets through; it only throws before the inner write, hangs before it, or turns the
 * scheduled records' entries into `RejectError`s.
 *
 * @module
 */

import { inspect } from 'node:util'
import type { JsonValue } from '@ackline/core'
import { MAX_TIMER_MS, RejectError, RetryableError, type Sink } from '@ackline/topology'
import { forwardMembers, SINK_MEMBERS } from './internal/forwardMembers.js'

/** When and how a {@link faultySink} fails. */
export interface FailureSchedule {
  /** Write calls (1-based, counting retries) that throw a `RetryableError` before writing. */
  readonly errorOnCalls: readonly number[]
  /** Records rejected (one `RejectError` entry each): those whose `field` value modulo `modulo` is 0. */
  readonly rejectWhen?: { readonly field: string; readonly modulo: number } | undefined
  /** How long every write waits before it runs, in milliseconds (0: none). */
  readonly hangMs: number
}

/** No fault: the inner sink as it is. */
export const NO_FAULTS: FailureSchedule = { errorOnCalls: [], hangMs: 0 }

/** `faults` in one line: `errors on calls 2, 3; rejects n % 3 == 0; hangs 20 ms`. */
export function describeSchedule(faults: FailureSchedule): string {
  const parts = [
    faults.errorOnCalls.length > 0 ? `errors on calls ${faults.errorOnCalls.join(', ')}` : undefined,
    faults.rejectWhen === undefined
      ? undefined
      : `rejects ${faults.rejectWhen.field} % ${faults.rejectWhen.modulo} == 0`,
    faults.hangMs > 0 ? `hangs ${faults.hangMs} ms` : undefined,
  ].filter((p) => p !== undefined)
  return parts.length === 0 ? 'no faults' : parts.join('; ')
}

const matches = (value: JsonValue | undefined, modulo: number): boolean =>
  typeof value === 'number' && value % modulo === 0

/**
 * Refuses a schedule the wrapper cannot follow, naming the field: read at the first write, a
 * missing `errorOnCalls` would throw a `TypeError` there, which the runtime reads as every event
 * rejected; a `hangMs` past what a timer holds would fire at once.
 */
function checkSchedule(faults: FailureSchedule): void {
  const calls: unknown = faults?.errorOnCalls
  if (!Array.isArray(calls) || !calls.every((n) => Number.isSafeInteger(n) && n >= 1))
    throw new TypeError(
      `faultySink: 'errorOnCalls' must be an array of write call numbers (1 or more), got ${inspect(calls)}`,
    )
  const hang: unknown = faults.hangMs
  if (typeof hang !== 'number' || !(hang >= 0 && hang <= MAX_TIMER_MS))
    throw new RangeError(
      `faultySink: 'hangMs' must be a number from 0 to ${MAX_TIMER_MS}, got ${inspect(hang)}`,
    )
  const reject = faults.rejectWhen
  if (
    reject !== undefined &&
    (typeof reject?.field !== 'string' || !Number.isSafeInteger(reject.modulo) || reject.modulo < 1)
  )
    throw new TypeError(
      `faultySink: 'rejectWhen' must be { field: string, modulo: a whole number >= 1 }, got ${inspect(reject)}`,
    )
}

/**
 * Wraps `sink` so it fails on `faults`. Hangs use `setTimeout`, so they follow fake timers.
 * Throws a `TypeError` or `RangeError` naming the field of a schedule it cannot follow.
 *
 * @example
 * ```ts
 * builder.sink('db', ['in'], faultySink(mySink(), { errorOnCalls: [1], hangMs: 0 }), { retry: { attempts: 3, initialBackoffMs: 0 } })
 * ```
 */
export function faultySink(sink: Sink, faults: FailureSchedule): Sink & { readonly calls: number } {
  checkSchedule(faults)
  let calls = 0
  return {
    ...sink,
    ...forwardMembers(sink, SINK_MEMBERS),
    kind: sink.kind,
    get calls() {
      return calls
    },
    async write(events) {
      // This call's number, taken before the hang: writes overlapping it (a sink with concurrency)
      // move the counter on meanwhile.
      const call = ++calls
      if (faults.hangMs > 0) await new Promise((resolve) => setTimeout(resolve, faults.hangMs))
      if (faults.errorOnCalls.includes(call)) {
        throw new RetryableError(sink.kind, `scheduled failure on write call ${call}`)
      }
      const reject = faults.rejectWhen
      const flags = events.events.map(
        (e) => reject !== undefined && matches(e.get(reject.field), reject.modulo),
      )
      const result = await sink.write(events)
      if (!flags.includes(true)) return result
      // A malformed result is passed on as it is, for the runtime to settle errored (BAD_RESULT):
      // filling its gaps with `delivered` would hide the inner sink's bug behind a wrong ack.
      if (result !== undefined && (!Array.isArray(result) || result.length !== events.length)) return result
      // Every other entry as the inner sink gave it: one that is no status (null, a hole) stays
      // one, for the runtime to settle errored, never filled in with `delivered`.
      return events.events.map((_, i) =>
        flags[i]
          ? new RejectError(sink.kind, `scheduled rejection of ${reject!.field}`)
          : result === undefined
            ? 'delivered'
            : result[i]!,
      )
    },
  }
}
