// The measuring loop every benchmark shares: each measurement in a fresh process (so variants
// cannot make each other's call sites polymorphic or leave heap behind), the variants
// round-robin (so a noisy neighbour weighs on all of them alike).
import { spawnSync } from 'node:child_process'

/**
 * Runs `file` once per variant and round, with `ACKLINE_BENCH_VARIANT` naming the variant; the
 * child prints its rate (events/s) as its last line. Returns every variant's rates, sorted.
 */
export function roundRobin(file: string, names: readonly string[], rounds: number): Map<string, number[]> {
  const rates = new Map<string, number[]>(names.map((name) => [name, []]))
  for (let round = 0; round < rounds; round++) {
    for (const name of names) {
      const result = spawnSync(process.execPath, [...process.execArgv, file], {
        env: { ...process.env, ACKLINE_BENCH_VARIANT: name },
        encoding: 'utf8',
      })
      const rate = Number(result.stdout.trim().split('\n').at(-1))
      if (result.status !== 0 || !Number.isFinite(rate))
        throw new Error(`variant '${name}' failed: ${result.stderr}`)
      rates.get(name)!.push(rate)
    }
  }
  for (const list of rates.values()) list.sort((a, b) => a - b)
  return rates
}

/** The median of sorted rates. */
export const median = (sorted: readonly number[]): number => sorted[Math.floor(sorted.length / 2)]!
