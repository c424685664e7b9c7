/**
 * Decoded AMQP header values made fit to encode again, as they were sent.
 *
 * Invariant: a header named `__proto__` holding a table, an array, bytes or void, which amqplib's
 * decoding (by assignment) made the prototype of the table that held it, is an own key of that
 * table again, at any depth, and no table has keys of its prototype's as its own: amqplib encodes
 * a table by `for...in`, which read a prototype's keys as the table's own (and threw on a
 * prototype of bytes). Anything else is as it was.
 */

/**
 * `value` (a decoded header value) with every table a plain object of its own keys and `__proto__`
 * header. A loop, not a recursion: amqplib decodes arrays nested thousands deep (some 11,000 in a
 * 128 KiB frame), and a recursion overflowed the stack first, where the copy of a rejected message
 * is made, leaving it unacked. Decoded values hold no cycle (each table and array is new).
 */
export function ownTables(value: unknown): unknown {
  const result: unknown[] = [value]
  // Each value still to copy, with the array or table holding it and its place there. A table's
  // keys are defined first, in order, and their values replaced once copied (same position).
  const pending: [unknown, Record<string, unknown> | unknown[], string | number][] = [[value, result, 0]]
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [item, holder, place] = next
    if (typeof item !== 'object' || item === null) continue
    // A real Buffer (bytes), not a table whose prototype is one.
    if (ArrayBuffer.isView(item)) continue
    if (Array.isArray(item)) {
      const out: unknown[] = item.slice()
      put(holder, place, out)
      for (let i = 0; i < out.length; i++) pending.push([out[i], out, i])
      continue
    }
    const out: Record<string, unknown> = {}
    put(holder, place, out)
    const prototype: unknown = Object.getPrototypeOf(item)
    // Defined, not assigned: the assignment would set the prototype of `out` in turn.
    if (prototype !== Object.prototype) define(out, '__proto__', prototype)
    for (const [key, entry] of Object.entries(item)) define(out, key, entry)
    for (const key of Object.keys(out)) pending.push([out[key], out, key])
  }
  return result[0]
}

function put(holder: Record<string, unknown> | unknown[], place: string | number, value: unknown): void {
  if (Array.isArray(holder)) holder[place as number] = value
  else define(holder, place as string, value)
}

function define(table: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(table, key, { value, writable: true, enumerable: true, configurable: true })
}
