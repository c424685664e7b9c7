/**
 * @module
 */
import { ComponentError, type ComponentErrorOptions } from './ComponentError.js'

/**
 * Thrown by a sink's `write` when the events can never be delivered (a 400 from the service, a
 * record too large). The runtime settles them `rejected` at once, with no retry.
 *
 * @example
 * ```ts
 * if (response.status === 400) throw new RejectError('http', 'the service refused the body')
 * ```
 */
export class RejectError extends ComponentError<'REJECTED'> {
  override readonly name = 'RejectError'

  /** `component` is the sink that refused; `options` may name the field and carry the `cause`. */
  constructor(component: string, message: string, options?: Omit<ComponentErrorOptions, 'component'>) {
    super('REJECTED', message, { ...options, component })
  }
}
