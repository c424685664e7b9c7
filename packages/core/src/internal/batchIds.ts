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
import { EPOCH_MS, msSinceEpoch } from './epoch.js'

/**
 * The random bits of every id this process writes (RFC 9562 `rand_b` below the counter): drawn
 * once, so two processes that share a millisecond and a counter value still differ, and one
 * batch's id reads the same every time.
 */
const RANDOM = globalThis.crypto.getRandomValues(new Uint8Array(16))

let lastMs = Number.NEGATIVE_INFINITY
let lastSeq = 0

/** The first millisecond a UUID v7's 48-bit time field cannot hold. */
const MAX_UUID_MS = 2 ** 48

/**
 * `now` when it is a clock reading a stamp can take (an integer from 0 to 2^48 - 1, a UUID v7's
 * time), else the clock read now: what a caller's reading goes through before it stamps a batch.
 */
export function stampTime(now: number | undefined): number {
  return typeof now === 'number' && Number.isInteger(now) && now >= 0 && now < MAX_UUID_MS ? now : Date.now()
}

/** Where a stamp goes: the batch state's fields, and its rare part for a stamp ahead of the clock. */
export interface Stamped {
  opened: number
  idSeq: number
  _rare(): { stampAhead: number }
}

/**
 * Stamps `state` with the next stamp, for a batch created at `now` (ms since the epoch): a new
 * millisecond starts its counter at a random 31-bit value (so two processes rarely share a
 * prefix); within a millisecond, or when `now` is behind the last stamp (a caller that read the
 * clock a little earlier), the counter counts up, and when it wraps the stamp borrows the next
 * millisecond, so stamps never go backwards. `opened` keeps `now` (as ms after the epoch, see
 * `epoch.ts`; what latency is measured from); a stamp ahead of it keeps the difference in the
 * rare part. So while the clock is behind the last stamp (it stepped back, or a caller passed a
 * `now` ahead of it), each batch stamped has a rare part, about 100 bytes more, until the clock
 * catches up: the price of exact `openedAt` and ordered ids in a window that should not happen,
 * rather than a field per batch.
 */
export function nextStamp(state: Stamped, now: number): void {
  state.idSeq = nextSeq(now)
  if (lastMs !== now) state._rare().stampAhead = lastMs - now
  state.opened = msSinceEpoch(now)
}

/**
 * The counter of the next stamp, for a batch created at `now` (as {@link nextStamp}, which a
 * caller without a `Stamped` object uses through this); the stamp's millisecond is then
 * {@link lastStampMs}, `now` unless the clock is behind the last stamp.
 */
export function nextSeq(now: number): number {
  if (now > lastMs) {
    lastMs = now
    lastSeq = Math.floor(Math.random() * 0x80000000)
  } else {
    lastSeq = (lastSeq + 1) | 0
    if (lastSeq === 0) lastMs++
  }
  return lastSeq
}

/** The millisecond of the last stamp taken (see {@link nextSeq}). */
export const lastStampMs = (): number => lastMs

/** Two hex digits per byte value. */
const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'))
/** The two random bits of the 11th byte, below the counter's last six. */
const BYTE_10_RANDOM = RANDOM[10]! & 0x03
/** The last five bytes, random and the same in every id of the process: written once. */
const TAIL = HEX[RANDOM[11]!]! + HEX[RANDOM[12]!]! + HEX[RANDOM[13]!]! + HEX[RANDOM[14]!]! + HEX[RANDOM[15]!]!

/**
 * The UUID v7 of a stamp: the same for the same stamp, within this process. RFC 9562's layout:
 * 48 bits of milliseconds, the version (7), then the counter as 32 bits (read unsigned: it starts
 * below 2^31 and counts on through the negative numbers of `| 0` before it wraps) across `rand_a`
 * (12 bits) and, after the variant (binary 10), the first 20 bits of `rand_b`, then the process's
 * random bits.
 * Written by hand from a byte table (an id is read for every answer an HTTP source gives): a
 * general UUID library call with options cost about 280 ns, this about 80.
 */
export function idOf(ms: number, seq: number): string {
  const t = ms + EPOCH_MS
  // Division, not shifts, above 32 bits; `& 0xff` truncates the quotient (t is positive).
  return (
    HEX[(t / 0x10000000000) & 0xff]! +
    HEX[(t / 0x100000000) & 0xff]! +
    HEX[(t / 0x1000000) & 0xff]! +
    HEX[(t / 0x10000) & 0xff]! +
    '-' +
    HEX[(t / 0x100) & 0xff]! +
    HEX[t & 0xff]! +
    '-' +
    HEX[0x70 | ((seq >>> 28) & 0x0f)]! +
    HEX[(seq >>> 20) & 0xff]! +
    '-' +
    HEX[0x80 | ((seq >>> 14) & 0x3f)]! +
    HEX[(seq >>> 6) & 0xff]! +
    '-' +
    HEX[((seq << 2) & 0xff) | BYTE_10_RANDOM]! +
    TAIL
  )
}

/** @internal For the test that checks the layout against a UUID library: this process's random bytes and epoch. */
export const _forTests = { random: RANDOM, epochMs: EPOCH_MS }
