/**
 * `route`: sends each event to every named output whose predicate accepts it, and to `_unmatched`
 * when none does.
 *
 * Invariant: an event matched by k routes leaves on k ports, as k handles on the same finalizers
 * (k - 1 clones plus the original), so its sources wait for every consumer of every matched
 * port; an event matched by none leaves on `_unmatched` once. Nothing is discarded here: what a
 * port nobody reads means is the runtime's business. An event whose predicate throws leaves on no
 * port: the call throws once the others are routed, and the runtime settles it `errored`; so
 * does an event one of whose predicates answers anything but a boolean (it is not taken for a
 * miss). An event a predicate ended leaves on no port either, and the call throws as well, but it
 * keeps the status the predicate ended it with (the runtime cannot settle it again).
 *
 * @module
 */
import type { EventArray } from '@ackline/core'
import {
  ConfigIssue,
  codeOption,
  defineOptions,
  type Transform,
  type TransformContext,
} from '@ackline/topology'
import { z } from 'zod'
import type { Predicate } from './Filter.js'
import { badAnswer, dropAnswer, predicateEnded } from './internal/badAnswer.js'

/**
 * The port of events that no route accepted; read it as `'<id>._unmatched'`.
 *
 * @example
 * ```ts
 * builder.sink('rest', [`split.${UNMATCHED}`], archive)
 * ```
 */
export const UNMATCHED = '_unmatched' as const

/** Named routes: each output port's predicate. Port names may not contain `.` nor be `_unmatched`. */
export type Routes<Name extends string = string> = Readonly<Record<Name, Predicate>>

/** The route names a port may have, in the words of a config issue. */
const ROUTE_NAME = `a route name: non-empty, without '.', and not '${UNMATCHED}' (reserved for events no route accepts)`

/** What `routes` must be, in the words of a config issue. */
const ROUTES = 'an object naming at least one route'

/**
 * One route, checked alone: zod reads a record's `constructor` to tell a plain object (a route so
 * named holds a predicate there, and the record was refused as "a valid value"), and writes the
 * record it checked by assignment, which drops a `__proto__` route ("naming at least one route").
 */
const RouteArgument = defineOptions({
  name: z.string().refine((name) => name !== '' && !name.includes('.') && name !== UNMATCHED, ROUTE_NAME),
  predicate: codeOption<Predicate>('a function'),
})

/**
 * The field of the route `name`, as the options machinery names a record's entry (a key that is
 * empty or holds a dot or a bracket quoted in brackets): `routes.errors`, `routes["a[0]"]`. What
 * `validate()` and a predicate's bad answer name alike (the answer's read `routes.a[0]`).
 */
function routeField(name: string): string {
  return /^$|[.[\]]/.test(name) ? `routes[${JSON.stringify(name)}]` : `routes.${name}`
}

/** The issues of the route `name` (its name, then its predicate; one per route), at {@link routeField}. */
function routeIssues(name: string, predicate: unknown): ConfigIssue[] {
  const [issue] = RouteArgument.validate({ name, predicate })
  if (issue === undefined) return []
  const field = routeField(name)
  return [
    issue.field === 'name'
      ? ConfigIssue.of(field, `a key that is ${issue.expected ?? ROUTE_NAME}`, name)
      : { ...issue, field },
  ]
}

/**
 * The transform {@link route} returns; `Name` is the union of its route names, so a builder can
 * check the ports that downstream components read (`'split.errors'`).
 */
export interface RouteTransform<Name extends string = string> extends Transform<Name | typeof UNMATCHED> {
  readonly kind: 'route'
  /** The route names, in order, then `_unmatched`. */
  readonly outputs: readonly (Name | typeof UNMATCHED)[]
  /** Problems in the options, each naming its field; empty when they are fine. */
  validate(): readonly ConfigIssue[]
}

