/**
 * The public identity of a record: a string a source puts on each record it reads, the same
 * every time it reads that record again (after a redelivery, a restart, a reconnect), so a sink
 * can give it to its target as a deduplication key (AMQP `message-id`, JetStream `Nats-Msg-Id`,
 * a database's unique key).
 *
 * Invariant: the identity lives in one top-level field, {@link RecordId.FIELD} (`_recordId`), of
 * the record's fields, so it travels wherever the fields go (through transforms, fan-out copies,
 * a disk buffer). Only a non-empty string there is an identity; anything else is none. A source
 * that has no stable identity for a record (a generator, an HTTP request) sets none: an id that
 * changes on redelivery would make a consumer keep the duplicate it is meant to drop.
 *
 * A sink that publishes the fields leaves the field out of the payload when it hands the id to
 * its target as a property of its own (the connectors of `@ackline/amqp` and `@ackline/nats` do).
 *
 * @module
 */

import { shown } from './internal/shown.js'
import type { JsonObject } from './JsonValue.js'
import type { LogEvent } from './LogEvent.js'

/**
 * Sets and reads the identity of a record.
 *
 * @example
 * ```ts
 * // In a source: the broker's own stable id of the message.
 * await context.send(messages.map((m) => RecordId.set({ ...JSON.parse(m.body) }, `${stream}:${m.seq}`)))
 * // In a sink: the deduplication key, when the record has one.
 * const id = RecordId.of(event) // 'orders:42' | undefined
 * ```
 */
export const RecordId = {
  /** The top-level field that holds a record's identity. */
  FIELD: '_recordId',

  /**
   * Puts `id` on `fields` (in place) and returns them; an empty `id`, or `fields` that are no
   * object, is a programming error (a `TypeError` naming the argument).
   */
  set<T extends JsonObject>(fields: T, id: string): T {
    if (typeof fields !== 'object' || fields === null) {
      throw new TypeError(`RecordId.set: the fields must be an object, got ${shown(fields)}`)
    }
    if (typeof id !== 'string' || id === '') {
      throw new TypeError(`RecordId.set: the id must be a non-empty string, got ${shown(id)}`)
    }
    ;(fields as JsonObject)[RecordId.FIELD] = id
    return fields
  },

  /** The identity of `event`: the non-empty string under {@link RecordId.FIELD}, else `undefined`. */
  of(event: LogEvent): string | undefined {
    const id = event.fields[RecordId.FIELD]
    return typeof id === 'string' && id !== '' ? id : undefined
  },
} as const
