/**
 * Where a JSON text first breaks the grammar or nests deeper than allowed, so a 400 response can
 * name the line and column. `JSON.parse` in current V8 no longer reports a position, so this walks
 * the text itself; it runs only after `JSON.parse` failed, never on the happy path.
 *
 * Invariant: the walk is iterative (an explicit stack of open containers, one byte each), so no
 * input, however deep, can overflow the call stack; it reads each character once.
 */

/** The first problem of a JSON text, in reading order. */
export interface JsonErrorLocation {
  /** `'syntax'` when the grammar breaks, `'depth'` when a container opens past the nesting limit. */
  readonly kind: 'syntax' | 'depth'
  /** Offset of the offending character (UTF-16 code units), `text.length` at an unexpected end. */
  readonly offset: number
  /** 1-based line of the offset. */
  readonly line: number
  /** 1-based column of the offset. */
  readonly column: number
  /** What was found there. */
  readonly reason: string
}

class SyntaxStop {
  constructor(
    readonly offset: number,
    readonly reason: string,
    readonly kind: 'syntax' | 'depth' = 'syntax',
  ) {}
}

const ARRAY = 0
const OBJECT = 1
// What the walk expects next.
const VALUE = 0
const KEY = 1
const AFTER_VALUE = 2

const isDigit = (ch: string | undefined): boolean => ch !== undefined && ch >= '0' && ch <= '9'
const isHex = (ch: string | undefined): boolean =>
  ch !== undefined && ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F'))

/**
 * The location of the first problem in `text`: a syntax error, or (when `maxDepth` is given) an
 * array or object opened at a depth past `maxDepth` (the outermost container is depth 1).
 * `undefined` when `text` is valid JSON within the limit.
 */
export function locateJsonError(
  text: string,
  maxDepth: number = Number.POSITIVE_INFINITY,
): JsonErrorLocation | undefined {
  let i = 0
  const fail = (reason?: string): never => {
    if (i >= text.length)
      throw new SyntaxStop(i, `unexpected end of input${reason === undefined ? '' : ` (${reason})`}`)
    throw new SyntaxStop(i, reason ?? `unexpected ${JSON.stringify(text[i])}`)
  }
  const ws = (): void => {
    while (i < text.length && (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r'))
      i++
  }
  const literal = (word: string): void => {
    for (const ch of word) {
      if (text[i] !== ch) fail()
      i++
    }
  }
  const digits = (): void => {
    if (!isDigit(text[i])) fail()
    while (isDigit(text[i])) i++
  }
  const number = (): void => {
    if (text[i] === '-') i++
    if (text[i] === '0') i++
    else digits()
    if (text[i] === '.') {
      i++
      digits()
    }
    if (text[i] === 'e' || text[i] === 'E') {
      i++
      if (text[i] === '+' || text[i] === '-') i++
      digits()
    }
  }
  const string = (): void => {
    i++
    for (;;) {
      if (i >= text.length) fail('unterminated string')
      const ch = text[i]!
      if (ch === '"') {
        i++
        return
      }
      if (ch < ' ') fail('control character in string')
      if (ch === '\\') {
        i++
        const esc = text[i]
        if (esc === 'u') {
          for (let k = 1; k <= 4; k++) {
            if (!isHex(text[i + k])) {
              i += k
              fail('bad \\u escape')
            }
          }
          i += 5
          continue
        }
        if (esc === undefined || !'"\\/bfnrt'.includes(esc)) fail('bad escape')
      }
      i++
    }
  }
  // The open containers, innermost last; grown by doubling, so depth costs one byte per level.
  let open = new Uint8Array(64)
  let depth = 0
  const enter = (kind: number): void => {
    if (depth >= maxDepth) throw new SyntaxStop(i, `nesting deeper than ${maxDepth}`, 'depth')
    if (depth === open.length) {
      const grown = new Uint8Array(open.length * 2)
      grown.set(open)
      open = grown
    }
    open[depth++] = kind
    i++
  }

  try {
    let next = VALUE
    for (;;) {
      if (next === VALUE) {
        ws()
        const ch = text[i]
        if (ch === '{') {
          enter(OBJECT)
          ws()
          if (text[i] === '}') {
            i++
            depth--
            next = AFTER_VALUE
          } else next = KEY
        } else if (ch === '[') {
          enter(ARRAY)
          ws()
          if (text[i] === ']') {
            i++
            depth--
            next = AFTER_VALUE
          } else next = VALUE
        } else {
          if (ch === '"') string()
          else if (ch === 't') literal('true')
          else if (ch === 'f') literal('false')
          else if (ch === 'n') literal('null')
          else if (ch === '-' || isDigit(ch)) number()
          else fail()
          next = AFTER_VALUE
        }
      } else if (next === KEY) {
        ws()
        if (text[i] !== '"') fail('expected a property name')
        string()
        ws()
        if (text[i] !== ':') fail("expected ':'")
        i++
        next = VALUE
      } else {
        ws()
        if (depth === 0) {
          if (i < text.length) fail()
          return undefined
        }
        const inObject = open[depth - 1] === OBJECT
        if (text[i] === ',') {
          i++
          next = inObject ? KEY : VALUE
        } else if (text[i] === (inObject ? '}' : ']')) {
          i++
          depth--
        } else fail(inObject ? "expected ',' or '}'" : "expected ',' or ']'")
      }
    }
  } catch (stop) {
    if (!(stop instanceof SyntaxStop)) throw stop
    return { kind: stop.kind, ...position(text, stop.offset), offset: stop.offset, reason: stop.reason }
  }
}

/**
 * The offset of the first `[` or `{` that opens past `maxDepth` in a text already known to be
 * valid JSON, or -1. A plain scan (strings skipped, brackets counted): `JSON.parse` accepts any
 * depth, and what reads the value afterwards (encoders, transforms) may recurse.
 */
export function depthExceededAt(text: string, maxDepth: number): number {
  // Nesting past maxDepth takes more than maxDepth brackets that open, so a text with no more (a
  // request of a few events) is cleared by the native search alone, without the walk.
  const arrays = countUpTo(text, '[', maxDepth)
  if (arrays + countUpTo(text, '{', maxDepth - arrays) <= maxDepth) return -1
  let depth = 0
  const n = text.length
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      i = closingQuote(text, i)
      if (i < 0) return -1
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > maxDepth) return i
    } else if (c === 0x5d || c === 0x7d) depth--
  }
  return -1
}

