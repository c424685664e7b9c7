/**
 * Numeric codes for statuses, used on the hot path instead of strings, and the two lattices as
 * flat tables derived once from `lattice.ts` (so the rules live in one place).
 */
import type { BatchStatus } from '../BatchStatus.js'
import type { EventStatus } from '../EventStatus.js'
import { batchLattice, eventLattice } from './lattice.js'

export const DROPPED = 0
export const DELIVERED = 1
export const ERRORED = 2
export const REJECTED = 3
export const RECORDED = 4

/** Marks the invalid update in {@link EVENT_UPDATE}. */
export const INVALID = -1

export const EVENT_STATUS_NAMES: readonly EventStatus[] = [
  'dropped',
  'delivered',
  'errored',
  'rejected',
  'recorded',
]
const BATCH_STATUS_NAMES: readonly BatchStatus[] = ['delivered', 'errored', 'rejected']

export const eventStatusCode = (status: EventStatus): number => {
  switch (status) {
    case 'dropped':
      return DROPPED
    case 'delivered':
      return DELIVERED
    case 'errored':
      return ERRORED
    case 'rejected':
      return REJECTED
    case 'recorded':
      return RECORDED
  }
}

/** Batch statuses share the codes of the event statuses of the same name. */
export const batchStatusName = (code: number): BatchStatus => EVENT_STATUS_NAMES[code] as BatchStatus
export const batchStatusCode = (status: BatchStatus): number => EVENT_STATUS_NAMES.indexOf(status)

/** `EVENT_UPDATE[current * 5 + next]`: the event lattice as a table. */
export const EVENT_UPDATE: Int8Array = (() => {
  const table = new Int8Array(25)
  for (const [c, current] of EVENT_STATUS_NAMES.entries()) {
    for (const [n, next] of EVENT_STATUS_NAMES.entries()) {
      const result = eventLattice(current, next)
      table[c * 5 + n] = result === undefined ? INVALID : eventStatusCode(result)
    }
  }
  return table
})()

/** `BATCH_UPDATE[batch * 5 + event]`: the batch lattice as a table, indexed by codes. */
export const BATCH_UPDATE: Int8Array = (() => {
  const table = new Int8Array(25)
  for (const batch of BATCH_STATUS_NAMES) {
    for (const [e, event] of EVENT_STATUS_NAMES.entries()) {
      table[batchStatusCode(batch) * 5 + e] = batchStatusCode(batchLattice(batch, event))
    }
  }
  return table
})()
