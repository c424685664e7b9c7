/**
 * The two lattices, each as one pure function with an exhaustive match. Everything else (the
 * public `update` functions, the numeric tables of the hot path) is derived from these two.
 */
import { match, P } from 'ts-pattern'
import type { BatchStatus } from '../BatchStatus.js'
import type { EventStatus } from '../EventStatus.js'

const rank = { delivered: 0, errored: 1, rejected: 2 } as const

/** The event lattice; `undefined` marks the invalid update (to `dropped` from any other status). */
export const eventLattice = (current: EventStatus, next: EventStatus): EventStatus | undefined =>
  match([current, next] as const)
    .returnType<EventStatus | undefined>()
    .with(['recorded', P._], [P._, 'recorded'], () => 'recorded')
    .with(['dropped', P.select()], (n) => n)
    .with([P._, 'dropped'], () => undefined)
    .with(
      [P.union('delivered', 'errored', 'rejected'), P.union('delivered', 'errored', 'rejected')],
      ([c, n]) => (rank[c] >= rank[n] ? c : n),
    )
    .exhaustive()

/** The batch lattice: errored and rejected raise the batch; dropped, delivered and recorded leave it. */
export const batchLattice = (batch: BatchStatus, event: EventStatus): BatchStatus =>
  match(event)
    .returnType<BatchStatus>()
    .with('errored', () => (batch === 'rejected' ? 'rejected' : 'errored'))
    .with('rejected', () => 'rejected')
    .with('dropped', 'delivered', 'recorded', () => batch)
    .exhaustive()
