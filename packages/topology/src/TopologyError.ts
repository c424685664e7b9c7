/**
 * The error `TopologyBuilder.build()` throws when a topology is not valid.
 *
 * Invariant: one error carries every problem found, so a user fixes a configuration in one pass;
 * each problem names the component and the field it is about.
 *
 * @module
 */
import { ComponentError } from './ComponentError.js'
import type { ConfigIssue } from './ConfigIssue.js'

/**
 * What kind of problem, as a stable code for programs to match on.
 *
 * @example
 * ```ts
 * const cycles = error.problems.filter((p) => p.code === 'CYCLE').map((p) => p.component)
 * ```
 */
export type TopologyProblemCode =
  | 'INVALID_ID'
  | 'DUPLICATE_ID'
  /**
   * One component object (a source, transform or sink) is declared under two ids: it would be
   * started, run and stopped once per declaration, with one state for both. Reported on the later
   * declaration, naming the first; field: its role (`"sink"`).
   */
  | 'DUPLICATE_COMPONENT'
  | 'DUPLICATE_INPUT'
  | 'UNKNOWN_INPUT'
  | 'INPUT_IS_SINK'
  | 'UNDECLARED_OUTPUT'
  | 'NO_INPUTS'
  | 'SOURCE_WITH_INPUTS'
  | 'CYCLE'
  | 'UNFED_SINK'
  | 'INVALID_OPTION'
  | 'INVALID_CONFIG'
  /** A sink that cannot confirm a delivery (`canAcknowledge: false`) lacks `acknowledgements: false`. */
  | 'ACK_UNSUPPORTED'
  /** `topology.start()`: a sink's `start()` threw (the problem's `cause` is what it threw). */
  | 'SINK_START_FAILED'
  /**
   * `topology.start()`: the buffer in front of a component could not open, or its factory returned
   * the buffer it had opened for another sink.
   */
  | 'BUFFER_OPEN_FAILED'
  /**
   * `topology.start()`: `stop()` gave up waiting for a sink's `start()` or a buffer's opening (past
   * its `drainTimeoutMs`, or at a second `stop()`); what finishes later is stopped or closed again.
   */
  | 'STOPPED_WHILE_STARTING'

/**
 * One problem: the component concerned, the field of its declaration or config, and what is wrong.
 *
 * @example
 * ```ts
 * // { code: 'UNKNOWN_INPUT', component: 'archive', field: 'inputs[1]', message: "input 'prase' names no component" }
 * ```
 */
export interface TopologyProblem {
  /** A stable code for programs to match on (see {@link TopologyProblemCode}). */
  readonly code: TopologyProblemCode
  /** The component's id. */
  readonly component: string
  /** The field concerned: `"id"`, `"inputs"`, `"inputs[1]"`, `"buffer.maxEvents"`, or a config field. */
  readonly field: string
  /** What is wrong, in words a user can act on. */
  readonly message: string
  /** What was thrown, for the problems found by `start()`. */
  readonly cause?: unknown
  /** For a problem with an option's value: what it must be, in words (see {@link ConfigIssue}). */
  readonly expected?: string
  /** For a problem with an option's value: what it was, shown briefly. */
  readonly got?: string
}

/**
 * Every problem of a topology, reported together.
 *
 * @example
 * ```ts
 * try {
 *   builder.build()
 * } catch (error) {
 *   if (error instanceof TopologyError) for (const p of error.problems) console.error(p.component, p.field, p.message)
 * }
 * ```
 */
export class TopologyError extends ComponentError<'INVALID_TOPOLOGY'> {
  override readonly name = 'TopologyError'

  /** `component` and `field` stay unset: the error may span components, each problem names its own. */
  constructor(
    /** Every problem found, in declaration order of the components. */
    readonly problems: readonly TopologyProblem[],
    /** `cause`: the first problem's cause, when `start()` found the problems. */
    options?: ErrorOptions,
  ) {
    super(
      'INVALID_TOPOLOGY',
      `invalid topology (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n` +
        problems.map((p) => `  - ${ComponentError.describe(p.component, p.field, p.message)}`).join('\n'),
      options,
    )
  }
}
