/**
 * The options that name things on the wire (queues, exchanges, routing keys).
 *
 * Invariant: a name AMQP cannot carry (a short string: at most 255 bytes of UTF-8) is refused at
 * build, naming the field: amqplib throws on it only when it encodes it, so the source's run and
 * the sink's start failed as though the url were wrong ('cannot connect'), and a routing key too
 * long passed start and then rejected every event.
 *
 * @module
 */
import { z } from 'zod'

/** The most bytes of UTF-8 an AMQP short string holds. */
const SHORT_STRING_MAX_BYTES = 255

/** A name AMQP carries as a short string: at most 255 bytes of UTF-8 (not characters). */
export const shortString = () =>
  z
    .string()
    .refine(
      (name) => Buffer.byteLength(name, 'utf8') <= SHORT_STRING_MAX_BYTES,
      `a name of at most ${SHORT_STRING_MAX_BYTES} bytes of UTF-8 (an AMQP short string)`,
    )
