/**
 * The conformance suite of transforms: every event handed to a transform leaves it exactly once
 * (emitted, dropped through the context, or merged), and, where the transform says so, in order.
 *
 * Invariant: the direct rules call `process` (and `flush`) with a recording context on events
 * with live notifiers, and end whatever is left, so a rule leaks nothing whatever the transform
 * does; the topology rule runs it for real under a {@link DeliveryLedger}.
 *
 * @module
 */
import { type JsonObject, LogEvent } from '@ackline/core'
import { TopologyBuilder, type Transform, type TransformContext } from '@ackline/topology'
import { ConformanceError } from './ConformanceError.js'
import {
  type ConformanceRule,
  type ConformanceRunner,
  callWithin,
  namingSteps,
  register,
  runRules,
  stepOf,
} from './ConformanceRunner.js'
import { DeliveryLedger } from './DeliveryLedger.js'
import { describeThrown } from './internal/describeThrown.js'
import { describeValue } from './internal/describeValue.js'
import { batchOf, collectSink, defaultRecords, listSource, runTopology } from './internal/fixtures.js'
import { forwardMembers, TRANSFORM_MEMBERS } from './internal/forwardMembers.js'

/** Options of {@link transformConformance} and {@link checkTransform}. */
export interface TransformConformanceOptions {
  /**
   * Records to process (default: six small log records with `n`, `message`, `level`; at least one, each a JSON object; anything else is refused with a `RangeError` naming it).
   */
  readonly records?: readonly JsonObject[]
  /**
   * Whether the transform promises to keep the input order on each port (default false). When
   * true, `transform.keeps-order` checks it.
   */
  readonly keepsOrder?: boolean
  /**
   * How many calls one transform gets in a row in `transform.accounts-for-every-event`,
   * `transform.drops-through-context` and `transform.emits-once-per-port` (default 24: batches of
   * every size from one to all the records in turn, over and over), then one `flush`. Raise it for
   * a transform whose state changes after more calls (a window, a cache that fills).
   */
  readonly calls?: number
  /** The test runner's `describe` and `it` (default: those on `globalThis`). */
  readonly runner?: ConformanceRunner
  /**
   * How long a run may take, in milliseconds (default 5000).
   * From 1 to 2^31 - 1, what a timer holds; anything else is refused with a `RangeError` naming it.
   */
  readonly timeoutMs?: number
}

type Subject = { readonly make: () => Transform } & TransformConformanceOptions

interface Observed {
  /** Per input index (across the calls, in order), the call (from 1) that got it. */
  readonly callOf: readonly number[]
  /** Per input index: how it left (emitted on ports, dropped, merged, ended directly). */
  readonly emitted: Map<number, string[]>
  readonly dropped: Set<number>
  readonly merged: Set<number>
  readonly endedDirectly: Set<number>
  /** Per port, the input indices in the order they were emitted (created events count as -1). */
  readonly order: Map<string, number[]>
  /**
   * Ends and drops of events the suite had settled, made after the call returned (from a timer the
   * transform did not await): counted so far (read after {@link lateCallWindow}).
   */
  readonly late: () => number
}

/**
 * How long a rule waits, after the calls, for what a transform does late to its events (an end or
 * a drop from a timer it did not await): counted then, and failing the rule. Made harmless, they
 * would otherwise pass unseen; in a real topology each throws `ALREADY_ENDED`, an uncaught exception.
 */
const LATE_CALL_WINDOW_MS = 100

const lateCallWindow = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, LATE_CALL_WINDOW_MS))

/** The failure of a transform that ended or dropped `late` events after its call returned. */
const lateCalls = (kind: string, rule: string, late: number) =>
  new ConformanceError(
    rule,
    kind,
    `${late} event(s) were ended or dropped after the call that got them returned (the runtime had settled them)`,
    'decide every event within process() (or flush()): await what you wait for, then emit or drop; never end or drop an event from a timer or callback left running',
  )

