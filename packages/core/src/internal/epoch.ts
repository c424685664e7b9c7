/**
 * Times kept per batch and per event as small integers: milliseconds after an epoch taken when
 * this module loads. V8 keeps a number field unboxed only while it holds such integers (31-bit
 * with pointer compression); a full epoch time is a double, which costs a 16-byte box of its own
 * per object (a difference of two doubles is a double too, hence the `| 0` below).
 *
 * A time more than 2^30 ms (about 12 days) from the epoch, or one with a fraction of a
 * millisecond, is kept as a double after the epoch when that is exact (a boxed number, 16 bytes
 * more per object, as before), and otherwise in an {@link ExactTime} (a difference from the epoch
 * would round a fraction such as 0.1 ms to the epoch's precision, about 2^-12 ms).
 */

/** The epoch, in ms since 1970: when this process loaded core. */
export const EPOCH_MS = Date.now()

const SMALL = 0x40000000

/**
 * A whole number of ms since 1970 (a clock reading) as ms after {@link EPOCH_MS}: a small integer
 * whenever it can be one, else the exact difference.
 */
export function msSinceEpoch(ms: number): number {
  const after = ms - EPOCH_MS
  const small = after | 0
  return small === after && small > -SMALL && small < SMALL ? small : after
}

/** A time kept as it was given, where a difference from the epoch would not be exact. */
export class ExactTime {
  constructor(readonly time: number) {}
}

/** A time as {@link sinceEpoch} keeps it. */
export type KeptTime = number | ExactTime

/**
 * `time` (ms since 1970) as ms after {@link EPOCH_MS}: a small integer whenever it can be one,
 * else a double when the difference is exact, else an {@link ExactTime}. Read it back with
 * {@link timeOf}: always `time` itself.
 */
export function sinceEpoch(time: number): KeptTime {
  const after = msSinceEpoch(time)
  return after + EPOCH_MS === time ? after : new ExactTime(time)
}

/** The time (ms since 1970) that {@link sinceEpoch} kept. */
export const timeOf = (kept: KeptTime): number => (typeof kept === 'number' ? kept + EPOCH_MS : kept.time)
