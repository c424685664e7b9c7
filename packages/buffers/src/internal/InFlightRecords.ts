/**
 * The records a buffer handed out and that are not settled yet, and those negatively
 * acknowledged that wait out a back-off before they are handed out again.
 *
 * Invariant: a sequence number is in at most one of the two (in flight, or waiting to be
 * retried); a retry is due `initialMs · 2^(attempt−1)` after its nack, capped at `maxMs`; and a
 * record is never dropped here but by `settle` (acknowledged or dead-lettered): it stays on disk
 * meanwhile, so a crash hands it out again.
 *
 * @module
 */
import type { StoredRecord } from '../DiskBuffer.js'

/** A record handed out: its payload and checksum (to redeliver or dead-letter it) and its attempt. */
export interface Held {
  readonly payload: Buffer
  readonly crc: number
  readonly attempt: number
}

interface Retry extends Held {
  readonly seq: number
  readonly dueAt: number
}

/** The unsettled records of one reader, with their redelivery back-off. */
export class InFlightRecords {
  readonly #held = new Map<number, Held>()
  #retries: Retry[] = []
  readonly #initialMs: number
  readonly #maxMs: number

  constructor(backoff: { readonly initialMs: number; readonly maxMs: number }) {
    this.#initialMs = backoff.initialMs
    this.#maxMs = backoff.maxMs
  }

  /** Records handed out and not settled. */
  get size(): number {
    return this.#held.size
  }

  /** Records waiting for their back-off to pass. */
  get retryPending(): number {
    return this.#retries.length
  }

  /** Records not settled: handed out, or waiting to be handed out again (what `maxInFlight` bounds). */
  get unsettled(): number {
    return this.#held.size + this.#retries.length
  }

  /** The record `seq`, if it is in flight. */
  get(seq: number): Held | undefined {
    return this.#held.get(seq)
  }

  /** Moves the retries due at `now` into `out` (and their `held`), in nack order, until `out` holds `max`. */
  takeDue(now: number, max: number, out: StoredRecord[], held: Held[]): void {
    if (this.#retries.length === 0) return
    const later: Retry[] = []
    for (const retry of this.#retries) {
      if (retry.dueAt <= now && out.length < max) {
        out.push({ seq: retry.seq, payload: retry.payload, attempt: retry.attempt })
        held.push(retry)
      } else {
        later.push(retry)
      }
    }
    this.#retries = later
  }

  /** Marks `out` handed out (`held[i]` belongs to `out[i]`). */
  hold(out: readonly StoredRecord[], held: readonly Held[]): void {
    // Kept as given, not copied: one object less per record read (a retry's extra fields are harmless).
    for (let i = 0; i < out.length; i++) this.#held.set(out[i]!.seq, held[i]!)
  }

  /** Forgets `seq` for good (acknowledged); returns whether it was unsettled (in flight or waiting for a retry). */
  settle(seq: number): boolean {
    // A record is in at most one of the two: one handed out is not searched for among the retries.
    if (this.#held.delete(seq)) return true
    const before = this.#retries.length
    if (before > 0) this.#retries = this.#retries.filter((r) => r.seq !== seq)
    return this.#retries.length < before
  }

  /** Schedules the in-flight record `seq` for redelivery after its back-off; `false` if it is not in flight. */
  nack(seq: number, now: number): boolean {
    const held = this.#held.get(seq)
    if (held === undefined) return false
    this.#held.delete(seq)
    const attempt = held.attempt + 1
    // The exponent is capped: past 2^1023 the power is Infinity, and 0 · Infinity (initialMs 0)
    // is NaN, a due time no clock reaches (the record was never handed out again after its
    // 1025th nack). Capped, the product is a number (or Infinity), which maxMs caps as before.
    const delay = Math.min(this.#maxMs, this.#initialMs * 2 ** Math.min(attempt - 1, 1023))
    this.#retries.push({ seq, payload: held.payload, crc: held.crc, attempt, dueAt: now + delay })
    return true
  }

  /** When the next retry is due, if one waits. */
  nextDueAt(): number | undefined {
    // A loop, not Math.min(...): more retries than a call takes arguments would overflow the stack.
    let due: number | undefined
    for (const retry of this.#retries) if (due === undefined || retry.dueAt < due) due = retry.dueAt
    return due
  }
}
