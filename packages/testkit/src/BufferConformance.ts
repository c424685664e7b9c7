/**
 * The conformance suite of edge buffers (`EdgeBuffer` of `@ackline/topology`): what goes in comes
 * out through `pull`, `close` drains, `pull` waits and honours its signal, and no event is
 * acknowledged before the sink settled it — or, for a buffer that acknowledges on write, before
 * it would survive a crash.
 *
 * Invariant: every rule ends whatever it pulled and disposes or closes what it opened, so a rule
 * leaks no handle whatever the buffer does.
 *
 * @module
 */
import { inspect } from 'node:util'
import type { BatchStatus, BatchStatusReceiver, EventArray, JsonObject, LogEvent } from '@ackline/core'
import type { EdgeBuffer } from '@ackline/topology'
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
import { describeValue } from './internal/describeValue.js'
import { batchOf, defaultRecords } from './internal/fixtures.js'
import { matchRecords, sameJsonValue } from './internal/matchRecords.js'

/** A buffer under test, and (for the durability rule) how to crash it and open it again. */
export interface BufferUnderTest {
  /** The buffer the suite pushes to, pulls from and closes (a fresh one for each rule). */
  readonly buffer: EdgeBuffer
  /**
   * Simulates a crash of the process holding `buffer`: whatever was not durable is lost (for a
   * disk buffer, on a file system that can lose unsynced writes). With `reopen`, enables
   * `buffer.durable-before-acknowledged`.
   */
  readonly crash?: () => Promise<void> | void
  /** Opens the buffer again over the same storage, as the next run of the process would. */
  readonly reopen?: () => Promise<EdgeBuffer>
}

/** Options of {@link bufferConformance} and {@link checkBuffer}. */
export interface BufferConformanceOptions {
  /**
   * Records to push (default: six small log records; at least one, each a JSON object; anything else is refused with a `RangeError` naming it). What comes out is compared with them one
   * for one (two equal records pushed, two handed out) and as JSON values (the order of their keys,
   * an object's prototype and -0 against 0 do not count; a `Date` is its ISO string, as JSON
   * writes it).
   */
  readonly records?: readonly JsonObject[]
  /** Whether `pull` hands events out in push order (default true). */
  readonly keepsOrder?: boolean
  /**
   * Whether the buffer tells sources `delivered` once an event is stored (a disk buffer in
   * `acknowledgements: 'on-write'` mode) rather than when the sink settles it (default false).
   */
  readonly acknowledgesOnWrite?: boolean
  /** The test runner's `describe` and `it` (default: those on `globalThis`). */
  readonly runner?: ConformanceRunner
  /**
   * How long a pull may take once something is in the buffer, in milliseconds (default 5000).
   * From 1 to 2^31 - 1, what a timer holds; anything else is refused with a `RangeError` naming it.
   */
  readonly timeoutMs?: number
}

type Subject = { readonly make: () => Promise<BufferUnderTest> } & BufferConformanceOptions

const KIND = 'buffer'

/**
 * Pulls until `undefined`, ending each pulled event `status`; returns the pulled fields. A buffer
 * that hands out more arrays than it could hold (`records` pushed in `arrays` arrays) — empty
 * arrays instead of waiting, the same array again — fails the rule rather than spin: a pull that
 * resolves at once never yields to the timer that would end the rule.
 */
async function drain(
  buffer: EdgeBuffer,
  timeoutMs: number,
  pushed: { readonly records: number; readonly arrays: number },
  status: 'delivered' | 'errored' = 'delivered',
) {
  const out: JsonObject[] = []
  for (let pulls = 1; ; pulls++) {
    const next: unknown = await within(buffer.pull(), timeoutMs, () => hang('pull'))
    if (next === undefined) return out
    if (!isEventArray(next)) {
      throw new ConformanceError(
        'buffer.hands-out-what-it-accepts',
        KIND,
        `pull resolved ${inspect(next, { depth: 1, breakLength: Number.POSITIVE_INFINITY })}, which is neither an EventArray nor undefined`,
        'resolve pull with the EventArray that was pushed (not its `events`), or undefined once closed and drained',
      )
    }
    if (next.events.some((event) => event.isEnded)) {
      throw new ConformanceError(
        'buffer.hands-out-what-it-accepts',
        KIND,
        `pull handed out an event that had already ended (after ${out.length} record(s) came out): an event handed out twice`,
        'hand each pushed event out once: remove an array from the buffer when pull hands it out',
      )
    }
    for (const event of next) out.push({ ...event.fields } as JsonObject)
    next.end(status)
    if (pulls > pushed.records + pushed.arrays) {
      throw new ConformanceError(
        'buffer.hands-out-what-it-accepts',
        KIND,
        `pull handed out ${pulls} array(s) (${out.length} record(s)) for ${pushed.records} record(s) pushed in ${pushed.arrays} array(s), and had still not resolved undefined`,
        'pull waits while the buffer is open and empty (it never resolves an empty array), and resolves undefined once closed and drained',
      )
    }
  }
}

