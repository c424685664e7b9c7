/**
 * `filter`: keeps the events a predicate accepts and discards the rest.
 *
 * Invariant: every input event leaves exactly once: emitted on the default output when the
 * predicate returns `true`, handed to `context.drop` otherwise (the runtime settles it with the
 * transform's `dropStatus`). A predicate that throws is a bug: the runtime settles the events not
 * yet handled `errored` and reports it.
 *
 * @module
 */
import type { LogEvent } from '@ackline/core'
import { codeOption, defineOptions, keepIf, type OptionsOf } from '@ackline/topology'
import type { DroppingTransform } from './DroppingTransform.js'
import { DropStatus } from './DropStatus.js'

/**
 * Decides whether an event goes on: `true`, or anything else for no. It must not end, emit or
 * keep the event, and it answers at once: one that returns a promise (an `async` function, from
 * untyped code) fails the call with a `ComponentError` (`BAD_RESULT`), and the runtime settles
 * the event `errored`, rather than take the promise for a no (the promise's rejection, if it
 * rejects, is handled: it never becomes an unhandled rejection).
 */
export type Predicate = (event: LogEvent) => boolean

/** Options of {@link filter}: its schema (`validate`, `jsonSchema`, …). */
export const FilterOptions = defineOptions({ dropStatus: DropStatus.option })
/** Options of {@link filter}. */
export type FilterOptions = OptionsOf<typeof FilterOptions>

/** The predicate, checked like an option (it may come from untyped code). */
const FilterArguments = defineOptions({ predicate: codeOption<Predicate>('a function') })

/** The transform {@link filter} returns. */
export interface FilterTransform extends DroppingTransform {
  readonly kind: 'filter'
}

/**
 * Keeps the events for which `predicate` returns `true`; discards the others with
 * `options.dropStatus` (`'delivered'` unless set: a filtered-out event was processed as asked).
 *
 * @example
 * ```ts
 * builder.transform('errors', ['in'], filter((e) => e.get('level') === 'error'))
 * // or make discards hold up acknowledgement:
 * filter((e) => e.get('user') !== undefined, { dropStatus: 'rejected' })
 * ```
 */
export function filter(predicate: Predicate, options: FilterOptions = {}): FilterTransform {
  return {
    kind: 'filter',
    // Event by event: what queued behind an array may come in the same call.
    coalesce: true,
    synchronous: true,
    // Through `?.`: options that are no object (untyped code) are for `validate()` to report.
    dropStatus: options?.dropStatus ?? DropStatus.default,
    validate: () => [...FilterArguments.validate({ predicate }), ...FilterOptions.validate(options)],
    // Until the first discard nothing is emitted: if every event is kept, the array goes on whole.
    process: keepIf(predicate),
  }
}
