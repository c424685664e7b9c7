/**
 * The conformance suite of sources: `run` does not resolve before its batches are accepted, and
 * the upstream hears "done" only for what was delivered (an errored batch is re-sent or failed
 * back to the upstream).
 *
 * Invariant: the rules drive `run` with a scripted `SourceContext` (the suite decides when each
 * send is accepted and what each batch resolves to), so they test the source alone, without a
 * runtime in between. However a rule ends, it aborts the source's signal and accepts (errored)
 * every send, so no source under test runs on after its rule.
 *
 * @module
 */
import { type BatchStatus, type EventArray, type JsonObject, RecordOutcomes } from '@ackline/core'
import type { BatchReceipt, Source, SourceContext } from '@ackline/topology'
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
import { describeThrown } from './internal/describeThrown.js'
import { describeValue } from './internal/describeValue.js'
import { defaultRecords } from './internal/fixtures.js'
import { matchRecords, sameJsonValue } from './internal/matchRecords.js'

/** A source under test, with hooks to its upstream where it has one. */
export interface SourceUnderTest {
  /** The source under test (a fresh one for each rule, from your factory). */
  readonly source: Source
  /** Hands records to the source's upstream (emit on an observable, post a request); omit for a source that makes its own. */
  readonly feed?: (records: readonly JsonObject[]) => Promise<void> | void
  /** Tells the upstream there is no more (completes the observable, ends the pipe). */
  readonly end?: () => void
  /**
   * What the upstream has been told so far: records acknowledged, and records failed back (nacked,
   * answered with an error). Enables `source.acknowledges-only-delivered`.
   */
  readonly upstream?: () => { readonly acked: readonly JsonObject[]; readonly failed: readonly JsonObject[] }
}

/** Options of {@link sourceConformance} and {@link checkSource}. */
export interface SourceConformanceOptions {
  /**
   * Records to feed (default: six small log records; at least one, each a JSON object; anything else is refused with a `RangeError` naming it). Records are compared as JSON values (the
   * order of their keys, an object's prototype and -0 against 0 do not count; a `Date` is its ISO
   * string, as JSON writes it), and one for one: each copy of a repeated record must be
   * sent and acknowledged (or failed back). `source.acknowledges-only-delivered` feeds the first
   * three, with every record equal to one of them, as the batch it fails, then the rest.
   */
  readonly records?: readonly JsonObject[]
  /** The test runner's `describe` and `it` (default: those on `globalThis`). */
  readonly runner?: ConformanceRunner
  /**
   * How long the source may take to send or to return, in milliseconds (default 5000).
   * From 1 to 2^31 - 1, what a timer holds; anything else is refused with a `RangeError` naming it.
   */
  readonly timeoutMs?: number
}

type Subject = { readonly make: () => SourceUnderTest | Promise<SourceUnderTest> } & SourceConformanceOptions

interface Sent {
  readonly records: JsonObject[]
  accept(): void
  resolve(status: BatchStatus): void
  /** The status the test resolved first (what the source was told), once resolved. */
  readonly told: () => BatchStatus | undefined
}

/**
 * A scripted context: every send waits until the test accepts it, and its status until the test
 * resolves it; `release` (once the rule is over, however it ended) aborts the signal and accepts
 * every send, pending or later, as `errored`, so the source can return and nothing of it outlives
 * the rule. A send with `{ outcomes: true }` gets `receipt.outcomes`, each record's outcome its
 * batch's status, and one that also says `receipt: false` is refused, as the runtime does.
 */
