/**
 * Re-sending only what failed: the plumbing a source that asks for per-record outcomes would
 * otherwise hand-write.
 *
 * Invariant: every record given to {@link RecordRetry.send} ends with exactly one final outcome:
 * `delivered` or `dropped` (done), `rejected` (reported once to `onRejected`, never re-sent), or
 * still `errored` after the last attempt (handed once to `onExhausted`, whose decision is
 * returned). Only errored records are re-sent, each attempt after a back-off with jitter, so a
 * sink never sees again a record that every sink finished. A record a fan-out delivered to one
 * sink and errored at another is re-sent whole, and the healthy sink sees it twice
 * (at-least-once). Every attempt sends each record as it was given: a retry sends a fresh copy of
 * it, taken before the first send, since a sent record becomes its event's fields and a transform
 * may change those in place (re-sending the sent object sent it transformed twice).
 *
 * @module
 */
import type { JsonObject, RecordOutcome } from '@ackline/core'
import type { BatchFailure } from './BatchFailure.js'
import { ComponentError } from './ComponentError.js'
import { ConfigIssue } from './ConfigIssue.js'
import { MAX_TIMER_MS } from './internal/maxTimerMs.js'
import { recordCopy } from './internal/recordCopy.js'
import type { RetryPolicy } from './RetryPolicy.js'
import type { SourceContext } from './Source.js'

/** What a source decides for records still errored after the last attempt. */
export type RetryDecision = 'dead_letter' | 'nack'

/** Why records reached `onExhausted`: the attempts ran out, or the topology is stopping. */
export type ExhaustedReason = 'attempts' | 'stopped'

/** One record handed to a callback, with its index in the records first sent. */
export interface IndexedRecord {
  /** The record's index in the records first sent (0-based). */
  readonly index: number
  /**
   * The record as it was given to {@link RecordRetry.send}: a copy taken before the first send
   * (or what {@link RecordRetryOptions.remake} made), not the object given. A sent record becomes its event's fields (`EventArray.fromRecords`), and
   * a transform that changes fields in place (`event.set`, `event.remove`) changes that object; the
   * copy holds what the source put there. Only plain objects and arrays are copied: any other value
   * in it (a `Date`, a `Map`, a class instance, not JSON) is the record's own object. An object held
   * at two places in the record (or inside itself, a cycle) is copied once, held at the same
   * places. Their own enumerable string keys are copied, as JSON writes them (a symbol or a
   * non-enumerable key is not in the copy, a getter's value is copied as data). A record that
   * cannot be copied (a getter that throws) is the object given, as sent.
   */
  readonly record: JsonObject
  /**
   * For a rejected record: the failure of the batch it was rejected in (`receipt.failure`), which
   * names the component, code and message that gave that batch its status. Outcomes are kept per
   * record but reasons per batch, so with several rejections in one batch it names the first.
   */
  readonly failure?: BatchFailure | undefined
}

/** Options of {@link RecordRetry.send}. */
export interface RecordRetryOptions extends RetryPolicy {
  /**
   * How much of each back-off is random, 0 to 1 (default 0.5): the delay is
   * `backoff * (1 - jitter + jitter * random())`, so sources retrying at once spread out.
   */
  readonly jitter?: number
  /**
   * Called once with the records rejected at any attempt (not called when there are none), each
   * `record` as it was given to `send`, however a transform changed the sent one (see
   * {@link IndexedRecord.record}).
   */
  readonly onRejected?: (records: readonly IndexedRecord[]) => void | Promise<void>
  /**
   * Called once with the records still errored after the last attempt (or when the signal aborts
   * during a back-off), each as it was given to `send`; returns what the source does with them: `'dead_letter'` or `'nack'`
   * (nothing returned means `'nack'`). Anything else (`'ack'`, a typo) makes `send` reject with a
   * `ComponentError` (`BAD_RESULT`, field `onExhausted`): a caller that acks on all but `'nack'`
   * would ack records no sink took. Default: `'nack'`.
   */
  readonly onExhausted?: (
    records: readonly IndexedRecord[],
    reason: ExhaustedReason,
  ) => RetryDecision | Promise<RetryDecision>
  /** The source of randomness for the jitter (default `Math.random`); tests pass their own. */
  readonly random?: () => number
  /**
   * Makes the record at `index` of the records given to `send` anew, as it was given: a source
   * that keeps what it read (a line's text and offset) rebuilds a record for less than a copy
   * costs. When given, `send` copies nothing: each retry sends `remake(index)`, and the callbacks'
   * {@link IndexedRecord.record} is `remake(index)`. It must return a new object on each call (a
   * retry's transforms may change what it returned in place), equal to the record first given.
   */
  readonly remake?: (index: number) => JsonObject
}

