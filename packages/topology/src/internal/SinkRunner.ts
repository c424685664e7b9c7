/**
 * Runs one sink: pulls arrays from its buffer, writes them with the retry policy, and ends every
 * handle it handed to `write` exactly once with the status the write reported. Up to
 * `concurrency` writes are pending at once (1 by default: each write ends before the next
 * starts); each is retried and settled on its own, so with more than one they may end out of
 * order. The runner pulls the next array only when a write slot is free, so a full sink leaves
 * what waits in its buffer (back pressure, coalescing) as with one write.
 *
 * Invariant: an array is settled once — by its write's outcome, or by `force()` at a stop's
 * deadline (which settles every pending write), whichever comes first; the later one is ignored.
 * `run()` returns only once every write it started has ended. An authoritative sink ends its
 * handles with `{ authoritative: true }`, and tells the batch trackers what it recorded for each
 * (batch, event) it is the first to record, so a source can be told at once. Nothing a sink
 * returns or throws counts as `delivered` unless it says so in a known way: what a write reports
 * is read by {@link classifyWriteError} and {@link SinkRunner}'s result check, and nowhere else.
 */
import {
  type BatchStatusReceiver,
  type DeliveryStatus,
  type EndOptions,
  type EventArray,
  EventStatus,
  type LogEvent,
} from '@ackline/core'
import type { BatchFailure } from '../BatchFailure.js'
import type { EdgeBuffer } from '../EdgeBuffer.js'
import type { LifecycleEvent } from '../LifecycleEvent.js'
import type { ResolvedOptionsOf } from '../OptionsSchema.js'
import { RejectError } from '../RejectError.js'
import { RetryableError } from '../RetryableError.js'
import { RetryPolicy } from '../RetryPolicy.js'
import type { Sink, SinkResult } from '../Sink.js'
import { textOf } from '../textOf.js'
import type { Counters } from './Counters.js'
import { EMPTY, MemoryChannel } from './MemoryChannel.js'

const AUTHORITATIVE: EndOptions = { authoritative: true }
/** The shortest wait before a failed pull of the buffer is tried again, whatever the retry policy. */
const READ_RETRY_MIN_MS = 100

/**
 * What a failed write (or one event's error in a per-event result) means, decided here only:
 * - a `RetryableError`: try again under the retry policy, then `errored`;
 * - a `RejectError`: `rejected` at once;
 * - a `TypeError` or `RangeError`: `rejected` at once, as `UNENCODABLE`. These are what encoding
 *   throws for a value the sink's format cannot represent (`JSON.stringify` of a `BigInt`, of a
 *   cycle, or of a value nested deeper than the stack): the same event fails the same way on
 *   every retry, so retrying it would only make it a poison message. A sink whose `TypeError`
 *   has nothing to do with the events wraps it in a `RetryableError`;
 * - anything else (a socket error, a full disk, a plain `Error`): retryable under the policy.
 */
export function classifyWriteError(error: unknown): 'retryable' | 'rejected' | 'unencodable' {
  if (error instanceof RetryableError) return 'retryable'
  if (error instanceof RejectError) return 'rejected'
  if (error instanceof TypeError || error instanceof RangeError) return 'unencodable'
  return 'retryable'
}

/** The outcome of one write: one status for the whole array, or one per event. */
type Outcome =
  | { readonly status: DeliveryStatus; readonly failure: BatchFailure | undefined }
  | { readonly statuses: readonly DeliveryStatus[]; readonly failures: readonly (BatchFailure | undefined)[] }

const DELIVERED: Outcome = { status: 'delivered', failure: undefined }

export class SinkRunner {
  readonly #authoritative: boolean
  readonly #policy: ResolvedOptionsOf<typeof RetryPolicy>
  readonly #concurrency: number
  /**
   * The arrays being written and not settled yet (a forced stop settles them): the one write of
   * a sink that writes one at a time in a field, several in a set (a set entry hashes the array,
   * which costs more than the rest of a small write's bookkeeping).
   */
  #current: EventArray | undefined = undefined
  /** The array of the one write in flight of a sink that writes one at a time (kept after a forced stop settled it). */
  #writing: EventArray | undefined = undefined
  readonly #pending = new Set<EventArray>()
  /** Wakes the retry back-offs that are sleeping, so a forced stop ends them at once. */
  readonly #wakes = new Set<() => void>()
  #forced = false

