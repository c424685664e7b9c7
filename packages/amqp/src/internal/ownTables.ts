/**
 * Decoded AMQP header values made fit to encode again, as they were sent.
 *
 * Invariant: a header named `__proto__` holding a table, an array, bytes or void, which amqplib's
 * decoding (by assignment) made the prototype of the table that held it, is an own key of that
 * table again, at any depth, and no table has keys of its prototype's as its own: amqplib encodes
 * a table by `for...in`, which read a prototype's keys as the table's own (and threw on a
 * prototype of bytes). Anything else is as it was.
 */

/** `value` (a decoded header value) with every table a plain object of its own keys and `__proto__` header. */
export function ownTables(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value
  if (Array.isArray(value)) return value.map(ownTables)
  // A real Buffer (bytes), not a table whose prototype is one.
  if (ArrayBuffer.isView(value)) return value
  const out: Record<string, unknown> = {}
  const prototype: unknown = Object.getPrototypeOf(value)
  // Defined, not assigned: the assignment would set the prototype of `out` in turn.
  if (prototype !== Object.prototype) define(out, '__proto__', ownTables(prototype))
  for (const [key, item] of Object.entries(value)) define(out, key, ownTables(item))
  return out
}

function define(table: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(table, key, { value, writable: true, enumerable: true, configurable: true })
}
