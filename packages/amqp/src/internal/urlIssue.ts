/**
 * The check of the broker URL, made at build: amqplib connects only with a URL that `new URL`
 * parses and whose protocol is `amqp:` or `amqps:`, and throws on any other at every connect.
 *
 * Invariant: a URL amqplib would refuse is an issue naming `url`, and the issue never shows the
 * URL's credentials: everything up to its last `@` is left out, whether it parses or not (a
 * password holding a `/` is no longer in the URL's user info once parsed). When the part before
 * that `@` holds a character that ends a URL's server part (`/`, `?`, `#`), the issue says to
 * percent-encode the user and password if that part is them, without saying which character it
 * found.
 *
 * @module
 */
import { ConfigIssue } from '@ackline/topology'

const EXPECTED = 'an AMQP URL, amqp:// or amqps:// and the server (amqp://user:password@host:5672/vhost)'

/**
 * What to do about credentials a URL cannot carry as written: `/`, `?` and `#` end the server
 * part, so `new URL` reads what follows as a port, a path or a query. `@` and `:` in a password
 * parse (the last `@` ends the user info, the first `:` the user), but are named too: whoever
 * encodes one should encode them all. Said with an 'if': the part before the last `@` may as well
 * be a server and a path holding an `@` (`amqp://h:56x72/a@b`, a bad port), which no one can tell
 * from a user and a password holding a `/`.
 */
const PERCENT_ENCODE =
  "; if the part before the last '@' is a user and password, percent-encode them (as encodeURIComponent does: '/' is %2F, '?' %3F, '#' %23, '@' %40, ':' %3A, '%' %25): that part holds a character that ends a URL's server part"

/** The issue of a `url` amqplib cannot connect with; none when it can. */
export function urlIssue(url: string): ConfigIssue[] {
  let protocol: string | undefined
  try {
    protocol = new URL(url).protocol
  } catch {}
  if (protocol === 'amqp:' || protocol === 'amqps:') return []
  const shown = url.replace(/^([a-z][a-z0-9+.-]*:\/\/)?.*@/is, '$1…@')
  // The user info as written: after the scheme's '//', up to the last '@'.
  const userInfo = /^[a-z][a-z0-9+.-]*:\/\/(.*)@/is.exec(url)?.[1]
  const unescaped = userInfo !== undefined && /[/?#]/.test(userInfo)
  return [ConfigIssue.of('url', unescaped ? `${EXPECTED}${PERCENT_ENCODE}` : EXPECTED, shown)]
}
