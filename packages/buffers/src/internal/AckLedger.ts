/**
 * What was acknowledged, in memory: the contiguous acknowledged prefix (every record below
 * `below`) and the acknowledged records above it, plus how far the last checkpoint got.
 *
 * Invariant: `below` only grows (but for {@link AckLedger.reset}), no number below it is kept
 * in the set above it, and `saved <= below`. Only `below` is checkpointed, so after a crash the
 * acknowledgements above it, and those below it but above `saved`, are delivered again.
 *
 * @module
 */

/** The acknowledged records of one queue. */
export class AckLedger {
  #below: number
  readonly #above = new Set<number>()
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
    return this.#above.size
  }

  /** Acknowledgements of the prefix not yet saved by a checkpoint. */
  get unsaved(): number {
    return this.#below - this.#saved
  }

  /** Whether `seq` was acknowledged. */
  has(seq: number): boolean {
    return seq < this.#below || this.#above.has(seq)
  }

  /** Marks `seq` (at or above the prefix) acknowledged; returns whether the prefix advanced. */
  mark(seq: number): boolean {
    if (seq !== this.#below) {
      this.#above.add(seq)
      return false
    }
    this.#below++
    while (this.#above.delete(this.#below)) this.#below++
    return true
  }

  /** Records that a checkpoint saved the prefix `position`. */
  saved(position: number): void {
    this.#saved = position
  }

  /** Everything below `nextSeq` acknowledged (the queue was emptied). */
  reset(nextSeq: number): void {
    this.#above.clear()
    this.#below = nextSeq
  }
}
