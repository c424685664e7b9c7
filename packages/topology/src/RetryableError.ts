/**
 * @module
 */
import { ComponentError, type ComponentErrorOptions } from './ComponentError.js'

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
export class RetryableError extends ComponentError<'RETRYABLE'> {
  override readonly name = 'RetryableError'

  /** `component` is the sink that failed; `options` may name the field and carry the `cause`. */
  constructor(component: string, message: string, options?: Omit<ComponentErrorOptions, 'component'>) {
    super('RETRYABLE', message, { ...options, component })
  }
}