function scripted(controller: AbortController) {
  const sent: Sent[] = []
  const waiters: (() => void)[] = []
  let counter = 0
  let released = false
  const context: SourceContext = {
    id: 'conformance',
    acknowledgements: true,
    signal: controller.signal,
    async send(records, options) {
      // Refused as the runtime refuses it, before anything is sent: a source that sends something
      // else than records must fail here as it would in a topology.
      if (options?.receipt === false && options.outcomes === true)
        throw new TypeError(
          "source 'conformance': a send with outcomes: true needs its receipt (it was sent with receipt: false)",
        )
      const given: unknown[] = [...records]
      given.forEach((record, i) => {
        if (typeof record !== 'object' || record === null || Array.isArray(record)) {
          const got = record === null ? 'null' : Array.isArray(record) ? 'an array' : `a ${typeof record}`
          throw new TypeError(
            `source 'conformance': record ${i} of a send is ${got}; a record must be a JSON object`,
          )
        }
      })
      const list = (given as JsonObject[]).map((r) => structuredClone(r))
      let accept!: () => void
      let settle!: (status: BatchStatus) => void
      let told: BatchStatus | undefined
      const resolve = (s: BatchStatus): void => {
        told ??= s
        settle(s)
      }
      const accepted = new Promise<void>((r) => {
        accept = r
      })
      const status = new Promise<BatchStatus>((r) => {
        settle = r
      })
      const batchId = `batch-${++counter}`
      let failure: BatchReceipt['failure']
      void status.then((s) => {
        if (s !== 'delivered')
          failure = { componentId: 'conformance', code: 'SCRIPTED', message: `scripted ${s}` } as never
      })
      sent.push({ records: list, accept, resolve, told: () => told })
      for (const wake of waiters.splice(0)) wake()
      if (released) {
        accept()
        resolve('errored')
      }
      await accepted
      return {
        batchId,
        status,
        get failure() {
          return failure
        },
        // Asked for, each record's outcome is its batch's status (the suite settles a batch as a
        // whole), resolved with it: a source that settles each record by its outcome (as
        // SendOptions documents it) is checked as one that reads the status.
        ...(options?.outcomes === true
          ? { outcomes: status.then((s) => RecordOutcomes.all(s, list.length)) }
          : {}),
      }
    },
    async sendEvents(events: EventArray) {
      // Events with the source's own notifiers: scripted as a send is, accepted when the test
      // accepts them, and ended with the status the test resolves (which their notifiers report).
      const records = events.events.map((e) => ({ ...e.fields }) as JsonObject)
      let accept!: () => void
      const accepted = new Promise<void>((r) => {
        accept = r
      })
      let told: BatchStatus | undefined
      const resolve = (status: BatchStatus): void => {
        if (told !== undefined) return
        told = status
        for (const event of events.events) if (!event.isEnded) event.end(status)
      }
      sent.push({ records, accept, resolve, told: () => told })
      for (const wake of waiters.splice(0)) wake()
      if (released) {
        accept()
        resolve('errored')
      }
      await accepted
    },
  }
  const nextSend = (count: number): Promise<void> =>
    sent.length >= count
      ? Promise.resolve()
      : new Promise<void>((r) => waiters.push(r)).then((): Promise<void> => nextSend(count))
  const release = (): void => {
    released = true
    controller.abort()
    for (const s of sent) {
      s.accept()
      s.resolve('errored')
    }
  }
  return { context, sent, nextSend, release }
}

/**
 * How long the suite waits, once run() returned, before it reads what the upstream heard at the
 * end of a rule: an acknowledgement the source did not await (a commit still on its way, resolved
 * on a later turn) reaches the upstream after run() returned, and read at once it went unseen.
 */
const LATE_ACK_WINDOW_MS = 100

const lateAckWindow = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, LATE_ACK_WINDOW_MS))

const turns = async (n = 10) => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve))
}

/**
 * The records of the batch `source.acknowledges-only-delivered` fails, and those fed after it:
 * the first three records, with every record equal to one of them, then the rest (kept in order).
 * A copy sent after the errored batch is then a re-send of it or a record fed later, never both,
 * so neither can stand in for the other. Records that are all equal are all in the errored batch.
 */
function splitAtErrored(records: readonly JsonObject[]): { errored: JsonObject[]; later: JsonObject[] } {
  const groups: JsonObject[][] = []
  for (const record of records) {
    const group = groups.find((g) => sameJsonValue(g[0], record))
    if (group === undefined) groups.push([record])
    else group.push(record)
  }
  // Whole groups, up to three records, and at least one group left for later when there are two.
  let taken = 1
  while (taken < groups.length - 1 && groups.slice(0, taken).flat().length < 3) taken++
  const errored = new Set(groups.slice(0, taken).flat())
  return {
    errored: records.filter((r) => errored.has(r)),
    later: records.filter((r) => !errored.has(r)),
  }
}

