// A small seeded generator (mulberry32): the same seed draws the same kill points, so a crash
// loop can be replayed from the seed it printed.

/** Numbers in [0, 1) drawn from `seed`. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32
  }
}