class Route<Name extends string> implements RouteTransform<Name> {
  readonly kind = 'route'
  // Event by event, in order: what queued behind an array may come in the same call.
  readonly coalesce = true
  readonly synchronous = true
  readonly outputs: readonly (Name | typeof UNMATCHED)[]
  readonly #names: readonly Name[]
  readonly #predicates: readonly Predicate[]
  // Reused for every event: which routes matched, so nothing is allocated per event.
  readonly #matched: Uint8Array
  /** The routes as given, for `validate()` to name when they name no route. */
  readonly #given: unknown

  constructor(routes: Routes<Name>) {
    this.#given = routes
    // Untyped code may give anything: only an object's keys are route names (a string's or an
    // array's indexes were taken for routes named '0', '1', …).
    const record = typeof routes === 'object' && routes !== null && !Array.isArray(routes)
    this.#names = (record ? Object.keys(routes) : []) as Name[]
    this.#predicates = this.#names.map((name) => routes[name]!)
    this.#matched = new Uint8Array(this.#names.length)
    this.outputs = [...this.#names, UNMATCHED]
  }

  validate(): readonly ConfigIssue[] {
    if (this.#names.length === 0) {
      // Named as given: a number, an array, a Map (no own keys) were all reported as "got {}".
      const given = this.#given
      // An array shows as JSON, its predicates as null: `[null]`.
      return [
        Array.isArray(given)
          ? { field: 'routes', expected: ROUTES, got: 'an array', message: `must be ${ROUTES}, got an array` }
          : ConfigIssue.of('routes', ROUTES, given),
      ]
    }
    return this.#names.flatMap((name, i) => routeIssues(name, this.#predicates[i]))
  }

  process(events: EventArray, context: TransformContext): void {
    const list = events.events
    const names = this.#names
    const predicates = this.#predicates
    const matched = this.#matched
    // An event whose predicate throws is left for the runtime to settle, and the call throws the
    // first error once every other event is routed: one call may hold several batches (coalesced).
    let failed: { readonly error: unknown } | undefined
    for (let e = 0; e < list.length; e++) {
      const event = list[e]!
      // Evaluate every predicate before emitting: once emitted, the event is no longer ours to read.
      let last = -1
      try {
        for (let r = 0; r < predicates.length; r++) {
          const answer: unknown = predicates[r]!(event)
          if (event.isEnded) {
            dropAnswer(answer)
            throw predicateEnded(context.id, routeField(names[r]!), `the predicate of route '${names[r]!}'`)
          }
          const hit = answer === true
          // Anything but a boolean (a truthy 1, a forgotten return, an async predicate's promise)
          // is not a miss that sends the event to `_unmatched`.
          if (!hit && answer !== false)
            throw badAnswer(
              context.id,
              routeField(names[r]!),
              `the predicate of route '${names[r]!}'`,
              answer,
            )
          matched[r] = hit ? 1 : 0
          if (hit) last = r
        }
      } catch (error) {
        failed ??= { error }
        continue
      }
      if (last < 0) {
        context.emit(event, UNMATCHED)
        continue
      }
      for (let r = 0; r < last; r++) if (matched[r] === 1) context.emit(event.clone(), names[r])
      context.emit(event, names[last])
    }
    if (failed !== undefined) throw failed.error
  }
}

/**
 * Routes events to named outputs by predicate. An event may match several routes (it then goes
 * to each, as clones sharing its finalizers) or none (it goes to `_unmatched`). Downstream
 * components read a route as `'<id>.<route>'`. `routes` is an object of predicates, one key per
 * route; anything else (an array of predicates, a `Map`, a number), or an object naming no
 * route, is a config issue of `routes` naming what was given, which `build()` refuses.
 *
 * @example
 * ```ts
 * builder
 *   .transform('split', ['in'], route({ errors: (e) => e.get('level') === 'error', audit: (e) => e.get('audit') === true }))
 *   .sink('alerts', ['split.errors'], alertSink)
 *   .sink('archive', ['split.audit', 'split._unmatched'], archiveSink)
 * ```
 */
export function route<const Name extends string>(routes: Routes<Name>): RouteTransform<Name> {
  return new Route<Name>(routes)
}
