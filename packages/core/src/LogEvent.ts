/**
 * A log event: JSON-compatible fields plus metadata. A `LogEvent` object is one *handle* on an
 * event.
 *
 * Invariant (ownership): each handle has one owner and ends exactly once — with a status (a sink
 * reports what became of it) or without one (a transform discards it). `clone()` makes another
 * handle that shares the same finalizers; `merge()` moves another handle's finalizers into this
 * one and consumes it. Using a handle after its end throws a `FinalizationError`. JavaScript
 * cannot move a handle, so a component may keep a reference to one it gave away: runtimes mark
 * on each handle whether it is still its holder's own (`isLocal`, `isLocalTo`), and refuse to pass
 * on or end one that is not.
 *
 * Fields are copied on write: a clone shares its original's fields until either one changes them.
 *
 * @module
 */

import { BatchNotifier } from './BatchNotifier.js'
import type { BatchStatusReceiver } from './BatchStatusReceiver.js'
import type { EventFinalizers } from './EventFinalizers.js'
import { EventMetadata } from './EventMetadata.js'
import type { DeliveryStatus, EventStatus } from './EventStatus.js'
import { FinalizationError } from './FinalizationError.js'
import { type KeptTime, sinceEpoch } from './internal/epoch.js'
import { getPath, removePath, setPath } from './internal/FieldPath.js'
import { endRef, explainRef, mergeRefs, type Ref, retainRef, SET } from './internal/refs.js'
import { shown } from './internal/shown.js'
import { INDEX_BITS, INDEX_MASK, notifierOf, SlotChunk } from './internal/slots.js'
import { batchStatusName, deliveryStatusCode, ERRORED } from './internal/statusCodes.js'
import { type JsonObject, JsonValue } from './JsonValue.js'

/** `LogEvent._flags`: the fields may be shared with another handle (copy on write). */
const SHARED = 1
/** `LogEvent._flags`: made by `clone()` or `new LogEvent`, or kept for a transform; not passed on since. */
const LOCAL = 2
/**
 * `LogEvent._flags`: a source's runtime sent this handle into a topology (`markSent`). Kept by
 * every later mark: the handle is never the source's to send again.
 */
const SENT = 4
/**
 * `LogEvent._flags`, above the three bits: whom a runtime keeps the handle for (`markKept`), 0
 * when made by its holder. One bit could not tell the component that keeps a handle from the one
 * that passed it on and still has a reference to it. A handle that is not local has no holder:
 * there the bits hold the last pass over an input array that met it (`meetAsInput`).
 */
const HOLDER_SHIFT = 3
/** The largest holder `markKept` takes: the flags stay a small integer (below 2^30). */
const MAX_HOLDER = 0x07ffffff
/** The bits `markKept` and `markPassedOn` keep: copy on write, and the source's send. */
const KEPT_BITS = SHARED | SENT

/**
 * A path that is no string (a number, from untyped code) made the path functions throw a raw
 * `path.includes is not a function`: named here instead.
 */
const badPath = (call: 'get' | 'set' | 'remove', path: unknown): TypeError =>
  new TypeError(
    `LogEvent.${call}: the path must be a dotted string such as "http.status", got ${
      Array.isArray(path) ? 'an array' : typeof path === 'object' && path !== null ? 'an object' : shown(path)
    }`,
  )

/** Options of a new event. */
export interface LogEventOptions {
  /** The id of the source that read the event. */
  readonly sourceId?: string | undefined
  /** When the event entered the pipeline (ms since the epoch); defaults to now. */
  readonly ingestTimestamp?: number | undefined
}

/** Options of {@link LogEvent.end}. */
export interface EndOptions {
  /**
   * End as an authoritative sink: the status is sent to the event's batches now and marked
   * `recorded`, so what any other copy reports later is ignored.
   */
  readonly authoritative?: boolean
  /**
   * Why the status is `errored` or `rejected`: an opaque value (core never reads it) that each
   * batch of the event keeps when this end is the first to explain the status the batch ends
   * with; the batch's receiver shows it as `reason`. Ignored for `delivered` and for no status.
   */
  readonly reason?: unknown
}

