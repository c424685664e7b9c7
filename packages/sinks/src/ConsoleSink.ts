/**
 * `console`: a sink that prints each event as one line.
 *
 * Invariants:
 * - A write resolves only once the stream has taken its lines (a Node.js Writable's write callback
 *   said so, which waits while the stream is full; a stream that is no Writable, such as the
 *   sonic-boom of `pino.destination()`: its `write` returned true and it emitted no `drop`, or it
 *   emitted `drain`), so
 *   events are settled `delivered` only once written. A
 *   stream that fails the write, errors or closes before that (a closed pipe: `EPIPE`, when stdout
 *   is piped into `head -1`) makes the write throw a `RetryableError` naming the stream, so the
 *   events are retried, then settled `errored`.
 * - A stream's `error` event never crashes the process: the sink listens to it for the stream's
 *   whole life (Node emits it after the failed write's callback, so a listener for the write alone
 *   would come too late), and what failed is reported by the writes.
 * - Each event is one line, and drives no terminal: in `text`, a message's line breaks (LF, VT,
 *   FF, CR, NEL, U+2028, U+2029) and control characters (C0 but the tab, DEL, C1: ESC and the
 *   sequences it starts) are written with JSON's string escapes (`\n`, `\r`, `\f`, `\b`,
 *   `\u001b`, `\u0085`, `\u2028`), so a reader or a line-based collector does not take one event
 *   for several, and a message cannot colour, move or retitle the terminal it is printed on. The
 *   tab, a backslash and every other character are written as they are (so `\n` in the output may
 *   also be a message's own backslash and `n`). A JSON line (`json`, or a `text` event with no
 *   string message) has what `JSON.stringify` writes raw among those (DEL, C1, U+2028, U+2029)
 *   written `\uXXXX`, so it parses to the same fields.
 * - An event the format cannot represent (a `BigInt`, a cycle, a value nested too deep for
 *   `JSON.stringify`, a `toJSON()` that returns nothing) fails alone: the others are printed, and
 *   the write reports that event's encoding error in its place, which the runtime settles
 *   `rejected`.
 *
 * @module
 */
import type { DeliveryStatus, EventArray } from '@ackline/core'
import {
  type ConfigIssue,
  codeOption,
  defineOptions,
  type OptionsOf,
  RetryableError,
  type Sink,
  type SinkResult,
  textOf,
} from '@ackline/topology'
import { z } from 'zod'
import { JoinedLines, jsonText } from './internal/jsonLine.js'

/**
 * Options of {@link console}: its schema (`validate`, `jsonSchema`, …).
 *
 * @example
 * ```ts
 * console({ stream: process.stderr, format: 'text' })
 * ```
 */
export const ConsoleSinkOptions = defineOptions({
  stream: codeOption<NodeJS.WritableStream>('a writable stream', (value) => {
    const stream = value as { write?: unknown; on?: unknown } | null
    return typeof stream?.write === 'function' && typeof stream.on === 'function'
  })
    .optional()
    .describe(
      'Where lines go (default `process.stdout`): a Node.js writable stream, or any object with `write` and `on` that emits `drain` and `error` as one does (sonic-boom).',
    ),
  format: z
    .enum(['json', 'text'])
    .default('json')
    .describe(
      "`json`: each event's fields as JSON; `text`: its `message` field, or JSON when it has none that is a string (a number, an object). A message's line breaks (LF, VT, FF, CR, NEL, U+2028, U+2029) and control characters (C0 but the tab, DEL, C1, ESC among them) are written escaped as in JSON (`\\n`, `\\r`, `\\u001b`, `\\u2028`), so it stays one line and drives no terminal; other characters, the tab and a backslash too, as they are. A JSON line has DEL, C1, U+2028 and U+2029, which JSON leaves raw, written `\\uXXXX` too.",
    ),
})
/** Options of {@link console}. */
export type ConsoleSinkOptions = OptionsOf<typeof ConsoleSinkOptions>

/**
 * The sink {@link console} returns; it checks its options in `validate()`.
 *
 * @example
 * ```ts
 * const sink: ConsoleSink = console()
 * ```
 */
export interface ConsoleSink extends Sink {
  readonly kind: 'console'
  /** Problems in the options, each naming its field; empty when they are fine. */
  validate(): readonly ConfigIssue[]
}

class Console implements ConsoleSink {
  readonly kind = 'console'
  readonly #options: ConsoleSinkOptions

  constructor(options: ConsoleSinkOptions) {
    this.#options = options
  }

