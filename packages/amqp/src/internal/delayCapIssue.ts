/**
 * The check of a back-off's first delay against its cap, which the option schemas cannot make
 * (it reads two options).
 *
 * Invariant: a cap below the first delay is an issue naming the cap, as in the JetStream source
 * (`nakMaxMs`): every delay is the smaller of the two, so such a cap won silently (a 60 s
 * `retryInitialDelayMs` under the default 30 s `retryMaxDelayMs` held each errored message 30 s).
 *
 * @module
 */
import { ConfigIssue } from '@ackline/topology'

/** The issue of a cap (`maxField`) below its first delay (`initialField`); none when it holds it. */
export function delayCapIssue(
  initialField: string,
  initialDelayMs: number,
  maxField: string,
  maxDelayMs: number,
): ConfigIssue[] {
  return maxDelayMs < initialDelayMs
    ? [ConfigIssue.of(maxField, `at least ${initialField} (${initialDelayMs})`, maxDelayMs)]
    : []
}