/** Whether `value` is an `EventArray` (read by shape: a buffer may build it with its own copy of the core). */
const isEventArray = (value: unknown): value is EventArray =>
  typeof value === 'object' &&
  value !== null &&
  Array.isArray((value as EventArray).events) &&
  typeof (value as EventArray).end === 'function'

/** A batch a rule pushed: the handles it gave the buffer, and what its source hears. */
type Pushed = { readonly events: EventArray; readonly receiver: BatchStatusReceiver }

/** Ends `errored` the pushed handles the buffer left live (it lost them); returns them. */
function endLive(pushed: readonly Pushed[]): LogEvent[] {
  const live = pushed.flatMap((p) => p.events.events.filter((event) => !event.isEnded))
  for (const event of live) event.end('errored')
  return live
}

/** Runs a rule's `body` over the batches it pushes; a failure first ends what the buffer left live. */
async function endingOnFailure(body: (pushed: Pushed[]) => Promise<void>): Promise<void> {
  const pushed: Pushed[] = []
  try {
    await body(pushed)
  } catch (error) {
    endLive(pushed)
    throw error
  }
}

/**
 * Waits for the batches a rule pushed to resolve. Past `timeoutMs` the buffer lost an event (it
 * neither handed it out nor ended it): the suite ends what is still live `errored`, so nothing
 * leaks, and the rule fails `code` instead of waiting forever.
 */
async function resolved(pushed: readonly Pushed[], timeoutMs: number, code: string): Promise<BatchStatus[]> {
  try {
    return await within(
      Promise.all(pushed.map((p) => p.receiver.promise)),
      timeoutMs,
      () => new ConformanceError(code, KIND, 'lost', ''),
    )
  } catch (error) {
    if (!(error instanceof ConformanceError)) throw error
    const open = pushed.filter((p) => !p.receiver.isResolved).length
    const live = endLive(pushed)
    throw new ConformanceError(
      code,
      KIND,
      `${open} pushed batch(es) did not resolve within ${timeoutMs} ms of the sink ending every pulled event: ${live.length} pushed event(s) were never handed out by pull nor ended`,
      'hand out through pull every event pushed (or, acknowledging on write, end it once stored); an event the buffer forgets keeps its source waiting forever',
    )
  }
}

const hang = (what: string, code = 'buffer.hands-out-what-it-accepts') =>
  new ConformanceError(
    code,
    KIND,
    `${what} did not settle`,
    'pull waits only while the buffer is open and empty: it resolves undefined when its signal aborts, or once closed and drained',
  )

/** A few turns of the event loop, for a buffer that settles asynchronously. */
const turns = async (n = 5) => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve))
}

/**
 * Whether `a` and `b` hold the same records, one for one and deeply equal (a buffer that stores
 * records with their keys in another order, as a jsonb column does, hands out the same records),
 * in the same order when `ordered`.
 */
const sameRecords = (a: readonly JsonObject[], b: readonly JsonObject[], ordered: boolean) =>
  a.length === b.length &&
  (ordered ? a.every((record, i) => sameJsonValue(record, b[i])) : matchRecords(a, b).unmatched.length === 0)

/** What `make` gives, failing the rule (`buffer.settles`) when it does not settle within the timeout. */
const made = (subject: Subject) => step(subject, 'make()', subject.make)

/** `call` (a step of the buffer's: `push`, `close`, the `crash` and `reopen` hooks), failing the rule (`buffer.settles`) if it hangs. */
const step = <T>(subject: Subject, name: string, call: () => T | PromiseLike<T>): Promise<T> =>
  callWithin(call, subject.timeoutMs ?? 5000, 'buffer.settles', KIND, name)

