/**
 * The conformance suite of sinks: what every sink must do for the runtime to keep its promise
 * (each event ends exactly once, with the status the sink reported).
 *
 * Invariant: each rule feeds the sink events with live batch notifiers, watches what it does to
 * them, and ends whatever the sink left live itself, as the runtime would, so a rule leaks nothing
 * whatever the sink does.
 *
 * @module
 */
import { inspect } from 'node:util'
import type { DeliveryStatus, JsonObject, LogEvent } from '@ackline/core'
import type { Sink } from '@ackline/topology'
import { TopologyBuilder, TopologyError } from '@ackline/topology'
import { ConformanceError } from './ConformanceError.js'
import {
  type ConformanceRule,
  type ConformanceRunner,
  callWithin,
  namingSteps,
  register,
  runRules,
  within,
} from './ConformanceRunner.js'
import { DeliveryLedger } from './DeliveryLedger.js'
import { classifyError, classifyResult, isValidEntry } from './internal/classifyResult.js'
import { describeThrown } from './internal/describeThrown.js'
import { describeValue } from './internal/describeValue.js'
import { batchOf, defaultRecords, listSource, runTopology } from './internal/fixtures.js'
import { forwardMembers, SINK_MEMBERS } from './internal/forwardMembers.js'
import { matchRecords } from './internal/matchRecords.js'
import { StepFailure } from './internal/StepFailure.js'

/** Options of {@link sinkConformance} and {@link checkSink}. */
export interface SinkConformanceOptions<S extends Sink = Sink> {
  /**
   * Records to write (default: six small log records; at least one, each a JSON object; anything else is refused with a `RangeError` naming it); the sink must be able to
   * deliver them all.
   */
  readonly records?: readonly JsonObject[]
  /**
   * What the sink has stored so far, as records (read back from its file, table or memory). When
   * given, the rules `sink.written-before-resolved` and `sink.flushes-on-stop` run; without it
   * they are skipped, since only the sink's author knows where it writes. Each record sent must
   * be stored as it was sent, once for each time it was sent (two identical records, two stored),
   * compared as JSON values (the order of their keys, an object's prototype, such as the
   * null-prototype rows some drivers read back, and -0 against 0 do not count; a value with
   * `toJSON` is what that returns, as JSON writes it: a `Date` read back matches its ISO string
   * sent, never `{}`).
   * The store may be shared by every rule (one table for all the sinks `make` returns): each rule
   * reads it before its first write and counts only what its own writes added.
   */
  readonly read?: (sink: S) => Promise<readonly JsonObject[]> | readonly JsonObject[]
  /** The test runner's `describe` and `it` (default: those on `globalThis`). */
  readonly runner?: ConformanceRunner
  /**
   * How long `stop()` and a write may take, in milliseconds (default 5000).
   * From 1 to 2^31 - 1, what a timer holds; anything else is refused with a `RangeError` naming it.
   */
  readonly timeoutMs?: number
}

type Subject = { readonly make: () => Sink | Promise<Sink> } & SinkConformanceOptions

const kindOf = (sink: Sink): string => sink.kind

/**
 * A batch whose ends the suite watches (own properties on its handles and array, as the transform
 * suite does); the suite ends what the sink left live with `endBySuite`. An end the sink makes of
 * a handle already ended — late, from a confirm callback after its write returned —
 * is counted and made harmless: it would throw `ALREADY_ENDED` in the sink's callback, an uncaught
 * exception that ends the test process, and the rule could not name the sink.
 */
function watchedBatch(records: readonly JsonObject[]) {
  const { events, receiver } = batchOf(records)
  const ends = { late: 0 }
  let suite = false
  for (const event of events.events) {
    const end = event.end.bind(event)
    Object.defineProperty(event, 'end', {
      value: (...args: Parameters<LogEvent['end']>) => {
        if (suite) return end(...args)
        if (event.isEnded) {
          ends.late++
          return
        }
        end(...args)
      },
    })
  }
  Object.defineProperty(events, 'end', {
    value: (...args: Parameters<LogEvent['end']>) => {
      for (const event of events.events) event.end(...args)
    },
  })
  /** Ends `event` for the suite (as the runtime would), unless it has ended. */
  const endBySuite = (event: LogEvent, status?: DeliveryStatus): void => {
    if (event.isEnded) return
    suite = true
    try {
      event.end(status)
    } finally {
      suite = false
    }
  }
  return { events, receiver, ends, endBySuite }
}

