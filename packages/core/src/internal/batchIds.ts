/**
 * Batch ids, made only when someone reads them.
 *
 * A batch takes a stamp when it is created (the millisecond and a counter within it, as RFC 9562
 * lays out a UUID v7 with a counter in its `rand_a` and first `rand_b` bits); the id is written
 * from that stamp whenever it is read. Its other random bits are drawn once per process, so every
 * read of one batch's id gives the same id without keeping it, ids sort by creation order, and a
 * batch whose id nobody reads costs no UUID (and no clock read of its own: the creator passes the
 * time it read for its events).
 */
import { v7 as uuidv7 } from 'uuid'

/**
 * The random bits of every id this process writes (RFC 9562 `rand_b` below the counter): drawn
 * once, so two processes that share a millisecond and a counter value still differ, and one
 * batch's id reads the same every time.
 */
const RANDOM = globalThis.crypto.getRandomValues(new Uint8Array(16))

let lastMs = Number.NEGATIVE_INFINITY
let lastSeq = 0
/**
 * Stamps keep their millisecond relative to this one, taken at load: a small integer fits a field
 * as it is, where a full epoch time (a double) would be boxed, one more object per batch.
 */
const EPOCH_MS = Date.now()

/**
 * Stamps `state` with the next stamp, for a batch created at `now` (ms since the epoch): a new
 * millisecond starts its counter at a random 31-bit value (so two processes rarely share a
 * prefix); within a millisecond, or when `now` is behind the last stamp (a caller that read the
 * clock a little earlier), the counter counts up, and when it wraps the stamp borrows the next
 * millisecond, so stamps never go backwards.
 */
export function nextStamp(state: { idMs: number; idSeq: number }, now: number): void {
  if (now > lastMs) {
    lastMs = now
    lastSeq = Math.floor(Math.random() * 0x80000000)
  } else {
    lastSeq = (lastSeq + 1) | 0
    if (lastSeq === 0) lastMs++
  }
  state.idMs = lastMs - EPOCH_MS
  state.idSeq = lastSeq
}

/** The UUID v7 of a stamp: the same for the same stamp, within this process. */
export function idOf(ms: number, seq: number): string {
  return uuidv7({ msecs: ms + EPOCH_MS, seq, random: RANDOM })
}