/**
 * Runs `source` without ever leaving its rejection unhandled (a `checkSource` script would crash
 * on it): `running` always resolves; `threw()` says whether run() threw, and what. `started`
 * resolves at `nextSend(count)`, and rejects with a {@link ConformanceError} (`source.run-throws`,
 * the error as its `cause`) if run() throws first.
 */
function launch(source: Source, context: SourceContext) {
  let failed: { readonly error: unknown } | undefined
  const running = Promise.resolve()
    .then(() => source.run(context))
    .then(
      () => undefined,
      (error: unknown) => {
        failed = { error }
      },
    )
  const threw = (): ConformanceError | undefined =>
    failed === undefined
      ? undefined
      : new ConformanceError(
          'source.run-throws',
          source.kind,
          `run() threw: ${describeThrown(failed.error, true)}`,
          'the suite needs a source that runs: check `make`, the `feed` hook and the records (the cause is what run() threw)',
          { cause: failed.error },
        )
  /** Resolves once `sent` resolves; rejects at once if run() throws first (and waits on if it just returns). */
  const before = <T>(sent: Promise<T>): Promise<T> =>
    Promise.race([
      sent,
      running.then(() => {
        const error = threw()
        if (error !== undefined) throw error
        return new Promise<never>(() => {})
      }),
    ])
  return { running, threw, before }
}

