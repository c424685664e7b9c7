/**
 * `remap`: a user function turns each event into zero, one or many events.
 *
 * Invariant: every output shares the input's finalizers (it is the input, a clone of it, or the
 * input's handle given new fields), so the input's sources wait for every output; the input
 * itself leaves exactly once: emitted, ended without a status once its outputs hold its
 * finalizers, or, when there are no outputs, handed to `context.drop`.
 *
 * @module
 */
import { type JsonObject, LogEvent } from '@ackline/core'
import {
  ComponentError,
  codeOption,
  defineOptions,
  type OptionsOf,
  perEvent,
  type TransformContext,
  textOf,
} from '@ackline/topology'
import type { DroppingTransform } from './DroppingTransform.js'
import { DropStatus } from './DropStatus.js'
import { ignoreRejection } from './internal/ignoreRejection.js'
import { isThenable } from './internal/isThenable.js'

/** One output of a remap function: an event handle, or the fields of a new event. */
export type RemapOutput = LogEvent | JsonObject

/**
 * What a remap function returns:
 * - `undefined` (nothing): the input goes on as it is (after whatever the function changed in it);
 * - `null` or `[]`: no output, the input is dropped;
 * - a `LogEvent`: the input, a handle the function derived from it (`input.clone()`), or one it
 *   made (`new LogEvent(...)`): every output that is a `LogEvent` other than the input is given
 *   the input's finalizers (merged in), so the input's sources wait for it;
 * - a fields object (a plain object, of any realm: one a function run in a `vm` context made
 *   too): the input goes on with these fields instead of its own;
 * - an array of the above: one output each, in order.
 *
 * Anything else (a promise, as an `async` function returns; a number; a `Map`; `null` or
 * `undefined` inside an array; a `LogEvent` that has ended; an object that cannot be inspected, a
 * Proxy whose trap throws or a revoked one) is a bug in the function: the call throws a `ComponentError`
 * with code `BAD_RESULT` naming the transform and `fn`, before the event has any output, and the
 * runtime settles the event `errored` and reports it, rather than pass on fields no sink can
 * write (a promise serializes as `{}`). A refused promise that rejects is handled, never left an
 * unhandled rejection.
 *
 * A function that ends its input, or merges it into an event, breaks its contract whatever it
 * returns: the call throws a `ComponentError` (`BAD_RESULT`, naming the transform and `fn`), the
 * input is neither passed on nor dropped again, and the runtime reports the failure. The input's
 * status stays the one the function ended it with, which remap can no longer change: `end()`
 * without a status counts `delivered` (not the transform's `dropStatus`; to discard, return
 * `null`). The `LogEvent`s such a function returned are ended `errored` (they may hold the input's
 * finalizers), not left live for the leak detector.
 */
export type RemapResult = undefined | null | RemapOutput | readonly RemapOutput[]

/**
 * A remap function. It may change the input with `set`/`remove`, return it, clone it, or return
 * fields; it must not end, merge or emit events (its input included: one that ends its input
 * fails the call, see {@link RemapResult}; to discard it, return `null`). An output that is a
 * `LogEvent` other than the input (`input.clone()`, or `new LogEvent(...)`) is given the input's
 * finalizers, so the input is not acknowledged before it.
 * Fields objects are used as they are, not copied. They may hold objects of the input's fields
 * (`{ ...event.fields, tag: 1 }`, also as an event's, `new LogEvent({ ...event.fields })`), or one
 * object in several of them: a later `set` copies first wherever another handle may share them,
 * so the input's other copies and the other outputs keep their values. They must not hold an
 * object kept beyond the call (a constant), which a later `set` on the output could change.
 */
// biome-ignore lint/suspicious/noConfusingVoidType: `void` lets a block body that only edits the event type-check.
export type RemapFunction = (event: LogEvent) => RemapResult | void

/** Options of {@link remap}: its schema (`validate`, `jsonSchema`, …). */
export const RemapOptions = defineOptions({ dropStatus: DropStatus.option })
/** Options of {@link remap}. */
export type RemapOptions = OptionsOf<typeof RemapOptions>

