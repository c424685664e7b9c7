/**
 * Batch ids, made only when someone reads them.
 *
 * A batch takes a stamp when it is created (the millisecond and a counter within it, as RFC 9562
 * lays out a UUID v7 with a counter in its `rand_a` and first `rand_b` bits); the id is written
 * from that stamp, with fresh random bits, on first read. So ids sort by creation order whenever
 * they are read, and a batch whose id nobody reads costs one clock read instead of a UUID.
 */
import { v7 as uuidv7 } from 'uuid'

let lastMs = Number.NEGATIVE_INFINITY
let lastSeq = 0
/**
 * Stamps keep their millisecond relative to this one, taken at load: a small integer fits a field
 * as it is, where a full epoch time (a double) would be boxed, one more object per batch.
 */
const EPOCH_MS = Date.now()

/**
 * Stamps `state` with the next stamp: a new millisecond starts its counter at a random 31-bit
 * value (so two processes rarely share a prefix); within a millisecond the counter counts up, and
 * when it wraps the stamp borrows the next millisecond, so stamps never go backwards.
 */
export function nextStamp(state: { idMs: number; idSeq: number }): void {
  const now = Date.now()
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

/** The UUID v7 of a stamp. */
export function idOf(ms: number, seq: number): string {
  return uuidv7({ msecs: ms + EPOCH_MS, seq })
}