/**
 * One handle on a log event.
 *
 * @example
 * ```ts
 * const event = new LogEvent({ message: 'hi', http: { status: 200 } }, { sourceId: 'in' })
 * event.get('http.status') // 200
 * const copy = event.clone() // a second handle on the same finalizers
 * event.end('delivered')
 * copy.end('errored')       // the event's batch will resolve 'errored'
 * ```
 */
export class LogEvent {
  /** @internal The fields; read them through `fields`. */
  declare _fields: JsonObject
  /**
   * @internal `SHARED`: `_fields` may be shared with another handle, so a write must copy it
   * first. `LOCAL`: the handle is its holder's own, made by `clone()` or `new LogEvent` or kept
   * by a runtime for a transform, and no runtime has passed it on since (see `isLocal`). `SENT`:
   * a source sent it (see `isSent`). Above them, whom it is kept for (see `isLocalTo`), or, on a
   * handle that is not local, the last pass over an input array that met it (`meetAsInput`).
   */
  declare _flags: number
  /** @internal The id of the source that read the event; read it through `metadata.sourceId`. */
  declare readonly _sourceId: string | undefined
  /** @internal When the event entered the pipeline, as `epoch.ts` keeps times; see `metadata.ingestTimestamp`. */
  declare readonly _ingest: KeptTime
  /**
   * @internal The handle's reference to its finalizers (see `refs.ts`); `null` once the handle
   * ended. The handle's state is kept here, not in its metadata: one object per event, not two.
   */
  declare _ref: Ref | SlotChunk | null
  /**
   * @internal The slot in the batch when `_ref` is a notifier; `SET` when it is a set; when it is
   * a block's token (a batch kept as a slot), the batch's index in the block in the low
   * `INDEX_BITS` bits and the event's slot in the batch above them (see `slots.ts`).
   */
  declare _slot: number
  /** @internal The metadata object, once someone read it. */
  declare _metadata: EventMetadata | undefined

  constructor(fields?: JsonObject, options?: LogEventOptions)
  /** @internal An event whose metadata values the runtime has already (an array's events, a clone). */
  constructor(
    fields: JsonObject,
    options: undefined,
    sourceId: string | undefined,
    ingest: KeptTime,
    ref: Ref | SlotChunk,
    slot: number,
  )
  constructor(
    fields: JsonObject = {},
    options?: LogEventOptions,
    sourceId?: string,
    ingest?: KeptTime,
    ref?: Ref | SlotChunk,
    slot?: number,
  ) {
    this._fields = fields
    if (ingest === undefined) {
      this._flags = LOCAL
      this._sourceId = options?.sourceId
      this._ingest = sinceEpoch(options?.ingestTimestamp ?? Date.now())
      this._ref = undefined
      this._slot = 0
    } else {
      this._flags = 0
      this._sourceId = sourceId
      this._ingest = ingest
      this._ref = ref
      this._slot = slot!
    }
    this._metadata = undefined
  }

  /** The event's metadata; its finalizers are shared by every copy of the event. */
  get metadata(): EventMetadata {
    if (this._metadata === undefined) this._metadata = new EventMetadata(this)
    return this._metadata
  }

  /** The fields, read-only: change them through {@link LogEvent.set} so copies stay independent. */
  get fields(): Readonly<JsonObject> {
    if (this._ref === null) this._live('read') // throws: the handle has ended
    return this._fields
  }

  /** Whether this handle has ended. */
  get isEnded(): boolean {
    return this._ref === null
  }

  /**
   * The value at a dotted path such as `"http.status"`, or `undefined`. A path that is no string
   * (from untyped code) throws a `TypeError` naming the call, as in `set` and `remove`.
   */
  get(path: string): JsonValue | undefined {
    if (typeof path !== 'string') throw badPath('get', path)
    return getPath(this.fields, path)
  }

  /**
   * Sets the value at a dotted path, creating objects on the way. Throws a `TypeError` naming the
   * path when a segment on the way is not an object or array, or a segment on an array is not an
   * index it can hold (a whole number up to 2^32 - 2): JSON would not write the value.
   */
  set(path: string, value: JsonValue): this {
    if (typeof path !== 'string') throw badPath('set', path)
    if (!setPath(this._own(), path, value)) {
      throw new TypeError(
        `cannot set '${path}' on an event from source ${this._sourceId ?? 'unknown'}: a segment on the way is not an object, or not an index of the array it meets`,
      )
    }
    return this
  }