  constructor(
    readonly id: string,
    readonly sink: Sink,
    readonly buffer: EdgeBuffer,
    authoritative: boolean,
    retry: RetryPolicy | undefined,
    concurrency: number,
    readonly counters: Counters,
    readonly emit: (fact: LifecycleEvent) => void,
    /** Told, for an authoritative sink, the status recorded for one event of a batch. */
    readonly onRecorded: (
      sourceId: string | undefined,
      receiver: BatchStatusReceiver,
      status: EventStatus,
      failure: BatchFailure | undefined,
    ) => void,
  ) {
    this.#authoritative = authoritative
    this.#policy = RetryPolicy.resolve(retry)
    this.#concurrency = concurrency
  }

  run(): Promise<void> {
    return this.#concurrency === 1 ? this.#runOneAtATime() : this.#runConcurrently()
  }

  async #runOneAtATime(): Promise<void> {
    const buffer = this.buffer
    const memory = buffer instanceof MemoryChannel ? buffer : undefined
    for (;;) {
      // A wake's worth of queued input is taken without a promise; less is waited for until the
      // burst that queued it is over (`MemoryChannel.pullNow`), so that it comes coalesced.
      let array = memory !== undefined ? memory.pullNow() : EMPTY
      if (array === EMPTY) array = await this.#pull()
      if (array === undefined) return
      if (memory !== undefined) array = memory.coalesce(array)
      this.counters.received += array.length
      if (this.#forced) this.#stopped(array)
      else await this.#write(array)
    }
  }

