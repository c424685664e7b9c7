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
import { z } from 'zod'
import type { EdgeBufferFactory } from './EdgeBuffer.js'
import { planTopology } from './internal/TopologyPlan.js'
import { codeOption, defineOptions, type OptionsOf } from './OptionsSchema.js'
import { RetryPolicy } from './RetryPolicy.js'
import type { Sink } from './Sink.js'
import type { Source } from './Source.js'
import { Topology } from './Topology.js'
import { TopologyError } from './TopologyError.js'
import type { Transform } from './Transform.js'

/**
 * Options of the whole topology, declared once (see {@link defineOptions}): `build()` checks them
 * with everything else, and `TopologyOptions.jsonSchema()` describes them for config files.
 *
 * @example
 * ```ts
 * new TopologyBuilder({ acknowledgements: true, ackTimeoutMs: 30_000, dataDir: '/var/lib/ackline' })
 * ```
 */
export const TopologyOptions = defineOptions({
  acknowledgements: z
    .boolean()
    .optional()
    .describe(
      "Whether sinks acknowledge by default (default false). A sink's own `acknowledgements` setting always wins over this, whichever way.",
    ),
  dataDir: z
    .string()
    .min(1)
    .optional()
    .describe(
      'Directory under which durable buffers keep their files by default (a disk buffer of sink `archive` lives in `<dataDir>/archive`); given to every buffer factory.',
    ),
  ackTimeoutMs: z
    .number()
    .positive()
    .optional()
    .describe(
      'Settle a batch `errored` for its source when it has not resolved this long after it was sent, in milliseconds (no timeout when unset).',
    ),
  onWarning: codeOption<(warning: TopologyWarning) => void>('a function')
    .optional()
    .describe(
      'Called with each warning of `build()`. Defaults to `process.emitWarning` with code `ACKLINE_ACK_UNSUPPORTED`.',
    ),
})
/** Options of the whole topology: see the {@link TopologyOptions} schema for each option. */
export type TopologyOptions = OptionsOf<typeof TopologyOptions>

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
export const MemoryBufferOptions = defineOptions({
  type: z.literal('memory').optional().describe('The kind of buffer: `memory` (the default).'),
  maxEvents: z.int().min(1).default(500).describe('How many events may wait in the channel.'),
  whenFull: z
    .enum(['block', 'drop_newest'])
    .default('block')
    .describe(
      'What a full channel does: make the upstream wait (`block`) or drop what arrives (`drop_newest`).',
    ),
  droppedStatus: z
    .enum(['delivered', 'errored', 'rejected'] satisfies DeliveryStatus[])
    .default('rejected')
    .describe('The status of events a `drop_newest` channel drops.'),
})
/** Options of the in-memory channel: see the {@link MemoryBufferOptions} schema for each option. */
export type MemoryBufferOptions = OptionsOf<typeof MemoryBufferOptions>

/**
 * Options of a transform.
 *
 * @example
 * ```ts
 * builder.transform('valid', ['in'], filter(isValid), { dropStatus: 'rejected', buffer: { maxEvents: 1000 } })
 * ```
 */
export const TransformOptions = defineOptions({
  buffer: MemoryBufferOptions.schema.optional().describe('The channel in front of the transform.'),
  dropStatus: z
    .enum(['delivered', 'rejected'])
    .optional()
    .describe("What `context.drop` means here; wins over the transform's own `dropStatus`."),
})
/** Options of a transform: see the {@link TransformOptions} schema for each option. */
export type TransformOptions = OptionsOf<typeof TransformOptions>

/**
 * Options of a sink. The disk buffer's options are checked by the disk buffer's own rules, not by
 * this schema, which describes the in-memory channel under `buffer`.
 *
 * @example
 * ```ts
 * builder.sink('alerts', ['split.errors'], pager, { authoritative: true, retry: { attempts: 5 } })
 * builder.sink('debug', ['in'], console(), { acknowledgements: false })
 * ```
 */
export const SinkOptions = defineOptions({
  acknowledgements: z
    .boolean()
    .optional()
    .describe("Whether this sink acknowledges; wins over the topology's `acknowledgements`, both ways."),
  authoritative: z
    .boolean()
    .optional()
    .describe(
      'When this sink settles an event, its batches learn that status at once and what every other copy reports later is ignored.',
    ),
  buffer: MemoryBufferOptions.schema
    .optional()
    .describe(
      "The buffer in front of the sink: the in-memory channel's options (the default), or, in code, a factory of another kind of buffer such as `diskBuffer({ maxBytes })` from `@ackline/buffers`.",
    ),
  retry: RetryPolicy.schema.optional().describe('How failed writes are retried.'),
})
/** Options of a sink: see the {@link SinkOptions} schema for each option. */
export type SinkOptions = Omit<OptionsOf<typeof SinkOptions>, 'buffer'> & {
  /**
   * The buffer in front of the sink: the in-memory channel's options (the default), or a factory
   * of another kind of buffer, such as `diskBuffer({ maxBytes })` from `@ackline/buffers`.
   */
  readonly buffer?: MemoryBufferOptions | EdgeBufferFactory
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