/**
 * Processes each array in turn (one call each, one batch each) on `transform`, then flushes, with
 * a recording context; ends everything afterwards. An input's index counts across the arrays.
 */
async function observe(
  transform: Transform,
  arrays: readonly (readonly JsonObject[])[],
  timeoutMs: number,
): Promise<Observed> {
  const batches = arrays.map((records) => batchOf(records))
  const all = batches.flatMap(({ events }) => events.events)
  const index = new Map<LogEvent, number>(all.map((e, i) => [e, i]))
  const seen: Observed = {
    callOf: arrays.flatMap((records, call) => records.map(() => call + 1)),
    emitted: new Map(),
    dropped: new Set(),
    merged: new Set(),
    endedDirectly: new Set(),
    order: new Map(),
    late: () => late,
  }
  const live = new Set<LogEvent>()
  // Ends made by the suite itself (a drop through the context, the cleanup) are not the transform's.
  let watching = true
  // Once process and flush are over (the rules decide on what they saw by then), what the
  // transform does later (from a timer it did not await) is ignored: a late drop or end of a
  // handle the suite has ended would throw in the transform's callback, an uncaught exception.
  let done = false
  let late = 0
  // Per-handle watches (own properties on the test's events, not the prototype): a direct end and
  // a merge are the two ways out the context does not see.
  for (const [event, i] of index) {
    const end = event.end.bind(event)
    const merge = event.merge.bind(event)
    Object.defineProperty(event, 'end', {
      value: (...args: Parameters<LogEvent['end']>) => {
        if (done) {
          if (!event.isEnded) end(...args)
          else late++
          return
        }
        if (watching) seen.endedDirectly.add(i)
        end(...args)
      },
    })
    Object.defineProperty(event, 'merge', {
      value: (other: LogEvent) => {
        const j = index.get(other)
        if (j !== undefined) seen.merged.add(j)
        return merge(other)
      },
    })
  }
  const emit = (event: LogEvent, port = '') => {
    if (done) return
    const i = index.get(event) ?? -1
    if (i >= 0) seen.emitted.set(i, [...(seen.emitted.get(i) ?? []), port])
    seen.order.set(port, [...(seen.order.get(port) ?? []), i])
    if (!live.has(event)) live.add(event)
    else live.add(event.clone())
  }
  const context: TransformContext = {
    id: 'conformance',
    // The suite settles what the transform emits with every status: they must all matter to it.
    acknowledgements: true,
    emit,
    emitAll: (array, port) => {
      for (const event of array) emit(event, port)
    },
    drop: (event) => {
      if (done) {
        late++
        return
      }
      const i = index.get(event)
      if (i !== undefined) seen.dropped.add(i)
      watching = false
      event.end()
      watching = true
    },
    create: (fields, inheritFrom = []) => {
      const created = new LogEvent(fields)
      for (const parent of inheritFrom) created.merge(parent.clone())
      return created
    },
  }
  try {
    // A `process` or `flush` that never settles fails the rule (checkTransform has no runner's timeout).
    for (const { events } of batches)
      await callWithin(
        () => transform.process(events, context),
        timeoutMs,
        'transform.settles',
        transform.kind,
        'process()',
      )
    await callWithin(
      () => transform.flush?.(context),
      timeoutMs,
      'transform.settles',
      transform.kind,
      'flush()',
    )
  } catch (error) {
    // A call that threw or hung: what it left live ends errored, as the runtime settles it.
    done = true
    watching = false
    for (const event of [...live, ...all]) if (!event.isEnded) event.end('errored')
    throw error
  }
  done = true
  watching = false
  for (const event of live) if (!event.isEnded) event.end('delivered')
  // What the transform forgot, the suite ends (as the runtime does, errored) so nothing leaks.
  for (const event of all) if (!event.isEnded && !live.has(event)) event.end('errored')
  await Promise.all(batches.map(({ receiver }) => receiver))
  return seen
}