/**
 * `sink` for a topology, with an end it makes of a handle already ended (late, from a callback
 * after its write returned, when the runtime had settled it) made harmless: it would throw
 * `ALREADY_ENDED` in the sink's callback, an uncaught exception that ends the test process. An end
 * of a live handle goes through unchanged, the runtime's own included.
 */
function lateEndsHarmless(sink: Sink): { readonly sink: Sink; readonly late: () => number } {
  let late = 0
  const guarded = new WeakSet<object>()
  const guard = (
    target: object,
    end: (...args: Parameters<LogEvent['end']>) => void,
    isEnded: () => boolean,
  ) => {
    if (guarded.has(target)) return
    guarded.add(target)
    Object.defineProperty(target, 'end', {
      value: (...args: Parameters<LogEvent['end']>) => {
        if (!isEnded()) end(...args)
        else late++ // counted: harmless is not allowed
      },
    })
  }
  const wrapped: Sink = {
    ...sink,
    ...forwardMembers(sink, SINK_MEMBERS),
    kind: sink.kind,
    write(events) {
      for (const event of events.events) guard(event, event.end.bind(event), () => event.isEnded)
      guard(
        events,
        (...args) => {
          for (const event of events.events) event.end(...args)
        },
        () => false,
      )
      return sink.write(events)
    },
  }
  return { sink: wrapped, late: () => late }
}

/**
 * How long the suite waits, after the sink's `stop()` (or the topology's end), for ends a sink
 * makes late, from a timer or a callback it did not await: they are counted then, and fail the
 * rule. Made harmless, they would otherwise pass unseen; in a real topology each throws
 * `ALREADY_ENDED`, an uncaught exception.
 */
const LATE_END_WINDOW_MS = 100

const lateEndWindow = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, LATE_END_WINDOW_MS))

/** Writes one batch and returns what the write did, ending what the sink left live. */
async function writeOnce(sink: Sink, records: readonly JsonObject[], timeoutMs: number) {
  const { events, receiver, ends, endBySuite } = watchedBatch(records)
  let outcome: { result: Awaited<ReturnType<Sink['write']>> } | { error: unknown }
  try {
    outcome = {
      result: await within(
        sink.write(events),
        timeoutMs,
        () =>
          new ConformanceError(
            'sink.write-settles',
            kindOf(sink),
            `write did not settle within ${timeoutMs} ms`,
            'a write must resolve or throw; a write that waits forever blocks the sink and its sources',
          ),
      ),
    }
  } catch (error) {
    if (error instanceof ConformanceError) {
      // A write that did not settle: its events end errored, as at the runtime's stop deadline.
      for (const e of events.events) endBySuite(e, 'errored')
      throw error
    }
    outcome = { error }
  }
  const endedBySink = events.events.filter((e) => e.isEnded).length
  // The records as sent, not the events' fields after the write: a sink that changed an event
  // while writing it (removed a field) and stored the changed fields must not match itself.
  const fields = [...records]
  const statuses =
    'error' in outcome
      ? events.events.map(() => classifyError(outcome.error))
      : classifyResult(outcome.result, events.length)
  events.events.forEach((e, i) => {
    endBySuite(e, statuses[i])
  })
  await receiver
  return { outcome, endedBySink, ends, statuses, fields }
}

const unexpected = (sink: Sink, error: unknown) =>
  new ConformanceError(
    'sink.delivers-good-records',
    kindOf(sink),
    `write threw on the suite's records: ${describeThrown(error)}`,
    'the suite needs records the sink can deliver: pass `records` your sink accepts',
  )

/** `call` (a step of the user's code: `make`, `start`, `stop`, `read`), failing the rule (`sink.settles`) if it hangs. */
const step = <T>(subject: Subject, name: string, kind: string, call: () => T | Promise<T>): Promise<T> =>
  callWithin(call, subject.timeoutMs ?? 5000, 'sink.settles', kind, name)

/**
 * Makes and starts a sink, runs `body` on it and stops it: `body` calls `stop` where the rule
 * stops the sink; a rule that fails before that still stops it (a failure of that stop is not
 * the rule's), so a sink's connections and timers never outlive its rule.
 */
async function withSink(
  subject: Subject,
  body: (sink: Sink, stop: () => Promise<void>) => Promise<void>,
): Promise<void> {
  const sink = await step(subject, 'make()', 'sink', subject.make)
  await step(subject, 'start()', kindOf(sink), () => sink.start?.())
  let stopping: Promise<void> | undefined
  const stop = (): Promise<void> => {
    stopping ??= step(subject, 'stop()', kindOf(sink), () => sink.stop?.())
    return stopping
  }
  try {
    await body(sink, stop)
  } catch (error) {
    if (stopping === undefined) await stop().catch(() => undefined)
    throw error
  }
}

