import type { Sink, Transform } from '@ackline/topology'

/**
 * Copies the named members of a component onto a wrapper's object, methods bound to the
 * component. A spread (`{ ...sink }`) copies own properties only, so the methods of a class
 * instance (`start`, `stop`, `validate`, on its prototype) would be lost and the runtime would
 * never start the sink.
 */
export function forwardMembers<T extends object>(component: T, names: readonly (keyof T)[]): Partial<T> {
  const out: Partial<T> = {}
  for (const name of names) {
    const value = component[name]
    if (value === undefined) continue
    out[name] = (typeof value === 'function' ? value.bind(component) : value) as T[keyof T]
  }
  return out
}

/** Every member of a sink the runtime reads besides `write`. */
export const SINK_MEMBERS: readonly (keyof Sink)[] = [
  'kind',
  'validate',
  'start',
  'stop',
  'concurrency',
  'canAcknowledge',
]

/** Every member of a transform the runtime reads besides `process`. */
export const TRANSFORM_MEMBERS: readonly (keyof Transform)[] = [
  'kind',
  'validate',
  'outputs',
  'dropStatus',
  'flush',
  'flushIntervalMs',
  'coalesce',
  'synchronous',
]
