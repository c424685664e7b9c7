/**
 * The identity of an event by some of its fields, as one string: what `dedupe` remembers and
 * what `reduce` groups by.
 *
 * Two events get the same key exactly when every path holds equal JSON values (a missing field
 * differs from `null`, and the string `"1"` from the number `1`; objects are equal when their
 * members are, in any key order; a boxed string or a `Date` equals the string JSON writes for it,
 * wherever it is). A value with no JSON text equals nothing: its key is one no
 * other event gets. Such are a `BigInt` or a cycle a source put in a record, on which
 * `JSON.stringify` throws, and a function, a symbol or an object whose `toJSON` returns nothing,
 * which untyped code may set, of which it writes nothing.
 */
import type { JsonValue, LogEvent } from '@ackline/core'
import { canonicalJson } from './canonicalJson.js'

const SEPARATOR = '\u0000'

/** How many values had no JSON text (see `valueKey`). */
let unencodable = 0

/**
 * The key of one value: a tag for its kind, then its text (strings without a JSON round trip;
 * objects with their members in one order, see `canonicalJson`).
 */
export function valueKey(value: JsonValue | undefined): string {
  if (value === undefined) return 'u'
  if (typeof value === 'string') return 's' + value
  return otherKey(value, false)
}

/**
 * The key of one value among several: a string's length goes before it, so a NUL inside it (which
 * event data may hold) cannot pass for the separator and make two different events one key.
 */
function partKey(value: JsonValue | undefined): string {
  if (value === undefined) return 'u'
  if (typeof value === 'string') return `s${value.length}:${value}`
  return otherKey(value, true)
}

/**
 * The key of a value that is no string. One JSON writes as a string (a boxed string, a `Date`,
 * any object whose `toJSON` gives one) is keyed as that string, as it is inside an object (keyed
 * by its JSON text, it made a key other than the string's). As a `part`, a string's length goes
 * before it (see `partKey`).
 */
function otherKey(value: JsonValue, part: boolean): string {
  let text: string | undefined
  try {
    text = canonicalJson(value)
  } catch {
    // A throw here failed the whole call (and left a `reduce` group holding a settled event).
  }
  // No text (a BigInt, a cycle; a function, a symbol, which read as 'j' + undefined, one key for
  // all of them). The tag is one no JSON text or string key starts with; the count makes it unique.
  if (text === undefined) return `x${++unencodable}`
  if (text.charCodeAt(0) !== QUOTE) return 'j' + text
  const string = JSON.parse(text) as string
  return part ? `s${string.length}:${string}` : 's' + string
}

/** `"`, the first character of the JSON text of a string, and of no other. */
const QUOTE = 0x22

/**
 * The key of `event` by `paths`; one path costs one string, no array. A key that equals nothing
 * (a path holds a value with no JSON text) is the unique key of that value alone, so it is told
 * by its first character (see {@link equalsNothing}).
 */
export function fieldKey(event: LogEvent, paths: readonly string[]): string {
  if (paths.length === 1) return valueKey(event.get(paths[0]!))
  let key = ''
  for (let i = 0; i < paths.length; i++) {
    const part = partKey(event.get(paths[i]!))
    if (part.charCodeAt(0) === UNIQUE) return part
    // Each part ends unambiguously: JSON text never holds a raw NUL, and a string has its length.
    key += (i === 0 ? '' : SEPARATOR) + part
  }
  return key
}

/**
 * Whether `key` (a {@link fieldKey}) is one no other event gets: what `dedupe` need not remember,
 * as no event can be its duplicate (remembered, it took the place of a key one can match).
 */
export function equalsNothing(key: string): boolean {
  return key.charCodeAt(0) === UNIQUE
}

/** `x`, the tag of a key that equals nothing, and the first character of no other key. */
const UNIQUE = 0x78