/** What {@link RecordRetry.send} reports once every record has its final outcome. */
export interface RecordRetryResult {
  /** Each record's final outcome, in the order of the records given. */
  readonly outcomes: readonly RecordOutcome[]
  /** How many sends were made in all (1 when nothing errored). */
  readonly attempts: number
  /** The decision `onExhausted` returned, or `undefined` when no record was exhausted. */
  readonly decision: RetryDecision | undefined
}

/** The defaults of {@link RecordRetryOptions}: five attempts, 100 ms doubling to 5 s, half jitter. */
const DEFAULTS = { attempts: 5, initialBackoffMs: 100, maxBackoffMs: 5000, multiplier: 2, jitter: 0.5 }

/**
 * Companion of {@link RecordRetryOptions}.
 *
 * @example
 * ```ts
 * const result = await RecordRetry.send(context, records, {
 *   attempts: 4,
 *   onRejected: (rejected) => deadLetter.write(rejected),
 *   onExhausted: () => 'nack',
 * })
 * if (result.decision === 'nack') upstream.nack(batch)
 * else upstream.ack(batch)
 * ```
 */
export const RecordRetry = {
  defaults: DEFAULTS as Readonly<typeof DEFAULTS>,

  /**
   * The delay before attempt `attempt + 1` (1-based `attempt`), jitter applied with `random`; at
   * most 2^31 - 1 ms, the longest a timer waits (a longer delay would fire after 1 ms).
   */
  delayMs(options: RecordRetryOptions, attempt: number, random: number): number {
    // Field by field: an option given as `undefined` (untyped code, a config) means its default.
    const initial = options.initialBackoffMs ?? DEFAULTS.initialBackoffMs
    const max = options.maxBackoffMs ?? DEFAULTS.maxBackoffMs
    const multiplier = options.multiplier ?? DEFAULTS.multiplier
    // 0 · Infinity (the growth past about 1024 attempts, or an Infinity multiplier) is NaN.
    const backoff = initial === 0 ? 0 : Math.min(max, initial * multiplier ** (attempt - 1))
    const jitter = Math.min(1, Math.max(0, options.jitter ?? DEFAULTS.jitter))
    const share = 1 - jitter + jitter * random
    // Infinity · 0 too is NaN: an uncapped back-off grown to Infinity, all of it jitter, random() at 0.
    return share === 0 ? 0 : Math.min(MAX_TIMER_MS, backoff * share)
  },

  /**
   * Sends `records` as one batch with per-record outcomes, then re-sends only the errored ones
   * until none is left or `attempts` sends were made; reports rejected records once and hands
   * exhausted ones to `onExhausted`. The first attempt sends `records` themselves; each retry sends
   * a fresh copy of each record, taken before the first send (see {@link IndexedRecord.record}),
   * so its transforms start from what the source sent. With `attempts: 1` and no callback, or with
   * `remake` (which then makes what a retry sends), nothing is copied; otherwise each send copies
   * every record's objects and arrays once, and each retry again for the records it re-sends. Resolves once every record has its final outcome. Waiting
   * for a back-off ends early when `context.signal` aborts; what is still errored then goes to
   * `onExhausted` with reason `'stopped'`. Options out of their range (`attempts: NaN` or
   * `2.5`, a `jitter` above 1, a string from a config, a callback that is no function) make it
   * reject, before anything is sent, with a `ComponentError` (`INVALID_OPTION`) naming the source
   * and the field.
   */
  async send(
    context: SourceContext,
    records: readonly JsonObject[],
    options: RecordRetryOptions = {},
  ): Promise<RecordRetryResult> {
    checkOptions(context.id, options)
    const attempts = options.attempts ?? DEFAULTS.attempts
    const random = options.random ?? Math.random
    const final: RecordOutcome[] = new Array(records.length).fill('errored')
    const rejected: IndexedRecord[] = []
    // A sent record becomes its event's fields, which transforms may change in place: what a
    // retry re-sends and a callback reads is a copy kept before the first send, or what `remake`
    // makes. Only when a retry or a callback may read it: one attempt and no callback copy nothing.
    const remake = options.remake
    const kept =
      remake === undefined &&
      (attempts > 1 || options.onRejected !== undefined || options.onExhausted !== undefined)
        ? records.map(recordCopy)
        : records
    const original = (index: number): JsonObject => (remake === undefined ? kept[index]! : remake(index))
    let pending = records.map((_, i) => i)
    let attempt = 0
    let reason: ExhaustedReason = 'attempts'
    while (pending.length > 0 && attempt < attempts) {
      if (attempt > 0) {
        const stopped = await sleep(RecordRetry.delayMs(options, attempt, random()), context.signal)
        if (stopped) {
          reason = 'stopped'
          break
        }
      }
      attempt++
      // The first attempt sends the caller's array itself; each retry a fresh copy of what was
      // kept, as that retry's transforms may change theirs in place too.
      const batch =
        attempt === 1
          ? records
          : pending.map((i) => (remake === undefined ? recordCopy(kept[i]!) : remake(i)))
      const receipt = await context.send(batch, { outcomes: true })
      const outcomes = await receipt.outcomes
      const next: number[] = []
      for (let k = 0; k < pending.length; k++) {
        const index = pending[k]!
        // A receipt without outcomes (a source context that ignores the option) is taken at its
        // batch status for every record.
        const outcome: RecordOutcome = outcomes !== undefined ? outcomes.get(k) : await receipt.status
        final[index] = outcome
        switch (outcome) {
          case 'errored':
            next.push(index)
            break
          case 'rejected':
            rejected.push({ index, record: original(index), failure: receipt.failure })
            break
          case 'delivered':
          case 'dropped':
            break
        }
      }
      pending = next
    }
    if (rejected.length > 0) await options.onRejected?.(rejected)
    let decision: RetryDecision | undefined
    if (pending.length > 0) {
      const exhausted = pending.map((index) => ({ index, record: original(index) }))
      const decided: unknown = (await options.onExhausted?.(exhausted, reason)) ?? 'nack'
      if (decided !== 'dead_letter' && decided !== 'nack') {
        // A caller that acks on all but 'nack' (as the example above) would ack records no sink took.
        const { got } = ConfigIssue.of('onExhausted', "'dead_letter' or 'nack'", decided)
        const message = `RecordRetry.send: onExhausted must return 'dead_letter' or 'nack', got ${got}`
        throw new ComponentError('BAD_RESULT', message, { component: context.id, field: 'onExhausted' })
      }
      decision = decided
    }
    return { outcomes: final, attempts: attempt, decision }
  },
} as const

