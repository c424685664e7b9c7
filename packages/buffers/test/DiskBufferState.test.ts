// A unit test of an internal module (src/internal/DiskBufferState.ts), so it imports it by path:
// the buffer's life cycle is not part of the package's API.
import { describe, expect, it } from 'vitest'
import {
  type DiskBufferEvent,
  type DiskBufferState,
  initialState,
  isStopped,
  transition,
} from '../src/internal/DiskBufferState.js'

type Kind = DiskBufferState['kind']
// How to reach each state from a new buffer.
const reach: Record<Kind, readonly DiskBufferEvent[]> = {
  open: [],
  draining: ['endWrites'],
  closed: ['close'],
  crashed: ['abandon'],
}
const state = (kind: Kind): DiskBufferState => reach[kind].reduce(transition, initialState)

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
  it('a buffer starts open', () => {
    expect(initialState.kind).toBe('open')
  })

  it.each(table)('%s + %s → %s', (from, event, to) => {
    const before = state(from)
    expect(before.kind).toBe(from)
    const after = transition(before, event)
    expect(after.kind).toBe(to)
    // An event that changes nothing returns the same state, so callers can tell a no-op apart.
    expect(after === before).toBe(from === to)
  })

  it('closed and crashed are stopped; open and draining are not', () => {
    const kinds: Kind[] = ['open', 'draining', 'closed', 'crashed']
    expect(kinds.filter((k) => isStopped(state(k)))).toEqual(['closed', 'crashed'])
  })
})
