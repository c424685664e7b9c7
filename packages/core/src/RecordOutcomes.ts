/**
 * What became of each record of one batch, in the order the records joined the batch (send
 * order), for sources that asked for it.
 *
 * Invariant: one byte per record, fixed once the batch is decided. A record's outcome folds every
 * status its copies reported by the event lattice (clones fold into their record, a merged event
 * into every record it carries, a record expanded into several events takes the worst of them),
 * except that once an authoritative sink recorded it, later reports are ignored. The batch's own
 * status is the worst outcome of its records (`dropped` counting as `delivered`).
 *
 * @module
 */
import { shown } from './internal/shown.js'
import { recordOutcomeCode as codeOf, ERRORED, RECORD_OUTCOME_NAMES } from './internal/statusCodes.js'

/**
 * The outcome of one record.
 * - `delivered`: a sink delivered it (and no copy errored or was rejected);
 * - `errored`: a sink failed to deliver it; re-sending it may help;
 * - `rejected`: a sink (or a dropping transform with `dropStatus: 'rejected'`) refused it; re-sending
 *   will not help;
 * - `dropped`: no sink reported anything, because every copy was discarded without a status (a
 *   filter's default drop). It counts as `delivered`: the record was processed as the topology
 *   asked, and the source may acknowledge it.
 */
export type RecordOutcome = 'delivered' | 'errored' | 'rejected' | 'dropped'

const NAMES = RECORD_OUTCOME_NAMES as readonly RecordOutcome[]

/**
 * The per-record outcomes of one batch: a read-only view over one byte per record.
 *
 * @example
 * ```ts
 * const receipt = await context.send(records, { outcomes: true })
 * const outcomes = await receipt.outcomes
 * for (const i of outcomes.indexesOf('errored')) retry.push(records[i])
 * ```
 */
export class RecordOutcomes implements Iterable<RecordOutcome> {
  readonly #codes: Uint8Array

  /** @internal Takes ownership of `codes` (one outcome code per record). */
  constructor(codes: Uint8Array) {
    this.#codes = codes
  }

  /**
   * `length` records, every one with the same outcome. A `length` that is no whole number of at
   * least 0 throws a `RangeError` naming the call (a fraction would be cut to a smaller batch).
   */
  static all(outcome: RecordOutcome, length: number): RecordOutcomes {
    if (!Number.isSafeInteger(length) || length < 0) {
      throw new RangeError(
        `RecordOutcomes.all: the length must be a whole number of at least 0, got ${shown(length)}`,
      )
    }
    return new RecordOutcomes(new Uint8Array(length).fill(codeOf(outcome)))
  }

  /**
   * The outcomes named, in order (for sources and tests that build a report themselves). Outcomes
   * that are no array (`null`, from untyped code) throw a `TypeError` naming the call.
   */
  static of(outcomes: readonly RecordOutcome[]): RecordOutcomes {
    if (!Array.isArray(outcomes)) {
      throw new TypeError(`RecordOutcomes.of: the outcomes must be an array, got ${shown(outcomes)}`)
    }
    const codes = new Uint8Array(outcomes.length)
    for (let i = 0; i < outcomes.length; i++) codes[i] = codeOf(outcomes[i]!)
    return new RecordOutcomes(codes)
  }

  /** How many records the batch had. */
  get length(): number {
    return this.#codes.length
  }

  /** The outcome of record `index` (0-based, send order); a `RangeError` outside the batch. */
  get(index: number): RecordOutcome {
    if (!Number.isInteger(index) || index < 0 || index >= this.#codes.length) {
      throw new RangeError(`record ${index} is not in the batch (it has ${this.#codes.length})`)
    }
    return NAMES[this.#codes[index]!]!
  }

  /** The indexes of the records with `outcome`, ascending. */
  indexesOf(outcome: RecordOutcome): number[] {
    const code = codeOf(outcome)
    const out: number[] = []
    const codes = this.#codes
    // The native search skips the (usually many) records with other outcomes.
    for (let i = codes.indexOf(code); i >= 0; i = codes.indexOf(code, i + 1)) out.push(i)
    return out
  }

  /** How many records have `outcome`. */
  count(outcome: RecordOutcome): number {
    const code = codeOf(outcome)
    let n = 0
    const codes = this.#codes
    for (let i = 0; i < codes.length; i++) if (codes[i] === code) n++
    return n
  }

  /** Whether every record is finished for good: delivered, dropped or rejected (none errored). */
  get isFinished(): boolean {
    return this.#codes.indexOf(ERRORED) < 0
  }

  /** The outcomes as an array of names. */
  toArray(): RecordOutcome[] {
    return Array.from(this.#codes, (code) => NAMES[code]!)
  }

  /** Each record's outcome, in the order of the records. */
  *[Symbol.iterator](): Iterator<RecordOutcome> {
    for (let i = 0; i < this.#codes.length; i++) yield NAMES[this.#codes[i]!]!
  }
}