/** The function, checked like an option (it may come from untyped code). */
const RemapArguments = defineOptions({ fn: codeOption<RemapFunction>('a function') })

/** The transform {@link remap} returns. */
export interface RemapTransform extends DroppingTransform {
  readonly kind: 'remap'
}

/**
 * Emits what `fn` returned for `input`, as {@link RemapResult} describes, for any result but the
 * input going on as it is (which `perEvent` handles).
 */
function emitResult(
  input: LogEvent,
  result: Exclude<RemapResult, undefined> | typeof INPUT_ENDED,
  context: TransformContext,
): void {
  if (result === INPUT_ENDED) throw inputEnded(context.id)
  if (result === null) {
    if (input.isEnded) throw inputEnded(context.id)
    context.drop(input)
    return
  }
  let kind: Kind
  try {
    kind = kindOf(result)
  } catch (error) {
    const bad = uninspectable(context.id, error, undefined)
    // A Proxy of an array whose getPrototypeOf trap throws is still an array, which may hold the
    // clones the function made: they are ended as those of any refused array.
    throw isArray(result) ? refused(result, input, bad, context) : bad
  }
  switch (kind) {
    case 'event':
      if (input.isEnded) throw refused([result], input, inputEnded(context.id), context)
      // The input's finalizers move into the output (kept once where it is the input's clone), so
      // the input's sources wait for it even when the function made it with `new LogEvent`.
      context.emit((result as LogEvent).merge(input))
      return
    case 'array': {
      const outputs = result as readonly unknown[]
      // Checked before anything is emitted: a bad output leaves the input untouched for the runtime.
      let bad: ComponentError<'BAD_RESULT'> | undefined
      let i = 0
      try {
        for (; i < outputs.length; i++) {
          const output = outputs[i]
          const its = kindOf(output)
          if (its !== 'event' && its !== 'fields') {
            bad = badResult(context.id, output, its, i)
            break
          }
        }
      } catch (error) {
        bad = uninspectable(context.id, error, i)
      }
      if (bad !== undefined) throw refused(outputs, input, bad, context)
      if (input.isEnded) throw refused(outputs, input, inputEnded(context.id), context)
      emitMany(input, outputs as readonly RemapOutput[], context)
      return
    }
    case 'fields':
      if (input.isEnded) throw inputEnded(context.id)
      context.emit(input.replaceFields(result as JsonObject))
      return
    case 'promise':
      // Refused, a promise is awaited by nobody: its rejection must not go unhandled.
      ignoreRejection(result)
      throw badResult(context.id, result, kind, undefined)
    case 'ended':
    case 'other':
      // An ended handle is checked before the input: merging into it throws, after which nothing
      // may be left half done.
      throw badResult(context.id, result, kind, undefined)
  }
}

/**
 * What a remap function returned (or one output of an array it returned) is: a live `LogEvent`,
 * one that has ended, an array, a fields object, a promise, or something else.
 */
type Kind = 'event' | 'ended' | 'array' | 'fields' | 'promise' | 'other'

/**
 * The {@link Kind} of `value`. Throws what telling it threw: a Proxy's trap (`getPrototypeOf`,
 * `get`), a revoked Proxy, a Proxy of a `LogEvent` (whose private fields it cannot reach).
 */
function kindOf(value: unknown): Kind {
  if (value instanceof LogEvent) return value.isEnded ? 'ended' : 'event'
  if (Array.isArray(value)) return 'array'
  if (isFields(value)) return 'fields'
  return isThenable(value) ? 'promise' : 'other'
}

/** `Array.isArray`, false for what it throws on (a revoked Proxy, whose outputs nothing can reach). */
function isArray(value: unknown): value is readonly unknown[] {
  try {
    return Array.isArray(value)
  } catch {
    return false
  }
}

/**
 * What a remap function's step gives `emitResult` when the function returned nothing (or its
 * input) but ended its input, or merged it into an event: passed on as it is, the ended input was
 * taken out by the runtime and reported as ended after it was emitted, and its batch told what
 * the function ended it with, without a word about the function.
 */
const INPUT_ENDED: unique symbol = Symbol('input ended')

