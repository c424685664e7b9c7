/**
 * How a conformance suite registers its tests: with the `describe` and `it` of whatever runner the
 * user has (vitest, jest, mocha, node:test), given or found on `globalThis`.
 *
 * Invariant: a rule is a plain async check that throws a {@link ConformanceError}; the runner only
 * names it. A step of the user's code that throws (a factory, `start()`, `stop()`, a hook) fails
 * the rule it ran under, naming the component's kind and the step (`namingSteps`). `check*`
 * functions run the same rules without any runner and return the failures.
 *
 * @module
 */
import { inspect } from 'node:util'
import { MAX_TIMER_MS } from '@ackline/topology'
import { ConformanceError } from './ConformanceError.js'
import { describeThrown } from './internal/describeThrown.js'
import { StepFailure } from './internal/StepFailure.js'

/** The two functions a conformance suite needs from a test runner. */
export interface ConformanceRunner {
  /** Declares a group of tests (vitest's, node:test's or your runner's `describe`). */
  describe(name: string, body: () => void): void
  /** Declares one test: `body` resolves when it passes and rejects with the failure; `timeout` in ms. */
  it(name: string, body: () => Promise<void>, timeout?: number): void
}

/** One rule of a conformance suite: an id, what it means, and its check. */
export interface ConformanceRule<Subject> {
  /** `sink.never-ends-events`: the code of the {@link ConformanceError} it throws. */
  readonly id: string
  /** What a component of that kind must do, as a test's name. */
  readonly title: string
  /** Throws a {@link ConformanceError} when `subject` breaks the rule. */
  check(subject: Subject): Promise<void>
}

/** `runner`, or the `describe`/`it` on `globalThis` (vitest with globals, jest, mocha). */
export function resolveRunner(runner: ConformanceRunner | undefined): ConformanceRunner {
  if (runner !== undefined) return runner
  const g = globalThis as Partial<ConformanceRunner>
  if (typeof g.describe === 'function' && typeof g.it === 'function') {
    return { describe: g.describe.bind(globalThis), it: g.it.bind(globalThis) }
  }
  throw new ConformanceError(
    'runner',
    'conformance suite',
    'no describe/it given and none on globalThis',
    "pass { runner: { describe, it } } (for vitest: import { describe, it } from 'vitest')",
  )
}

/**
 * Refuses the options every suite shares when no rule could check anything with them. A
 * `timeoutMs` no timer can wait: Node fires a delay of `NaN`, 0 or less, or past 2^31 - 1 ms after
 * 1 ms, so every rule would fail at once on a correct component. `records` that are no records:
 * with none every rule passes whatever the component does (a sink that stores nothing, a
 * transform that forgets every event), and one that is not a JSON object fails the rules for the
 * suite's own sends, blaming the component.
 */
function checkOptions(subject: unknown, where: string): void {
  const { timeoutMs, records } = subject as { readonly timeoutMs?: unknown; readonly records?: unknown }
  if (
    timeoutMs !== undefined &&
    (typeof timeoutMs !== 'number' || !(timeoutMs >= 1 && timeoutMs <= MAX_TIMER_MS))
  )
    throw new RangeError(
      `${where}: 'timeoutMs' must be a number of milliseconds from 1 to ${MAX_TIMER_MS}, got ${describeThrown(timeoutMs)}`,
    )
  if (
    records !== undefined &&
    !(
      Array.isArray(records) &&
      records.length > 0 &&
      Array.from(records).every((r) => typeof r === 'object' && r !== null && !Array.isArray(r))
    )
  )
    throw new RangeError(
      `${where}: 'records' must be a non-empty array of records (JSON objects), got ${inspect(records, { depth: 1, breakLength: Number.POSITIVE_INFINITY })}: with no record no rule checks anything`,
    )
}

/** Registers one test per rule under `name`, each with the runner's timeout `timeoutMs` (capped at what a timer holds). */
export function register<S>(
  name: string,
  rules: readonly ConformanceRule<S>[],
  subject: S,
  runner: ConformanceRunner | undefined,
  timeoutMs: number,
): void {
  checkOptions(subject, `conformance suite '${name}'`)
  const { describe, it } = resolveRunner(runner)
  const bound = Math.min(timeoutMs, MAX_TIMER_MS)
  describe(name, () => {
    for (const rule of rules) it(`${rule.id}: ${rule.title}`, () => rule.check(subject), bound)
  })
}

/** Runs every rule, returning the failures (a rule that throws something else is reported too). */
export async function runRules<S>(
  rules: readonly ConformanceRule<S>[],
  subject: S,
  component: string,
): Promise<ConformanceError[]> {
  checkOptions(subject, `the ${component} conformance check`)
  const failures: ConformanceError[] = []
  for (const rule of rules) {
    try {
      await rule.check(subject)
    } catch (error) {
      failures.push(
        error instanceof ConformanceError
          ? error
          : new ConformanceError(
              rule.id,
              component,
              `the check threw: ${describeThrown(error)}`,
              'see the cause',
              {
                cause: error,
              },
            ),
      )
    }
  }
  return failures
}

/**
 * `rules` with each check reporting a step of the user's code that threw (`callWithin`, `stepOf`)
 * as a {@link ConformanceError} of that rule, naming the component's kind and the step, with what
 * it threw as its `cause`: a suite's rules are made through it, so a rule run on its own (its
 * exported `check`) says it as well as the runner and the `check*` functions do.
 */
export function namingSteps<S>(rules: readonly ConformanceRule<S>[]): readonly ConformanceRule<S>[] {
  return rules.map((rule) => ({
    ...rule,
    check: (subject: S) =>
      Promise.resolve()
        .then(() => rule.check(subject))
        .catch((error: unknown) => {
          if (!(error instanceof StepFailure)) throw error
          throw new ConformanceError(
            rule.id,
            error.component,
            `${error.step} threw: ${describeThrown(error.thrown)}`,
            `${error.step} must succeed for the rule to check anything: see the cause, what it threw`,
            { cause: error.thrown },
          )
        }),
  }))
}

/**
 * What `call` (a synchronous step of the user's code, such as a transform's factory) returns; a
 * throw fails the rule it ran under, naming `component` and `step` (see {@link namingSteps}).
 */
export function stepOf<T>(call: () => T, component: string, step: string): T {
  try {
    return call()
  } catch (error) {
    throw new StepFailure(component, step, error)
  }
}

/** Resolves with `promise`, or rejects with a {@link ConformanceError} after `ms`. */
export function within<T>(promise: Promise<T>, ms: number, error: () => ConformanceError): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(error()), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/**
 * What `call` (a step of the user's code: a factory, `start`, `stop`, a hook) returns, or a
 * {@link ConformanceError} `code` naming `step` when it does not settle within `ms`: the rule
 * fails, it never waits forever (the `check*` functions have no runner's timeout to end them).
 * A `call` that throws or rejects fails the rule it ran under, naming `component` and `step`
 * (see {@link namingSteps}).
 */
export function callWithin<T>(
  call: () => T | PromiseLike<T>,
  ms: number,
  code: string,
  component: string,
  step: string,
): Promise<T> {
  const called = Promise.resolve()
    .then(call)
    .catch((error: unknown) => {
      throw new StepFailure(component, step, error)
    })
  return within(
    called,
    ms,
    () =>
      new ConformanceError(
        code,
        component,
        `${step} did not settle within ${ms} ms`,
        `${step} must resolve or throw; one that waits forever stalls the components around it`,
      ),
  )
}
