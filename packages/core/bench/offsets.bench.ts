// OffsetTracker against plain-array peers doing the same work, side by side in one process:
//   shift peer: an array of { key, finished } objects; resolve sets the flag, then shifts the
//               finished prefix off the front (what a source would hand-write)
//   head peer:  the same array read from a moving head, never compacted (memory grows forever)
//   tracker:    OffsetTracker (keys read from a moving head, compacted, one state byte per record)
// Workloads: RECORDS records resolved in read order, and in a random order (one shuffled
// permutation shared by all). The shift peer is quadratic on large arrays (each shift moves the
// whole array), so it runs at SMALL records only, next to the tracker at SMALL.
// Time per record (track + resolve), median of ROUNDS rounds.
// Run: pnpm bench offsets
import { OffsetTracker } from '@ackline/core'

const RECORDS = Number(process.env.ACKLINE_BENCH_RECORDS ?? 1_000_000)
const SMALL = Number(process.env.ACKLINE_BENCH_SMALL ?? 20_000)
const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 5)

interface Peer {
  track(key: number): number
  resolve(ticket: number, status: 'delivered'): void
  committable(): number | undefined
}

class ShiftPeer implements Peer {
  readonly records: { key: number; finished: boolean }[] = []
  base = 0
  committed: number | undefined = undefined
  track(key: number): number {
    this.records.push({ key, finished: false })
    return this.base + this.records.length - 1
  }
  resolve(ticket: number): void {
    this.records[ticket - this.base]!.finished = true
    while (this.records.length > 0 && this.records[0]!.finished) {
      this.committed = this.records.shift()!.key
      this.base++
    }
  }
  committable(): number | undefined {
    return this.committed
  }
}

class HeadPeer implements Peer {
  readonly records: { key: number; finished: boolean }[] = []
  head = 0
  committed: number | undefined = undefined
  track(key: number): number {
    this.records.push({ key, finished: false })
    return this.records.length - 1
  }
  resolve(ticket: number): void {
    this.records[ticket]!.finished = true
    while (this.head < this.records.length && this.records[this.head]!.finished) {
      this.committed = this.records[this.head++]!.key
    }
  }
  committable(): number | undefined {
    return this.committed
  }
}

let seed = 42
const random = () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff
  return seed / 0x7fffffff
}
function permutation(n: number): number[] {
  const order = Array.from({ length: n }, (_, i) => i)
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[order[i], order[j]] = [order[j]!, order[i]!]
  }
  return order
}
const shuffled = permutation(RECORDS)
const shuffledSmall = permutation(SMALL)
const inOrder = Array.from({ length: RECORDS }, (_, i) => i)
const inOrderSmall = Array.from({ length: SMALL }, (_, i) => i)

function run(peer: Peer, order: number[]): void {
  const n = order.length
  const tickets = new Array<number>(n)
  for (let i = 0; i < n; i++) tickets[i] = peer.track(i)
  for (let i = 0; i < n; i++) peer.resolve(tickets[order[i]!]!, 'delivered')
  if (peer.committable() !== n - 1)
    throw new Error(`committed ${String(peer.committable())}, expected ${n - 1}`)
}

const variants: Record<string, [() => void, number]> = {
  'head peer, in order': [() => run(new HeadPeer(), inOrder), RECORDS],
  'tracker, in order': [() => run(new OffsetTracker<number>(), inOrder), RECORDS],
  'head peer, random': [() => run(new HeadPeer(), shuffled), RECORDS],
  'tracker, random': [() => run(new OffsetTracker<number>(), shuffled), RECORDS],
  'shift peer, in order, small': [() => run(new ShiftPeer(), inOrderSmall), SMALL],
  'tracker, in order, small': [() => run(new OffsetTracker<number>(), inOrderSmall), SMALL],
  'shift peer, random, small': [() => run(new ShiftPeer(), shuffledSmall), SMALL],
  'tracker, random, small': [() => run(new OffsetTracker<number>(), shuffledSmall), SMALL],
}
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!
for (const [f] of Object.values(variants)) f()
const samples: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((k) => [k, []]))
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, [f, n]] of Object.entries(variants)) {
    const start = process.hrtime.bigint()
    f()
    samples[name]!.push(Number(process.hrtime.bigint() - start) / n)
  }
}
const ns = Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, median(v)])) as Record<
  string,
  number
>
console.log(
  `time per record (track, then resolve; ${RECORDS.toLocaleString()} records, small: ${SMALL.toLocaleString()}; median of ${ROUNDS} rounds)`,
)
for (const [name, value] of Object.entries(ns))
  console.log(`  ${name.padEnd(26)} ${value.toFixed(1).padStart(8)} ns`)
const ratio = (a: string, b: string) => `${(ns[a]! / ns[b]!).toFixed(2)}x`
console.log(
  `  tracker / shift peer, in order (small): ${ratio('tracker, in order, small', 'shift peer, in order, small')}`,
)
console.log(`  tracker / head peer, in order:         ${ratio('tracker, in order', 'head peer, in order')}`)
console.log(`  tracker / head peer, random:           ${ratio('tracker, random', 'head peer, random')}`)
console.log(
  `  tracker / shift peer, random (small):  ${ratio('tracker, random, small', 'shift peer, random, small')}`,
)