/**
 * The arrays of the rules that give one transform many calls: every size from one to all the
 * records in turn, over and over, `calls` arrays in all. A transform whose state changes with
 * use (a count, a window, a cache that fills) may lose or repeat events only from a later call.
 */
function callsInARow(subject: Subject): JsonObject[][] {
  const records = subject.records ?? defaultRecords()
  const calls = subject.calls ?? 24
  if (records.length === 0) return []
  return Array.from({ length: calls }, (_, i) => records.slice(0, (i % records.length) + 1))
}

/** Which inputs of `seen` were neither emitted, dropped, merged nor ended. */
const forgottenIn = (seen: Observed, count: number): number[] =>
  Array.from({ length: count }, (_, i) => i).filter(
    (i) => !seen.emitted.has(i) && !seen.dropped.has(i) && !seen.merged.has(i) && !seen.endedDirectly.has(i),
  )

/**
 * `transform` for a topology, with what it does to a call's events after that call returned (a
 * drop or an end from a timer it did not await, when the runtime had settled the event) made
 * harmless: it would throw `ALREADY_ENDED` in the transform's callback, an uncaught exception that
 * ends the test process. During the call everything goes through unchanged, a double end included.
 */
function lateCallsHarmless(transform: Transform): {
  readonly transform: Transform
  readonly late: () => number
} {
  let late = 0
  const process: Transform['process'] = (events, context) => {
    let returned = false
    for (const event of events.events) {
      const end = event.end.bind(event)
      Object.defineProperty(event, 'end', {
        configurable: true,
        value: (...args: Parameters<LogEvent['end']>) => {
          if (!(returned && event.isEnded)) end(...args)
          else late++ // counted: harmless is not allowed
        },
      })
    }
    const guarded: TransformContext = {
      id: context.id,
      acknowledgements: context.acknowledgements,
      emit: (event, port) => context.emit(event, port),
      emitAll: (array, port) => context.emitAll(array, port),
      create: (fields, inheritFrom) => context.create(fields, inheritFrom),
      drop: (event) => {
        if (!(returned && event.isEnded)) context.drop(event)
        else late++
      },
    }
    const pending = transform.process(events, guarded)
    if (pending === undefined) {
      returned = true
      return undefined
    }
    return Promise.resolve(pending).finally(() => {
      returned = true
    })
  }
  return {
    transform: { ...transform, ...forwardMembers(transform, TRANSFORM_MEMBERS), process },
    late: () => late,
  }
}

