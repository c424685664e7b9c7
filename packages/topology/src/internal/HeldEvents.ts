/**
 * The input events a transform with `flush` keeps across calls (a window, a reduce group), as its
 * runner tracks them.
 *
 * Invariant: `live()` is exactly the events added that have neither ended nor been passed to
 * `leave`. Holding is mostly first in, first out (a window passes on its oldest events, a reduce
 * group its first one), so the events are kept in a queue in the order they were added, not in a
 * hash set: an event that leaves from the front costs a comparison, and adding one costs a push.
 * An event that leaves from elsewhere is noted in a set of leavers; events ended some other way
 * (merged, dropped) stay in place. Both are dropped by a compaction, which runs after a call while
 * the queue is short, and once it is long when it has doubled since the last one, when the
 * leavers are half of it, or when its dead front is half of its array and a leaver is noted; a
 * dead front with no leaver noted is shifted away without reading the events. So holding n events
 * costs amortised O(1) per event whatever n is. Until then a leaver stays referenced here (fewer
 * than half the queue), which delays its collection (and so the leak detector's notice, should
 * a later component drop it without ending it), never its status.
 */
import type { LogEvent } from '@ackline/core'

/** Up to this many held events, the queue is compacted after every call. */
const SMALL = 64

export class HeldEvents {
  /**
   * The held events from `#head` to `#tail`, in the order added; `undefined` elsewhere. A
   * compaction or a shift moves the events to the front and clears the rest, and adding reuses the
   * slots: the array is shortened only when eight times larger than what it keeps (after a burst).
   * Cut to its live length at every compaction, it was grown again by the next pushes, copying the
   * whole queue each time: at 10,000 held, a fifth of a window's time.
   */
  #queue: (LogEvent | undefined)[] = []
  #head = 0
  #tail = 0
  /** Events that left other than from the front, forgotten at the next compaction. */
  readonly #left = new Set<LogEvent>()
  /** How many events the queue kept at its last compaction. */
  #compacted = 0
  /** Whom the events are kept for (`LogEvent.markKept`): the runner's number. */
  readonly #holder: number

  constructor(holder = 0) {
    this.#holder = holder
  }

  /**
   * Whether the queue keeps no reference at all: every event added has left from the front, or
   * none was added since a compaction emptied it. (An event that left out of order stays until a
   * compaction, so this may be false while nothing live is held.)
   */
  get isEmpty(): boolean {
    return this.#head === this.#tail
  }

  /** How long the queue's array is (what the cut after a burst bounds); for tests. */
  get capacity(): number {
    return this.#queue.length
  }

  /** How many events that left out of order are still noted (until the next compaction); for tests. */
  get noted(): number {
    return this.#left.size
  }

  /** How many references this keeps, dead ones included (what a compaction bounds). */
  get slots(): number {
    return this.#tail + this.#left.size
  }

