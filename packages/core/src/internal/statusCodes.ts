/**
 * Numeric codes for statuses, used on the hot path instead of strings, and the batch lattice as a
 * flat table derived once from `lattice.ts` (so the rule lives in one place).
 */
import type { BatchStatus } from '../BatchStatus.js'
import type { DeliveryStatus, EventStatus } from '../EventStatus.js'
import { FinalizationError } from '../FinalizationError.js'
import { batchLattice, eventLattice } from './lattice.js'
import { shown } from './shown.js'

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
/** A record's outcomes (`RecordOutcome`), by code: the event statuses below `recorded`. */
export const RECORD_OUTCOME_NAMES: readonly string[] = EVENT_STATUS_NAMES.slice(0, RECORDED)

/**
 * The code of a record's outcome. Untyped callers can pass anything: a value that is not an
 * outcome throws, rather than reading as `dropped` (the code an unset byte has).
 */
export const recordOutcomeCode = (outcome: string): number => {
  const code = RECORD_OUTCOME_NAMES.indexOf(outcome)
  if (code < 0) throw unknownStatus(outcome, RECORD_OUTCOME_NAMES)
  return code
}

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
    default:
      throw unknownStatus(status, EVENT_STATUS_NAMES)
  }
}

/**
 * The code of a status an event may end with. Untyped callers can pass anything: a value that is
 * not one of the three throws before any state changes, so it can never count as delivered.
 */
export const deliveryStatusCode = (status: DeliveryStatus): number => {
  switch (status) {
    case 'delivered':
      return DELIVERED
    case 'errored':
      return ERRORED
    case 'rejected':
      return REJECTED
    default:
      throw unknownStatus(status, DELIVERY_STATUS_NAMES)
  }
}

const DELIVERY_STATUS_NAMES: readonly DeliveryStatus[] = ['delivered', 'errored', 'rejected']

function unknownStatus(status: unknown, expected: readonly string[]): FinalizationError {
  const got = typeof status === 'string' ? `'${status}'` : shown(status)
  return new FinalizationError(
    'INVALID_STATUS',
    `unknown status ${got}: expected one of ${expected.map((s) => `'${s}'`).join(', ')}`,
  )
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
 * `EVENT_UPDATE[current * 5 + next]`: the event lattice as a table, indexed by codes; -1 marks the
 * invalid update (to `dropped` from any other status). `EventStatus.update` reads it: the match it
 * is derived from allocates, and took about 2 µs a call on the authoritative sinks' path.
 */
export const EVENT_UPDATE: Int8Array = (() => {
  const table = new Int8Array(25)
  for (const [c, current] of EVENT_STATUS_NAMES.entries()) {
    for (const [n, next] of EVENT_STATUS_NAMES.entries()) {
      const result = eventLattice(current, next)
      table[c * 5 + n] = result === undefined ? -1 : eventStatusCode(result)
    }
  }
  return table
})()

/**
 * `OUTCOME_UPDATE[record * 5 + event]`: the event lattice as a table over a record's outcome code
 * (dropped, delivered, errored or rejected; never recorded, which is kept apart, see
 * the batch state's recorded slots). An update to `dropped` or to `recorded` leaves the outcome as it is.
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
