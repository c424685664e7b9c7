/**
 * The original finalizer groups of the records a disk edge buffer wrote in this process run
 * ('on-delivery'), found by sequence number when the sink settles a record read back.
 *
 * Invariant: each record's group is ended at most once (a second `end` of the same record does
 * nothing), and `endAll` ends every group not ended yet. One push is one entry (its first
 * sequence number, its groups and which group each record has), not one per record: the records
 * of a push have consecutive sequence numbers, so a record is found by a binary search over the
 * pushes still waiting, and an entry is dropped once every record of it, and of every push
 * before it, was ended. So what is kept grows with the pushes since the oldest record not ended,
 * not with the records not ended: one record retried again and again keeps every later push's
 * entry. That is bounded by what the buffer holds on disk, whose records the store tracks anyway.
 * A number is held by one push at a time: numbers a failed write gave back leave that push when a
 * later push gets them, whether or not its records were ended yet (its failure ends them through
 * the push itself, {@link RecordOrigins.endPush}, never by number: by then the numbers may be
 * another push's).
 *
 * @module
 */
import type { EndOptions, EventFinalizerGroups } from '@ackline/core'

/** The records of one push: `count` consecutive sequence numbers from `first`. */
interface Push {
  readonly first: number
  readonly count: number
  readonly groups: EventFinalizerGroups
  /** The group of record `first + k` is `index[k]`; `undefined` when it is `k` (nothing was left out). */
  readonly index: readonly number[] | undefined
  /** Records whose group is not ended yet. */
  waiting: number
}

/** One push noted by {@link RecordOrigins.add}, to end its groups by (opaque). */
export type PushHandle = { readonly __push: unique symbol }

/** Whether `push` holds any of the numbers `first … first + count − 1`. */
const overlaps = (push: Push, first: number, count: number): boolean =>
  push.first < first + count && first < push.first + push.count

/** Drop ended pushes from the front of the list once this many have piled up there. */
const COMPACT_AT = 256

/** The original groups of this run's records, by sequence number. */
export class RecordOrigins {
  /** In order of `first`; entries before `#head` are ended. */
  #pushes: Push[] = []
  #head = 0
  /** Pushes whose numbers a later push holds now, with groups not ended yet (ended by {@link RecordOrigins.endPush}). */
  readonly #givenBack = new Set<Push>()

  /** Records whose group is not ended yet. */
  get size(): number {
    let n = 0
    for (const push of this.#givenBack) n += push.waiting
    for (let i = this.#head; i < this.#pushes.length; i++) n += this.#pushes[i]!.waiting
    return n
  }

  /**
   * Notes that records `first … first + count − 1` carry the groups `index[k]` of `groups`
   * (`index` undefined: group `k`). Pushes usually arrive in sequence order; one that does not is
   * put in its place. Returns the push, for {@link RecordOrigins.endPush}.
   */
  add(
    first: number,
    count: number,
    groups: EventFinalizerGroups,
    index: readonly number[] | undefined,
  ): PushHandle {
    const push: Push = { first, count, groups, index, waiting: count }
    if (count === 0) return push as unknown as PushHandle
    const pushes = this.#pushes
    let at = pushes.length
    while (at > this.#head && pushes[at - 1]!.first > first) at--
    // Numbers a failed write gave back (group commit: its pushes were answered before the write)
    // are given again: the pushes that held them go, or a record would be looked up in one of
    // them and its new group never ended. One whose failure was not heard yet (its `durable` is
    // settled a few turns after the numbers were given back) is ended through its handle.
    let from = at
    while (from > this.#head && overlaps(pushes[from - 1]!, first, count)) from--
    let to = at
    while (to < pushes.length && overlaps(pushes[to]!, first, count)) to++
    if (from === to && to === pushes.length) pushes.push(push)
    else {
      for (const gone of pushes.splice(from, to - from, push)) if (gone.waiting > 0) this.#givenBack.add(gone)
    }
    return push as unknown as PushHandle
  }

  /**
   * Ends every group of `handle`'s push not ended yet with `status` (its write failed after it
   * was answered): by the push, not by its numbers, which a later push may hold by now.
   */
  endPush(handle: PushHandle, status: 'delivered' | 'rejected' | 'errored', options?: EndOptions): void {
    const push = handle as unknown as Push
    this.#givenBack.delete(push)
    for (let k = 0; k < push.count && push.waiting > 0; k++) {
      const i = push.index === undefined ? k : push.index[k]!
      if (push.groups.isConsumed(i)) continue
      push.waiting--
      push.groups.end(i, status, options)
    }
    this.#dropEnded()
  }

  /** Ends the group of record `seq` with `status`; nothing if it is not known or already ended. */
  end(seq: number, status: 'delivered' | 'rejected' | 'errored', options?: EndOptions): void {
    const push = this.#find(seq)
    if (push === undefined) return
    const k = seq - push.first
    const i = push.index === undefined ? k : push.index[k]!
    if (push.groups.isConsumed(i)) return
    push.waiting--
    push.groups.end(i, status, options)
    if (push.waiting === 0) this.#dropEnded()
  }

  /** Ends every group not ended yet with `status` (the buffer shut down before they were settled). */
  endAll(status: 'delivered' | 'rejected' | 'errored'): void {
    const pushes = [...this.#givenBack, ...this.#pushes.slice(this.#head)]
    this.#givenBack.clear()
    this.#pushes = []
    this.#head = 0
    for (const push of pushes) {
      for (let k = 0; k < push.count; k++) {
        const i = push.index === undefined ? k : push.index[k]!
        if (!push.groups.isConsumed(i)) push.groups.end(i, status)
      }
    }
  }

  #find(seq: number): Push | undefined {
    const pushes = this.#pushes
    let lo = this.#head
    let hi = pushes.length - 1
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1
      const push = pushes[mid]!
      if (seq < push.first) hi = mid - 1
      else if (seq >= push.first + push.count) lo = mid + 1
      else return push
    }
    return undefined
  }

  /** Moves the head past the pushes whose records are all ended, and compacts now and then. */
  #dropEnded(): void {
    const pushes = this.#pushes
    let head = this.#head
    while (head < pushes.length && pushes[head]!.waiting === 0) head++
    if (head === pushes.length) {
      this.#pushes = []
      this.#head = 0
    } else if (head >= COMPACT_AT && head * 2 >= pushes.length) {
      this.#pushes = pushes.slice(head)
      this.#head = 0
    } else {
      this.#head = head
    }
  }
}
