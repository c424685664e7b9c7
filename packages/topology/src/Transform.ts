/**
 * The contract between the runtime and a transform.
 *
 * Invariant: every event handed to a transform leaves it exactly once: emitted on a port,
 * dropped (ended without a status, or with the transform's `dropStatus`), or merged into another
 * event. The runtime checks this after every call and settles any forgotten event `errored`
 * (reporting the bug), so a transform can neither leak nor double-end a handle by mistake. A
 * transform with `flush` may keep events across calls (a reduce window); the runtime tracks them
 * and settles `errored` whatever is still kept after the last `flush` at stop.
 *
 * @module
 */
import type { EventArray, JsonObject, LogEvent } from '@ackline/core'
import type { ConfigIssue } from './ConfigIssue.js'

/**
 * What a running transform may do with events, during the call it was passed to. An `emit`
 * through it after that call returned (from a timer, or a promise the call did not wait for) is
 * not passed on: the event is settled `errored` and reported (`EMIT_AFTER_RETURN`), unless it was
 * passed on already (a sink may be writing it: it is left to the sink, and only reported). A `drop`
 * then is reported the same way and ends nothing (see `drop`): the event may be a sink's by then,
 * and ended there it would count as dropped before the sink said how its write went. For a
 * transform that declares itself `synchronous`, the runtime passes the same object to its
 * successive `process` calls, so a context kept from an earlier call and used during a later one
 * would act for the later call: such a transform promises not to keep it.
 */
export interface TransformContext {
  /** The transform's component id. */
  readonly id: string
  /**
   * Whether a status for what this transform emits can matter: `true` when a source that
   * acknowledges feeds it and its output reaches a sink that acknowledges or another transform
   * (which may settle an event `errored` or `rejected` before any sink sees it). When `false`,
   * every event it passes on counts as `delivered` wherever it goes (a sink without
   * acknowledgements settles it on accept), so a transform that watches what becomes of its
   * output (as `dedupe` does, to forget a key whose event was not delivered) may skip the
   * watching. Fixed for the run.
   */
  readonly acknowledgements: boolean
  /**
   * Passes an event on, to the default output or to a named port. Ownership moves downstream.
   * Emitting the same handle again (on another port) sends a clone of it, as it is when the call
   * returns, so one event can go to several ports without the transform cloning it. Only an event
   * that is the transform's is passed on: an input of this call, one it made in a call (`create`,
   * `clone()`, `new LogEvent`) and has not passed on, or one the runtime holds for it. A handle an
   * earlier call passed on (a sink may be writing it) is not passed on again, nor are copies of it:
   * the runtime leaves it to whoever holds it and reports `ENDED_AFTER_EMIT`. Given
   * anything but a `LogEvent` (from untyped code), it throws a `ComponentError` with code
   * `NOT_AN_EVENT`, and the call fails as any throwing call does.
   */
  emit(event: LogEvent, port?: string): void
  /**
   * Passes every event of `events` on, in order, as `emit` would one by one, in one call: the
   * cheap way for a transform that edits events in place and passes the array on. Given anything
   * but an `EventArray`, it throws as `emit` does.
   */
  emitAll(events: EventArray, port?: string): void
  /**
   * Discards an event: ends it per the transform's drop status, and counts the discard. Only an
   * event that is still the transform's is ended: an input of this call, one it made in a call
   * (`create`, `clone()`, `new LogEvent`) and has not passed on, or one the runtime holds for it (a
   * transform with `flush`). Any other (one an earlier call
   * passed on, which a sink may be writing) is not ended, and the drop is reported
   * (`ENDED_AFTER_EMIT`); so is a drop after the call returned (`EMIT_AFTER_RETURN`), unless of an
   * event made by a `create` after it returned and not passed on since.
   */
  drop(event: LogEvent): void
  /**
   * A brand-new event that inherits the finalizers of `inheritFrom` (shared, as a clone would):
   * its sources wait for it too. The events in `inheritFrom` stay owned by the caller. The new
   * event is checked after the call as an input is: one the call neither emitted nor ended is
   * settled `errored` and reported (`LEAKED_EVENTS`), or, for a transform with `flush`, held
   * until a later call emits it. If a parent cannot be cloned (it has ended), `create` throws and
   * makes nothing; given `fields` that JSON would not write as an object of members (`null`, an
   * array, a string, a `Map` or `Set`, a promise, a `Date`: what untyped code may pass), it throws
   * a `ComponentError` with code `NOT_FIELDS` and makes nothing. A class instance is taken, as
   * JSON writes its own members. `fields` is taken as it is, not copied. With a parent in
   * `inheritFrom`, the new event's first write copies its fields first, so an object in them taken
   * from another event (`{ http: input.get('http') }`) may be changed through it
   * (`set('http.status', 500)`) without changing that event. Without one (`inheritFrom` empty),
   * such an object is still that event's, and a `set` through the new event would change it there
   * too, and in that event's copies on other paths; copy such an object first (`JsonValue.copy`
   * from `@ackline/core`).
   */
  create(fields: JsonObject, inheritFrom?: readonly LogEvent[]): LogEvent
}

