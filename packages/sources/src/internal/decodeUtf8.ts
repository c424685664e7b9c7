/**
 * Request bodies from bytes to text. UTF-8 only, strictly by default: a byte sequence that is not
 * UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF) is refused with its
 * byte offset rather than replaced with U+FFFD, so the pipeline never carries data changed
 * without anyone being told. A leading byte order mark is skipped.
 */
import { isUtf8 } from 'node:buffer'

export type DecodedBody =
  | { readonly ok: true; readonly text: string }
  | {
      readonly ok: false
      /** Offset, in the body's bytes (byte order mark included), of the first invalid sequence. */
      readonly byteOffset: number
    }

/** The text of `bytes`; with `replace`, invalid sequences become U+FFFD instead of failing. */
export function decodeUtf8(bytes: Buffer, replace: boolean): DecodedBody {
  const bom = bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0
  const body = bom === 0 ? bytes : bytes.subarray(bom)
  // The native check runs on every body; the walk that finds the offset only on a bad one.
  if (!replace && !isUtf8(body)) return { ok: false, byteOffset: bom + firstInvalidUtf8(body) }
  return { ok: true, text: body.toString('utf8') }
}

/** The offset of the first byte that starts an invalid or truncated UTF-8 sequence, or `bytes.length`. */
export function firstInvalidUtf8(bytes: Uint8Array): number {
  const n = bytes.length
  let i = 0
  while (i < n) {
    const b = bytes[i]!
    if (b < 0x80) {
      i++
      continue
    }
    let length: number
    // The second byte's range is narrower after some lead bytes: that rules out overlong forms
    // (E0, F0), surrogates (ED) and code points past U+10FFFF (F4).
    let low = 0x80
    let high = 0xbf
    if (b >= 0xc2 && b <= 0xdf) length = 2
    else if (b >= 0xe0 && b <= 0xef) {
      length = 3
      if (b === 0xe0) low = 0xa0
      else if (b === 0xed) high = 0x9f
    } else if (b >= 0xf0 && b <= 0xf4) {
      length = 4
      if (b === 0xf0) low = 0x90
      else if (b === 0xf4) high = 0x8f
    } else return i
    if (i + length > n) return i
    const second = bytes[i + 1]!
    if (second < low || second > high) return i
    for (let k = 2; k < length; k++) {
      const next = bytes[i + k]!
      if (next < 0x80 || next > 0xbf) return i
    }
    i += length
  }
  return n
}
