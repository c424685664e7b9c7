/**
 * Request paths in the one spelling the HTTP source compares them in: RFC 3986 6.2.2.1 and
 * 6.2.2.2, nothing more. Clients spell one path in several ways (curl sends `%C3`, some clients
 * `%c3`; older encoders send `%7E` for `~`), and those spellings name the same resource. Nothing
 * else is rewritten: no other percent-decoding (`%2F` stays, it is not `/`), no dot segments, no
 * case folding outside a percent-encoding, so two paths that differ otherwise still differ.
 * Idempotent: the result of a result is itself.
 */

/** A percent-encoding (a `%` not followed by two hex digits is left as it is). */
const PERCENT_ENCODED = /%([0-9A-Fa-f]{2})/g
/** A `%` not followed by two hex digits. */
const STRAY_PERCENT = /%(?![0-9A-Fa-f]{2})/
/** RFC 3986 2.3: `ALPHA / DIGIT / "-" / "." / "_" / "~"`, which need no encoding. */
const UNRESERVED = /^[A-Za-z0-9\-._~]$/

/**
 * `path` with its percent-encodings in upper case and those of unreserved characters decoded:
 * `/%c3%a9v` and `/%C3%A9v` give `/%C3%A9v`, `/%7Euser` and `/%7euser` give `/~user`. A path
 * holding a `%` not followed by two hex digits is not RFC 3986's: its encodings are only
 * upper-cased (`/100%/%7e` gives `/100%/%7E`).
 */
export function normalizePercentEncoding(path: string): string {
  // Most paths hold no `%`: returned as they are, with nothing allocated.
  if (!path.includes('%')) return path
  // A stray `%` (not RFC 3986): a hex digit decoded beside it could make a new percent-encoding
  // (`/%a%62` would be `/%ab`, then `/%AB`), so such a path only has its encodings upper-cased.
  const decode = !STRAY_PERCENT.test(path)
  return path.replace(PERCENT_ENCODED, (_, hex: string) => {
    const character = String.fromCharCode(Number.parseInt(hex, 16))
    return decode && UNRESERVED.test(character) ? character : `%${hex.toUpperCase()}`
  })
}
