/**
 * Numeric codes for statuses, used on the hot path instead of strings, and the batch lattice as a
 * flat table derived once from `lattice.ts` (so the rule lives in one place).
 */
import type { BatchStatus } from '../BatchStatus.js'
import type { EventStatus } from '../EventStatus.js'
import { batchLattice, eventLattice } from './lattice.js'

export const DROPPED = 0
export const DELIVERED = 1
export const ERRORED = 2
export const REJECTED = 3
export const RECORDED = 4

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

/**
 * `OUTCOME_UPDATE[record * 5 + event]`: the event lattice as a table over a record's outcome code
 * (dropped, delivered, errored or rejected; never recorded, which is kept apart, see
 * `BatchState.recorded`). An update to `dropped` or to `recorded` leaves the outcome as it is.
 */
export const OUTCOME_UPDATE: Uint8Array = (() => {
  const table = new Uint8Array(20)
  for (let record = DROPPED; record <= REJECTED; record++) {
    for (const [e, event] of EVENT_STATUS_NAMES.entries()) {
      const next = eventLattice(EVENT_STATUS_NAMES[record]!, event)
      table[record * 5 + e] = next === undefined || next === 'recorded' ? record : eventStatusCode(next)
    }
  }
  return table
})()
