/**
 * What `build()` warns about: a topology that builds but may not do what the user hopes. Given to
 * `TopologyOptions.onWarning` and kept by the built {@link Topology} (`topology.warnings`). Each
 * warning is told by its `code`; a `switch` on it narrows to the warning's own fields.
 *
 * @module
 */
/**
 * A warning of `build()`: the topology builds, but may not do what the user hopes.
 *
 * - `ACK_UNSUPPORTED`: a source that cannot acknowledge feeds an acknowledging sink, so what it
 *   reads is gone once read whatever the sink does (`source`, `sink`).
 * - `NO_CONSUMERS`: nothing reads any output of a source or a transform (`component`), so
 *   everything it sends or emits is discarded, and counted as dropped. Where an acknowledging
 *   source feeds it, that settles `delivered`: the source tells its upstream "got it" for events
 *   no sink received; where acknowledgements are off for its events nothing is settled (its
 *   source counts a batch delivered once sent, as any), and the message says so. Mostly a
 *   forgotten or misspelt input; a route's `_unmatched` port that nobody reads is not one (the
 *   route's other ports are read).
 * - `AUTHORITATIVE_IGNORED`: a sink declared `authoritative: true` has acknowledgements off (its
 *   own `acknowledgements: false`, or the topology's default), so its copies are settled as its
 *   buffer takes them and what it reports reaches no source: it records nothing (`sink`).
 *
 * @example
 * ```ts
 * new TopologyBuilder({ acknowledgements: true, onWarning: (w) => log.warn(w.message, { code: w.code }) })
 * ```
 */
export type TopologyWarning = AckUnsupportedWarning | NoConsumersWarning | AuthoritativeIgnoredWarning

/** A source that cannot acknowledge feeds an acknowledging sink (see {@link TopologyWarning}). */
export interface AckUnsupportedWarning {
  /** What the warning is about: tells it from the other warnings of {@link TopologyWarning}. */
  readonly code: 'ACK_UNSUPPORTED'
  /** The source that cannot acknowledge. */
  readonly source: string
  /** An acknowledging sink that it feeds. */
  readonly sink: string
  /** The warning in words, naming the source and the sink. */
  readonly message: string
}

/** Nothing reads any output of a source or a transform (see {@link TopologyWarning}). */
export interface NoConsumersWarning {
  /** What the warning is about: tells it from the other warnings of {@link TopologyWarning}. */
  readonly code: 'NO_CONSUMERS'
  /** The source or transform whose outputs nobody reads. */
  readonly component: string
  /** The warning in words, naming the component and what happens to its events. */
  readonly message: string
}

/**
 * A sink declared `authoritative: true` has acknowledgements off, so it records nothing (see
 * {@link TopologyWarning}).
 */
export interface AuthoritativeIgnoredWarning {
  /** What the warning is about: tells it from the other warnings of {@link TopologyWarning}. */
  readonly code: 'AUTHORITATIVE_IGNORED'
  /** The authoritative sink whose acknowledgements are off. */
  readonly sink: string
  /** The warning in words, naming the sink and where its acknowledgements were turned off. */
  readonly message: string
}
