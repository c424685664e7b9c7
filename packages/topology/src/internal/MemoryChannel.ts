/**
 * The bounded in-memory channel in front of a component: the default {@link EdgeBuffer}.
 *
 * Invariant: at most `maxEvents` events wait in the queue (one larger array is let in when the
 * queue is empty, so an oversized batch cannot deadlock), plus at most one array per blocked
 * producer, plus the one array held for a consumer whose wake is scheduled. Every array pushed is
 * handed to `pull` or settled (dropped when full, or forced at a stop's deadline); none is lost.
 *
 * Waking: a consumer waiting for input is handed a small array (fewer than `WAKE_AT` events) only
 * once the microtask queue has drained (in `process.nextTick`, still within the same task: the
 * producer's burst is over) or once `WAKE_AT` events wait, whichever comes first; a consumer
 * that coalesces and finds a few events queued (`pullNow`) waits the same way. What the burst
 * queued meanwhile is there for it to coalesce. A larger array, a full channel, a producer that
 * finds it full, a second `pull`, a close or a forced stop wakes it at once.
 */
import { nextTick } from 'node:process'
import { type DeliveryStatus, type EndOptions, EventArray, type LogEvent } from '@ackline/core'
import type { BatchFailure } from '../BatchFailure.js'
import type { EdgeBuffer } from '../EdgeBuffer.js'

/**
 * The promise every push that did not have to wait returns (and `Output.send` when each of its
 * pushes did not): a producer that sees it knows there was room, and goes on without waiting for
 * a microtask. Back pressure is untouched: a push that must wait returns a promise of its own.
 */
export const RESOLVED: Promise<void> = Promise.resolve()

/**
 * How many events wake a waiting consumer before its producer's burst is over: an array this large
 * is handed over at once, as are smaller ones once this many wait (the consumer then coalesces
 * what is queued, up to its own bound: 128 events for a transform, `maxEvents` for a sink).
 * Coalescing many small arrays saves a consumer's call per array; gathering more only grows what
 * is in flight (more objects alive across young collections, colder caches). Woken only at the
 * end of each burst, a generator → remap → blackhole topology at batch 100 took about 25 % more
 * time per event than with this bound, and at batch 1 a bound of 512 was slower than 128 too
 * (alternating runs, RFC 0002).
 */
export const WAKE_AT = 128

/**
 * Coalescing arrays of this many events or more on average is done with one native
 * `Array.prototype.concat` (about 0.7 ns per event at batch 100, against 4 for a copy loop);
 * smaller ones (batch 1 to 15) are copied in a loop into an array of the final size, as `concat`
 * costs about as much per array as a loop does per event.
 */
const COPY_AT = 16
/**
 * At most this many arrays are passed to one `concat` (one argument each): V8 refuses a call of
 * about 125,000 arguments, which a sink whose `maxEvents` is in the millions could reach. More
 * are copied in the loop.
 */
const CONCAT_MAX = 4096

/** What {@link MemoryChannel.tryPull} returns when nothing is queued. */
export const EMPTY: unique symbol = Symbol('ackline.empty')

interface Blocked {
  readonly array: EventArray
  readonly resolve: () => void
}

export interface MemoryChannelOptions {
  readonly maxEvents: number
  readonly whenFull: 'block' | 'drop_newest'
  readonly droppedStatus: DeliveryStatus
  /** Why events dropped when full were not delivered (told to their batches). */
  readonly droppedFailure: BatchFailure
  /** Why events settled by a forced stop, or pushed after it, were not delivered. */
  readonly stoppedFailure: BatchFailure
  /** Told how many events were dropped because the channel was full. */
  readonly onDrop: (events: number, status: DeliveryStatus) => void
}

export class MemoryChannel implements EdgeBuffer {
  readonly #options: MemoryChannelOptions
  readonly #dropped: EndOptions
  readonly #stopped: EndOptions
  /**
   * Queued arrays are `#queue[#head]` up to `#queue[#tail - 1]`; slots outside hold `undefined`.
   * A drained queue starts over at slot 0 in the same array, so a channel that drains after
   * every array (the usual case at small batches) allocates nothing per array.
   */
  #queue: (EventArray | undefined)[] = []
  #head = 0
  #tail = 0
  #queued = 0
  #blocked: Blocked[] = []
  #puller: ((array: EventArray | undefined) => void) | undefined = undefined
  #closed = false