/** Every rule of the transform suite, in the order they run. */
export const transformRules: readonly ConformanceRule<Subject>[] = namingSteps<Subject>([
  {
    id: 'transform.accounts-for-every-event',
    title: 'emits, drops or merges every event it is given (by the end of process, or of flush)',
    async check(subject) {
      const records = subject.records ?? defaultRecords()
      // Every batch size from 1 to all the records, each on a fresh transform: a transform that
      // works in chunks (pairs, groups of three) may forget only the events past the last full one.
      const runs: Observed[] = []
      let kind = 'transform'
      for (let size = 1; size <= records.length; size++) {
        const transform = stepOf(subject.make, 'transform', 'make()')
        kind = transform.kind
        const batch = records.slice(0, size)
        const seen = await observe(transform, [batch], subject.timeoutMs ?? 5000)
        const forgotten = forgottenIn(seen, batch.length)
        if (forgotten.length > 0) {
          throw new ConformanceError(
            'transform.accounts-for-every-event',
            transform.kind,
            `of ${size} event(s) processed, ${forgotten.length} neither emitted, dropped nor merged, e.g. ${describeValue(batch[forgotten[0]!])}`,
            'call context.emit or context.drop for every event (or merge it into one you emit); the runtime settles a forgotten event errored and reports it',
          )
        }
        runs.push(seen)
      }
      // Then one transform for many calls in a row: one that forgets from its Nth call (or event) on.
      const arrays = callsInARow(subject)
      const transform = stepOf(subject.make, 'transform', 'make()')
      const seen = await observe(transform, arrays, subject.timeoutMs ?? 5000)
      const inputs = arrays.flat()
      const forgotten = forgottenIn(seen, inputs.length)
      if (forgotten.length > 0) {
        const first = forgotten[0]!
        throw new ConformanceError(
          'transform.accounts-for-every-event',
          transform.kind,
          `of ${inputs.length} event(s) processed in ${arrays.length} calls by one transform, ${forgotten.length} neither emitted, dropped nor merged, the first in its call ${seen.callOf[first]}, e.g. ${describeValue(inputs[first])}`,
          'call context.emit or context.drop for every event (or merge it into one you emit), however many calls came before; the runtime settles a forgotten event errored and reports it',
        )
      }
      runs.push(seen)
      await lateCallWindow()
      const late = runs.reduce((sum, seen) => sum + seen.late(), 0)
      if (late > 0) throw lateCalls(kind, 'transform.accounts-for-every-event', late)
    },
  },
  {
    id: 'transform.drops-through-context',
    title: 'discards an event with context.drop, never by ending it',
    async check(subject) {
      const transform = stepOf(subject.make, 'transform', 'make()')
      const seen = await observe(transform, callsInARow(subject), subject.timeoutMs ?? 5000)
      const direct = [...seen.endedDirectly].filter((i) => !seen.dropped.has(i))
      if (direct.length > 0) {
        throw new ConformanceError(
          'transform.drops-through-context',
          transform.kind,
          `${direct.length} event(s) ended with event.end() instead of context.drop()`,
          "use context.drop(event): it ends the event with the transform's drop status and counts the discard",
        )
      }
    },
  },
  {
    id: 'transform.emits-once-per-port',
    title: 'emits one event at most once on each port',
    async check(subject) {
      const transform = stepOf(subject.make, 'transform', 'make()')
      const arrays = callsInARow(subject)
      const seen = await observe(transform, arrays, subject.timeoutMs ?? 5000)
      for (const [i, ports] of seen.emitted) {
        if (new Set(ports).size !== ports.length) {
          throw new ConformanceError(
            'transform.emits-once-per-port',
            transform.kind,
            `event ${describeValue(arrays.flat()[i])} (in its call ${seen.callOf[i]} of ${arrays.length}) was emitted ${ports.length} times on port(s) ${describeValue(ports)}`,
            'emit an event once per port; to send a second event, create() a new one or clone() it on purpose',
          )
        }
      }
    },
  },
  {
    id: 'transform.keeps-order',
    title: 'keeps the input order on each port, when it says it does',
    async check(subject) {
      if (subject.keepsOrder !== true) return
      const transform = stepOf(subject.make, 'transform', 'make()')
      const seen = await observe(transform, [subject.records ?? defaultRecords()], subject.timeoutMs ?? 5000)
      for (const [port, order] of seen.order) {
        const inputs = order.filter((i) => i >= 0)
        const sorted = [...inputs].sort((a, b) => a - b)
        if (inputs.join() !== sorted.join()) {
          throw new ConformanceError(
            'transform.keeps-order',
            transform.kind,
            `port '${port || 'default'}' got inputs in the order ${inputs.join(', ')}`,
            'emit in input order, or do not declare keepsOrder',
          )
        }
      }
    },
  },
  {
    id: 'transform.in-topology',
    title:
      'in a topology, leaves no event unsettled, reports no component error, and its sources hear what the sinks reported',
    async check(subject) {
      // Twice: sinks that deliver, then sinks that fail every event. Only the second shows an event
      // replaced by a copy that does not inherit its finalizers (its source hears delivered).
      for (const outcome of ['delivered', 'errored'] as const) {
        const transform = stepOf(subject.make, 'transform', 'make()')
        const records = subject.records ?? defaultRecords()
        const ledger = new DeliveryLedger({ acknowledgements: true })
        const watched = lateCallsHarmless(transform)
        let builder = new TopologyBuilder<string>({ acknowledgements: true, onWarning: () => {} })
          .source('in', ledger.source('in', listSource([records.slice(0, 3), records.slice(3)])))
          .transform('t', ['in'], ledger.transform('t', watched.transform))
        for (const port of ['', ...(transform.outputs ?? [])]) {
          const id = port === '' ? 'out' : `out_${port}`
          builder = builder.sink(id, [port === '' ? 't' : `t.${port}`], ledger.sink(id, collectSink(outcome)))
        }
        const under = outcome === 'delivered' ? '' : 'with sinks that fail every event, '
        const facts = await runTopology(
          builder.build(),
          subject.timeoutMs ?? 5000,
          () =>
            new ConformanceError(
              'transform.in-topology',
              transform.kind,
              `${under}the topology did not finish`,
              'process and flush must settle',
            ),
        )
        await lateCallWindow()
        if (watched.late() > 0) throw lateCalls(transform.kind, 'transform.in-topology', watched.late())
        const errors = facts.filter((f) => f.type === 'component_error')
        if (errors.length > 0) {
          throw new ConformanceError(
            'transform.in-topology',
            transform.kind,
            `${under}the runtime reported ${describeValue(errors[0])}`,
            'fix what the runtime names (a forgotten event, an event ended twice)',
          )
        }
        try {
          await ledger.expectMatchesModel()
          await ledger.expectNoLoss()
        } catch (error) {
          throw new ConformanceError(
            'transform.in-topology',
            transform.kind,
            `${under}${String(error)}`,
            outcome === 'delivered'
              ? 'see the counterexample'
              : 'a source heard delivered for records whose copies failed: an event the transform passes on in place of an input must carry its finalizers (emit the input, a clone, or context.create(fields, [input]))',
          )
        }
      }
    },
  },
])

