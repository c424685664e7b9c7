/**
 * Finalizers taken off events so the events can be stored (serialized to a disk buffer, say) and
 * the finalizers put back on the events read back later.
 *
 * Invariant: each group holds exactly the reference its event held, and is consumed exactly
 * once: attached to an event, or ended with a status. Consuming a group twice throws.
 *
 * @module
 */
import type { DeliveryStatus } from './EventStatus.js'
import { FinalizationError } from './FinalizationError.js'
import { endRef, explainRef, type Ref } from './internal/refs.js'
import { shown } from './internal/shown.js'
import { deliveryStatusCode, ERRORED } from './internal/statusCodes.js'
import type { EndOptions, LogEvent } from './LogEvent.js'

const CONSUMED: unique symbol = Symbol('ackline.consumed')

/**
 * One group of finalizers per event, in the order of the events they were detached from.
 *
 * @example
 * ```ts
 * const groups = EventFinalizerGroups.detach(array) // the events now carry no finalizers
 * await buffer.write(array)                          // store the data
 * const restored = await buffer.read()               // later: events decoded from disk
 * groups.attachAll(restored)                         // each event gets its own group back
 * ```
 */
export class EventFinalizerGroups {
  readonly #refs: (Ref | typeof CONSUMED)[]
  readonly #slots: number[]
  readonly #sourceIds: (string | undefined)[]

  private constructor(refs: Ref[], slots: number[], sourceIds: (string | undefined)[]) {
    this.#refs = refs
    this.#slots = slots
    this.#sourceIds = sourceIds
  }

  /**
   * Takes the finalizers off every event, one group per event. The events stay live handles
   * without finalizers (ending them then settles nothing). An ended event throws a
   * `FinalizationError` (`USE_AFTER_END`), and the events before it get their finalizers back.
   */
  static detach(events: Iterable<LogEvent>): EventFinalizerGroups {
    const refs: Ref[] = []
    const slots: number[] = []
    const sourceIds: (string | undefined)[] = []
    const taken: LogEvent[] = []
    try {
      for (const event of events) {
        const { ref, slot } = event._take()
        taken.push(event)
        refs.push(ref)
        slots.push(slot)
        sourceIds.push(event._sourceId)
      }
    } catch (error) {
      // Otherwise the finalizers taken so far would be held by nobody: their batches would wait
      // for good, and the events' ends would settle nothing.
      for (let i = 0; i < taken.length; i++) taken[i]!._put(refs[i], slots[i]!)
      throw error
    }
    return new EventFinalizerGroups(refs, slots, sourceIds)
  }

  /** How many groups there are (consumed or not). */
  get size(): number {
    return this.#refs.length
  }

  /** How many groups are not consumed yet. */
  get remaining(): number {
    let n = 0
    for (const ref of this.#refs) if (ref !== CONSUMED) n++
    return n
  }

  /** Whether group `index` was attached or ended already. */
  isConsumed(index: number): boolean {
    return this.#refs[index] === CONSUMED
  }

  /**
   * Puts group `index` on `event` (added to whatever finalizers the event already has). An event
   * that has ended throws a `FinalizationError` before the group is taken: the group stays
   * unconsumed, to be attached elsewhere or ended. An `index` that is not one of the groups' (not
   * a whole number, or out of range) throws a `RangeError`; an `event` that is no `LogEvent` (from
   * untyped code) a `TypeError`, the group again unconsumed.
   */
  attach(index: number, event: LogEvent): void {
    // Checked before the group is taken, as an ended event is: the group stays to attach elsewhere.
    if (typeof (event as Partial<LogEvent> | null)?._live !== 'function') {
      throw new TypeError(`EventFinalizerGroups.attach: the event must be a LogEvent, got ${what(event)}`)
    }
    event._live('attach finalizers to')
    event._put(this.#take(index), this.#slots[index]!)
  }

  /** Puts group `i` on `events[i]` for every group; the counts must match (`null` is a `TypeError`). */
  attachAll(events: Iterable<LogEvent> & { readonly length: number }): void {
    if (events == null) {
      throw new TypeError(
        `EventFinalizerGroups.attachAll: the events must be an array of LogEvent, got ${shown(events)}`,
      )
    }
    if (events.length !== this.size) {
      throw new RangeError(`cannot attach ${this.size} finalizer groups to ${events.length} events`)
    }
    let i = 0
    for (const event of events) this.attach(i++, event)
  }

  /**
   * Ends group `index` as its event's handle would end: with a status, or without one. With
   * `authoritative`, the status is sent to the batches now and later ones are ignored; `reason`
   * is kept as `LogEvent.end` keeps it; `null` options are none, as there. An `index` that is
   * not one of the groups' throws a `RangeError`, as in {@link attach}.
   */
  end(index: number, status?: DeliveryStatus, options?: EndOptions | null): void {
    const code = status === undefined ? -1 : deliveryStatusCode(status)
    // `null` (untyped code) is no options, as `LogEvent.end` and `EventArray.end` take it.
    const reason = options?.reason
    const authoritative = options?.authoritative === true
    const ref = this.#take(index)
    const slot = this.#slots[index]!
    if (code >= ERRORED && reason !== undefined) explainRef(ref, slot, code, reason)
    endRef(ref, slot, code, authoritative)
  }

  /** Ends every group not consumed yet, each as {@link end} would. */
  endAll(status?: DeliveryStatus, options?: EndOptions | null): void {
    for (let i = 0; i < this.#refs.length; i++) if (this.#refs[i] !== CONSUMED) this.end(i, status, options)
  }

  #take(index: number): Ref {
    // Not an integer (0.5, NaN): `#refs[index]` would read no group and mark none consumed, so
    // the call would do nothing and the real group would keep its batch waiting.
    if (!Number.isInteger(index) || index < 0 || index >= this.#refs.length) {
      throw new RangeError(`finalizer group ${index} does not exist (there are ${this.#refs.length})`)
    }
    const ref = this.#refs[index]
    if (ref === CONSUMED) {
      throw new FinalizationError(
        'GROUP_CONSUMED',
        `finalizer group ${index} was already consumed`,
        this.#sourceIds[index],
      )
    }
    this.#refs[index] = CONSUMED
    return ref
  }
}

/** A value that is no event, as an error message shows it. */
const what = (value: unknown): string =>
  typeof value === 'object' && value !== null
    ? Array.isArray(value)
      ? 'an array'
      : 'an object'
    : shown(value)
