// A unit test of an internal module (src/internal/DiskBufferState.ts), so it imports it by path:
// the buffer's life cycle is not part of the package's API.
import { describe, expect, it } from 'vitest'
import {
  type DiskBufferEvent,
  type DiskBufferKind,
  type DiskBufferState,
  liveOf,
  opened,
  remainsOf,
  transition,
} from '../src/internal/DiskBufferState.js'

type Kind = DiskBufferKind
// The parts a buffer works with: one object for its whole life.
const parts = { name: 'the live parts' }
type State = DiskBufferState<typeof parts>
// How to reach each state from a new buffer.
const reach: Record<Kind, readonly DiskBufferEvent[]> = {
  open: [],
  draining: ['endWrites'],
  closed: ['close'],
  crashed: ['abandon'],
}
const state = (kind: Kind): State => reach[kind].reduce<State>(transition, opened(parts))

// Every state × every event, and where it leads.
const table: readonly [Kind, DiskBufferEvent, Kind][] = [
  ['open', 'endWrites', 'draining'],
  ['open', 'close', 'closed'],
  ['open', 'abandon', 'crashed'],
  ['draining', 'endWrites', 'draining'],
  ['draining', 'close', 'closed'],
  ['draining', 'abandon', 'crashed'],
  ['closed', 'endWrites', 'closed'],
  ['closed', 'close', 'closed'],
  ['closed', 'abandon', 'crashed'],
  ['crashed', 'endWrites', 'crashed'],
  ['crashed', 'close', 'crashed'],
  ['crashed', 'abandon', 'crashed'],
]

describe('DiskBufferState', () => {
  it('a buffer starts open, with its live parts', () => {
    const start = opened(parts)
    expect(start.kind).toBe('open')
    expect(liveOf(start)).toBe(parts)
  })

  it.each(table)('%s + %s → %s', (from, event, to) => {
    const before = state(from)
    expect(before.kind).toBe(from)
    const after = transition(before, event)
    expect(after.kind).toBe(to)
    // An event that changes nothing returns the same state, so callers can tell a no-op apart.
    expect(after === before).toBe(from === to)
    // The parts are live only while open or draining, and what remains of them is readable in every state.
    expect(liveOf(after)).toBe(to === 'open' || to === 'draining' ? parts : undefined)
    expect(remainsOf(after)).toBe(parts)
  })

  it('open and draining are live; closed and crashed are stopped', () => {
    const kinds: Kind[] = ['open', 'draining', 'closed', 'crashed']
    expect(kinds.filter((k) => liveOf(state(k)) === undefined)).toEqual(['closed', 'crashed'])
    expect(liveOf(undefined)).toBeUndefined()
  })
})
