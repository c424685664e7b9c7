// What a step of the user's code threw (a factory, `start`, `stop`, a hook, a call of the
// component), with the component's kind and the step: `callWithin` throws it, and the rule it
// happened under turns it into its own `ConformanceError` (`namingSteps`), so a failure says
// which component and which step, never only "the check threw".
import { describeThrown } from './describeThrown.js'

/** A step of the user's code that threw; never seen outside the suites (each rule converts it). */
export class StepFailure extends Error {
  override readonly name = 'StepFailure'
  /** The same for every step failure: the suites tell it by its class. */
  readonly code = 'STEP_FAILED'

  constructor(
    /** The component's kind (`sink.kind`), or the suite's (`'sink'`) before `make` gave one. */
    readonly component: string,
    /** The step, as the failure names it: `make()`, `start()`, `the \`read\` option`. */
    readonly step: string,
    /** What it threw. */
    readonly thrown: unknown,
  ) {
    super(`${step} threw: ${describeThrown(thrown)}`, { cause: thrown })
  }
}
