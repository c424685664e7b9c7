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
import type { EventArray, LogEvent } from '@ackline/core'
import {
  type ConfigIssue,
  codeOption,
  defineOptions,
  type OptionsOf,
  type TransformContext,
} from '@ackline/topology'
import type { DroppingTransform } from './DroppingTransform.js'
import { DropStatus } from './DropStatus.js'

/** Decides whether an event goes on. It must not end, emit or keep the event. */
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

class Filter implements FilterTransform {
  readonly kind = 'filter'
  readonly dropStatus: DropStatus
  readonly #predicate: Predicate
  readonly #options: FilterOptions

  constructor(predicate: Predicate, options: FilterOptions) {
    this.#predicate = predicate
    this.#options = options
    this.dropStatus = options.dropStatus ?? DropStatus.default
  }

  validate(): readonly ConfigIssue[] {
    return [
      ...FilterArguments.validate({ predicate: this.#predicate }),
      ...FilterOptions.validate(this.#options),
    ]
  }

  process(events: EventArray, context: TransformContext): void {
    const list = events.events
    const predicate = this.#predicate
    // Until the first discard nothing is emitted: if every event is kept, the array goes on whole.
    let i = 0
    try {
      while (i < list.length && predicate(list[i]!) === true) i++
    } finally {
      // Stopped early (a discard, or a throw): what was kept is emitted now, in order.
      if (i < list.length) for (let j = 0; j < i; j++) context.emit(list[j]!)
    }
    if (i === list.length) {
      context.emitAll(events)
      return
    }
    context.drop(list[i]!)
    for (i++; i < list.length; i++) {
      const event = list[i]!
      if (predicate(event) === true) context.emit(event)
      else context.drop(event)
    }
  }
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
  return new Filter(predicate, options)
}
