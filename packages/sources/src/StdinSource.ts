/**
 * `stdin`: a source that reads newline-delimited records from standard input (or any readable
 * stream): a line holding a JSON object becomes that object, any other line `{ message: line }`
 * (a JSON object nested deeper than `maxDepth` too: code downstream may recurse over a value; and
 * one holding a number too large for a double, which would parse as `Infinity` and reach the sinks
 * as `null`). A line longer than `maxLineBytes` becomes `{ message }` holding as many of its
 * first whole characters as fit in `maxLineBytes` bytes, with a warning: only that much of an
 * open line is ever held, so a stream without newlines cannot exhaust memory. A byte order mark
 * that starts the input is skipped (a signature, not text: with it, a first line holding a JSON
 * object would be kept as text).
 *
 * Invariant: every complete line that is not blank (empty once its CR is stripped) becomes
 * exactly one event, in order; a blank line becomes none. Lines that arrived together travel as
 * one batch (at most `maxBatchLines`). A pipe cannot be asked to send data
 * again, so this source cannot acknowledge: the builder warns when an acknowledging sink reads it,
 * and a batch the pipeline does not accept (its send fails) is reported and sent again after a
 * back-off, reading no further meanwhile, until it is accepted or the topology stops.
 *
 * @module
 */
import { Buffer, constants } from 'node:buffer'
import { StringDecoder } from 'node:string_decoder'
import { type JsonObject, JsonValue } from '@ackline/core'
import {
  type ConfigIssue,
  codeOption,
  defineOptions,
  type OptionsOf,
  RecordRetry,
  type Source,
  type SourceContext,
  textOf,
  warningsTo,
} from '@ackline/topology'
import { z } from 'zod'
import { depthExceededAt } from './internal/locateJsonError.js'

const format = z.enum(['auto', 'text'])

/** How lines are decoded: JSON objects when they parse as such (`'auto'`), or always as text. */
export type StdinFormat = z.infer<typeof format>