  /**
   * Removes the value at a dotted path and returns it, or `undefined` if there was none. A path
   * that is no string (from untyped code) throws a `TypeError` naming the call.
   */
  remove(path: string): JsonValue | undefined {
    if (typeof path !== 'string') throw badPath('remove', path)
    return removePath(this._own(), path)
  }

  /**
   * Replaces every field. `fields` is taken as it is, not copied, and may hold objects of the
   * fields it replaces (`{ ...event.fields, tag: 1 }`): while those may be shared with another
   * handle (a clone, a copy on another path), the next write copies first, as it would have
   * copied the fields replaced, so a `set` through this handle never changes another's.
   */
  replaceFields(fields: JsonObject): this {
    this._live('write')
    // `SHARED` stays as it was: the new fields may share objects with the old ones (a spread).
    this._fields = fields
    return this
  }

  /**
   * Another handle on the same event: same finalizers, same metadata values, fields copied on
   * write. Each handle must end on its own; the event's batches wait for both.
   */
  clone(): LogEvent {
    let ref: Ref | SlotChunk | null = this._ref
    let slot = this._slot
    if (ref instanceof SlotChunk && !ref._block.isMaterialized(slot & INDEX_MASK)) {
      ref._block.retain(slot & INDEX_MASK)
    } else {
      ref = this._live('clone')
      slot = this._slot
      retainRef(ref, slot)
    }
    const copy = new LogEvent(this._fields, undefined, this._sourceId, this._ingest, ref, slot)
    this._flags |= SHARED
    copy._flags = SHARED | LOCAL
    return copy
  }

  /**
   * Moves the finalizers of `other` into this event and consumes `other` (it may not be used or
   * ended after). Fields are not touched: combining data is the caller's business. The batches of
   * both events then resolve only when this event ends, with its status. When `other`'s fields may
   * be shared with another handle, so may this event's from then on (it may have been made of
   * them: `new LogEvent({ ...other.fields, tag: 1 })`): its next write copies first, so a `set`
   * through it never changes the handles `other` shared with. An `other` that is no `LogEvent`
   * (fields, `null`, from untyped code) throws a `TypeError` and changes nothing.
   */
  merge(other: LogEvent): this {
    if (typeof (other as Partial<LogEvent> | null)?._take !== 'function') {
      // Untyped code that passes fields, or nothing, met a raw `other._take is not a function`.
      // Not `instanceof`: an event from another copy of this package is still an event.
      throw new TypeError(
        `LogEvent.merge: 'other' must be a LogEvent, got ${other === null ? 'null' : typeof other === 'object' ? 'an object' : shown(other)}`,
      )
    }
    if (other === this) {
      throw new FinalizationError('SELF_MERGE', 'cannot merge an event into itself', this._sourceId)
    }
    this._live('merge into')
    const shared = other._flags & SHARED
    const { ref, slot } = other._take()
    other._consume()
    this._put(ref, slot)
    this._flags |= shared
    return this
  }

  /**
   * Ends this handle: with a status when a sink reports what became of the event, without one
   * when a transform discards it (the event then counts as delivered unless another copy says
   * otherwise). Ending twice throws a `FinalizationError` with code `ALREADY_ENDED`; a status that
   * is none of the three (from untyped code) throws one with code `INVALID_STATUS`, and the handle
   * stays live. `null` options are none.
   */
  end(status?: DeliveryStatus, options?: EndOptions): void {
    const code = status === undefined ? -1 : deliveryStatusCode(status)
    // `null` (untyped code) is no options, as `undefined` is.
    if (options == null) {
      this._end(code, false)
      return
    }
    if (code >= ERRORED && options.reason !== undefined) this._explain(code, options.reason)
    this._end(code, options.authoritative === true)
  }

  /** The fields, for `JSON.stringify`. */
  toJSON(): JsonObject {
    return this.fields as JsonObject
  }

  /** @internal The fields, copied first if another handle may share them. */
  _own(): JsonObject {
    if (this._ref === null) this._live('write') // throws: the handle has ended
    if ((this._flags & SHARED) !== 0) {
      this._fields = JsonValue.copy(this._fields)
      this._flags &= ~SHARED
    }
    return this._fields
  }