/** What {@link scanRecords} found. */
export interface RecordScan {
  /** How many objects open at the records' level. */
  readonly records: number
  /** Where nesting first passes `maxDepth`, as {@link depthExceededAt} says, or -1. */
  readonly deepAt: number
}

/**
 * One walk over `text`, strings skipped, that counts the objects opening at nesting `level` (0:
 * the top-level values that are objects, one JSON object or NDJSON's lines; 1: the objects that
 * are elements of a top-level array) and finds where nesting first passes `maxDepth` (exactly
 * {@link depthExceededAt}'s answer, so a caller that has this need not walk again). Exact for
 * valid JSON and NDJSON; for a malformed text the count is an estimate. Allocates nothing but
 * its answer: it runs before `JSON.parse`, to refuse a body of too many records before a single
 * one is made.
 */
export function scanRecords(text: string, level: number, maxDepth: number): RecordScan {
  let records = 0
  let deepAt = -1
  let depth = 0
  const n = text.length
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      i = closingQuote(text, i)
      if (i < 0) break
    } else if (c === 0x7b || c === 0x5b) {
      if (c === 0x7b && depth === level) records++
      if (++depth > maxDepth && deepAt < 0) deepAt = i
    } else if (c === 0x5d || c === 0x7d) depth--
  }
  return { records, deepAt }
}

/**
 * Where the string that opens at `open` ends (its closing quote), or -1 when it never does. The
 * native search skips it (strings are most of a log's bytes): a quote ends it unless an odd
 * number of backslashes precedes it.
 */
function closingQuote(text: string, open: number): number {
  for (let from = open; ; ) {
    const quote = text.indexOf('"', from + 1)
    if (quote < 0) return -1
    let backslashes = 0
    while (text.charCodeAt(quote - 1 - backslashes) === 0x5c) backslashes++
    if (backslashes % 2 === 0) return quote
    from = quote
  }
}

/** How many times `text` holds `ch`, counted only up to the first past `limit`. */
export function countUpTo(text: string, ch: string, limit: number): number {
  let count = 0
  for (let i = text.indexOf(ch); i >= 0 && count <= limit; i = text.indexOf(ch, i + 1)) count++
  return count
}

/** The 1-based line and column of `offset` in `text`. */
export function position(text: string, offset: number): { line: number; column: number } {
  let line = 1
  let lineStart = 0
  for (let k = text.indexOf('\n'); k >= 0 && k < offset; k = text.indexOf('\n', k + 1)) {
    line++
    lineStart = k + 1
  }
  return { line, column: offset - lineStart + 1 }
}
