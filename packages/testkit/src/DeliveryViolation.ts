/**
 * The error a {@link DeliveryLedger} assertion throws: which property failed, a readable
 * counterexample (the records, the path each copy took, what each component reported), and how
 * to fix it.
 *
 * @module
 */

/**
 * Which delivery property a run broke, or why a check had nothing to look at, where passing
 * would prove nothing: `NO_SOURCE` (no source was wrapped by the ledger), `NO_SINK` (no sink
 * was, or none wrapped was started or written to), `NOTHING_CHECKED` (no
 * batch was sent through it, or none had an id for a check that reads only those; see
 * `LedgerCheckOptions`).
 */
export type DeliveryViolationCode =
  | 'MODEL_MISMATCH'
  | 'NACK_LOST'
  | 'LOST'
  | 'NOT_DELIVERED'
  | 'DIVERGENT_DUPLICATE'
  | 'NO_SOURCE'
  | 'NO_SINK'
  | 'NOTHING_CHECKED'

/**
 * A broken delivery property, with its counterexample.
 *
 * @example
 * ```ts
 * try { await ledger.expectNoLoss() } catch (e) { if (e instanceof DeliveryViolation) console.log(e.counterexample) }
 * ```
 */
export class DeliveryViolation extends Error {
  /** `'DeliveryViolation'`, so a test report tells it from other errors. */
  override readonly name = 'DeliveryViolation'

  constructor(
    /** The property that failed. */
    readonly code: DeliveryViolationCode,
    summary: string,
    /** One line per record involved: its tag, its fields, and each copy's path and reported status. */
    readonly counterexample: readonly string[],
    /** What to look at to fix it. */
    readonly hint: string,
  ) {
    super(`${code}: ${summary}\n  ${counterexample.join('\n  ')}\n  fix: ${hint}`)
  }
}