  /**
   * Whether this handle is its holder's own: made by `clone()` or `new LogEvent` (or kept by a
   * runtime for a transform, `markKept`), and not passed on by a runtime since (`markPassedOn`).
   * Handles a source makes from records (`EventArray.fromRecords`) are not. A runtime tells by it
   * an event a transform made or kept from one an earlier call passed on, which a sink may be
   * writing: not the transform's to pass on again or to end. A mark for runtimes: it changes
   * nothing about the event itself.
   */
  get isLocal(): boolean {
    return (this._flags & LOCAL) !== 0
  }

  /**
   * Whether this handle is `holder`'s own: local (`isLocal`), and either made by whoever holds it
   * or kept for `holder` (`markKept(holder)`). A component that passed a handle on may still have
   * a reference to it when the next one keeps it: to the first, the handle is not its own.
   */
  isLocalTo(holder: number): boolean {
    const flags = this._flags
    if ((flags & LOCAL) === 0) return false
    const keptFor = flags >>> HOLDER_SHIFT
    return keptFor === 0 || keptFor === holder
  }

  /**
   * For runtimes: notes that a runtime keeps this handle for a component, `holder` (a number from
   * 1 to 2^27 - 1 naming it; 0 or none for no one in particular; see `isLocalTo`).
   */
  markKept(holder = 0): void {
    this._flags = (this._flags & KEPT_BITS) | LOCAL | ((holder & MAX_HOLDER) << HOLDER_SHIFT)
  }

  /** For runtimes: notes that a runtime passed this handle on to a component (see `isLocal`). */
  markPassedOn(): void {
    this._flags &= KEPT_BITS
  }

  /**
   * For runtimes: notes that pass `pass` over a component's input array (a number from 1 to
   * 2^27 - 1, a new one for each pass) met this handle, and returns true; or returns false,
   * changing nothing, if the handle is local (`isLocal`: made or kept by a component, so not an
   * input a runtime gave it) or this pass met it already (it is in the array twice). What finds
   * that untyped code wrote into an input array, with one read and one write per event and
   * nothing allocated. The number takes the holder's bits, which a handle that is not local does
   * not use (`markKept` and `markPassedOn` overwrite it). A number the counter comes round to
   * again may still sit on a handle from long before: false then says "maybe", and the runtime
   * makes sure another way.
   */
  meetAsInput(pass: number): boolean {
    const flags = this._flags
    if ((flags & LOCAL) !== 0 || flags >>> HOLDER_SHIFT === pass) return false
    this._flags = (flags & KEPT_BITS) | ((pass & MAX_HOLDER) << HOLDER_SHIFT)
    return true
  }

  /**
   * Whether a source's runtime sent this handle into a topology (`EventArray.markSent`): from then on the
   * handle is the topology's, whoever holds it, and sending it again would put one handle in two
   * places. A clone is a handle of its own, not sent. A mark for runtimes: it changes nothing
   * about the event itself.
   */
  get isSent(): boolean {
    return (this._flags & SENT) !== 0
  }

  /**
   * @internal Marks the handle sent (`isSent`), unless it was sent already or has ended: then
   * returns false and changes nothing. See `EventArray.markSent`.
   */
  _markSent(): boolean {
    const flags = this._flags
    if ((flags & SENT) !== 0 || this._ref === null) return false
    this._flags = flags | SENT
    return true
  }

  /** @internal Takes back a `_markSent` of an array that was refused as a whole. */
  _unmarkSent(): void {
    this._flags &= ~SENT
  }

  /**
   * @internal The reference, or a `FinalizationError` if the handle ended. A handle holding its
   * block's token (a batch kept as a slot) is moved to its batch's notifier first.
   */
  _live(action: string): Ref {
    const ref = this._ref
    if (ref === null) {
      throw new FinalizationError(
        'USE_AFTER_END',
        `cannot ${action} an event whose handle has ended`,
        this._sourceId,
      )
    }
    return ref instanceof SlotChunk ? this._unslot(ref) : ref
  }