/**
 * A transform of events. `Ports` names its output ports, so the builder can type the inputs
 * that read them (`'split.errors'`); it defaults to any string.
 *
 * @example
 * ```ts
 * const upper: Transform = {
 *   kind: 'upper',
 *   coalesce: true, // event by event: what is queued may come as one array
 *   synchronous: true, // never returns a promise, never keeps the context: one context for all calls
 *   process(events, context) {
 *     for (const event of events) context.emit(event.set('message', String(event.get('message')).toUpperCase()))
 *   },
 * }
 * ```
 */
export interface Transform<Ports extends string = string> {
  /** The kind of component (`"route"`, `"reduce"`). */
  readonly kind: string
  /** Named output ports besides the default one (`route` declares its routes and `_unmatched`). */
  readonly outputs?: readonly Ports[]
  /**
   * What `context.drop` means for this transform: `'delivered'` (the default: the event ends
   * without a status, it was processed as the user asked) or `'rejected'`. The builder's
   * `dropStatus` option, when given, wins over this.
   */
  readonly dropStatus?: 'delivered' | 'rejected'
  /**
   * `true` when what the transform emits does not depend on how its input is cut into arrays
   * (it decides event by event, in order, as a transform built with `perEvent` or `keepIf` does).
   * The runtime may then hand one `process` call the arrays already queued for it as one array,
   * up to 128 events (or its buffer's `maxEvents` when that is smaller), so a transform that fell
   * behind on small arrays catches up in a few calls. A waiting transform that declares it is
   * also woken only once the burst that fed it is over (when the microtask queue has drained,
   * within the same task) or 128 events wait, so small arrays sent in one burst reach it in one
   * call. Nothing waits for a timer or for more input; each event keeps its own finalizers, so
   * every source batch is acknowledged as if its array had come alone. Unset (the default), each
   * call gets one array exactly as its producer sent it: a source's batch, or what one call of an
   * upstream transform emitted on that port. A transform downstream of one that coalesces may
   * therefore see several source batches in one array: a transform that acts on array boundaries
   * (pairing events within one array) sees them as its producers emitted them, not as sources
   * sent them. The declaration's `coalesce` option (`TransformOptions`) wins over this.
   *
   * @example
   * ```ts
   * const withUser: Transform = { kind: 'with_user', coalesce: true, process: keepIf((e) => e.get('user') !== undefined) }
   * ```
   */
  readonly coalesce?: boolean
  /**
   * `true` when `process` never returns a promise and uses its context only during the call (no
   * timer, no promise, nothing kept that emits later). The runtime then passes one context to
   * every `process` call instead of making one per call. Unset (the default), each call gets its
   * own, so an `emit` through an earlier call's context, whenever it comes, is caught
   * (`EMIT_AFTER_RETURN`). A transform that declares it and returns a promise after all gets a
   * context per call from then on; one that keeps its context breaks the promise, and its late
   * emits count for whichever call is open. The built-in transforms declare it.
   */
  readonly synchronous?: boolean
  /** Problems in the transform's own configuration; the builder reports them with everything else. */
  validate?(): readonly ConfigIssue[]
  /**
   * Handles one input array. Every event in it must be emitted, dropped or merged before it
   * returns — or, for a transform with `flush`, by a later call. The array is read-only: the
   * runtime checks the call against it and keeps no copy, so an event taken out of it or written
   * over (`splice`, `shift`, `list[0] = list[1]` from untyped code) is lost to that check: its
   * batch waits for the stop. Such a change is reported (`INPUT_MUTATED`) and the transform's
   * later input arrays are frozen; a handle written in twice is passed on once (a copy the second
   * time, if emitted twice), and a handle written in that the transform made is checked as any
   * emitted handle. Reordering the array in place (`sort`) loses nothing and is allowed.
   */
  process(events: EventArray, context: TransformContext): void | Promise<void>
  /**
   * Emits whatever the transform still holds (a `reduce` window). Called on a timer when
   * `flushIntervalMs` is set, and once when the topology stops. Calls never overlap: a tick that
   * comes while a timed flush already waits its turn (behind a slow `process` or `flush`) is
   * skipped, so a flush slower than its interval does not pile calls up.
   */
  flush?(context: TransformContext): void | Promise<void>
  /** How often to call `flush`, in milliseconds; no timer when unset. */
  readonly flushIntervalMs?: number
}
