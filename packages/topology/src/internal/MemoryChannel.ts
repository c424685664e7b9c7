/**
 * The bounded in-memory channel in front of a component: the default {@link EdgeBuffer}.
 *
 * Invariant: at most `maxEvents` events wait in the queue (one larger array is let in when the
 * queue is empty, so an oversized batch cannot deadlock), plus at most one array per blocked
 * producer. Every array pushed is handed to `pull` or settled (dropped when full, or forced at a
 * stop's deadline); none is lost.
 */
import { type DeliveryStatus, type EndOptions, EventArray } from '@ackline/core'
import type { BatchFailure } from '../BatchFailure.js'
import type { EdgeBuffer } from '../EdgeBuffer.js'

/**
 * The promise every push that did not have to wait returns (and `Output.send` when each of its
 * pushes did not): a producer that sees it knows there was room, and goes on without waiting for
 * a microtask. Back pressure is untouched: a push that must wait returns a promise of its own.
 */
export const RESOLVED: Promise<void> = Promise.resolve()

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

  readonly #waitForPush = (resolve: (array: EventArray | undefined) => void): void => {
    this.#puller = resolve
  }

  constructor(options: MemoryChannelOptions) {
    this.#options = options
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
      puller(array)
      return RESOLVED
    }
    if (
      this.#blocked.length === 0 &&
      (this.#queued === 0 || this.#queued + array.length <= this.#options.maxEvents)
    ) {
      this.#enqueue(array)
      return RESOLVED
    }
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

  pull(signal?: AbortSignal): Promise<EventArray | undefined> {
    if (this.#head < this.#tail) return Promise.resolve(this.#take())
    if (this.#closed || signal?.aborted === true) return Promise.resolve(undefined)
    // The runtime's consumers wait without a signal, once per array at small batches: one
    // executor for the channel's life rather than a closure per wait.
    if (signal === undefined) return new Promise<EventArray | undefined>(this.#waitForPush)
    return new Promise<EventArray | undefined>((resolve) => {
      this.#puller = resolve
      signal?.addEventListener(
        'abort',
        () => {
          if (this.#puller === resolve) {
            this.#puller = undefined
            resolve(undefined)
          }
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
    let head = this.#head
    if (head >= tail) return first
    const limit = Math.min(upTo, this.#options.maxEvents)
    let total = first.length
    if (total + queue[head]!.length > limit) return first
    const events = first.events.slice()
    do {
      const next = queue[head]!
      if (total + next.length > limit) break
      const list = next.events
      for (let i = 0; i < list.length; i++) events.push(list[i]!)
      total += next.length
      this.#queued -= next.length
      queue[head++] = undefined
    } while (head < tail)
    this.#head = head
    this.#taken()
    this.#admit()
    return new EventArray(events)
  }

  close(): Promise<void> {
    this.#closed = true
    if (this.#head >= this.#tail && this.#blocked.length === 0) this.#wakePuller()
    return RESOLVED
  }

  /** Settles everything waiting with `status`, releases blocked producers and closes. Returns the events settled. */
  force(status: DeliveryStatus): number {
    let events = 0
    for (let i = this.#head; i < this.#tail; i++) {
      const array = this.#queue[i]!
      events += array.length
      array.end(status, this.#stopped)
    }
    this.#queue = []
    this.#head = 0
    this.#tail = 0
    this.#queued = 0
    const blocked = this.#blocked
    this.#blocked = []
    for (const { array, resolve } of blocked) {
      events += array.length
      array.end(status, this.#stopped)
      resolve()
    }
    this.#closed = true
    this.#wakePuller()
    return events
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
