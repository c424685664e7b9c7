/**
 * Building a topology in code: sources, transforms and sinks with ids, wired by naming their
 * inputs (`'parse'`, or a port: `'split.errors'`).
 *
 * Invariant: `build()` either returns a runnable {@link Topology} whose acknowledgements have been
 * propagated from sinks back to sources, or throws one {@link TopologyError} listing every problem.
 * The builder only records declarations; nothing runs before `topology.start()`.
 *
 * @module
 */
import { withoutUrlPasswords } from './internal/hideSecrets.js'
import { planTopology } from './internal/TopologyPlan.js'
import type { Sink } from './Sink.js'
import type { SinkOptions } from './SinkOptions.js'
import type { Source } from './Source.js'
import { Topology } from './Topology.js'
import { TopologyError } from './TopologyError.js'
import type { TopologyOptions } from './TopologyOptions.js'
import type { TopologyWarning } from './TopologyWarning.js'
import type { Transform } from './Transform.js'
import type { TransformOptions } from './TransformOptions.js'

/** @internal One declared component, as the builder recorded it. */
export type ComponentDeclaration =
  | {
      readonly role: 'source'
      readonly id: string
      readonly inputs: readonly string[]
      readonly component: Source
    }
  | {
      readonly role: 'transform'
      readonly id: string
      readonly inputs: readonly string[]
      readonly component: Transform
      readonly options: TransformOptions
    }
  | {
      readonly role: 'sink'
      readonly id: string
      readonly inputs: readonly string[]
      readonly component: Sink
      readonly options: SinkOptions
    }

/**
 * Declares a topology. `Inputs` is the union of what later components may name as inputs: each
 * source and transform id, and `id.port` for each transform port. Use `TopologyBuilder<string>`
 * to build topologies whose ids are only known at run time.
 *
 * @example
 * ```ts
 * const topology = new TopologyBuilder({ acknowledgements: true })
 *   .source('in', generator({ count: 1000 }))
 *   .transform('parse', ['in'], parse)
 *   .sink('out', ['parse'], blackhole())
 *   .sink('debug', ['in'], console(), { acknowledgements: false })
 *   .build()
 * await topology.start()
 * await topology.stop({ drainTimeoutMs: 5000 })
 * ```
 */
export class TopologyBuilder<Inputs extends string = never> {
  readonly #options: TopologyOptions
  readonly #declarations: ComponentDeclaration[] = []

  constructor(options: TopologyOptions = {}) {
    this.#options = options
  }

  /**
   * Declares a source. Each declaration takes a component object of its own: `build()` refuses
   * one object declared twice (`DUPLICATE_COMPONENT`), as the same holds for transforms and sinks.
   */
  source<const Id extends string>(id: Id, source: Source): TopologyBuilder<Inputs | Id> {
    this.#declarations.push({ role: 'source', id, inputs: [], component: source })
    return this as TopologyBuilder<Inputs | Id>
  }

  /** Declares a transform reading `inputs` (component ids or `id.port`). */
  transform<const Id extends string, Ports extends string = string>(
    id: Id,
    inputs: readonly Inputs[],
    transform: Transform<Ports>,
    options: TransformOptions = {},
  ): TopologyBuilder<Inputs | Id | `${Id}.${Ports}`> {
    this.#declarations.push({ role: 'transform', id, inputs, component: transform as Transform, options })
    return this as TopologyBuilder<Inputs | Id | `${Id}.${Ports}`>
  }

  /** Declares a sink reading `inputs` (component ids or `id.port`). */
  sink<const Id extends string>(
    id: Id,
    inputs: readonly Inputs[],
    sink: Sink,
    options: SinkOptions = {},
  ): TopologyBuilder<Inputs> {
    this.#declarations.push({ role: 'sink', id, inputs, component: sink, options })
    return this
  }

  /**
   * Validates every declaration, propagates acknowledgements and returns the topology. Throws a
   * {@link TopologyError} with every problem found. Warnings go to `onWarning` and are kept on
   * `topology.warnings`. The topology keeps a copy of the options as they were checked (the
   * topology's, and each declaration's, with its `retry` and in-memory `buffer`): changing those
   * objects afterwards changes nothing it runs with. Each option is read once (a getter is not read
   * again: what runs is what was checked). Components and buffer factories are kept as given.
   */
  build(): Topology {
    const { plan, problems, warnings } = planTopology(this.#declarations, this.#options)
    if (problems.length > 0 || plan === undefined) throw new TopologyError(problems.map(withoutUrlPasswords))
    // The options as build() read and checked them: a getter is not read again.
    const onWarning =
      plan.options.onWarning ??
      ((warning: TopologyWarning) =>
        process.emitWarning(warning.message, { code: `ACKLINE_${warning.code}` }))
    for (const warning of warnings) onWarning(warning)
    return new Topology(plan, warnings)
  }
}
