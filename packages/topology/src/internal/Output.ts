/**
 * One output port of a component and the edges it feeds.
 *
 * Invariant (fan-out): with n consumers, the first gets the original handles and every other one
 * a clone made before anything is pushed, so each consumer owns exactly one handle per event and
 * the source's batch waits for all of them. A port that nothing reads ends its events without a
 * status (they were processed as the topology asked) and counts them as discarded.
 */
import type { EventArray } from '@ackline/core'
import type { Counters } from './Counters.js'
import { RESOLVED } from './MemoryChannel.js'

/** Where an edge delivers: a consumer's buffer, possibly behind a settle-on-accept step. */
export interface Inlet {
  push(array: EventArray): Promise<void>
}

const nothing = (): void => {}

export class Output {
  readonly #inlets: readonly Inlet[]
  readonly #counters: Counters

  constructor(inlets: readonly Inlet[], counters: Counters) {
    this.#inlets = inlets
    this.#counters = counters
  }

  /** Sends `array` to every consumer; returns `RESOLVED` (see `MemoryChannel`) when none had to wait. */
  send(array: EventArray): Promise<void> {
    const inlets = this.#inlets
    const n = inlets.length
    if (array.length === 0) return RESOLVED
    if (n === 0) {
      this.#counters.discarded += array.length
      array.end()
      return RESOLVED
    }
    this.#counters.sent += array.length * n
    if (n === 1) return inlets[0]!.push(array)
    const copies: EventArray[] = [array]
    for (let i = 1; i < n; i++) copies.push(passedOn(array.clone()))
    let pending: Promise<void>[] | undefined
    for (let i = 0; i < n; i++) {
      const pushed = inlets[i]!.push(copies[i]!)
      if (pushed === RESOLVED) continue
      if (pending === undefined) pending = [pushed]
      else pending.push(pushed)
    }
    // Every consumer had room: the producer need not wait.
    if (pending === undefined) return RESOLVED
    return Promise.all(pending).then(nothing)
  }
}

/**
 * Notes every event of `array` as passed on (`LogEvent.markPassedOn`): handles a component did not
 * make or keep, such as a fan-out's copies, are not its consumer's own (what a source sends with
 * `sendEvents` is marked by `EventArray.markSent`). Returns `array`.
 */
function passedOn(array: EventArray): EventArray {
  const events = array.events
  for (let i = 0; i < events.length; i++) events[i]!.markPassedOn()
  return array
}