/**
 * Registers the transform suite with the test runner: one test per rule, each on a fresh
 * transform from `make`.
 *
 * @example
 * ```ts
 * import { describe, it } from 'vitest'
 * transformConformance('redact', () => redact(), { keepsOrder: true, runner: { describe, it } })
 * ```
 */
export function transformConformance(
  name: string,
  make: () => Transform,
  options: TransformConformanceOptions = {},
): void {
  checkCalls(options, `conformance suite '${name}'`)
  // Each call a rule waits for may take up to timeoutMs: transform.accounts-for-every-event makes a
  // process and a flush per batch size, then `calls` calls and a flush; transform.in-topology runs
  // two topologies, each with its stop. The runner must not end a rule sooner, or a correct but
  // slow transform fails by the runner's timeout, named by no rule.
  const steps = 2 * (options.records ?? defaultRecords()).length + (options.calls ?? 24) + 4
  register(
    name,
    transformRules,
    { ...options, make },
    options.runner,
    (options.timeoutMs ?? 5000) * steps + LATE_CALL_WINDOW_MS * 2,
  )
}

/** Runs the transform suite without a test runner and returns the rules it broke (none: conforms). */
export async function checkTransform(
  make: () => Transform,
  options: TransformConformanceOptions = {},
): Promise<ConformanceError[]> {
  checkCalls(options, 'the transform conformance check')
  return runRules(transformRules, { ...options, make }, 'transform')
}

/** Refuses a `calls` option that is not a whole number from 1: zero calls would check nothing. */
function checkCalls(options: TransformConformanceOptions, where: string): void {
  const calls: unknown = options.calls
  if (calls !== undefined && !(Number.isSafeInteger(calls) && (calls as number) >= 1))
    throw new RangeError(`${where}: 'calls' must be a whole number from 1, got ${describeThrown(calls)}`)
}
