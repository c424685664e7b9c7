/**
 * Where a JSON text first breaks the grammar, so a 400 response can name the line and column.
 * `JSON.parse` in current V8 no longer reports a position, so this walks the text itself; it runs
 * only after `JSON.parse` failed, never on the happy path.
 */

/** The first syntax error of a JSON text. */
export interface JsonErrorLocation {
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
  ) {}
}

/** The location of the first syntax error in `text`, or `undefined` when it is valid JSON. */
export function locateJsonError(text: string): JsonErrorLocation | undefined {
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
    if (!(text[i]! >= '0' && text[i]! <= '9')) fail()
    while (text[i]! >= '0' && text[i]! <= '9') i++
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
            if (!/[0-9a-fA-F]/.test(text[i + k] ?? '')) {
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
  const value = (): void => {
    ws()
    const ch = text[i]
    if (ch === '{') {
      i++
      ws()
      if (text[i] === '}') {
        i++
        return
      }
      for (;;) {
        ws()
        if (text[i] !== '"') fail('expected a property name')
        string()
        ws()
        if (text[i] !== ':') fail("expected ':'")
        i++
        value()
        ws()
        if (text[i] === ',') i++
        else if (text[i] === '}') {
          i++
          return
        } else fail("expected ',' or '}'")
      }
    }
    if (ch === '[') {
      i++
      ws()
      if (text[i] === ']') {
        i++
        return
      }
      for (;;) {
        value()
        ws()
        if (text[i] === ',') i++
        else if (text[i] === ']') {
          i++
          return
        } else fail("expected ',' or ']'")
      }
    }
    if (ch === '"') string()
    else if (ch === 't') literal('true')
    else if (ch === 'f') literal('false')
    else if (ch === 'n') literal('null')
    else if (ch === '-' || (ch !== undefined && ch >= '0' && ch <= '9')) number()
    else fail()
  }
  try {
    value()
    ws()
    if (i < text.length) fail()
    return undefined
  } catch (stop) {
    if (!(stop instanceof SyntaxStop)) throw stop
    return { ...position(text, stop.offset), offset: stop.offset, reason: stop.reason }
  }
}

function position(text: string, offset: number): { line: number; column: number } {
  let line = 1
  let lineStart = 0
  for (let k = 0; k < offset && k < text.length; k++) {
    if (text[k] === '\n') {
      line++
      lineStart = k + 1
    }
  }
  return { line, column: offset - lineStart + 1 }
}
