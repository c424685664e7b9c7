/**
 * Times kept per batch and per event as small integers: milliseconds after an epoch taken when
 * this module loads. V8 keeps a number field unboxed only while it holds such integers (31-bit
 * with pointer compression); a full epoch time is a double, which costs a 16-byte box of its own
 * per object (a difference of two doubles is a double too, hence the `| 0` below).
 *
 * A time more than 2^30 ms (about 12 days) from the epoch, or one with a fraction of a
 * millisecond, is kept as it is: still exact, and 16 bytes more per object, as before.
 */

/** The epoch, in ms since 1970: when this process loaded core. */
export const EPOCH_MS = Date.now()

const SMALL = 0x40000000

/** `time` (ms since 1970) as ms after {@link EPOCH_MS}: a small integer whenever it can be one. */
export function sinceEpoch(time: number): number {
  const after = time - EPOCH_MS
  const small = after | 0
  return small === after && small > -SMALL && small < SMALL ? small : after
}
