/**
 * A problem found in a component's configuration, as the component itself reports it.
 *
 * @module
 */

/** One configuration problem: the field concerned (dotted path) and what is wrong with it. */
export interface ConfigIssue {
  /** The option concerned, as a dotted path into the component's options (`"address"`, `"tls.cert"`). */
  readonly field: string
  /** What is wrong, in words a user can act on. */
  readonly message: string
}