/**
 * `error`, once every output of a refused result is dealt with: the handles the function derived
 * (clones, or events it merged its input into) reach no one else, so they are ended `errored`
 * here, or their batches would wait for them until the leak detector found them; a promise is
 * awaited by nobody, so its rejection is handled. Arrays inside it (a `map` where `flatMap` was
 * meant) are walked too, each once.
 */
function refused(
  outputs: readonly unknown[],
  input: LogEvent,
  error: ComponentError<'BAD_RESULT'>,
  context: TransformContext,
): ComponentError<'BAD_RESULT'> {
  const reason = { componentId: context.id, code: 'BAD_RESULT', message: error.message }
  const seen = new Set<readonly unknown[]>()
  const walk = (list: readonly unknown[]): void => {
    seen.add(list)
    let n = 0
    try {
      n = list.length
    } catch {
      // An array (a Proxy of one) whose length cannot be read: no output to reach.
    }
    for (let i = 0; i < n; i++) {
      try {
        const other: unknown = list[i]
        if (other instanceof LogEvent) {
          if (other !== input && !other.isEnded) other.end('errored', { reason })
        } else if (isArray(other)) {
          if (!seen.has(other)) walk(other)
        } else if (isThenable(other)) ignoreRejection(other)
      } catch {
        // An output that cannot be inspected (a Proxy whose trap throws): nothing to end through it.
      }
    }
  }
  walk(outputs)
  return error
}

/**
 * What a remap throws when its function ended its input, or merged it into an event (which
 * consumes it): an output could not take the input's finalizers, and one that holds them already
 * would be left live, its batches waiting, if the call failed on them halfway.
 */
function inputEnded(id: string): ComponentError<'BAD_RESULT'> {
  return new ComponentError(
    'BAD_RESULT',
    'the remap function ended its input (or merged it into another event); it must leave the input to remap, which gives every output the finalizers it needs',
    { component: id, field: 'fn' },
  )
}

/**
 * Whether `value` is a fields object: a plain object (not a promise, a `Map`, a class instance),
 * of any realm. Told by its prototype being the root of its chain, as `Object.prototype` is in
 * every realm, not by this realm's `Object.prototype`: a function run in a `vm` context returns
 * objects of that context's (refused, each of its events was settled errored). A `Map`, a `Date`,
 * a promise or a class instance has a prototype of its own before the root, in any realm.
 */
function isFields(value: unknown): value is JsonObject {
  if (typeof value !== 'object' || value === null) return false
  const prototype: unknown = Object.getPrototypeOf(value)
  return prototype === null || prototype === Object.prototype || Object.getPrototypeOf(prototype) === null
}

/**
 * The name of the class `value` was made by, when it says; `{ cause }` when its `constructor`
 * cannot be read (a Proxy whose `get` trap throws, a getter that throws).
 */
function constructorName(value: object): string | undefined | { readonly cause: unknown } {
  try {
    const maker: unknown = (value as { constructor?: unknown }).constructor
    return typeof maker === 'function' && typeof maker.name === 'string' && maker.name !== ''
      ? maker.name
      : undefined
  } catch (cause) {
    return { cause }
  }
}

/**
 * What an object that is no fields object is, in words, from the name of its class
 * ({@link constructorName}): the class name went after "a" whatever it was ("a Object object" for
 * `Object.create({...})`, "a Array object").
 */
function objectKind(name: string | undefined): string {
  // Its constructor is Object's, inherited through an object between it and the root.
  if (name === 'Object') return 'an object that inherits from another object (Object.create?)'
  return name === undefined ? 'an object of no named class' : `an instance of ${name}`
}

/**
 * What a remap throws for a result (or the output at `index` of one) that is none of
 * {@link RemapResult}, of the {@link Kind} `kind`. An object whose `constructor` cannot be read
 * (a Proxy whose `get` trap throws) is one that cannot be inspected: what reading it threw is the
 * error's cause, as for {@link uninspectable}.
 */