  /** A consumer whose wake is scheduled, and the array it is handed then (not in the queue). */
  #waking: ((array: EventArray | undefined) => void) | undefined = undefined
  #handoff: EventArray | undefined = undefined
  /** Events that wake a waiting consumer at once: `WAKE_AT`, or `maxEvents` when smaller (a full channel). */
  readonly #wakeAt: number
  /**
   * Hands a waiting consumer the array held for it (`#waking` and `#handoff` are set and cleared
   * together). Scheduled in `process.nextTick`, which Node runs once the microtask queue is
   * empty: a producer that sends in microtasks (a source whose sends find room, an upstream
   * component working through a coalesced array) has finished its burst by then, so a consumer
   * that coalesces takes the burst as one array where it used to wake once per array. It runs
   * within the same task, before any timer or I/O callback: the wait is for code already queued
   * to run, never for a timer or more input. Called earlier when the wait should end at once (see
   * the module header); the scheduled call then finds nothing to do. `nextTick` is taken from
   * `node:process` at load: a fake-timer library that replaces `process.nextTick` cannot stall
   * the pipeline.
   */
  readonly #wake = (): void => {
    const puller = this.#waking
    const array = this.#handoff
    this.#waking = undefined
    this.#handoff = undefined
    if (puller !== undefined) puller(array)
  }

  /**
   * A consumer waits: for the next push when nothing is queued; with a few events queued (not
   * `#ripe`), for the end of the burst that queued them, holding the head of the queue.
   */
  readonly #waitForPush = (resolve: (array: EventArray | undefined) => void): void => {
    // A second pull while a wake is scheduled: the first waiter is handed its array now.
    if (this.#waking !== undefined) this.#wake()
    if (this.#head < this.#tail) this.#hold(resolve, this.#take())
    else this.#puller = resolve
  }

  /** Holds `array` for `consumer`, and schedules its wake for when the burst is over. */
  #hold(consumer: (array: EventArray | undefined) => void, array: EventArray): void {
    this.#waking = consumer
    this.#handoff = array
    nextTick(this.#wake)
  }

  /**
   * Whether what is queued is worth taking at once rather than at the end of the burst: enough
   * events to make a full wake (`#wakeAt`), producers blocked on a full channel, or a closed
   * channel.
   */
  #ripe(): boolean {
    return this.#queued >= this.#wakeAt || this.#blocked.length > 0 || this.#closed
  }

  constructor(options: MemoryChannelOptions) {
    this.#options = options
    this.#wakeAt = Math.min(WAKE_AT, options.maxEvents)
    this.#dropped = { reason: options.droppedFailure }
    this.#stopped = { reason: options.stoppedFailure }
  }

  /** Slots of the queue's array, empty ones included (for tests of its bound). */
  get slots(): number {
    return this.#queue.length
  }

  /** Events waiting in the queue (blocked producers' arrays not counted). */
  get queuedEvents(): number {
    return this.#queued
  }

  push(array: EventArray): Promise<void> {
    if (this.#closed) {
      // Only a forced stop closes a channel under a producer's feet: what arrives late is not delivered.
      array.end('errored', this.#stopped)
      return RESOLVED
    }
    if (array.length === 0) return RESOLVED
    const puller = this.#puller
    if (puller !== undefined) {
      this.#puller = undefined
      if (array.length >= this.#wakeAt) {
        puller(array)
        return RESOLVED
      }
      // A small array: handed to the consumer as before, but the consumer is woken only once the
      // producer's burst is over or WAKE_AT events wait (see `#wake`); what the burst queues
      // meanwhile is there for it to coalesce.
      this.#hold(puller, array)
      return RESOLVED
    }
    if (
      this.#blocked.length === 0 &&
      (this.#queued === 0 || this.#queued + array.length <= this.#options.maxEvents)
    ) {
      this.#enqueue(array)
      if (this.#waking !== undefined && this.#queued + this.#handoff!.length >= this.#wakeAt) this.#wake()
      return RESOLVED
    }
    // Full: a consumer whose wake is scheduled is handed its array now.
    if (this.#waking !== undefined) this.#wake()
    if (this.#options.whenFull === 'drop_newest') {
      array.end(this.#options.droppedStatus, this.#dropped)
      this.#options.onDrop(array.length, this.#options.droppedStatus)
      return RESOLVED
    }
    return new Promise<void>((resolve) => {
      this.#blocked.push({ array, resolve })
    })
  }

  /**
   * The next queued array without waiting: {@link EMPTY} when none is queued (then `pull`
   * waits), `undefined` once the channel is closed and drained. A consumer that keeps up takes
   * its input this way with no promise per array.
   */
  tryPull(): EventArray | undefined | typeof EMPTY {
    if (this.#head < this.#tail) return this.#take()
    return this.#closed ? undefined : EMPTY
  }

  /**
   * What the runtime's consumers take their input with: {@link MemoryChannel.tryPull} when what
   * is queued is worth taking at once (see `#ripe`); otherwise {@link EMPTY}, and the consumer
   * calls `pull`, which hands it the head of the queue once the producer's burst is over (or
   * `WAKE_AT` events wait), with what queued meanwhile behind it to coalesce.
   */
  pullNow(): EventArray | undefined | typeof EMPTY {
    if (this.#head < this.#tail) return this.#ripe() ? this.#take() : EMPTY
    return this.#closed ? undefined : EMPTY
  }

  pull(signal?: AbortSignal): Promise<EventArray | undefined> {
    if (this.#head < this.#tail && this.#ripe()) return Promise.resolve(this.#take())
    if (this.#closed || signal?.aborted === true) {
      return Promise.resolve(this.#head < this.#tail ? this.#take() : undefined)
    }
    // The runtime's consumers wait without a signal, once per wake: one executor for the
    // channel's life rather than a closure per wait.
    if (signal === undefined) return new Promise<EventArray | undefined>(this.#waitForPush)
    return new Promise<EventArray | undefined>((resolve) => {
      this.#waitForPush(resolve)
      signal?.addEventListener(
        'abort',
        () => {
          if (this.#puller === resolve) this.#puller = undefined
          else if (this.#waking === resolve) this.#unwake()
          else return
          resolve(undefined)
        },
        { once: true },
      )
    })
  }

  /** Takes the head of a non-empty queue. */
  #take(): EventArray {
    const array = this.#queue[this.#head]!
    this.#queue[this.#head++] = undefined
    this.#taken()
    this.#queued -= array.length
    this.#admit()
    return array
  }

  /**
   * `first` (an array just pulled) and, taken without waiting, the arrays queued behind it while
   * the total stays within `upTo` (at most `maxEvents`, the default), as one array: a consumer
   * that fell behind catches up with one call (one write, one fsync) instead of one per array.
   * Nothing waits for more to arrive, so no latency is added; each event keeps its own
   * finalizers, so acknowledgements are as if the arrays had been handed over one by one.
   */
  coalesce(first: EventArray, upTo = this.#options.maxEvents): EventArray {
    const queue = this.#queue
    const tail = this.#tail
    const head = this.#head
    const limit = Math.min(upTo, this.#options.maxEvents)
    let total = first.length
    let end = head
    while (end < tail && total + queue[end]!.length <= limit) total += queue[end++]!.length
    if (end === head) return first
    const taken = end - head
    let events: LogEvent[]
    if (total >= COPY_AT * (taken + 1) && taken <= CONCAT_MAX) {
      // Large arrays: one native copy of them all (see COPY_AT).
      const lists = new Array<readonly LogEvent[]>(taken)
      for (let k = 0; k < taken; k++) lists[k] = queue[head + k]!.events
      events = first.events.concat(...lists)
    } else {
      // Many small arrays: one array of the final size, filled in a loop.
      events = new Array<LogEvent>(total)
      const own = first.events
      let j = 0
      for (let i = 0; i < own.length; i++) events[j++] = own[i]!
      for (let k = head; k < end; k++) {
        const list = queue[k]!.events
        for (let i = 0; i < list.length; i++) events[j++] = list[i]!
      }
    }
    for (let k = head; k < end; k++) queue[k] = undefined
    this.#queued -= total - first.length
    this.#head = end
    this.#taken()
    this.#admit()
    return new EventArray(events)
  }

  close(): Promise<void> {
    this.#closed = true
    if (this.#waking !== undefined) this.#wake()
    if (this.#head >= this.#tail && this.#blocked.length === 0) this.#wakePuller()
    return RESOLVED
  }

  /**
   * Ends the handles of `array` still live with `status` (the stop's reason); returns how many.
   * One ended already (untyped code upstream ended a handle it passed on) is skipped: `EventArray.end`
   * with a reason throws at it, which left a forced stop half done.
   */
  #settle(array: EventArray, status: DeliveryStatus): number {
    const events = array.events
    let live = 0
    for (let i = 0; i < events.length; i++) if (!events[i]!.isEnded) live++
    if (live === events.length) array.end(status, this.#stopped)
    else for (const event of events) if (!event.isEnded) event.end(status, this.#stopped)
    return live
  }

  /** Settles everything waiting with `status`, releases blocked producers and closes. Returns the events settled. */
  force(status: DeliveryStatus): number {
    let events = 0
    for (let i = this.#head; i < this.#tail; i++) events += this.#settle(this.#queue[i]!, status)
    this.#queue = []
    this.#head = 0
    this.#tail = 0
    this.#queued = 0
    const handoff = this.#handoff
    const waking = this.#waking
    if (handoff !== undefined) {
      // Not handed over yet: settled here, and its consumer is told the channel is over now
      // (the wake scheduled for it finds nothing to do).
      this.#handoff = undefined
      this.#waking = undefined
      events += this.#settle(handoff, status)
      waking?.(undefined)
    }
    const blocked = this.#blocked
    this.#blocked = []
    for (const { array, resolve } of blocked) {
      events += this.#settle(array, status)
      resolve()
    }
    this.#closed = true
    this.#wakePuller()
    return events
  }

  /** A consumer whose wake was scheduled stopped waiting: its array goes back to the queue's head. */
  #unwake(): void {
    const array = this.#handoff!
    this.#waking = undefined
    this.#handoff = undefined
    if (this.#head > 0) this.#queue[--this.#head] = array
    else {
      this.#queue.splice(this.#head, 0, array)
      this.#tail++
    }
    this.#queued += array.length
  }

  #enqueue(array: EventArray): void {
    this.#queue[this.#tail++] = array
    this.#queued += array.length
  }

  /** Lets blocked producers in, oldest first, while there is room. */
  #admit(): void {
    while (this.#blocked.length > 0) {
      const next = this.#blocked[0]!
      if (this.#queued !== 0 && this.#queued + next.array.length > this.#options.maxEvents) return
      this.#blocked.shift()
      this.#enqueue(next.array)
      next.resolve()
    }
    if (this.#closed && this.#head >= this.#tail) this.#wakePuller()
  }

  /**
   * Arrays were taken from the head. A queue that drained starts over at slot 0, in the same
   * array unless a burst made it large. A queue that never drains (a steady backlog) would grow a
   * slot per array: once more than half of it (and over 1,024 slots) lies before the head, what
   * is queued moves to the front.
   */
  #taken(): void {
    const head = this.#head
    const tail = this.#tail
    if (head === tail) {
      this.#head = 0
      this.#tail = 0
      if (this.#queue.length > 1024) this.#queue = []
    } else if (head > 1024 && head * 2 > tail) {
      this.#queue.copyWithin(0, head, tail)
      this.#queue.fill(undefined, tail - head, tail)
      this.#head = 0
      this.#tail = tail - head
    }
  }

  #wakePuller(): void {
    const puller = this.#puller
    if (puller !== undefined) {
      this.#puller = undefined
      puller(undefined)
    }
  }
}