/** Every rule of the source suite. */
export const sourceRules: readonly ConformanceRule<Subject>[] = namingSteps<Subject>([
  {
    id: 'source.run-waits-for-accepted',
    title: 'does not resolve run() while a batch it sent is not yet accepted',
    async check(subject) {
      const timeoutMs = subject.timeoutMs ?? 5000
      const under = await callWithin(subject.make, timeoutMs, 'source.settles', 'source', 'make()')
      const kind = under.source.kind
      const controller = new AbortController()
      const { context, sent, nextSend, release } = scripted(controller)
      let done = false
      const run = launch(under.source, context)
      const running = run.running.then(() => {
        done = true
      })
      let early = false
      try {
        await callWithin(
          () => under.feed?.(subject.records ?? defaultRecords()),
          timeoutMs,
          'source.settles',
          kind,
          'feed()',
        )
        await within(run.before(nextSend(1)), timeoutMs, () => noSend(kind, timeoutMs))
        under.end?.()
        controller.abort()
        await turns()
        early = done
        // Accept everything from now on, so the source can finish.
        const pump = setInterval(() => {
          for (const s of sent) {
            s.accept()
            s.resolve('delivered')
          }
        }, 1)
        try {
          await within(
            running,
            timeoutMs,
            () =>
              new ConformanceError(
                'source.run-waits-for-accepted',
                kind,
                'run() did not return after the stop signal',
                'return from run() once the signal aborts and the batch in hand is accepted',
              ),
          )
        } finally {
          clearInterval(pump)
        }
      } finally {
        release()
      }
      const threw = run.threw()
      if (threw !== undefined) throw threw
      // What the upstream heard by the stop: a source that commits, as it stops, all it read
      // (records never sent, or sent in a batch not delivered) loses them. One delivered copy for
      // each acknowledged record: two equal records acknowledged need two sent. Read once what
      // the source did not await has arrived.
      if (under.upstream !== undefined) await lateAckWindow()
      const acked = under.upstream?.().acked ?? []
      const delivered = sent.filter((s) => s.told() === 'delivered').flatMap((s) => s.records)
      const unsent = matchRecords(acked, delivered).unmatched
      if (unsent.length > 0) {
        throw new ConformanceError(
          'source.acknowledges-only-delivered',
          kind,
          `at the stop, the upstream heard "done" for ${unsent.length} record(s) never sent in a batch resolved delivered, e.g. ${describeValue(unsent[0])}`,
          'acknowledge upstream only what a delivered receipt covers: at the stop, leave what was read but not sent unacknowledged (or fail it back)',
        )
      }
      if (early) {
        throw new ConformanceError(
          'source.run-waits-for-accepted',
          kind,
          'run() resolved while a batch it sent had not been accepted',
          'await context.send(...) for every batch before returning: the runtime stops downstream components once run() returns',
        )
      }
    },
  },
  {
    id: 'source.acknowledges-only-delivered',
    title: 'tells its upstream "done" only for delivered batches; re-sends or fails back an errored one',
    async check(subject) {
      const timeoutMs = subject.timeoutMs ?? 5000
      const under = await callWithin(subject.make, timeoutMs, 'source.settles', 'source', 'make()')
      if (under.upstream === undefined || under.feed === undefined) return
      const kind = under.source.kind
      const feed = under.feed
      const upstream = under.upstream
      const fed = (records: readonly JsonObject[]) =>
        callWithin(() => feed(records), timeoutMs, 'source.settles', kind, 'feed()')
      const { errored, later } = splitAtErrored(subject.records ?? defaultRecords())
      const controller = new AbortController()
      const { context, sent, nextSend, release } = scripted(controller)
      const run = launch(under.source, context)
      const running = run.running
      let wrongly: JsonObject[]
      let first: Sent
      try {
        // The first batch errors; every later one is delivered.
        await fed(errored)
        await within(run.before(nextSend(1)), timeoutMs, () => noSend(kind, timeoutMs))
        first = sent[0]!
        // Accepted, then resolved only after a few turns, as in a runtime (accepted when the batch
        // enters the pipeline, resolved when the sinks settled it): a source that acknowledges on
        // the accept, or reads receipt.failure before the status resolved, is seen here.
        first.accept()
        await turns()
        const early = matchRecords(first.records, upstream().acked).matched
        if (early.length > 0) {
          throw new ConformanceError(
            'source.acknowledges-only-delivered',
            kind,
            `the upstream heard "done" for ${early.length} record(s) of a batch accepted but not yet resolved, e.g. ${describeValue(early[0])}`,
            'read receipt.status and acknowledge only once it resolved delivered (receipt.failure is undefined until then); on errored, re-send or nack so the upstream keeps the data',
          )
        }
        first.resolve('errored')
        await turns()
        // Nothing was delivered yet: whatever of the batch the upstream heard "done" for is wrong.
        wrongly = matchRecords(first.records, upstream().acked).matched
        const pump = setInterval(() => {
          for (const s of sent.slice(1)) {
            s.accept()
            s.resolve('delivered')
          }
        }, 1)
        try {
          await fed(later)
          // One for one (two equal records are two records): every record fed later is delivered,
          // so acknowledged; one fed with the errored batch but not sent in it (the source sent
          // it apart, or left it out) is acknowledged or failed back too.
          const leftOut = matchRecords(errored, first.records).unmatched
          const owed = () => {
            const { acked, failed } = upstream()
            const ofLater = matchRecords(later, acked)
            const ofLeftOut = matchRecords(leftOut, [
              ...ofLater.left,
              ...matchRecords(first.records, failed).left,
            ]).unmatched
            return [...ofLeftOut, ...ofLater.unmatched]
          }
          await within(
            (async () => {
              while (owed().length > 0) await new Promise((r) => setTimeout(r, 2))
            })(),
            timeoutMs,
            () => {
              const missing = owed()
              // Fed copies with no sent copy anywhere, and not failed back instead of being sent.
              const failedApart = matchRecords(first.records, upstream().failed).left
              const unsent = matchRecords(
                [...errored, ...later],
                [...sent.flatMap((s) => s.records), ...failedApart],
              ).unmatched
              return unsent.length > 0
                ? new ConformanceError(
                    'source.acknowledges-only-delivered',
                    kind,
                    `the source never sent ${unsent.length} of the ${errored.length + later.length} record(s) fed (nor failed them back), e.g. ${describeValue(unsent[0])}`,
                    'send every record the upstream hands over, each copy of a repeated record too (two equal records are two records)',
                  )
                : new ConformanceError(
                    'source.acknowledges-only-delivered',
                    kind,
                    `the upstream never heard "done" for delivered records, e.g. ${describeValue(missing[0])}`,
                    'acknowledge upstream once receipt.status resolves delivered',
                  )
            },
          )
          under.end?.()
          controller.abort()
          await within(
            running,
            timeoutMs,
            () =>
              new ConformanceError(
                'source.acknowledges-only-delivered',
                kind,
                'run() did not return',
                'return once the signal aborts',
              ),
          )
        } finally {
          clearInterval(pump)
        }
      } finally {
        release()
      }
      const threw = run.threw()
      if (threw !== undefined) throw threw
      // Read again at the end: an acknowledgement that came later (committing a later batch's
      // offset, which covers the errored one) loses the batch as surely, unless it was re-sent and
      // that copy delivered. One delivered copy for each acknowledged record. Read once what the
      // source did not await has arrived.
      await lateAckWindow()
      const { acked, failed } = upstream()
      const delivered = sent.filter((s) => s.told() === 'delivered').flatMap((s) => s.records)
      const undelivered = matchRecords(acked, delivered).unmatched
      if (wrongly.length === 0) wrongly = matchRecords(first.records, undelivered).matched
      if (wrongly.length > 0) {
        throw new ConformanceError(
          'source.acknowledges-only-delivered',
          kind,
          `the upstream heard "done" for ${wrongly.length} record(s) of an errored batch, e.g. ${describeValue(wrongly[0])}`,
          'read receipt.status and acknowledge only on delivered; on errored, re-send or nack so the upstream keeps the data',
        )
      }
      if (undelivered.length > 0) {
        throw new ConformanceError(
          'source.acknowledges-only-delivered',
          kind,
          `the upstream heard "done" for ${undelivered.length} record(s) never sent in a batch resolved delivered, e.g. ${describeValue(undelivered[0])}`,
          'acknowledge upstream only what a delivered receipt covers, each copy of a repeated record once',
        )
      }
      // Every record fed ends acknowledged (delivered) or failed back, one for one: a record of the
      // errored batch that was neither re-sent (then delivered) nor failed back is lost.
      const unsettled = matchRecords([...errored, ...later], [...failed, ...acked]).unmatched
      if (unsettled.length > 0) {
        throw new ConformanceError(
          'source.acknowledges-only-delivered',
          kind,
          `${unsettled.length} record(s) of an errored batch were neither re-sent nor failed back to the upstream, e.g. ${describeValue(unsettled[0])}`,
          'on errored, nack (or answer with an error) so the upstream re-delivers, or send the batch again',
        )
      }
    },
  },
])