/** What the sink stored, failing the rule when `read` does not settle in time. */
const storedBy = (subject: Subject, sink: Sink): Promise<readonly JsonObject[]> =>
  step(subject, 'the `read` option', kindOf(sink), () => subject.read!(sink))

/**
 * What the store held before a rule's first write. `read` may see one store shared by every rule
 * (a table, a file, a queue: `read: () => readBack(url)`), where the earlier rules' records are
 * already stored; a rule counts only what was stored after this. A store that cannot be read yet
 * (nothing written to it) holds nothing; a `read` that hangs still fails the rule.
 */
const storedBefore = (subject: Subject, sink: Sink): Promise<readonly JsonObject[]> =>
  // A copy: `read` may return the sink's own array, which its writes then grow.
  storedBy(subject, sink).then(
    (stored) => [...stored],
    (error: unknown) => {
      if (error instanceof ConformanceError) throw error
      return []
    },
  )

/** `stored` without one match (deeply equal) of each record of `before`: what a rule's writes added. */
const added = (stored: readonly JsonObject[], before: readonly JsonObject[]): JsonObject[] =>
  matchRecords(before, stored).left

/** Every rule of the sink suite, in the order they run. */
export const sinkRules: readonly ConformanceRule<Subject>[] = namingSteps<Subject>([
  {
    id: 'sink.never-ends-events',
    title: 'never ends an event itself; it reports statuses and the runtime ends the events',
    check: (subject) =>
      withSink(subject, async (sink, stop) => {
        const { endedBySink, ends } = await writeOnce(
          sink,
          subject.records ?? defaultRecords(),
          subject.timeoutMs ?? 5000,
        )
        // After the stop, which waits for what the sink still has in flight (its confirms), and
        // a window for what it ends from a timer it did not await.
        await stop()
        await lateEndWindow()
        if (endedBySink > 0 || ends.late > 0) {
          throw new ConformanceError(
            'sink.never-ends-events',
            kindOf(sink),
            endedBySink > 0
              ? `${endedBySink} event(s) were already ended when write returned`
              : `${ends.late} event(s) were ended by the sink after its write returned (the runtime had ended them)`,
            'do not call event.end() or events.end() in a sink: return the statuses (or throw) and the runtime ends each event once; a sink that learns the outcome later (a confirm) awaits it in write',
          )
        }
      }),
  },
  {
    id: 'sink.one-status-per-event',
    title:
      'reports one valid status per event, in batches of every size: nothing, a throw, or an array as long as the input',
    check: (subject) =>
      withSink(subject, async (sink, stop) => {
        const records = subject.records ?? defaultRecords()
        // Every batch size, all the records first: a sink that writes in pages (of a bulk API) may
        // build a result of the wrong length only for the sizes that leave a partial page.
        const sizes = [records.length, ...Array.from({ length: records.length - 1 }, (_, i) => i + 1)]
        let failed:
          | { readonly status: DeliveryStatus; readonly count: number; readonly of: number }
          | undefined
        for (const slice of sizes.map((size) => records.slice(0, size))) {
          const { outcome, statuses } = await writeOnce(sink, slice, subject.timeoutMs ?? 5000)
          if ('error' in outcome) throw unexpected(sink, outcome.error)
          const notDelivered = statuses.filter((status) => status !== 'delivered')
          if (failed === undefined && notDelivered.length > 0)
            failed = { status: notDelivered[0]!, count: notDelivered.length, of: slice.length }
          const result: unknown = outcome.result
          if (result === undefined) continue
          // `every` skips a hole; `Array.from` reads it as undefined, no valid entry (as the runtime does).
          if (
            !Array.isArray(result) ||
            result.length !== slice.length ||
            !Array.from(result).every(isValidEntry)
          ) {
            throw new ConformanceError(
              'sink.one-status-per-event',
              kindOf(sink),
              `write of ${slice.length} event(s) returned ${inspect(result, { depth: 2, breakLength: Number.POSITIVE_INFINITY })}`,
              "return nothing (all delivered) or one entry per event, in order: 'delivered', 'errored', 'rejected' or an Error",
            )
          }
        }
        await stop()
        // With `read`, sink.written-before-resolved reports this; without it no other rule looks
        // at the statuses, and a sink that delivers nothing would pass the suite.
        if (failed !== undefined && subject.read === undefined) {
          throw new ConformanceError(
            'sink.delivers-good-records',
            kindOf(sink),
            `write reported ${failed.count} of the suite's ${failed.of} record(s) '${failed.status}'`,
            'the suite needs records the sink can deliver: pass `records` your sink accepts',
          )
        }
      }),
  },
  {
    id: 'sink.written-before-resolved',
    title: 'has stored what it reported delivered by the time write resolves',
    async check(subject) {
      if (subject.read === undefined) return
      await withSink(subject, async (sink, stop) => {
        const records = subject.records ?? defaultRecords()
        // Two writes, each checked when it resolves: a sink may store its first write at once and
        // hold later ones (until a batch fills, until stop).
        const statuses: DeliveryStatus[] = []
        const delivered: JsonObject[] = []
        let missing: JsonObject[] = []
        const before = await storedBefore(subject, sink)
        for (const slice of [records.slice(0, 2), records.slice(2)]) {
          if (slice.length === 0) continue
          const written = await writeOnce(sink, slice, subject.timeoutMs ?? 5000)
          if ('error' in written.outcome) throw unexpected(sink, written.outcome.error)
          statuses.push(...written.statuses)
          delivered.push(...written.fields.filter((_, i) => written.statuses[i] === 'delivered'))
          if (missing.length === 0)
            missing = unmatched(added(await storedBy(subject, sink), before), delivered)
        }
        // Failed as a throw is: a sink that reports the suite's records failed has nothing to check.
        const failed = statuses.filter((status) => status !== 'delivered')
        if (failed.length > 0) {
          throw new ConformanceError(
            'sink.delivers-good-records',
            kindOf(sink),
            `write reported ${failed.length} of the suite's ${statuses.length} record(s) '${failed[0]}'`,
            'the suite needs records the sink can deliver: pass `records` your sink accepts',
          )
        }
        await stop()
        if (missing.length > 0) {
          throw new ConformanceError(
            'sink.written-before-resolved',
            kindOf(sink),
            `${missing.length} record(s) reported delivered were not stored when write resolved, e.g. ${describeValue(missing[0])}`,
            'await the write (and its flush or commit) before returning: a source acknowledges upstream as soon as write resolves',
          )
        }
      })
    },
  },
  {
    id: 'sink.flushes-on-stop',
    title: 'has stored every delivered record once stop() resolves',
    async check(subject) {
      if (subject.read === undefined) return
      await withSink(subject, async (sink, stop) => {
        const records = subject.records ?? defaultRecords()
        const delivered: JsonObject[] = []
        const before = await storedBefore(subject, sink)
        for (const slice of [records.slice(0, 2), records.slice(2)]) {
          const { statuses, fields } = await writeOnce(sink, slice, subject.timeoutMs ?? 5000)
          fields.forEach((f, i) => {
            if (statuses[i] === 'delivered') delivered.push(f)
          })
        }
        await stop().catch((error: unknown) => {
          throw error instanceof ConformanceError && error.code === 'sink.settles' ? stopHangs(sink) : error
        })
        const stored = added(await storedBy(subject, sink), before)
        const missing = unmatched(stored, delivered)
        if (missing.length > 0) {
          throw new ConformanceError(
            'sink.flushes-on-stop',
            kindOf(sink),
            `${missing.length} delivered record(s) missing after stop(), e.g. ${describeValue(missing[0])}`,
            'flush and close in stop(), and resolve it only once the data is stored',
          )
        }
      })
    },
  },
  {
    id: 'sink.survives-stop-mid-write',
    title: 'survives stop() called while a write is in flight: both settle, nothing hangs',
    check: (subject) =>
      withSink(subject, async (sink, stopSink) => {
        const timeoutMs = subject.timeoutMs ?? 5000
        const { events, receiver, endBySuite } = watchedBatch(subject.records ?? defaultRecords())
        const write = Promise.resolve()
          .then(() => sink.write(events))
          .then(
            (result) => classifyResult(result, events.length),
            (error: unknown) => events.events.map(() => classifyError(error)),
          )
        const stop = stopSink()
        const [statuses] = await within(
          Promise.all([write, stop.catch(() => undefined)]),
          timeoutMs,
          () =>
            new ConformanceError(
              'sink.survives-stop-mid-write',
              kindOf(sink),
              `write and stop() did not both settle within ${timeoutMs} ms`,
              'let stop() wait for (or cancel) the write in flight, and make a cancelled write throw rather than hang',
            ),
        ).catch((error: unknown) => {
          for (const e of events.events) endBySuite(e, 'errored')
          throw error
        })
        const ended = events.events.filter((e) => e.isEnded).length
        events.events.forEach((e, i) => {
          endBySuite(e, statuses[i])
        })
        await receiver
        if (ended > 0) {
          throw new ConformanceError(
            'sink.never-ends-events',
            kindOf(sink),
            `${ended} event(s) ended by the sink during a stop`,
            'report the status of an interrupted write (throw) instead of ending events',
          )
        }
      }),
  },
  {
    id: 'sink.in-topology',
    title: 'in a topology, every batch resolves with the status its writes reported',
    async check(subject) {
      const sink = await step(subject, 'make()', 'sink', subject.make)
      const records = subject.records ?? defaultRecords()
      const ledger = new DeliveryLedger({ acknowledgements: true })
      const watched = lateEndsHarmless(sink)
      const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
        .source('in', ledger.source('in', listSource([records.slice(0, 3), records.slice(3)])))
        .sink('out', ['in'], ledger.sink('out', watched.sink), { retry: { attempts: 1 } })
        .build()
      const facts = await runTopology(
        topology,
        subject.timeoutMs ?? 5000,
        () =>
          new ConformanceError(
            'sink.in-topology',
            kindOf(sink),
            'the topology did not finish',
            'see sink.write-settles',
          ),
      ).catch((error: unknown) => {
        // The runtime starts the sink: a start() that threw is named as the other rules name it.
        const failed =
          error instanceof TopologyError
            ? error.problems.find((p) => p.code === 'SINK_START_FAILED')
            : undefined
        throw failed === undefined ? error : new StepFailure(kindOf(sink), 'start()', failed.cause)
      })
      await lateEndWindow()
      if (watched.late() > 0) {
        throw new ConformanceError(
          'sink.in-topology',
          kindOf(sink),
          `the sink ended ${watched.late()} event(s) the runtime had ended (late, after its write returned)`,
          'do not call event.end() or events.end() in a sink: return the statuses (or throw); a sink that learns the outcome later (a confirm) awaits it in write',
        )
      }
      const errors = facts.filter((f) => f.type === 'component_error')
      if (errors.length > 0) {
        throw new ConformanceError(
          'sink.in-topology',
          kindOf(sink),
          `the runtime reported ${describeValue(errors[0])}`,
          'fix what the runtime names (an event ended twice, a bad result)',
        )
      }
      try {
        await ledger.expectMatchesModel()
        await ledger.expectNoLoss()
      } catch (error) {
        throw new ConformanceError('sink.in-topology', kindOf(sink), String(error), 'see the counterexample')
      }
    },
  },
])

