/**
 * Text cut to fit a byte limit of a wire format (a broker header, a server's payload limit).
 *
 * Invariant: the result is at most `maxBytes` bytes of UTF-8, never splits a character, and is
 * `text` itself when that fits.
 *
 * @module
 */

/**
 * `text` as it is when its UTF-8 form fits in `maxBytes` (at least 4); otherwise its longest
 * beginning that fits with '…' (3 bytes) after it, never cut within a character. For connectors
 * that put a reason where the wire limits its size.
 *
 * @example
 * ```ts
 * msg.term(cutToBytes(reason, 1024)) // a sink's 200 KB reason would exceed the server's max_payload
 * ```
 */
export function cutToBytes(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return text
  const bytes = Buffer.from(text, 'utf8')
  // '…' is 3 bytes; step back over continuation bytes (10xxxxxx) to a character's first byte.
  let end = maxBytes - 3
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--
  return `${bytes.subarray(0, end).toString('utf8')}…`
}
