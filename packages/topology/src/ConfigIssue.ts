/**
 * A problem found in a component's configuration, as the component itself reports it.
 *
 * Invariant: an issue names one field; issues made by an {@link OptionsSchema} also say what was
 * expected and what was given, and their message is always `must be <expected>, got <got>`.
 *
 * @module
 */
import { isSecretField } from './internal/hideSecrets.js'
import { kindOf, show } from './internal/issuesOf.js'

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
  /**
   * What it was, shown briefly (`"0"`, `'"bogus"'`, `"undefined"`, `"a function"`), never a
   * credential: a credential-named field shows its kind only (`"a number"`), a credential-named
   * key's value is `"***"`, a URL's password `***` (RFC 0004, "What a config error shows").
   */
  readonly got?: string
}

/**
 * Companion of {@link ConfigIssue}: issues in the one message style for checks a schema cannot
 * express (a directory that must exist, a port that must be free).
 *
 * @example
 * ```ts
 * ConfigIssue.of('path', 'a file path in an existing directory', '/nope/x.ndjson')
 * // { field: 'path', expected: 'a file path in an existing directory', got: '"/nope/x.ndjson"', message: 'must be … , got "/nope/x.ndjson"' }
 * ```
 */
export const ConfigIssue = {
  /**
   * The issue of `field`, whose value `value` is not `expected`; `value` is shown briefly and
   * safely: only its kind (`a string`) when `field` names a credential (`password`, `auth.token`),
   * and a URL in it without its password (see RFC 0004, "What a config error shows").
   */
  of(field: string, expected: string, value: unknown): ConfigIssue {
    const got = isSecretField(field) ? kindOf(value) : show(value)
    return { field, expected, got, message: `must be ${expected}, got ${got}` }
  },
} as const
