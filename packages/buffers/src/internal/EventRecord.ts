/**
 * How an event is stored in a disk buffer record: its fields, source id and ingest timestamp as
 * one compact JSON array. Finalizers are never stored: they live in memory (this process run)
 * and the upstream redelivers after a restart.
 *
 * @module
 */
import { type JsonObject, LogEvent } from '@ackline/core'

/** What a record holds, decoded. */
export interface EventData {
  readonly fields: JsonObject
  readonly sourceId: string | undefined
  readonly ingestTimestamp: number
}

/** The texts of the source id and timestamp encoded last (see `EventRecord.encode`). */
const last: { sourceId: string | undefined; sourceText: string; timestamp: number; timestampText: string } = {
  sourceId: undefined,
  sourceText: 'null',
  timestamp: Number.NaN,
  timestampText: 'null',
}

/** Encoding and decoding of event records. */
export const EventRecord = {
  /**
   * The record's text: the same as `JSON.stringify([fields, sourceId ?? null, ingestTimestamp])`,
   * built from its parts, with the texts of the last source id and timestamp kept (a batch's
   * events share them). The disk buffer writes it as UTF-8 straight into the record's frame.
   * Throws a `TypeError` when JSON writes the fields as anything but an object, and whatever
   * `JSON.stringify` throws (a BigInt, a cycle, nesting too deep).
   */
  encode(event: LogEvent): string {
    const { sourceId, ingestTimestamp } = event.metadata
    if (sourceId !== last.sourceId) {
      last.sourceId = sourceId
      last.sourceText = sourceId === undefined ? 'null' : JSON.stringify(sourceId)
    }
    if (ingestTimestamp !== last.timestamp) {
      last.timestamp = ingestTimestamp
      last.timestampText = JSON.stringify(ingestTimestamp)
    }
    const fields = JSON.stringify(event.fields) as string | undefined
    // A `toJSON`, or fields that are not an object (untyped code), make text that does not read
    // back as an event: refused here (the edge settles it rejected), not dead-lettered once read.
    if (fields === undefined || fields.charCodeAt(0) !== 0x7b) {
      const text = fields === undefined ? 'nothing' : fields.length > 24 ? `${fields.slice(0, 24)}…` : fields
      throw new TypeError(`the fields are written as ${text}, not as a JSON object`)
    }
    return `[${fields},${last.sourceText},${last.timestampText}]`
  },

  /** The stored data, or `undefined` when the bytes are not an event record. */
  decode(payload: Uint8Array): EventData | undefined {
    try {
      // Records read back are Buffers already: no view to make first.
      const bytes = Buffer.isBuffer(payload)
        ? payload
        : Buffer.from(payload.buffer, payload.byteOffset, payload.length)
      const v = JSON.parse(bytes.toString('utf8'))
      if (!Array.isArray(v) || v.length !== 3) return undefined
      const [fields, sourceId, ingestTimestamp] = v as [unknown, unknown, unknown]
      if (typeof fields !== 'object' || fields === null || Array.isArray(fields)) return undefined
      if (typeof ingestTimestamp !== 'number' && ingestTimestamp !== null) return undefined
      return {
        fields: fields as JsonObject,
        sourceId: typeof sourceId === 'string' ? sourceId : undefined,
        // JSON writes a timestamp that is not a finite number (NaN from a date that did not parse,
        // say) as null: it comes back NaN, and the event is delivered, not taken for garbage.
        ingestTimestamp: ingestTimestamp ?? Number.NaN,
      }
    } catch {
      return undefined
    }
  },

  /** A fresh event (no finalizers) from stored data. */
  toEvent(data: EventData): LogEvent {
    return new LogEvent(data.fields, { sourceId: data.sourceId, ingestTimestamp: data.ingestTimestamp })
  },
} as const
