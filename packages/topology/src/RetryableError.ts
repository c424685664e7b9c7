/**
 * @module
 */

/**
 * Thrown by a sink's `write` when delivery failed but may succeed later (a timeout, a 503, a
 * broker that went away). The runtime retries per the sink's retry policy, then settles the
 * events `errored` so their sources do not acknowledge them.
 *
 * @example
 * ```ts
 * if (response.status === 503) throw new RetryableError('file', 'service unavailable')
 * ```
 */
export class RetryableError extends Error {
  override readonly name = 'RetryableError'
  readonly code = 'RETRYABLE'

  constructor(
    /** The component that failed. */
    readonly component: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(`${component}: ${message}`, options)
  }
}
