/**
 * A log event: JSON-compatible fields plus metadata. A `LogEvent` object is one *handle* on an
 * event.
 *
 * Invariant (ownership): each handle has one owner and ends exactly once — with a status (a sink
 * reports what became of it) or without one (a transform discards it). `clone()` makes another
 * handle that shares the same finalizers; `merge()` moves another handle's finalizers into this
 * one and consumes it. Using a handle after its end throws a `FinalizationError`.
 *
 * Fields are copied on write: a clone shares its original's fields until either one changes them.
 *
 * @module
 */

import { EventMetadata } from './EventMetadata.js'
import type { DeliveryStatus } from './EventStatus.js'
import { FinalizationError } from './FinalizationError.js'
import { sinceEpoch } from './internal/epoch.js'
import { getPath, removePath, setPath } from './internal/FieldPath.js'
import { retainRef } from './internal/refs.js'
import { deliveryStatusCode, ERRORED } from './internal/statusCodes.js'
import { type JsonObject, JsonValue } from './JsonValue.js'

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
  /** @internal Whether `_fields` may be shared with another handle, so a write must copy it first. */
  declare _shared: boolean
  /** The event's metadata; its finalizers are shared by every copy of the event. */
  declare readonly metadata: EventMetadata

  constructor(fields?: JsonObject, options?: LogEventOptions)
  /** @internal A clone: the caller made the metadata. */
  constructor(fields: JsonObject, options: undefined, metadata: EventMetadata)
  constructor(fields: JsonObject = {}, options?: LogEventOptions, metadata?: EventMetadata) {
    this._fields = fields
    this._shared = false
    this.metadata =
      metadata ?? new EventMetadata(options?.sourceId, sinceEpoch(options?.ingestTimestamp ?? Date.now()))
  }

  /** The fields, read-only: change them through {@link LogEvent.set} so copies stay independent. */
  get fields(): Readonly<JsonObject> {
    this.metadata._live('read')
    return this._fields
  }

  /** Whether this handle has ended. */
  get isEnded(): boolean {
    return this.metadata.isEnded
  }

  /** The value at a dotted path such as `"http.status"`, or `undefined`. */
  get(path: string): JsonValue | undefined {
    return getPath(this.fields, path)
  }

  /**
   * Sets the value at a dotted path, creating objects on the way. Throws a `TypeError` naming the
   * path when a segment on the way is not an object or array.
   */
  set(path: string, value: JsonValue): this {
    if (!setPath(this._own(), path, value)) {
      throw new TypeError(
        `cannot set '${path}' on an event from source ${this.metadata.sourceId ?? 'unknown'}: a segment on the way is not an object`,
      )
    }
    return this
  }

  /** Removes the value at a dotted path and returns it, or `undefined` if there was none. */
  remove(path: string): JsonValue | undefined {
    return removePath(this._own(), path)
  }

  /** Replaces every field. */
  replaceFields(fields: JsonObject): this {
    this.metadata._live('write')
    this._fields = fields
    this._shared = false
    return this
  }

  /**
   * Another handle on the same event: same finalizers, same metadata values, fields copied on
   * write. Each handle must end on its own; the event's batches wait for both.
   */
  clone(): LogEvent {
    const metadata = this.metadata
    const ref = metadata._live('clone')
    const slot = metadata._slot
    retainRef(ref, slot)
    const copy = new LogEvent(
      this._fields,
      undefined,
      new EventMetadata(metadata.sourceId, metadata._ingest, ref, slot),
    )
    this._shared = true
    copy._shared = true
    return copy
  }

  /**
   * Moves the finalizers of `other` into this event and consumes `other` (it may not be used or
   * ended after). Fields are not touched: combining data is the caller's business. The batches of
   * both events then resolve only when this event ends, with its status.
   */
  merge(other: LogEvent): this {
    if (other === this) {
      throw new FinalizationError('SELF_MERGE', 'cannot merge an event into itself', this.metadata.sourceId)
    }
    this.metadata._live('merge into')
    const { ref, slot } = other.metadata._take()
    other.metadata._consume()
    this.metadata._put(ref, slot)
    return this
  }

  /**
   * Ends this handle: with a status when a sink reports what became of the event, without one
   * when a transform discards it (the event then counts as delivered unless another copy says
   * otherwise). Ending twice throws a `FinalizationError` with code `ALREADY_ENDED`; a status that
   * is none of the three (from untyped code) throws one with code `INVALID_STATUS`, and the handle
   * stays live.
   */
  end(status?: DeliveryStatus, options?: EndOptions): void {
    const code = status === undefined ? -1 : deliveryStatusCode(status)
    if (options === undefined) {
      this.metadata._end(code, false)
      return
    }
    if (code >= ERRORED && options.reason !== undefined) this.metadata._explain(code, options.reason)
    this.metadata._end(code, options.authoritative === true)
  }

  /** The fields, for `JSON.stringify`. */
  toJSON(): JsonObject {
    return this.fields as JsonObject
  }

  /** @internal The fields, copied first if another handle may share them. */
  _own(): JsonObject {
    const metadata = this.metadata
    if (metadata._ref === null) metadata._live('write') // throws: the handle has ended
    if (this._shared) {
      this._fields = JsonValue.copy(this._fields)
      this._shared = false
    }
    return this._fields
  }
}
