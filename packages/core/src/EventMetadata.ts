/**
 * What an event carries besides its fields: where it came from, when, and the finalizers that
 * tie it to its sources' batches.
 *
 * Invariant: a metadata object belongs to exactly one event handle. Its state is live (with or
 * without finalizers) until the handle ends, then ended for good; every use after that throws a
 * `FinalizationError` naming the source.
 *
 * @module
 */
import type { BatchNotifier } from './BatchNotifier.js'
import { EventFinalizers } from './EventFinalizers.js'
import { FinalizationError } from './FinalizationError.js'
import { type KeptTime, timeOf } from './internal/epoch.js'
import { asSet, endRef, explainRef, mergeRefs, type Ref, SET } from './internal/refs.js'

/**
 * Metadata of one event handle.
 *
 * @example
 * ```ts
 * const { sourceId, ingestTimestamp } = event.metadata
 * const batches = event.metadata.finalizers.batchIds
 * ```
 */
export class EventMetadata {
  /** The id of the source that read the event, if it said. */
  declare readonly sourceId: string | undefined
  /** @internal When the event entered the pipeline, as `epoch.ts` keeps times (unboxed); read `ingestTimestamp`. */
  declare readonly _ingest: KeptTime
  /** @internal The handle's reference to its finalizers; `null` once the handle ended. */
  declare _ref: Ref | null
  /** @internal The slot in the batch when `_ref` is a notifier; `SET` when it is a set. */
  declare _slot: number

  /** @internal `ingest`: the ingest time as `epoch.ts` keeps times (`sinceEpoch(ms)`). */
  constructor(sourceId: string | undefined, ingest: KeptTime, ref: Ref = undefined, slot = 0) {
    this.sourceId = sourceId
    this._ingest = ingest
    this._ref = ref
    this._slot = slot
  }

  /** When the event entered the pipeline, in milliseconds since the epoch. */
  get ingestTimestamp(): number {
    return timeOf(this._ingest)
  }

  /** Whether the handle has ended (after which the event may not be used). */
  get isEnded(): boolean {
    return this._ref === null
  }

  /** Whether the event belongs to at least one batch (acknowledgements are on for it). */
  get hasFinalizers(): boolean {
    const ref = this._live('read the finalizers of')
    return ref !== undefined && (!(ref instanceof EventFinalizers) || ref.size > 0)
  }

  /** The event's finalizers (shared with every copy of the event). Empty when acknowledgements are off. */
  get finalizers(): EventFinalizers {
    const set = asSet(this._live('read the finalizers of'), this._slot)
    set._owned = false // handed out: whoever holds it may keep it, so it never changes again
    if (set !== EventFinalizers.EMPTY) {
      this._ref = set
      this._slot = SET
    }
    return set
  }

  /** @internal The reference, or a `FinalizationError` if the handle ended. */
  _live(action: string): Ref {
    const ref = this._ref
    if (ref === null) {
      throw new FinalizationError(
        'USE_AFTER_END',
        `cannot ${action} an event whose handle has ended`,
        this.sourceId,
      )
    }
    return ref
  }

  /** @internal Adds the event to a batch. */
  _attach(notifier: BatchNotifier): void {
    this._live('attach a batch to')
    this._put(notifier, notifier._state.addSlots(1))
  }

  /** @internal Ends the handle, with a status code or without one (`code < 0`). */
  _end(code: number, authoritative: boolean): void {
    const ref = this._ref
    if (ref === null) {
      throw new FinalizationError('ALREADY_ENDED', 'an event handle was ended twice', this.sourceId)
    }
    this._ref = null
    endRef(ref, this._slot, code, authoritative)
  }

  /** @internal Offers the reason of an end with `code` to the handle's batches, before the end. */
  _explain(code: number, reason: unknown): void {
    const ref = this._ref
    if (ref !== null) explainRef(ref, this._slot, code, reason)
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