/** Options of {@link stdin}: its schema (`validate`, `jsonSchema`, …). */
export const StdinOptions = defineOptions({
  input: codeOption<NodeJS.ReadableStream>(
    'a readable stream',
    // Read with `for await`, so an emitter that is not async-iterable would fail only once running.
    (value) =>
      typeof (value as { on?: unknown } | null)?.on === 'function' &&
      typeof (value as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === 'function',
  )
    .optional()
    .describe('The stream to read; `process.stdin` by default (tests inject their own).'),
  format: format
    .default('auto')
    .describe(
      '`auto`: a line that is a JSON object is that object, others are `{ message }`; `text`: always `{ message }`.',
    ),
  maxBatchLines: z.int().min(1).default(1000).describe('The most lines in one batch.'),
  maxLineBytes: z
    .int()
    .min(1)
    // A line is one string: past the engine's longest, a line could not be made at all.
    .max(constants.MAX_STRING_LENGTH)
    .default(102_400)
    .describe(
      'The most bytes (UTF-8, newline not counted) of a line; a longer one becomes `{ message }` holding its first whole characters within maxLineBytes bytes, ' +
        'with a warning, and the rest of it is never held in memory.',
    ),
  maxDepth: z.int().min(1).default(64).describe(
    // As the HTTP source's: far from the call-stack limit of code downstream that recurses.
    'How deep arrays and objects may nest in a JSON line, the outermost counting as 1; a deeper line is kept as text (`{ message }`).',
  ),
  onWarning: codeOption<(message: string) => void>('a function')
    .optional()
    .describe(
      'Where warnings go (a batch the pipeline did not accept, sent again after a back-off; a line cut at maxLineBytes). Default: process.emitWarning ' +
        '(code ACKLINE_STDIN), where a warning also goes when onWarning throws on it.',
    ),
})
/** Options of {@link stdin}. */
export type StdinOptions = OptionsOf<typeof StdinOptions>

/** The source {@link stdin} returns. */
export interface StdinSource extends Source {
  readonly kind: 'stdin'
  readonly canAcknowledge: false
  validate(): readonly ConfigIssue[]
}

/** Reads the input to its end or until the topology stops, as the module header says. */
async function run(options: StdinOptions, context: SourceContext): Promise<void> {
  const input = options.input ?? process.stdin
  const text = options.format === 'text'
  const maxLines = options.maxBatchLines ?? 1000
  const maxDepth = options.maxDepth ?? 64
  const maxBytes = options.maxLineBytes ?? 102_400
  const decoder = new StringDecoder('utf8')
  const iterator = (input as AsyncIterable<Buffer | string>)[Symbol.asyncIterator]()
  const stop = new Promise<IteratorResult<Buffer | string>>((resolve) => {
    if (context.signal.aborted) resolve({ done: true, value: undefined })
    else
      context.signal.addEventListener('abort', () => resolve({ done: true, value: undefined }), {
        once: true,
      })
  })
  /** The pieces of the line still open (no newline yet), joined only once it ends. */
  let open: string[] = []
  /** The UTF-8 bytes of `open`, at most `maxBytes` (past it, the line is cut: `openCut`). */
  let openBytes = 0
  /** The bytes of the open line in all once it was cut at `maxBytes` (then `open` is its first bytes); 0 while it is not. */
  let openCut = 0
  /** Whether the cut open line's last byte so far is a CR (not counted when a newline follows it). */
  let cutEndsCr = false
  /** Lines read so far, sent or not: how a cut line is named in warnings. */
  let read = 0
  // Guarded: an `onWarning` that throws would end the run with the refused lines, which cannot be read again.
  const warn = warningsTo(options.onWarning, context.id, 'ACKLINE_STDIN')
  /** Lines sent so far: how refused lines are named in warnings. */
  let sent = 0
  /** Sends one batch until it is accepted; false when the topology stopped first. */
  const sendBatch = async (records: JsonObject[]): Promise<boolean> => {
    for (let refusals = 1; ; refusals++) {
      try {
        // Standard input has no upstream to tell: the receipt would go unread.
        await context.send(records, { receipt: false })
        sent += records.length
        return true
      } catch (error) {
        // The lines cannot be read again: keep them, and the rest of the input, until accepted.
        const stopped = context.signal.aborted
        const wait = RecordRetry.delayMs({}, refusals, Math.random())
        const lines = `${records.length} line(s) (records ${sent + 1} to ${sent + records.length} of the input)`
        warn(
          `stdin source '${context.id}': the pipeline did not accept ${lines}: ${textOf(error)}; ${
            stopped
              ? 'the topology stopped, they are not sent'
              : `sending them again in ${Math.round(wait)} ms`
          }`,
        )
        if (stopped || (await sleep(wait, context.signal))) return false
      }
    }
  }
  const sendLines = async (lines: string[]): Promise<void> => {
    for (let from = 0; from < lines.length; from += maxLines) {
      const records = lines.slice(from, from + maxLines).map((line) => toRecord(line, text, maxDepth))
      if (!(await sendBatch(records))) return
    }
  }
  /** Says that line number `line` of `bytes` bytes was cut to `kept`, its first bytes. */
  const warnCut = (line: number, bytes: number, kept: string): string => {
    // A cut backs off to a whole character: the bytes sent may be fewer than maxLineBytes.
    warn(
      `stdin source '${context.id}': line ${line} of the input is ${bytes} bytes, longer than maxLineBytes (${maxBytes}): ` +
        `its first ${Buffer.byteLength(kept)} bytes (whole characters) are sent as { message }, the rest is dropped`,
    )
    return kept
  }
  /** Adds `piece` (no newline in it) to the open line, cutting that line at `maxBytes` once it passes it. */
  const extend = (piece: string): void => {
    if (piece === '') return
    // Each piece is measured once: the open line is never measured again (linear in its length).
    const bytes = Buffer.byteLength(piece)
    if (openCut > 0) {
      openCut += bytes
      cutEndsCr = piece.endsWith('\r')
      return
    }
    open.push(piece)
    openBytes += bytes
    if (openBytes <= maxBytes) return
    const joined = open.join('')
    cutEndsCr = joined.endsWith('\r')
    open = [prefixWithin(joined, maxBytes)]
    openCut = openBytes
    openBytes = maxBytes
  }
  /**
   * Ends the open line: its text (cut at `maxBytes` when longer, with a warning), or `undefined`
   * for a blank line; a fresh open line follows. A cut line is sent even when no whole character
   * of it fits (`''`), as a cut line in the middle of a chunk is.
   */
  const close = (): string | undefined => {
    read++
    const cut = openCut
    // A cut line's CR (of a CRLF) was never held: it is not text of the line, and not cut from it.
    const bytes = cut - (cutEndsCr ? 1 : 0)
    const line = cut === 0 ? stripCr(open.join('')) : open[0]!
    open = []
    openBytes = 0
    openCut = 0
    if (cut === 0) return line === '' ? undefined : line
    return bytes > maxBytes ? warnCut(read, bytes, line) : line
  }
  /** `line` (complete, CR stripped, not blank), cut at `maxBytes` with a warning when longer. */
  const within = (line: string): string => {
    if (line.length * 3 <= maxBytes) return line
    const bytes = Buffer.byteLength(line)
    if (bytes <= maxBytes) return line
    return warnCut(read, bytes, prefixWithin(line, maxBytes))
  }
  /** A high surrogate a string chunk ended with: held until the next chunk brings its other half. */
  let carry = ''
  /** Until the input's first character: a byte order mark there is a signature, not text of the line. */
  let atStart = true
  try {
    for (;;) {
      const next = await Promise.race([iterator.next(), stop])
      if (next.done === true) break
      let piece = typeof next.value === 'string' ? next.value : decoder.write(next.value)
      if (carry !== '') {
        piece = carry + piece
        carry = ''
      }
      if (atStart && piece !== '') {
        atStart = false
        if (piece.charCodeAt(0) === 0xfeff) piece = piece.slice(1)
      }
      // A surrogate pair split between string chunks (a decoder never splits one): measured
      // apart, each half would count 3 bytes.
      const lastUnit = piece.charCodeAt(piece.length - 1)
      if (lastUnit >= 0xd800 && lastUnit <= 0xdbff) {
        carry = piece.slice(-1)
        piece = piece.slice(0, -1)
      }
      // Only the new piece is searched: rescanning a long open line on every chunk made reading a
      // line of n chunks take n² time.
      const first = piece.indexOf('\n')
      if (first < 0) {
        extend(piece)
        continue
      }
      extend(piece.slice(0, first))
      const complete: string[] = []
      const head = close()
      if (head !== undefined) complete.push(head)
      const end = piece.lastIndexOf('\n')
      if (end > first)
        for (const raw of piece.slice(first + 1, end).split('\n')) {
          read++
          const line = stripCr(raw)
          if (line !== '') complete.push(within(line))
        }
      extend(piece.slice(end + 1))
      if (complete.length > 0) await sendLines(complete)
      if (context.signal.aborted) break
    }
  } finally {
    // Stops the stream. `return` is not awaited: with a read still pending (a stop while the input
    // is idle) it settles only after that read, which may never come; destroying ends the read.
    iterator.return?.().catch(() => {})
    if (context.signal.aborted) (input as { destroy?: () => void }).destroy?.()
  }
  if (context.signal.aborted) return
  extend(carry + decoder.end())
  const last = close()
  if (last !== undefined) await sendLines([last])
}

/** Waits `ms`; resolves `true` early when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(true)
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer)
      resolve(true)
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve(false)
    }, ms)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

const stripCr = (line: string): string => (line.endsWith('\r') ? line.slice(0, -1) : line)

/** The longest beginning of `text` whose UTF-8 form is at most `max` bytes (never half a character). */
function prefixWithin(text: string, max: number): string {
  const bytes = Buffer.from(text.slice(0, max))
  let cut = Math.min(max, bytes.length)
  // Back over the continuation bytes (10xxxxxx) of a character the cut would split.
  if (cut < bytes.length) while (cut > 0 && (bytes[cut]! & 0xc0) === 0x80) cut--
  return bytes.toString('utf8', 0, cut)
}

/** Whether `line` opens with a brace, after the blanks JSON allows there (trailing ones it allows too). */
function opensObject(line: string): boolean {
  const first = line.charCodeAt(0)
  return first === 0x7b || ((first === 0x20 || first === 0x09) && /^[ \t]*\{/.test(line))
}

function toRecord(line: string, text: boolean, maxDepth: number): JsonObject {
  if (!text && opensObject(line)) {
    try {
      const value = JSON.parse(line) as JsonValue
      if (
        typeof value === 'object' &&
        value !== null &&
        !Array.isArray(value) &&
        depthExceededAt(line, maxDepth) < 0 &&
        // A number a double cannot hold parsed as Infinity, which would reach the sinks as null.
        JsonValue.numberOutOfRange(line, value) === undefined
      )
        return value
    } catch {
      // Not JSON: the line is a message like any other.
    }
  }
  return { message: line }
}

/**
 * Reads standard input (or `options.input`) line by line: JSON-object lines (nested at most
 * `maxDepth` deep) become those objects, other lines `{ message: line }`; a line longer than
 * `maxLineBytes` (102400 by default) is cut to its first bytes, with a warning; a byte order mark
 * that starts the input is skipped. It cannot acknowledge
 * (`canAcknowledge: false`); it returns at the end of the input or when the topology stops. A batch the pipeline does not accept is
 * reported to `onWarning` and sent again after a back-off (100 ms doubling to 5 s), so no line
 * is skipped; it may reach a sink twice when a fan-out took it at one consumer and not another.
 *
 * @example
 * ```ts
 * // tail -f app.log | tsx pipeline.ts
 * builder.source('in', stdin()).sink('out', ['in'], console())
 * // in tests:
 * stdin({ input: Readable.from(['{"a":1}\nplain text\n']) })
 * ```
 */
export function stdin(options: StdinOptions = {}): StdinSource {
  return {
    kind: 'stdin',
    canAcknowledge: false,
    validate: () => StdinOptions.validate(options),
    run: (context) => run(options, context),
  }
}
