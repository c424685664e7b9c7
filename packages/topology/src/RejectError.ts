/**
 * @module
 */

/**
 * Thrown by a sink's `write` when the events can never be delivered (a 400 from the service, a
 * record too large). The runtime settles them `rejected` at once, with no retry.
 *
 * @example
 * ```ts
 * if (response.status === 400) throw new RejectError('http', 'the service refused the body')
 * ```
 */
export class RejectError extends Error {
  override readonly name = 'RejectError'
  readonly code = 'REJECTED'

  constructor(
    /** The component that refused. */
    readonly component: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(`${component}: ${message}`, options)
  }
}
