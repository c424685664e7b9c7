/**
 * `@ackline/transforms`: the built-in transforms. Each keeps the acknowledgement invariant: every
 * event it receives leaves once, emitted (possibly as clones or merged into another event) or
 * dropped with the transform's explicit `dropStatus`.
 *
 * @module @ackline/transforms
 */
export { DedupeOptions, type DedupeTransform, dedupe } from './Dedupe.js'
export type { DropOptions, DroppingTransform } from './DroppingTransform.js'
export { DropStatus } from './DropStatus.js'
export { FilterOptions, type FilterTransform, filter, type Predicate } from './Filter.js'
export { type MergeStrategy, ReduceOptions, type ReduceTransform, reduce } from './Reduce.js'
export {
  type RemapFunction,
  RemapOptions,
  type RemapOutput,
  type RemapResult,
  type RemapTransform,
  remap,
} from './Remap.js'
export { type Routes, type RouteTransform, route, UNMATCHED } from './Route.js'
export { SampleOptions, type SampleTransform, sample } from './Sample.js'
