/**
 * The check of the broker URL, made at build: amqplib connects only with a URL that `new URL`
 * parses and whose protocol is `amqp:` or `amqps:`, and throws on any other at every connect.
 *
 * Invariant: a URL amqplib would refuse is an issue naming `url`, and the issue never shows the
 * URL's credentials: everything up to its last `@` is left out, whether it parses or not (a
 * password holding a `/` is no longer in the URL's user info once parsed).
 *
 * @module
 */
import { ConfigIssue } from '@ackline/topology'

/** The issue of a `url` amqplib cannot connect with; none when it can. */
export function urlIssue(url: string): ConfigIssue[] {
  let protocol: string | undefined
  try {
    protocol = new URL(url).protocol
  } catch {}
  if (protocol === 'amqp:' || protocol === 'amqps:') return []
  const shown = url.replace(/^([a-z][a-z0-9+.-]*:\/\/)?.*@/is, '$1…@')
  return [
    ConfigIssue.of(
      'url',
      'an AMQP URL, amqp:// or amqps:// and the server (amqp://user:password@host:5672/vhost)',
      shown,
    ),
  ]
}
