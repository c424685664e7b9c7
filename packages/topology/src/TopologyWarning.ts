/**
 * What `build()` warns about: a topology that builds but may not do what the user hopes. Given to
 * `TopologyOptions.onWarning` and kept by the built {@link Topology} (`topology.warnings`).
 *
 * @module
 */
/**
 * A warning of `build()`: the topology builds, but may not do what the user hopes.
 *
 * @example
 * ```ts
 * new TopologyBuilder({ acknowledgements: true, onWarning: (w) => log.warn(w.message, { source: w.source, sink: w.sink }) })
 * ```
 */
export interface TopologyWarning {
  /** The only warning so far: a source that cannot acknowledge feeds an acknowledging sink. */
  readonly code: 'ACK_UNSUPPORTED'
  /** The source that cannot acknowledge. */
  readonly source: string
  /** An acknowledging sink that it feeds. */
  readonly sink: string
  /** The warning in words, naming the source and the sink. */
  readonly message: string
}