/** Every rule of the buffer suite, in the order they run. */
export const bufferRules: readonly ConformanceRule<Subject>[] = namingSteps<Subject>([
  {
    id: 'buffer.hands-out-what-it-accepts',
    title: 'hands out through pull every event pushed, then undefined once closed and drained',
    async check(subject) {
      const { buffer } = await made(subject)
      const records = subject.records ?? defaultRecords()
      const slices = [records.slice(0, 2), records.slice(2, 3), records.slice(3)]
      await endingOnFailure(async (pushed) => {
        for (const slice of slices) {
          const batch = batchOf(slice)
          pushed.push(batch)
          await step(subject, 'push()', () => buffer.push(batch.events))
        }
        await step(subject, 'close()', () => buffer.close())
        const out = await drain(buffer, subject.timeoutMs ?? 5000, {
          records: records.length,
          arrays: slices.length,
        })
        const again = await within(buffer.pull(), subject.timeoutMs ?? 5000, () =>
          hang('a pull after the end'),
        )
        if (!sameRecords(out, records, subject.keepsOrder ?? true) || again !== undefined) {
          throw new ConformanceError(
            'buffer.hands-out-what-it-accepts',
            KIND,
            `pushed ${records.length} record(s), pulled ${describeValue(out)}${again === undefined ? '' : ', and pull went on after the end'}`,
            'every pushed event must come out of pull (in order, unless keepsOrder is false) exactly once, then pull resolves undefined',
          )
        }
        const statuses = await resolved(pushed, subject.timeoutMs ?? 5000, 'buffer.hands-out-what-it-accepts')
        // The sink ended every event delivered: a batch told anything else was settled by the buffer.
        const wrong = statuses.filter((status) => status !== 'delivered')
        if (wrong.length > 0) {
          throw new ConformanceError(
            'buffer.never-acknowledges-before-the-sink',
            KIND,
            `the sink ended every event delivered, but ${wrong.length} of ${statuses.length} batch(es) resolved '${wrong[0]}'`,
            "hand the pushed handles themselves to pull and never end them in the buffer: the status a batch resolves is the sink's",
          )
        }
      })
    },
  },
  {
    id: 'buffer.never-acknowledges-before-the-sink',
    title:
      'leaves the status to the sink: a batch resolves only once its pulled events are ended, with their status',
    async check(subject) {
      if (subject.acknowledgesOnWrite === true) return
      const { buffer } = await made(subject)
      const records = subject.records ?? defaultRecords()
      await endingOnFailure(async (pushed) => {
        const batch = batchOf(records)
        pushed.push(batch)
        const { receiver } = batch
        await step(subject, 'push()', () => buffer.push(batch.events))
        await turns()
        const early = receiver.isResolved
        await step(subject, 'close()', () => buffer.close())
        await drain(buffer, subject.timeoutMs ?? 5000, { records: records.length, arrays: 1 }, 'errored')
        const [status] = await resolved(
          [batch],
          subject.timeoutMs ?? 5000,
          'buffer.never-acknowledges-before-the-sink',
        )
        if (early || status !== 'errored') {
          throw new ConformanceError(
            'buffer.never-acknowledges-before-the-sink',
            KIND,
            early
              ? 'the batch resolved before any event was pulled'
              : `the sink ended every event errored, the batch resolved '${status}'`,
            'hand the pushed handles themselves to pull and never end them in the buffer (unless it promises durability: set acknowledgesOnWrite)',
          )
        }
      })
    },
  },
  {
    id: 'buffer.pull-waits',
    title: 'pull waits for a push, and resolves undefined on an aborted signal or at close',
    async check(subject) {
      const { buffer } = await made(subject)
      const timeoutMs = subject.timeoutMs ?? 5000
      let settled = false
      const waiting = buffer.pull().then((next) => {
        settled = true
        return next
      })
      await turns()
      const early = settled
      await endingOnFailure(async (pushed) => {
        const batch = batchOf((subject.records ?? defaultRecords()).slice(0, 1))
        pushed.push(batch)
        await step(subject, 'push()', () => buffer.push(batch.events))
        const got = await within(waiting, timeoutMs, () =>
          hang('a pull waiting for a push', 'buffer.pull-waits'),
        )
        if (isEventArray(got)) got.end('delivered')
        const controller = new AbortController()
        const aborted = buffer.pull(controller.signal)
        controller.abort()
        const afterAbort = await within(aborted, timeoutMs, () =>
          hang('a pull whose signal aborted', 'buffer.pull-waits'),
        )
        const atClose = buffer.pull()
        await step(subject, 'close()', () => buffer.close())
        const afterClose = await within(atClose, timeoutMs, () =>
          hang('a pull pending at close', 'buffer.pull-waits'),
        )
        if (early || !isEventArray(got) || afterAbort !== undefined || afterClose !== undefined) {
          throw new ConformanceError(
            'buffer.pull-waits',
            KIND,
            early
              ? 'pull on an empty buffer resolved before any push'
              : !isEventArray(got)
                ? `a waiting pull did not get the next push, but ${inspect(got, { depth: 1, breakLength: Number.POSITIVE_INFINITY })}`
                : 'pull did not resolve undefined after its signal aborted or the buffer closed',
            'pull waits until an array is available; it resolves undefined when its signal aborts, or once closed and drained',
          )
        }
        await resolved([batch], timeoutMs, 'buffer.pull-waits')
      })
    },
  },
  {
    id: 'buffer.durable-before-acknowledged',
    title: 'what it acknowledged on write survives a crash and comes out of the reopened buffer',
    async check(subject) {
      if (subject.acknowledgesOnWrite !== true) return
      const under = await made(subject)
      if (under.crash === undefined || under.reopen === undefined) {
        // Nothing to check without a crash hook: release what was opened (its files, its lock;
        // close() alone leaves them to a pull that drains).
        await step(subject, 'dispose()', async () => {
          await (under.buffer.dispose?.() ?? under.buffer.close())
        })
        return
      }
      const records = subject.records ?? defaultRecords()
      const receivers = []
      for (const slice of [records.slice(0, 3), records.slice(3)]) {
        const { events, receiver } = batchOf(slice)
        receivers.push({ receiver, slice })
        await step(subject, 'push()', () => under.buffer.push(events))
      }
      // Only what the buffer acknowledged is owed after the crash.
      await within(Promise.all(receivers.map((r) => r.receiver.promise)), subject.timeoutMs ?? 5000, () =>
        hang('acknowledging on write'),
      )
      const owed = receivers.filter((r) => r.receiver.status === 'delivered').flatMap((r) => r.slice)
      if (owed.length === 0) {
        throw new ConformanceError(
          'buffer.durable-before-acknowledged',
          KIND,
          'no batch was acknowledged delivered on write, so durability could not be checked',
          'a buffer that acknowledges on write settles each stored event delivered once it is durable',
        )
      }
      // One array in a sink's hands at the crash (pulled, not yet ended): a buffer that forgets a
      // record once it hands it out, not once the sink settled it, loses it here.
      const inFlight = await within(under.buffer.pull(), subject.timeoutMs ?? 5000, () =>
        hang('a pull of what was pushed', 'buffer.durable-before-acknowledged'),
      )
      let out: JsonObject[]
      try {
        // Then one more push, acknowledged before the crash: a buffer that moves its read position
        // at the pull and writes it with its next sync loses the array in flight only once it synced.
        const after = records.slice(0, 1)
        const { events, receiver } = batchOf(after)
        receivers.push({ receiver, slice: after })
        await step(subject, 'push()', () => under.buffer.push(events))
        await within(receiver.promise, subject.timeoutMs ?? 5000, () => hang('acknowledging on write'))
        // First in what is owed, so it takes its own copy and the example named is one that was lost.
        if (receiver.status === 'delivered') owed.unshift(...after)
        await step(subject, 'the `crash` hook', () => under.crash!())
        const reopened = await step(subject, 'the `reopen` hook', () => under.reopen!())
        await step(subject, 'close() of the reopened buffer', () => reopened.close())
        out = await drain(reopened, subject.timeoutMs ?? 5000, {
          records: records.length + 1,
          arrays: receivers.length,
        })
      } finally {
        // The crashed process would never end them; ended only now, after the reopened buffer
        // was read, so nothing leaks and what they do cannot change what was checked.
        if (isEventArray(inFlight))
          for (const event of inFlight.events) if (!event.isEnded) event.end('errored')
      }
      // One record out for each owed (the push after the pull repeats a record), deeply equal.
      const missing = matchRecords(owed, out).unmatched
      if (missing.length > 0) {
        throw new ConformanceError(
          'buffer.durable-before-acknowledged',
          KIND,
          `${missing.length} record(s) acknowledged delivered were gone after a crash, e.g. ${describeValue(missing[0])}`,
          'settle an event delivered on write only after its bytes are synced (fsync/fdatasync), never when the write is merely queued',
        )
      }
    },
  },
])

