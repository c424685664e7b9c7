/**
 * A problem found in a component's configuration, as the component itself reports it.
 *
 * Invariant: an issue names one field; issues made by an {@link OptionsSchema} also say what was
 * expected and what was given, and their message is always `must be <expected>, got <got>`.
 *
 * @module
 */

/**
 * One configuration problem: the field concerned (dotted path) and what is wrong with it.
 *
 * @example
 * ```ts
 * // { field: 'retry.attempts', expected: 'a positive integer', got: '0', message: 'must be a positive integer, got 0' }
 * ```
 */
export interface ConfigIssue {
  /**
   * The option concerned, as a path into the component's options (`"address"`, `"tls.cert"`,
   * `"fields[1]"`); `"(options)"` when the options as a whole are wrong (not an object).
   */
  readonly field: string
  /** What is wrong, in words a user can act on. */
  readonly message: string
  /** What the field must be, in words (`"a positive integer"`, `'"block" or "drop_newest"'`). */
  readonly expected?: string
  /** What it was, shown briefly (`"0"`, `'"bogus"'`, `"undefined"`, `"a function"`). */
  readonly got?: string
}
