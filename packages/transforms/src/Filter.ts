/**
 * `filter`: keeps the events a predicate accepts and discards the rest.
 *
 * Invariant: every input event leaves exactly once: emitted on the default output when the
 * predicate returns `true`, handed to `context.drop` when it returns `false` (the runtime settles
 * it with the transform's `dropStatus`). A predicate that throws, or answers anything but a
 * boolean, is a bug: the event is left to the runtime, which settles it `errored` and reports it;
 * the other events of the call are decided as usual.
 *
 * @module
 */
import type { LogEvent } from '@ackline/core'
import { codeOption, defineOptions, type OptionsOf, perEvent } from '@ackline/topology'
import type { DroppingTransform } from './DroppingTransform.js'
import { DropStatus } from './DropStatus.js'
import { badAnswer, dropAnswer, predicateEnded } from './internal/badAnswer.js'

/**
 * Decides whether an event goes on: `true` for yes, `false` for no. It must not end, emit or keep
 * the event (one that ends it fails the call, and the event keeps the status it was ended with),
 * and it answers at once with a boolean. Any other answer (from untyped code: a truthy
 * `1` or `'yes'`, an object, `undefined` from a function that forgot to `return`, a promise from
 * an `async` function) fails the call with a `ComponentError` (`BAD_RESULT`, naming the component
 * and the predicate's field), and the runtime settles that event `errored`, rather than take the
 * answer for a no and drop (or misroute) an event the user meant to keep (a promise's rejection,
 * if it rejects, is handled: it never becomes an unhandled rejection).
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
 * Keeps the events for which `predicate` returns `true`; discards those for which it returns
 * `false` with `options.dropStatus` (`'delivered'` unless set: a filtered-out event was processed
 * as asked). Any other answer fails the call for that event (see {@link Predicate}).
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
    process: perEvent(
      (event): Verdict | undefined => {
        const answer: unknown = predicate(event)
        if (event.isEnded) {
          dropAnswer(answer)
          return ENDED
        }
        if (answer === true) return undefined
        // Allocated only for a wrong answer: the thrown error needs the context's id.
        return answer === false ? DISCARD : { answer }
      },
      (event, verdict, context) => {
        if (verdict === DISCARD) context.drop(event)
        else if (verdict === ENDED) throw predicateEnded(context.id, 'predicate', 'the predicate')
        else throw badAnswer(context.id, 'predicate', 'the predicate', verdict.answer)
      },
    ),
  }
}

/** What {@link filter} does with an event it does not keep: discard it, or fail on a non-boolean answer. */
type Verdict = typeof DISCARD | typeof ENDED | { readonly answer: unknown }

/** The verdict on an event the predicate answered `false` for. */
const DISCARD = 'discard'

/** The verdict on an event the predicate ended, against its contract. */
const ENDED = 'ended'
