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
import type { DeliveryStatus } from '@ackline/core'
import type { EdgeBufferFactory } from './EdgeBuffer.js'
import { planTopology } from './internal/TopologyPlan.js'
import type { RetryPolicy } from './RetryPolicy.js'
import type { Sink } from './Sink.js'
import type { Source } from './Source.js'
import { Topology } from './Topology.js'
import { TopologyError } from './TopologyError.js'
import type { Transform } from './Transform.js'

/**
 * Options of the whole topology.
 *
 * @example
 * ```ts
 * new TopologyBuilder({ acknowledgements: true, ackTimeoutMs: 30_000, dataDir: '/var/lib/ackline' })
 * ```
 */
export interface TopologyOptions {
  /**
   * Whether sinks acknowledge by default (default `false`). A sink's own `acknowledgements`
   * setting always wins over this, whichever way.
   */
  readonly acknowledgements?: boolean
  /**
   * Directory under which durable buffers keep their files by default (a disk buffer of sink
   * `archive` lives in `<dataDir>/archive`); given to every buffer factory.
   */
  readonly dataDir?: string
  /**
   * Settle a batch `errored` for its source when it has not resolved this long after it was sent
   * (no timeout when unset). See `rfcs/0002-topology-and-acknowledgement-propagation.md`.
   */
  readonly ackTimeoutMs?: number
  /**
   * Called with each warning of `build()` (a source that cannot acknowledge feeding an
   * acknowledging sink). Defaults to `process.emitWarning` with code `ACKLINE_ACK_UNSUPPORTED`.
   */
  readonly onWarning?: (warning: TopologyWarning) => void
}

/**
 * A warning of `build()`: the topology builds, but may not do what the user hopes.
 *
 * @example
 * ```ts
 * new TopologyBuilder({ acknowledgements: true, onWarning: (w) => log.warn(w.message, { source: w.source, sink: w.sink }) })
 * ```
 */
export interface TopologyWarning {
  readonly code: 'ACK_UNSUPPORTED'
  /** The source that cannot acknowledge. */
  readonly source: string
  /** An acknowledging sink that it feeds. */
  readonly sink: string
  readonly message: string
}

/**
 * The in-memory channel in front of a component: the default buffer, built into the runtime, so
 * it is given by its options rather than by a factory. Other kinds of buffer come from their own
 * package as an {@link EdgeBufferFactory} (`diskBuffer({ … })` of `@ackline/buffers`).
 *
 * @example
 * ```ts
 * builder.sink('metrics', ['in'], sink, { buffer: { maxEvents: 10_000, whenFull: 'drop_newest' } })
 * ```
 */
export interface MemoryBufferOptions {
  /** Optional tag, for configs that spell the kind out. */
  readonly type?: 'memory'
  /** How many events may wait in the channel (default 500). */
  readonly maxEvents?: number
  /** What a full channel does: make the upstream wait (`'block'`, the default) or drop what arrives. */
  readonly whenFull?: 'block' | 'drop_newest'
  /** The status of events a `drop_newest` channel drops (default `'rejected'`). */
  readonly droppedStatus?: DeliveryStatus
}

/**
 * Options of a transform.
 *
 * @example
 * ```ts
 * builder.transform('valid', ['in'], filter(isValid), { dropStatus: 'rejected', buffer: { maxEvents: 1000 } })
 * ```
 */
export interface TransformOptions {
  /** The channel in front of the transform. */
  readonly buffer?: MemoryBufferOptions
  /** What `context.drop` means here; wins over the transform's own `dropStatus`. */
  readonly dropStatus?: 'delivered' | 'rejected'
}

/**
 * Options of a sink.
 *
 * @example
 * ```ts
 * builder.sink('alerts', ['split.errors'], pager, { authoritative: true, retry: { attempts: 5 } })
 * builder.sink('debug', ['in'], console(), { acknowledgements: false })
 * ```
 */
export interface SinkOptions {
  /** Whether this sink acknowledges; wins over the topology's `acknowledgements`, both ways. */
  readonly acknowledgements?: boolean
  /**
   * When this sink settles an event, its batches learn that status at once and what every other
   * copy reports later is ignored.
   */
  readonly authoritative?: boolean
  /**
   * The buffer in front of the sink: the in-memory channel's options (the default), or a factory
   * of another kind of buffer, such as `diskBuffer({ maxBytes })` from `@ackline/buffers`.
   */
  readonly buffer?: MemoryBufferOptions | EdgeBufferFactory
  /** How failed writes are retried. */
  readonly retry?: RetryPolicy
}

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

  /** Declares a source. */
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
   * `topology.warnings`.
   */
  build(): Topology {
    const { plan, problems, warnings } = planTopology(this.#declarations, this.#options)
    if (problems.length > 0 || plan === undefined) throw new TopologyError(problems)
    const onWarning =
      this.#options.onWarning ??
      ((warning: TopologyWarning) =>
        process.emitWarning(warning.message, { code: 'ACKLINE_ACK_UNSUPPORTED' }))
    for (const warning of warnings) onWarning(warning)
    return new Topology(plan, warnings)
  }
}