const stopHangs = (sink: Sink) =>
  new ConformanceError(
    'sink.flushes-on-stop',
    kindOf(sink),
    'stop() did not resolve',
    'stop() must resolve once flushed',
  )

/**
 * The records of `expected` that `stored` does not hold, each stored record matching one expected
 * record at most (deeply equal): two identical records sent need two stored, so a sink that
 * stores one of them is caught when a user's records repeat.
 */
const unmatched = (stored: readonly JsonObject[], expected: readonly JsonObject[]): JsonObject[] =>
  matchRecords(expected, stored).unmatched

/**
 * Registers the sink suite with the test runner: one test per rule, each on a fresh sink from
 * `make`.
 *
 * @example
 * ```ts
 * import { describe, it } from 'vitest'
 * sinkConformance('my sink', () => mySink({ path }), { read: () => readRows(path), runner: { describe, it } })
 * ```
 */
export function sinkConformance<S extends Sink>(
  name: string,
  make: () => S | Promise<S>,
  options: SinkConformanceOptions<S> = {},
): void {
  // Each step of the sink a rule waits for may take up to timeoutMs, and sink.one-status-per-event
  // writes once per record (with a start and a stop); the runner must not end a rule sooner, or a
  // correct but slow sink fails by the runner's timeout, named by no rule.
  const steps = Math.max((options.records ?? defaultRecords()).length + 3, 8) + 1
  register(
    name,
    sinkRules,
    { ...(options as SinkConformanceOptions), make },
    options.runner,
    (options.timeoutMs ?? 5000) * steps + LATE_END_WINDOW_MS,
  )
}

/** Runs the sink suite without a test runner and returns the rules the sink broke (none: conforms). */
export function checkSink<S extends Sink>(
  make: () => S | Promise<S>,
  options: SinkConformanceOptions<S> = {},
): Promise<ConformanceError[]> {
  return runRules(sinkRules, { ...(options as SinkConformanceOptions), make }, 'sink')
}