  validate(): readonly ConfigIssue[] {
    return ConsoleSinkOptions.validate(this.#options)
  }

  async write(events: EventArray): Promise<SinkResult> {
    const stream = this.#options.stream ?? process.stdout
    const text = this.#options.format === 'text'
    const joined = new JoinedLines()
    let results: (DeliveryStatus | Error)[] | undefined
    for (let i = 0; i < events.length; i++) {
      const event = events.events[i]!
      let line: string
      try {
        // Read in the try: a `message` getter that throws fails its event alone, as encoding does.
        const message = text ? event.get('message') : undefined
        line = `${typeof message === 'string' ? oneLine(message) : terminalSafe(jsonText(event.fields))}\n`
      } catch (error) {
        // The first event that cannot be encoded: the ones before it were delivered.
        results ??= new Array<DeliveryStatus | Error>(i).fill('delivered')
        results.push(error instanceof Error ? error : new TypeError(textOf(error)))
        continue
      }
      joined.add(line)
      results?.push('delivered')
    }
    const texts = joined.texts
    if (typeof texts === 'string') await this.#print(stream, texts)
    else for (const piece of texts) await this.#print(stream, piece)
    return results
  }

  /** Hands `out` to `stream`; resolves once the stream has taken it, throws if it fails first. */
  #print(stream: NodeJS.WritableStream, out: string): Promise<void> {
    const state = watch(stream)
    return new Promise<void>((resolve, reject) => {
      const done = (error?: unknown): void => {
        if (!state.writes.delete(done)) return // settled already (the stream failed, then called back)
        state.drains.delete(done)
        if (error === undefined || error === null) resolve()
        else reject(this.#failure(stream, error))
      }
      state.writes.add(done)
      try {
        if (callsBack(stream)) stream.write(out, done)
        else {
          // A stream that is no Node.js Writable (sonic-boom, which `pino.destination()` returns)
          // may never call a write's callback: it has taken the lines once `write` says so, or at
          // its next `drain`, unless it dropped them (sonic-boom past its `maxLength` emits `drop`
          // from within `write`, and still returns true).
          const before = state.drops
          const room = stream.write(out)
          if (state.drops !== before) done(new Error('the stream dropped the lines (past its maxLength?)'))
          else if (room) done()
          else state.drains.add(done)
        }
      } catch (error) {
        done(error)
      }
    })
  }

  #failure(stream: NodeJS.WritableStream, cause: unknown): RetryableError {
    const name = stream === process.stdout ? 'stdout' : stream === process.stderr ? 'stderr' : 'its stream'
    const reason = cause instanceof Error ? cause.message : String(cause)
    return new RetryableError('console', `cannot write to ${name}: ${reason}`, { cause, field: 'stream' })
  }
}

/** Whether `stream` is a Node.js Writable, whose `write` calls its callback once it took the chunk. */
const callsBack = (stream: NodeJS.WritableStream): boolean =>
  typeof (stream as { writableLength?: unknown }).writableLength === 'number'

/** What a console sink keeps of a stream it wrote to, and hears from it. */
interface Watched {
  /** The writes still waiting for the stream to take their lines. */
  readonly writes: Set<(error?: unknown) => void>
  /** The writes, to a stream that is no Node.js Writable, waiting for its next `drain`. */
  readonly drains: Set<(error?: unknown) => void>
  /** How many times the stream emitted `drop` (sonic-boom past its `maxLength`). */
  drops: number
}

const watched = new WeakMap<NodeJS.WritableStream, Watched>()

/**
 * What the sinks keep of `stream`, listening to it once for good (however many sinks and writes
 * share it, so no listener piles up per write). Without an `error` listener, the `error` Node
 * emits after a failed write (a closed pipe) would crash the process, and it comes after the
 * write's callback. An `error` or a `close` fails every write still waiting; a `drain` settles
 * those waiting for it.
 */
function watch(stream: NodeJS.WritableStream): Watched {
  const known = watched.get(stream)
  if (known !== undefined) return known
  const state: Watched = { writes: new Set(), drains: new Set(), drops: 0 }
  watched.set(stream, state)
  stream.on('error', (error: unknown) => {
    for (const done of [...state.writes]) done(error)
  })
  stream.on('close', () => {
    for (const done of [...state.writes]) done(new Error('the stream closed before it took the lines'))
  })
  stream.on('drain', () => {
    const waiting = [...state.drains]
    state.drains.clear()
    for (const done of waiting) done()
  })
  stream.on('drop', () => {
    state.drops++
  })
  return state
}

/**
 * What a text line escapes: every line break a reader may split at (LF, VT, FF, CR, NEL, U+2028,
 * U+2029) and every other control character a terminal acts on (C0 but the tab, DEL, C1: ESC
 * starts colours, cursor moves, a window title; U+009B is a CSI of its own).
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is its purpose.
const UNSAFE = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u2028\u2029]/g

/** JSON's short escapes; other characters are written `\uXXXX`. */
const SHORT: Readonly<Record<string, string>> = { '\b': '\\b', '\f': '\\f', '\n': '\\n', '\r': '\\r' }

/**
 * A text message on one line that drives no terminal: each {@link UNSAFE} character written with
 * JSON's string escapes (`\n`, `\r`, `\f`, `\b`, `\u001b`, and `\u0085`, `\u2028` alike).
 */
function oneLine(message: string): string {
  return message.replace(UNSAFE, (c) => SHORT[c] ?? unicodeEscape(c))
}

/**
 * What JSON writes raw that a terminal acts on or a reader breaks a line at: DEL, C1 (NEL, an
 * 8-bit CSI), U+2028, U+2029. JSON text holds them only inside strings, where `\uXXXX` is the
 * same character.
 */
const RAW_IN_JSON = /[\u007f-\u009f\u2028\u2029]/
const RAW_IN_JSON_ALL = /[\u007f-\u009f\u2028\u2029]/g

/**
 * A JSON text with {@link RAW_IN_JSON} written `\uXXXX`: it parses to the same value. Given the
 * text before its newline is joined on (`JSON.stringify`'s own string, flat), so the scan copies
 * nothing.
 */
function terminalSafe(line: string): string {
  return RAW_IN_JSON.test(line) ? line.replace(RAW_IN_JSON_ALL, unicodeEscape) : line
}

/** `c` as JSON's `\uXXXX` escape. */
function unicodeEscape(c: string): string {
  return `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`
}

/**
 * A sink that prints events, one line each, to stdout or the given stream.
 *
 * @example
 * ```ts
 * builder.sink('print', ['parse'], console({ format: 'text' }), { acknowledgements: false })
 * ```
 */
export function console(options: ConsoleSinkOptions = {}): ConsoleSink {
  return new Console(options)
}