/**
 * Throws the first problem of `options`: unchecked, `attempts: NaN` would send nothing and hand
 * every record to `onExhausted`, and a `NaN` delay would retry after 1 ms.
 */
function checkOptions(sourceId: string, options: RecordRetryOptions): void {
  // By hand, not by `RetryPolicy`'s schema: `attempts: Infinity` (until done) is valid here, and
  // delays are capped by `delayMs`.
  const rules: readonly [keyof RecordRetryOptions, string, (value: unknown) => boolean][] = [
    [
      'attempts',
      'an integer of 1 or more (Infinity: until every record is done)',
      (v) => v === Number.POSITIVE_INFINITY || (Number.isInteger(v) && (v as number) >= 1),
    ],
    ['initialBackoffMs', 'a number of 0 or more', (v) => typeof v === 'number' && v >= 0],
    ['maxBackoffMs', 'a number of 0 or more', (v) => typeof v === 'number' && v >= 0],
    ['multiplier', 'a number of 1 or more', (v) => typeof v === 'number' && v >= 1],
    ['jitter', 'a number from 0 to 1', (v) => typeof v === 'number' && v >= 0 && v <= 1],
    // Called only later (after a send, at exhaustion): a value that is no function threw then.
    ['onRejected', 'a function', (v) => typeof v === 'function'],
    ['onExhausted', 'a function', (v) => typeof v === 'function'],
    ['random', 'a function', (v) => typeof v === 'function'],
    ['remake', 'a function', (v) => typeof v === 'function'],
  ]
  for (const [field, expected, holds] of rules) {
    const value: unknown = options[field]
    if (value === undefined || holds(value)) continue
    const issue = ConfigIssue.of(field, expected, value)
    throw new ComponentError('INVALID_OPTION', `RecordRetry.send: ${issue.message}`, {
      component: sourceId,
      field,
    })
  }
}

/** Waits `ms`; resolves `true` early (and at once) when `signal` is aborted. */
function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(true)
  return new Promise<boolean>((resolve) => {
    const onAbort = () => {
      clearTimeout(timer)
      resolve(true)
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve(false)
    }, ms)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}