function badResult(
  id: string,
  value: unknown,
  kind: Kind,
  index: number | undefined,
): ComponentError<'BAD_RESULT'> {
  const name =
    kind === 'other' && typeof value === 'object' && value !== null ? constructorName(value) : undefined
  if (typeof name === 'object')
    return resultError(
      id,
      `${where(index)} an object that cannot be inspected (its constructor could not be read: ${textOf(name.cause)})`,
      name.cause,
    )
  const what =
    kind === 'ended'
      ? 'a LogEvent that has ended'
      : kind === 'promise'
        ? 'a promise (an async function?)'
        : kind === 'array'
          ? 'an array'
          : value === null || value === undefined
            ? String(value)
            : typeof value !== 'object'
              ? `a ${typeof value}`
              : objectKind(name)
  return resultError(id, `${where(index)} ${what}`)
}

/**
 * What a remap throws for a result (or the output at `index` of one) that could not be told from
 * one of {@link RemapResult}: telling it threw `cause` (a Proxy's trap, a revoked Proxy), which
 * left the call as it was, naming neither the transform nor its function.
 */
function uninspectable(id: string, cause: unknown, index: number | undefined): ComponentError<'BAD_RESULT'> {
  return resultError(
    id,
    `${where(index)} an object that cannot be inspected (a Proxy whose trap threw, or a revoked one: ${textOf(cause)})`,
    cause,
  )
}

/** Where a bad result is, in words: the result itself, or its output at `index`. */
function where(index: number | undefined): string {
  return index === undefined ? 'returned' : `returned an array whose output ${index} is`
}

function resultError(id: string, what: string, cause?: unknown): ComponentError<'BAD_RESULT'> {
  return new ComponentError(
    'BAD_RESULT',
    `the remap function ${what}; expected undefined, null, a LogEvent, a fields object or an array of them`,
    cause === undefined ? { component: id, field: 'fn' } : { component: id, field: 'fn', cause },
  )
}

/**
 * Emits each output in order. Every output but the last that needs the input's finalizers gets a
 * clone of the input; the last reuses the input's own handle, so a one-to-one remap allocates
 * nothing and the input is never read after it was emitted.
 */
function emitMany(input: LogEvent, outputs: readonly RemapOutput[], context: TransformContext): void {
  const n = outputs.length
  if (n === 0) {
    context.drop(input)
    return
  }
  for (let i = 0; i < n - 1; i++) {
    const output = outputs[i]!
    if (output === input) context.emit(input.clone())
    // A handle of the function's own carries the input's finalizers too (see `emitResult`).
    else if (output instanceof LogEvent) context.emit(output.merge(input.clone()))
    else context.emit(input.clone().replaceFields(output as JsonObject))
  }
  const last = outputs[n - 1]!
  if (last === input) context.emit(input)
  else if (last instanceof LogEvent) context.emit(last.merge(input))
  else context.emit(input.replaceFields(last as JsonObject))
}

/**
 * Applies `fn` to every event. The outputs share the input's finalizers, so the input's batch
 * resolves only when every output is settled; an input with no output is dropped with
 * `options.dropStatus`.
 *
 * @example
 * ```ts
 * remap((e) => { e.set('level', String(e.get('level') ?? 'info').toUpperCase()) }) // edit in place
 * remap((e) => (e.get('debug') === true ? null : undefined))                       // drop some
 * remap((e) => (e.get('lines') as string[]).map((line) => ({ message: line })))     // split one into many
 * ```
 */
export function remap(fn: RemapFunction, options: RemapOptions = {}): RemapTransform {
  return {
    kind: 'remap',
    // Event by event: what queued behind an array may come in the same call.
    coalesce: true,
    synchronous: true,
    // Through `?.`: options that are no object (untyped code) are for `validate()` to report.
    dropStatus: options?.dropStatus ?? DropStatus.default,
    validate: () => [...RemapArguments.validate({ fn }), ...RemapOptions.validate(options)],
    // While every event goes on as it is (edited in place), the array is passed on whole.
    process: perEvent((event) => {
      // A function that returns nothing returns `undefined`.
      const result = fn(event) as RemapResult
      if (result !== undefined && result !== event) return result
      // One read per event: passed on as it is, an input the function ended would leave unreported.
      return event.isEnded ? INPUT_ENDED : undefined
    }, emitResult),
  }
}
