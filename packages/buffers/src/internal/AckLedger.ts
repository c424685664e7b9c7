/**
 * What was acknowledged, in memory: the contiguous acknowledged prefix (every record below
 * `below`) and the acknowledged records above it, plus how far the last checkpoint got.
 *
 * Invariant: `below` only grows (but for {@link AckLedger.reset}), no number below it is kept
 * above it, and `saved <= below`. Above the prefix, a record acknowledged on its own is one entry
 * of a set, and a run of numbers found missing is one range, whatever its length (a number that
 * jumps far ahead costs no more than a gap of one); the ranges are sorted, disjoint, and hold no
 * number of the set. Only `below` is checkpointed, so after a crash the acknowledgements above
 * it, and those below it but above `saved`, are delivered again.
 *
 * @module
 */

/** The acknowledged records of one queue. */
export class AckLedger {
  #below: number
  readonly #above = new Set<number>()
  /** Acknowledged runs above the prefix, `[from, to)` each, sorted by `from`. */
  #ranges: { readonly from: number; readonly to: number }[] = []
  /** How many numbers the ranges hold. */
  #inRanges = 0
  #saved: number

  constructor(ackedBelow: number) {
    this.#below = ackedBelow
    this.#saved = ackedBelow
  }

  /** The contiguous acknowledged prefix: every record below this sequence number was acknowledged. */
  get below(): number {
    return this.#below
  }

  /** How many records above the prefix were acknowledged. */
  get aboveCount(): number {
    return this.#above.size + this.#inRanges
  }

  /** Acknowledgements of the prefix not yet saved by a checkpoint. */
  get unsaved(): number {
    return this.#below - this.#saved
  }

  /** Whether `seq` was acknowledged. */
  has(seq: number): boolean {
    return seq < this.#below || this.#above.has(seq) || (this.#ranges.length > 0 && this.#inRange(seq))
  }

  /** Marks `seq` acknowledged (nothing if it was); returns whether the prefix advanced. */
  mark(seq: number): boolean {
    if (seq !== this.#below) {
      if (seq > this.#below && (this.#ranges.length === 0 || !this.#inRange(seq))) this.#above.add(seq)
      return false
    }
    this.#below++
    this.#advance()
    return true
  }

  /**
   * Marks every number in `[from, to)` acknowledged, in time and memory independent of its
   * length; returns how many of them were not acknowledged before. The prefix advances if it can.
   */
  markRange(from: number, to: number): number {
    const start = Math.max(from, this.#below)
    if (start >= to) return 0
    let lo = start
    let hi = to
    let known = 0
    // Merge the ranges this one overlaps or touches, and count what they held of it.
    const kept: { readonly from: number; readonly to: number }[] = []
    for (const range of this.#ranges) {
      if (range.to < lo || range.from > hi) {
        kept.push(range)
        continue
      }
      known += Math.max(0, Math.min(range.to, to) - Math.max(range.from, start))
      this.#inRanges -= range.to - range.from
      lo = Math.min(lo, range.from)
      hi = Math.max(hi, range.to)
    }
    for (const seq of this.#above) {
      if (seq < lo || seq >= hi) continue
      if (seq < to && seq >= start) known++
      this.#above.delete(seq)
    }
    const at = kept.findIndex((range) => range.from > lo)
    kept.splice(at === -1 ? kept.length : at, 0, { from: lo, to: hi })
    this.#ranges = kept
    this.#inRanges += hi - lo
    this.#advance()
    return to - start - known
  }

  /** Records that a checkpoint saved the prefix `position`. */
  saved(position: number): void {
    this.#saved = position
  }

  /** Moves the prefix over the acknowledgements that now follow it. */
  #advance(): void {
    for (;;) {
      if (this.#above.delete(this.#below)) {
        this.#below++
        continue
      }
      const first = this.#ranges[0]
      if (first === undefined || first.from !== this.#below) return
      this.#ranges.shift()
      this.#inRanges -= first.to - first.from
      this.#below = first.to
    }
  }

  /** Whether `seq` lies in a range (a binary search: the ranges are sorted and disjoint). */
  #inRange(seq: number): boolean {
    const ranges = this.#ranges
    let lo = 0
    let hi = ranges.length - 1
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1
      const range = ranges[mid]!
      if (seq < range.from) hi = mid - 1
      else if (seq >= range.to) lo = mid + 1
      else return true
    }
    return false
  }
}