  async #runConcurrently(): Promise<void> {
    let running = 0
    let slotFreed: (() => void) | undefined
    let failed: { readonly error: unknown } | undefined
    let allEnded: (() => void) | undefined
    const ended = (): void => {
      running--
      slotFreed?.()
      if (running === 0) allEnded?.()
    }
    for (;;) {
      while (running >= this.#concurrency) await new Promise<void>((resolve) => (slotFreed = resolve))
      slotFreed = undefined
      // A write that threw past its own handling is the runner's bug: stop taking more, as with one write.
      if (failed !== undefined) break
      const array = await this.#next()
      if (array === undefined) break
      if (this.#forced) {
        this.#stopped(array)
        continue
      }
      running++
      this.#write(array).then(ended, (error: unknown) => {
        failed ??= { error }
        ended()
      })
    }
    if (running > 0) await new Promise<void>((resolve) => (allEnded = resolve))
    if (failed !== undefined) throw failed.error
  }

  /** The next array to write, with what else already waits in memory; `undefined` when drained. */
  async #next(): Promise<EventArray | undefined> {
    let array = await this.#pull()
    if (array === undefined) return undefined
    // What else already waits in memory goes in the same write (a disk buffer hands out its own).
    if (this.buffer instanceof MemoryChannel) array = this.buffer.coalesce(array)
    this.counters.received += array.length
    return array
  }

  /**
   * The buffer's next array, or `undefined` once it is drained. A pull that fails (a disk buffer
   * whose segment cannot be read) is reported (`READ_FAILED`) and tried again after the retry
   * policy's back-off, never less than {@link READ_RETRY_MIN_MS} (a policy of 0 would spin), for
   * as long as the runner runs: stopped for good, the sink would leave every later event waiting
   * until the stop. A forced stop ends the attempts (a stop with no deadline waits for them).
   */
  async #pull(): Promise<EventArray | undefined> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.buffer.pull()
      } catch (error) {
        if (this.#forced) return undefined
        // The attempt is capped for the arithmetic: 0 · 2^1024 is NaN.
        const backoff = RetryPolicy.backoffMs(this.#policy, Math.min(attempt, 64))
        const delay = Number.isFinite(backoff) ? Math.max(READ_RETRY_MIN_MS, backoff) : READ_RETRY_MIN_MS
        this.#report(
          'READ_FAILED',
          `reading its buffer failed (attempt ${attempt}): ${messageOf(error)}; trying again in ${delay} ms`,
          0,
          error,
        )
        await this.#sleep(delay)
        if (this.#forced) return undefined
      }
    }
  }

  /**
   * An array pulled after a forced stop is not written: it is settled `errored` (`STOPPED`). A
   * memory channel hands out nothing then, but a buffer of another kind without `dispose` is only
   * closed, and hands out what it still holds: written, it reached the sink after `stop()` had
   * resolved (one write at a time), or was left live for the leak detector (several).
   */
  #stopped(array: EventArray): void {
    this.counters.inFlight += array.length // as `#write` counts it: `#settle` takes it off
    this.#settle(array, {
      status: 'errored',
      failure: this.#failure('STOPPED', 'the stop deadline passed before the write began'),
    })
  }

  /** Settles every array being written `errored` now and stops retrying. */
  force(): void {
    this.#forced = true
    const pending = [...this.#pending]
    this.#pending.clear()
    if (this.#current !== undefined) pending.push(this.#current)
    this.#current = undefined
    for (const array of pending) {
      this.#settle(array, {
        status: 'errored',
        failure: this.#failure('STOPPED', 'the stop deadline passed while the write was pending'),
      })
    }
    for (const wake of [...this.#wakes]) wake()
  }

  /**
   * Writes one array. Not an async function: the first attempt is called here and settled in
   * one reaction to the sink's promise; only a failed attempt goes on to the retry loop.
   */
  #write(array: EventArray): Promise<void> {
    this.counters.inFlight += array.length
    if (this.#concurrency === 1) {
      this.#current = array
      this.#writing = array
    } else {
      this.#pending.add(array)
    }
    let written: Promise<SinkResult>
    try {
      written = this.sink.write(array)
    } catch (error) {
      return this.#retry(array, error)
    }
    // `Promise.resolve` hands a native promise back as it is; it also takes the plain value or
    // thenable that a sink written in JavaScript may return against the types. One write at a
    // time: the array is `#current`, so the reactions are made once, not two closures per write.
    if (this.#concurrency === 1) return Promise.resolve(written).then(this.#written, this.#failed)
    return Promise.resolve(written).then(
      (result: unknown) => this.#read(array, result),
      (error: unknown) => this.#retry(array, error),
    )
  }

  /** The one write of a sink that writes one at a time returned `result`. */
  readonly #written = (result: unknown): Promise<void> | undefined => this.#read(this.#takeWriting(), result)

  /** The one write of a sink that writes one at a time threw `error`. */
  readonly #failed = (error: unknown): Promise<void> => this.#retry(this.#takeWriting(), error)

  /** The array of the write that just ended (not kept after: it would hold the array until the next write). */
  #takeWriting(): EventArray {
    const array = this.#writing!
    this.#writing = undefined
    return array
  }

  /** Reads what a write of `array` returned, and settles it (or retries, when reading throws). */
  #read(array: EventArray, result: unknown): Promise<void> | undefined {
    let outcome: Outcome
    try {
      outcome = result === undefined ? DELIVERED : this.#perEvent(result, array.length)
    } catch (error) {
      // Reading the result threw (a revoked proxy, a throwing getter): classified like a
      // write that threw, as when the read was inside the retry loop.
      return this.#retry(array, error)
    }
    // A forced stop may have settled this array while the write was pending.
    if (this.#untrack(array)) this.#settle(array, outcome)
    return undefined
  }

  /** The first attempt at writing `array` failed with `error`: classify, retry under the policy, settle. */
  async #retry(array: EventArray, firstError: unknown): Promise<void> {
    let outcome: Outcome
    for (let attempt = 1; ; attempt++) {
      try {
        // The first attempt was made by `#write`; its error is classified like any other.
        if (attempt === 1) throw firstError
        const result: unknown = await this.sink.write(array)
        outcome = result === undefined ? DELIVERED : this.#perEvent(result, array.length)
        break
      } catch (error) {
        const kind = classifyWriteError(error)
        if (kind !== 'retryable') {
          const code = kind === 'rejected' ? 'REJECTED' : 'UNENCODABLE'
          const message = `${kind === 'rejected' ? 'rejected' : 'cannot encode the events, rejected'}: ${messageOf(error)}`
          this.#report('WRITE_FAILED', message, array.length, error)
          outcome = { status: 'rejected', failure: this.#failure(code, message) }
          break
        }
        const last = attempt >= this.#policy.attempts || this.#forced
        const message = `attempt ${attempt} of ${this.#policy.attempts} failed${last ? '' : ', will retry'}: ${textOf(error)}`
        this.#report('WRITE_FAILED', message, array.length, error)
        if (last) {
          outcome = { status: 'errored', failure: this.#failure('WRITE_FAILED', message) }
          break
        }
        await this.#sleep(RetryPolicy.backoffMs(this.#policy, attempt))
        if (this.#forced) {
          outcome = {
            status: 'errored',
            failure: this.#failure('STOPPED', `stopped before retrying: ${message}`),
          }
          break
        }
      }
    }
    // A forced stop may have settled this array while the write was pending.
    if (this.#untrack(array)) this.#settle(array, outcome)
  }

  /** Forgets a write that ended; false when a forced stop settled its array already. */
  #untrack(array: EventArray): boolean {
    if (this.#current === array) {
      this.#current = undefined
      return true
    }
    return this.#pending.delete(array)
  }

  /**
   * Reads a per-event result, which comes from code the types cannot vouch for: anything but an
   * array of one known status (or error) per event is the sink's bug, reported as `BAD_RESULT`,
   * and the events it says nothing valid about are settled `errored`, never `delivered`.
   */
  #perEvent(result: unknown, length: number): Outcome {
    if (!Array.isArray(result) || result.length !== length) {
      const got = Array.isArray(result) ? `${result.length} statuses` : describe(result)
      const message = `returned ${got} for ${length} events; all were settled errored`
      this.#report('BAD_RESULT', message, length)
      return { status: 'errored', failure: this.#failure('BAD_RESULT', message) }
    }
    const statuses = new Array<DeliveryStatus>(length)
    const failures = new Array<BatchFailure | undefined>(length)
    let unknown = 0
    let firstUnknown: unknown
    let errors = 0
    let firstError: unknown
    let reportedErrored: BatchFailure | undefined
    let reportedRejected: BatchFailure | undefined
    for (let i = 0; i < length; i++) {
      // `result[i]` of a hole is `undefined`: an unknown status like any other.
      const entry: unknown = result[i]
      switch (entry) {
        case 'delivered':
          statuses[i] = 'delivered'
          break
        case 'errored':
          statuses[i] = 'errored'
          reportedErrored ??= this.#failure('WRITE_FAILED', 'the sink reported the event errored')
          failures[i] = reportedErrored
          break
        case 'rejected':
          statuses[i] = 'rejected'
          reportedRejected ??= this.#failure('REJECTED', 'the sink reported the event rejected')
          failures[i] = reportedRejected
          break
        default:
          if (entry instanceof Error) {
            const kind = classifyWriteError(entry)
            statuses[i] = kind === 'retryable' ? 'errored' : 'rejected'
            const code =
              kind === 'retryable' ? 'WRITE_FAILED' : kind === 'rejected' ? 'REJECTED' : 'UNENCODABLE'
            failures[i] = this.#failure(code, `${statuses[i]}: ${messageOf(entry)}`)
            if (errors++ === 0) firstError = entry
          } else {
            statuses[i] = 'errored'
            if (unknown++ === 0) firstUnknown = entry
          }
      }
    }
    if (errors > 0) {
      this.#report(
        'WRITE_FAILED',
        `${errors} of ${length} events failed (first: ${messageOf(firstError)})`,
        errors,
        firstError,
      )
    }
    if (unknown > 0) {
      const message = `returned ${unknown} unknown status(es) (first: ${describe(firstUnknown)}); those events were settled errored`
      this.#report('BAD_RESULT', message, unknown)
      const failure = this.#failure('BAD_RESULT', message)
      for (let i = 0; i < length; i++)
        if (statuses[i] === 'errored' && failures[i] === undefined) failures[i] = failure
    }
    return { statuses, failures }
  }

  #settle(array: EventArray, outcome: Outcome): void {
    const events = array.events
    const counters = this.counters
    counters.inFlight -= events.length
    if ('status' in outcome) {
      const { status, failure } = outcome
      if (this.#authoritative) {
        for (let i = 0; i < events.length; i++) {
          const event = events[i]!
          if (!event.isEnded) this.#endAuthoritative(event, status, failure)
        }
      } else {
        const options = failure === undefined ? undefined : { reason: failure }
        try {
          array.end(status, options)
        } catch {
          // A sink ended some handle itself (against its contract): end the rest one by one.
          for (let i = 0; i < events.length; i++) {
            const event = events[i]!
            if (!event.isEnded) event.end(status, options)
          }
        }
      }
      counters.settled(status, events.length)
      if (failure !== undefined) counters.failed(failure.code, events.length)
      return
    }
    const { statuses, failures } = outcome
    for (let i = 0; i < events.length; i++) {
      const event = events[i]!
      const status = statuses[i]!
      const failure = failures[i]
      if (!event.isEnded) {
        if (this.#authoritative) this.#endAuthoritative(event, status, failure)
        else event.end(status, failure === undefined ? undefined : { reason: failure })
      }
      counters.settled(status, 1)
      if (failure !== undefined) counters.failed(failure.code, 1)
    }
  }

  /** Ends one handle authoritatively, first reporting what it records for each batch not recorded yet. */
  #endAuthoritative(event: LogEvent, status: DeliveryStatus, failure: BatchFailure | undefined): void {
    // Read before the end: a slot already recorded (by another authoritative copy) is not counted
    // twice. Through fields and one bound visitor: nothing is made per event. Saved and restored:
    // `onRecorded` may reach this runner again (a forced stop from a fact it emits), whose end
    // must not change what this one records for the batches it has not visited yet.
    const outerStatus = this.#recording
    const outerFailure = this.#recordingFailure
    this.#recording = status
    this.#recordingFailure = failure
    try {
      event.forEachBatch(this.#recordOne)
    } finally {
      this.#recording = outerStatus
      this.#recordingFailure = outerFailure
    }
    event.end(status, failure === undefined ? AUTHORITATIVE : { authoritative: true, reason: failure })
  }

  /** The status and failure {@link SinkRunner.#endAuthoritative} is recording. */
  #recording: DeliveryStatus = 'delivered'
  #recordingFailure: BatchFailure | undefined = undefined

  /** Reports what the authoritative end being made records for one batch of its event. */
  readonly #recordOne = (
    receiver: BatchStatusReceiver,
    sourceId: string | undefined,
    current: EventStatus,
  ): void => {
    if (current !== 'recorded')
      this.onRecorded(
        sourceId,
        receiver,
        EventStatus.update(current, this.#recording),
        this.#recordingFailure,
      )
  }

  #failure(code: string, message: string): BatchFailure {
    return { componentId: this.id, code, message: `sink '${this.id}' (${this.sink.kind}): ${message}` }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = (): void => {
        clearTimeout(timer)
        this.#wakes.delete(wake)
        resolve()
      }
      const timer = setTimeout(wake, ms)
      this.#wakes.add(wake)
    })
  }

  #report(
    code: 'WRITE_FAILED' | 'BAD_RESULT' | 'READ_FAILED',
    message: string,
    events: number,
    cause?: unknown,
  ): void {
    this.emit({
      type: 'component_error',
      component: this.id,
      code,
      message: `sink '${this.id}' (${this.sink.kind}): ${message}`,
      events,
      ...(cause === undefined ? {} : { cause }),
    })
  }
}

function messageOf(error: unknown): string {
  try {
    return error instanceof Error ? `${textOf(error.name)}: ${textOf(error.message)}` : textOf(error)
  } catch {
    return textOf(error) // a `name` or `message` getter that throws
  }
}

/** A value from untyped code, for a message: short, and never throwing. */
function describe(value: unknown): string {
  if (typeof value === 'string') return `'${value.length > 40 ? `${value.slice(0, 40)}…` : value}'`
  if (typeof value === 'function') return 'a function'
  if (value === null || typeof value !== 'object') return String(value)
  return Array.isArray(value) ? 'an array' : 'an object'
}
