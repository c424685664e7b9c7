/**
 * The child side of a crash loop ({@link crashLoop}): a pipeline under test tells the parent what
 * it did — "delivered 5", "acked 3 (ids a, b, c)" — so the parent kills it at points chosen by what
 * happened, not by a clock.
 *
 * Invariant: a report is one line on standard output, written synchronously before the call
 * returns, so whatever the child reported happened before the parent read it, and a report made
 * before a SIGKILL is either whole in the pipe or not there at all (the parent ignores a cut line).
 * Report only what is done: a sink reports after its write resolved, a source after its upstream
 * was told.
 *
 * The line protocol, for a child not written in JavaScript:
 * `@ackline/testkit:crash <kind> <count>[ <JSON array of keys>]`, where `kind` is a word
 * (`delivered`, `acked`) and `count` a non-negative integer to add to that kind's total. A last
 * line without its newline counts when the child exits on its own, never after the loop's kill.
 * A line `@ackline/testkit:crash-finished` says the child has finished its whole input
 * ({@link CrashReporter.finished}).
 *
 * @module
 */
import { writeSync } from 'node:fs'
import type { EventArray, LogEvent } from '@ackline/core'
import { ComponentError, type Sink } from '@ackline/topology'
import { classifyResult } from './internal/classifyResult.js'
import { describeThrown } from './internal/describeThrown.js'
import { forwardMembers, SINK_MEMBERS } from './internal/forwardMembers.js'

/** The marker that starts a report line; anything before it on the line is ignored. */
export const CRASH_REPORT_PREFIX = '@ackline/testkit:crash '

/**
 * The line a child prints once it has finished its whole input ({@link CrashReporter.finished});
 * anything before it on the line is ignored.
 */
export const CRASH_FINISHED_LINE = '@ackline/testkit:crash-finished'

const KIND = /^[A-Za-z][\w-]*$/

/** Writes `text` to standard output now: a pipe may be non-blocking, so wait out `EAGAIN`. */
function printNow(text: string): void {
  const bytes = Buffer.from(text)
  for (let done = 0; done < bytes.length; ) {
    try {
      done += writeSync(1, bytes, done)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error
    }
  }
}

/** Options of {@link CrashReporter.sink}. */
export interface CrashReportingSinkOptions {
  /** The kind reported (default `'delivered'`). */
  readonly kind?: string
  /**
   * The key of each delivered event, reported with the count so the parent can check it was
   * stored. It is called on every event of a write before the inner sink sees them (a sink may
   * change or end its events), and must return a string or a number for each event the write
   * reports `delivered` (what it returns for one the sink rejected or errored is not used): one
   * that returns anything else or throws for a delivered event fails that write once the inner
   * sink resolved, with an error naming this option, so nothing is reported for it (retried and
   * then `errored` by the runtime, never `rejected`: the records are fine).
   */
  readonly key?: (event: LogEvent) => string | number
}

/**
 * Reports progress from a child process to the {@link crashLoop} that runs it.
 *
 * @example
 * ```ts
 * // in the child (your pipeline script):
 * builder.sink('db', ['in'], CrashReporter.sink(mySink(), { key: (e) => String(e.get('id')) }))
 * // or by hand, after something became durable:
 * CrashReporter.delivered(['id-1', 'id-2'])
 * ```
 */