  /** Holds `event`, an input the call neither passed on nor ended: the transform's own now (`markKept`). */
  add(event: LogEvent): void {
    event.markKept(this.#holder)
    const tail = this.#tail++
    if (tail < this.#queue.length) this.#queue[tail] = event
    else this.#queue.push(event)
  }

  /**
   * Forgets `event`, which a call emitted: a held event leaving, or any other event (one of the
   * call's own inputs, one it created), which is then forgotten at the next compaction.
   */
  leave(event: LogEvent): void {
    const queue = this.#queue
    const tail = this.#tail
    let head = this.#head
    // Events at the front that ended (merged, dropped) left already: step over them.
    while (head < tail && queue[head]!.isEnded) queue[head++] = undefined
    if (head < tail && queue[head] === event) queue[head++] = undefined
    else this.#left.add(event)
    this.#head = head
  }

  /**
   * After a call: compacts when the queue is short, or once it is long, when enough of it is dead.
   * A long queue whose only waste is its dead front (a window letting its oldest events go) is
   * shifted instead, without reading its events: a compaction reads every held event, which at
   * 10,000 held are far apart in memory, and it cost a window a tenth of its time there.
   */
  settle(): void {
    const size = this.#tail - this.#head
    if (size <= SMALL || size >= 2 * this.#compacted || this.#left.size * 2 >= size) this.#compact()
    // A dead front half of the array: shifted, unless leavers are noted, which only a compaction
    // forgets (while any is, the runner's quick check cannot take events from the front).
    else if (this.#head * 2 >= this.#tail) {
      if (this.#left.size > 0) this.#compact()
      else this.#shift()
    }
  }

  /**
   * How many of `list`'s first events are the held events at the front of the queue, in the
   * order held (ended events between them passed over, as `leave` does); 0 while an event that
   * left out of order is still noted. Changes nothing held: `takeFront` then lets them go, as
   * `leave` would one by one. Ended events at the very front are let go first, as `leave` lets
   * them go (left there, every later call would read them again), and a queue that this empties
   * is compacted. What the runner's quick check of a holding call uses.
   */
  frontRun(list: readonly LogEvent[]): number {
    if (this.#left.size > 0) return 0
    const queue = this.#queue
    const tail = this.#tail
    let head = this.#head
    while (head < tail && queue[head]!.isEnded) queue[head++] = undefined
    this.#head = head
    // Emptied so: compacted (its array cut if a burst grew it), as a settle after the call would.
    if (head === tail) {
      if (head > 0) this.#compact()
      return 0
    }
    let k = 0
    for (; k < list.length; k++) {
      while (head < tail && queue[head]!.isEnded) head++
      if (head === tail || queue[head] !== list[k]) break
      head++
    }
    return k
  }

  /**
   * Lets the `count` live events at the front go (what `frontRun` counted), passed on (no longer
   * the transform's own), and the ended ones before them.
   */
  takeFront(count: number): void {
    const queue = this.#queue
    let head = this.#head
    for (let k = 0; k < count; k++) {
      while (queue[head]!.isEnded) queue[head++] = undefined
      queue[head]!.markPassedOn()
      queue[head++] = undefined
    }
    this.#head = head
  }

  /** The events still held, in the order added (a new array). */
  live(): LogEvent[] {
    const queue = this.#queue
    const left = this.#left
    const kept: LogEvent[] = []
    for (let i = this.#head; i < this.#tail; i++) {
      const event = queue[i]!
      if (!event.isEnded && (left.size === 0 || !left.has(event))) kept.push(event)
    }
    return kept
  }

  /** Forgets every event. */
  clear(): void {
    this.#queue = []
    this.#head = 0
    this.#tail = 0
    this.#left.clear()
    this.#compacted = 0
  }

  /** Moves the queue's events to its front as they are (live or not), so the dead front goes. */
  #shift(): void {
    const queue = this.#queue
    const head = this.#head
    const tail = this.#tail
    const size = tail - head
    // A loop: `copyWithin` reads and writes each element as a property (about ten times slower).
    for (let i = 0; i < size; i++) queue[i] = queue[head + i]
    for (let i = size; i < tail; i++) queue[i] = undefined
    this.#cut(size)
    this.#head = 0
    this.#tail = size
  }

  /** Cuts an array far larger than the `size` events it keeps (after a burst) to twice that. */
  #cut(size: number): void {
    const queue = this.#queue
    if (queue.length > 1024 && queue.length > 8 * size) queue.length = Math.max(2 * size, 1024)
  }

  /** Moves the live events to the front of the queue, in place, and forgets the leavers. */
  #compact(): void {
    const queue = this.#queue
    const left = this.#left
    const tail = this.#tail
    let kept = 0
    for (let i = this.#head; i < tail; i++) {
      const event = queue[i]!
      if (!event.isEnded && (left.size === 0 || !left.has(event))) queue[kept++] = event
    }
    // Cleared, not cut: the slots are reused by the next adds, and keep no event alive. Only a
    // queue far larger than what it holds (after a burst) is cut, to twice that.
    for (let i = kept; i < tail; i++) queue[i] = undefined
    this.#cut(kept)
    this.#tail = kept
    this.#head = 0
    // Only when it holds any: clearing a set allocates its table anew.
    if (left.size > 0) left.clear()
    this.#compacted = kept
  }
}