/**
 * Registers the buffer suite with the test runner: one test per rule, each on a fresh buffer.
 *
 * @example
 * ```ts
 * import { describe, it } from 'vitest'
 * bufferConformance('my buffer', async () => ({ buffer: await myFactory.open({ componentId: 'k', dataDir }) }), { runner: { describe, it } })
 * ```
 */
export function bufferConformance(
  name: string,
  make: () => Promise<BufferUnderTest>,
  options: BufferConformanceOptions = {},
): void {
  // Each step a rule waits for may take up to timeoutMs: buffer.durable-before-acknowledged waits
  // for make, three pushes, their acknowledgements (two waits), a pull, the crash, the reopen and a
  // close (ten), then drains the reopened buffer, a pull per array (up to records + 5). The runner must
  // not end a rule sooner, or a correct but slow buffer (an fsync per push) fails by the runner's
  // timeout, named by no rule. One more for the turns between them.
  const steps = (options.records ?? defaultRecords()).length + 16
  register(name, bufferRules, { ...options, make }, options.runner, (options.timeoutMs ?? 5000) * steps)
}

/** Runs the buffer suite without a test runner and returns the rules the buffer broke (none: conforms). */
export function checkBuffer(
  make: () => Promise<BufferUnderTest>,
  options: BufferConformanceOptions = {},
): Promise<ConformanceError[]> {
  return runRules(bufferRules, { ...options, make }, KIND)
}
