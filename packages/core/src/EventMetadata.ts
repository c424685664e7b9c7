/**
 * What an event carries besides its fields: where it came from, when, and the finalizers that
 * tie it to its sources' batches.
 *
 * Invariant: a metadata object belongs to exactly one event handle and shows that handle's state:
 * live (with or without finalizers) until the handle ends, then ended for good; reading the
 * finalizers after that throws a `FinalizationError` naming the source.
 *
 * The state itself is kept by the handle (`LogEvent`): one object per event rather than two, as
 * every event pays for each object it is made of. A metadata object is made the first time
 * someone reads `event.metadata`, and the same one is returned after.
 *
 * @module
 */

import { EventFinalizers } from './EventFinalizers.js'
import { timeOf } from './internal/epoch.js'
import { asSet, SET } from './internal/refs.js'
import { SlotChunk } from './internal/slots.js'
import type { LogEvent } from './LogEvent.js'

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
  readonly sourceId: string | undefined
  /** When the event entered the pipeline, in milliseconds since the epoch. */
  readonly ingestTimestamp: number
  /** The handle whose metadata this is (private: a spread or `JSON.stringify` never shows the event). */
  readonly #event: LogEvent

  /** @internal Made by the handle, on first read of `event.metadata`. */
  constructor(event: LogEvent) {
    this.#event = event
    // A handle's source and ingest time never change: kept as plain values, as they always were.
    this.sourceId = event._sourceId
    this.ingestTimestamp = timeOf(event._ingest)
  }

  /** Whether the handle has ended (after which the event may not be used). */
  get isEnded(): boolean {
    return this.#event._ref === null
  }

  /** Whether the event belongs to at least one batch (acknowledgements are on for it). */
  get hasFinalizers(): boolean {
    // A batch kept as a slot has finalizers; asking must not make its state.
    if (this.#event._ref instanceof SlotChunk) return true
    const ref = this.#event._live('read the finalizers of')
    return ref !== undefined && (!(ref instanceof EventFinalizers) || ref.size > 0)
  }

  /** The event's finalizers (shared with every copy of the event). Empty when acknowledgements are off. */
  get finalizers(): EventFinalizers {
    const event = this.#event
    const set = asSet(event._live('read the finalizers of'), event._slot)
    set._owned = false // handed out: whoever holds it may keep it, so it never changes again
    if (set !== EventFinalizers.EMPTY) {
      event._ref = set
      event._slot = SET
    }
    return set
  }
}
