/**
 * The errors the RabbitMQ connector throws on purpose.
 *
 * Invariant: every one is a `ComponentError` naming the component (its id, or `amqp` before it has
 * one) and, where one is concerned, the option (`url`, `queue`, `exchange`); its `code` says what
 * failed and the underlying client error is its `cause`, except for a connect to a `url` whose
 * credentials did not parse as such, whose client error would show the password (none then).
 *
 * @module
 */
import { ComponentError, type ComponentErrorOptions } from '@ackline/topology'

/** What went wrong: connecting (refused credentials, unreachable broker) or a missing/wrong declaration. */
export type AmqpErrorCode = 'AMQP_CONNECT_FAILED' | 'AMQP_DECLARATION_FAILED'

/**
 * An error of the RabbitMQ source or sink.
 *
 * @example
 * ```ts
 * try { await topology.start() } catch (error) {
 *   if (error instanceof AmqpError && error.code === 'AMQP_CONNECT_FAILED') console.error(error.message)
 *   // "orders (url): cannot connect to amqp://guest@127.0.0.1:5672: … ACCESS_REFUSED …"
 * }
 * ```
 */
export class AmqpError extends ComponentError<AmqpErrorCode> {
  /** `'AmqpError'`, so a log or `instanceof`-less check tells it from other component errors. */
  override readonly name = 'AmqpError'

  constructor(code: AmqpErrorCode, message: string, options: ComponentErrorOptions) {
    super(code, message, options)
  }
}