  /**
   * @internal Moves this handle from its block's token to its batch's notifier, making the
   * batch's state if it has none yet (see `slots.ts`): what every operation but counting needs.
   */
  _unslot(chunk: SlotChunk): BatchNotifier {
    const notifier = notifierOf(chunk, this._slot, BatchNotifier._adopt)
    this._ref = notifier
    this._slot = this._slot >>> INDEX_BITS
    return notifier
  }

  /**
   * Calls `visit` once for each batch the event belongs to, with the batch's receiver, its source
   * and what {@link EventFinalizer.status} reads for it: `'recorded'` once an authoritative sink
   * recorded this event in it, else the batch's status so far. What iterating
   * `metadata.finalizers` tells, without making the metadata, a finalizer set and a finalizer per
   * event: a runtime does this for every event an authoritative sink ends. Nothing for an event
   * without finalizers (acknowledgements off); a `FinalizationError` (`USE_AFTER_END`) once the
   * handle has ended. `visit` must not end or change this handle.
   *
   * @example
   * ```ts
   * event.forEachBatch((receiver, sourceId, status) => {
   *   if (status !== 'recorded') told(sourceId, receiver, EventStatus.update(status, 'delivered'))
   * })
   * ```
   */
  forEachBatch(
    visit: (receiver: BatchStatusReceiver, sourceId: string | undefined, status: EventStatus) => void,
  ): void {
    const ref = this._live('read the batches of')
    if (ref === undefined) return
    if (this._slot !== SET) {
      visitBatch(ref as BatchNotifier, this._slot, visit)
      return
    }
    const set = ref as EventFinalizers
    for (let i = 0; i < set._notifiers.length; i++) visitBatch(set._notifiers[i]!, set._slots[i]!, visit)
  }

  /** @internal Adds the event to a batch. */
  _attach(notifier: BatchNotifier): void {
    this._live('attach a batch to')
    this._put(notifier, notifier._state.addSlots(1))
  }

  /** @internal Ends the handle, with a status code or without one (`code < 0`). */
  _end(code: number, authoritative: boolean): void {
    let ref = this._ref
    if (ref === undefined) {
      // No finalizers (acknowledgements off): ending only ends the handle.
      this._ref = null
      return
    }
    if (ref === null) {
      throw new FinalizationError('ALREADY_ENDED', 'an event handle was ended twice', this._sourceId)
    }
    if (ref instanceof SlotChunk) {
      const index = this._slot & INDEX_MASK
      if (!authoritative && !ref._block.isMaterialized(index)) {
        this._ref = null
        ref._block.release(index, 1, code, ref)
        return
      }
      ref = this._unslot(ref)
    }
    this._ref = null
    endRef(ref, this._slot, code, authoritative)
  }

  /** @internal Offers the reason of an end with `code` to the handle's batches, before the end. */
  _explain(code: number, reason: unknown): void {
    let ref = this._ref
    if (ref === null) return
    if (ref instanceof SlotChunk) ref = this._unslot(ref)
    explainRef(ref, this._slot, code, reason)
  }

  /** @internal Moves the reference out, leaving the handle live without finalizers. */
  _take(): { ref: Ref; slot: number } {
    const ref = this._live('detach the finalizers of')
    const taken = { ref, slot: this._slot }
    this._ref = undefined
    this._slot = 0
    return taken
  }

  /** @internal Adds a reference (moved from another handle or a group) to this handle's own. */
  _put(ref: Ref, slot: number): void {
    const own = this._live('attach finalizers to')
    if (ref === undefined) return
    if (own === undefined) {
      this._ref = ref
      this._slot = slot
    } else {
      this._ref = mergeRefs(own, this._slot, ref, slot)
      this._slot = SET
    }
  }

  /** @internal Consumes the handle without ending its reference (the reference was moved). */
  _consume(): void {
    this._live('merge')
    this._ref = null
  }
}

/** One pair of {@link LogEvent.forEachBatch}: what an `EventFinalizer` of it would read. */
function visitBatch(
  notifier: BatchNotifier,
  slot: number,
  visit: (receiver: BatchStatusReceiver, sourceId: string | undefined, status: EventStatus) => void,
): void {
  const state = notifier._state
  visit(state, notifier.sourceId, state.isRecorded(slot) ? 'recorded' : batchStatusName(state.code))
}
