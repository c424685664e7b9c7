/**
 * The `onWarning` option of a component made safe to call from anywhere: a client library's event
 * handlers, timers, the paths that settle deliveries (the AMQP and NATS connectors, the observable
 * source use it; a connector of your own can too).
 *
 * Invariant: the returned function never throws and never leaves a rejected promise behind. A
 * user's `onWarning` that throws (or, from untyped code, returns a promise that rejects) must not
 * become an uncaught exception inside a socket's 'close' handler, nor cut short what follows the
 * warning (a reconnect, an ack): the warning then goes to `process.emitWarning`, with what the
 * callback threw.
 */
import { textOf } from './textOf.js'

/**
 * `onWarning`, or `process.emitWarning` with `code` when unset, wrapped so it cannot throw.
 * `component` names the component in the fallback warning, and `field` the option the callback
 * was given as (`'onWarning'` unless told otherwise, such as the file source's `'onNotice'`).
 *
 * @example
 * ```ts
 * const warn = warningsTo(options.onWarning, context.id, 'ACKLINE_MY_SOURCE')
 * warn('lost the connection; reconnecting') // never throws, whatever onWarning does
 * ```
 */
export function warningsTo(
  onWarning: ((message: string) => void) | undefined,
  component: string,
  code: string,
  field = 'onWarning',
): (message: string) => void {
  const emit = (message: string): void => {
    try {
      process.emitWarning(message, { code })
    } catch {
      // Nowhere left to report to; what follows the warning must still run.
    }
  }
  const fallBack = (message: string, error: unknown): void =>
    emit(`${message} (the ${field} of ${component} failed on it: ${textOf(error)})`)
  if (onWarning === undefined) return emit
  return (message) => {
    try {
      const result: unknown = onWarning(message)
      if (typeof (result as PromiseLike<unknown> | undefined)?.then === 'function') {
        ;(result as PromiseLike<unknown>).then(undefined, (error: unknown) => fallBack(message, error))
      }
    } catch (error) {
      fallBack(message, error)
    }
  }
}
