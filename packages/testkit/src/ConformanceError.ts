/**
 * The error a conformance rule throws when a component breaks it: the rule's id (its `code`), the
 * component, what was observed, and how to fix it.
 *
 * @module
 */

/**
 * A broken conformance rule.
 *
 * @example
 * ```ts
 * const failures = await checkSink(() => mySink())
 * for (const f of failures) console.log(f.code, f.fix)
 * ```
 */
export class ConformanceError extends Error {
  /** `'ConformanceError'`, so a test report tells it from other errors. */
  override readonly name = 'ConformanceError'

  constructor(
    /** The rule's id, such as `sink.never-ends-events`. */
    readonly code: string,
    /** The component's kind, as it names itself. */
    readonly component: string,
    observed: string,
    /** How to fix the component. */
    readonly fix: string,
    /** `cause`: what the component threw, when the rule failed on a throw. */
    options?: ErrorOptions,
  ) {
    super(`${code} (${component}): ${observed}\n  fix: ${fix}`, options)
  }
}