export const CrashReporter = {
  /**
   * Reports `what` under `kind`: a count to add, or keys (their number is added, and the parent
   * keeps them per round). Throws a `TypeError` naming the field for a bad kind, count or key.
   */
  report(kind: string, what: number | readonly (string | number)[]): void {
    if (!KIND.test(kind)) throw new TypeError(`CrashReporter: 'kind' must be a word, got '${kind}'`)
    if (typeof what === 'number') {
      if (!Number.isSafeInteger(what) || what < 0)
        throw new TypeError(
          `CrashReporter: the count of '${kind}' must be a non-negative integer, got ${what}`,
        )
      if (what > 0) printNow(`${CRASH_REPORT_PREFIX}${kind} ${what}\n`)
      return
    }
    const keys = what.map((key) => {
      if (typeof key !== 'string' && typeof key !== 'number')
        throw new TypeError(
          `CrashReporter: a key of '${kind}' must be a string or a number, got ${typeof key}`,
        )
      return String(key)
    })
    if (keys.length > 0) printNow(`${CRASH_REPORT_PREFIX}${kind} ${keys.length} ${JSON.stringify(keys)}\n`)
  },

  /**
   * Tells the loop that this child has finished its whole input (every record read, delivered and
   * reported); the child then exits with code 0 on its own. A killed round whose
   * child said so and then exits with code 0 before its kill point ends `exited` (nothing was left
   * to crash on: an earlier run delivered the rest before its kill landed), where an exit without
   * it fails the loop with `CHILD_EXITED`. Call it where the pipeline knows its input ran out and
   * was delivered (a source whose last record's receipt said `delivered`), not merely after
   * `topology.done`, which resolves when a source failed too: a pipeline that gave up would pass.
   */
  finished(): void {
    printNow(`${CRASH_FINISHED_LINE}\n`)
  },

  /** `report('delivered', what)`. */
  delivered(what: number | readonly (string | number)[]): void {
    CrashReporter.report('delivered', what)
  },

  /**
   * Wraps `sink` so that, after each write resolved, it reports the events the write reported
   * `delivered` (their keys with `options.key`). What it reports is the sink's claim; a crash loop
   * then checks that the claim survives a SIGKILL. The wrapper changes nothing else: every call,
   * result and error passes through, and the sink's `concurrency` and `canAcknowledge` (own or on
   * its prototype) are the wrapper's.
   */
  sink(sink: Sink, options: CrashReportingSinkOptions = {}): Sink {
    const kind = options.kind ?? 'delivered'
    if (!KIND.test(kind)) throw new TypeError(`CrashReporter.sink: 'kind' must be a word, got '${kind}'`)
    const key = options.key
    if (key !== undefined && typeof key !== 'function')
      throw new TypeError(`CrashReporter.sink: 'key' must be a function, got ${typeof key}`)
    // A key that cannot be read is the test's bug, not the record's: a plain ComponentError, which
    // the runtime retries and then settles `errored` (a TypeError would read as `rejected`).
    const badKey = (index: number, length: number, text: string, cause?: unknown) =>
      new ComponentError(
        'BAD_KEY',
        `CrashReporter.sink's 'key' ${text} for event ${index} of ${length}, which the write reported delivered; it must return a string or a number for every event a write delivers`,
        { component: sink.kind, field: 'key', ...(cause === undefined ? {} : { cause }) },
      )
    // Read before the write (a sink may change or end its events), but held: only the keys of the
    // events the write delivered are reported, so a record the sink rejects (one that lacks the
    // key's field, say) does not fail the records written with it.
    const keysOf = (events: EventArray, pick: (event: LogEvent) => string | number) =>
      events.events.map((event, i): string | number | ComponentError => {
        let value: unknown
        try {
          value = pick(event)
        } catch (error) {
          return badKey(i, events.length, `threw ${describeThrown(error)}`, error)
        }
        if (typeof value === 'string' || typeof value === 'number') return value
        return badKey(i, events.length, `returned ${value === null ? 'null' : typeof value}`)
      })
    return {
      ...forwardMembers(sink, SINK_MEMBERS),
      kind: sink.kind,
      async write(events) {
        const keys = key === undefined ? undefined : keysOf(events, key)
        const result = await sink.write(events)
        const statuses = classifyResult(result, events.length)
        const delivered = (_: unknown, i: number) => statuses[i] === 'delivered'
        if (keys === undefined) CrashReporter.report(kind, statuses.filter(delivered).length)
        else {
          const reported = keys.filter(delivered)
          const bad = reported.find((k) => k instanceof ComponentError)
          if (bad !== undefined) throw bad
          CrashReporter.report(kind, reported as (string | number)[])
        }
        return result
      },
    }
  },
} as const
