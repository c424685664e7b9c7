/**
 * One event's fields as one line of NDJSON, the encoding the file and console sinks share.
 *
 * Invariant: what it returns is one JSON text and its newline, nothing else; what cannot be that
 * throws, as `JSON.stringify` itself does for a `BigInt` or a cycle (`TypeError`) and for a value
 * nested too deep (`RangeError`), which the runtime settles `rejected` for that event alone.
 *
 * @module
 */
import { constants } from 'node:buffer'

/**
 * The longest text one string can hold (V8: 2^29 - 24 characters). The sinks join an array's
 * lines into texts no longer than `max`: past it, `+=` throws a `RangeError` that is no event's
 * fault, and that would reject the event it was appending. Only tests lower `max`, to cover the
 * split without strings of 512 MiB.
 */
export const textLimit: { max: number } = { max: constants.MAX_STRING_LENGTH }

/**
 * `fields` as a JSON line. Throws a `TypeError` also for fields that encode as no JSON at all (a
 * `toJSON()` that returns `undefined`, which `JSON.stringify` answers with `undefined`, and which
 * would otherwise be written as the line `undefined`).
 *
 * @example
 * ```ts
 * jsonLine({ n: 1 }) // '{"n":1}\n'
 * ```
 */
export function jsonLine(fields: unknown): string {
  return `${jsonText(fields)}\n`
}

/**
 * `fields` as one JSON text without the newline, as {@link jsonLine} encodes it (and throws as it
 * does). For a caller that scans the text before it ends the line: the text `JSON.stringify`
 * returns is flat, where the line joined to its newline is not, and a regular expression run on a
 * joined string first copies it flat.
 *
 * @example
 * ```ts
 * jsonText({ n: 1 }) // '{"n":1}'
 * ```
 */
export function jsonText(fields: unknown): string {
  const json: string | undefined = JSON.stringify(fields)
  if (json === undefined)
    throw new TypeError("the event's fields encode as no JSON value (a toJSON() that returned undefined?)")
  return json
}

/**
 * Joins lines into as few texts as strings can hold: one while they fit in {@link textLimit},
 * more past it (each at most `textLimit.max` long, the lines whole and in order).
 *
 * @example
 * ```ts
 * const joined = new JoinedLines()
 * for (const event of events) joined.add(jsonLine(event.fields))
 * joined.texts // '{"n":1}\n{"n":2}\n': one string while the lines fit in one
 * ```
 */
export class JoinedLines {
  /** The texts filled already, before `last`; none while everything fits in one. */
  #full: string[] | undefined = undefined
  #last = ''

  /** Appends `line` (at most `textLimit.max` long), starting a new text when the current one cannot hold it. */
  add(line: string): void {
    if (this.#last.length + line.length > textLimit.max) {
      if (this.#full === undefined) this.#full = []
      if (this.#last !== '') this.#full.push(this.#last)
      this.#last = ''
    }
    this.#last += line
  }

  /** The texts, in order: one string while the lines fit in one; none (an empty list) when no line was added. */
  get texts(): string | readonly string[] {
    if (this.#full === undefined) return this.#last === '' ? NONE : this.#last
    return this.#last === '' ? this.#full : [...this.#full, this.#last]
  }
}

const NONE: readonly string[] = []