const noSend = (kind: string, ms: number) =>
  new ConformanceError(
    'source.sends',
    kind,
    `no batch was sent within ${ms} ms`,
    'give the suite a feed hook that hands records to the source, or records a finite source makes',
  )

/**
 * Registers the source suite with the test runner: one test per rule, each on a fresh source.
 *
 * @example
 * ```ts
 * import { describe, it } from 'vitest'
 * sourceConformance('my queue source', () => {
 *   const queue = new FakeQueue()
 *   return { source: queueSource(queue), feed: (r) => queue.publish(r), end: () => queue.close(), upstream: () => queue.outcomes() }
 * }, { runner: { describe, it } })
 * ```
 */
export function sourceConformance(
  name: string,
  make: () => SourceUnderTest | Promise<SourceUnderTest>,
  options: SourceConformanceOptions = {},
): void {
  // Each step a rule waits for may take up to timeoutMs: source.acknowledges-only-delivered waits
  // for make, two feeds, the first send, the acknowledgements of what was fed later, and run()'s
  // return (six); the runner must not end a rule sooner, or a correct but slow source fails by the
  // runner's timeout, named by no rule. One more for the turns and pumps between them, and the
  // window for late acknowledgements.
  register(
    name,
    sourceRules,
    { ...options, make },
    options.runner,
    (options.timeoutMs ?? 5000) * 7 + LATE_ACK_WINDOW_MS,
  )
}

/** Runs the source suite without a test runner and returns the rules the source broke (none: conforms). */
export function checkSource(
  make: () => SourceUnderTest | Promise<SourceUnderTest>,
  options: SourceConformanceOptions = {},
): Promise<ConformanceError[]> {
  return runRules(sourceRules, { ...options, make }, 'source')
}
