/**
 * The one base of every error ackline throws on purpose.
 *
 * Invariant: an ackline error always carries a stable `code` for programs to match on, a `name`
 * naming its class, and, where it is about one, the component id and the field of that
 * component's declaration or options; the underlying failure, if any, is its standard `cause`.
 * Anything thrown by ackline that is not a `ComponentError` is a bug in ackline.
 *
 * @module
 */

/**
 * What a {@link ComponentError} is about, besides its message. Every member is optional: an error
 * that concerns the whole topology has no component, one about a failed write has no field.
 *
 * @example
 * ```ts
 * new RetryableError('kafka', 'broker went away', { cause: socketError })
 * ```
 */
export interface ComponentErrorOptions extends ErrorOptions {
  /** The id of the component concerned (`"archive"`), or its kind where it has no id yet. */
  readonly component?: string | undefined
  /** The field of the component's declaration or options (`"buffer.maxEvents"`). */
  readonly field?: string | undefined
}

/**
 * An error about a component: a stable `code`, the component and the field concerned, the
 * `cause`. `RejectError`, `RetryableError` and `TopologyError` extend it; so should the errors of
 * third-party sources, sinks, transforms and buffers, so one `instanceof ComponentError` catches
 * every error ackline or a plugin throws on purpose.
 *
 * The message names the component (and field) in front of the text given, so a log line reads on
 * its own: `archive (path): cannot open`.
 *
 * @example
 * ```ts
 * class QuotaError extends ComponentError<'QUOTA'> {
 *   override readonly name = 'QuotaError'
 *   constructor(component: string, used: number) {
 *     super('QUOTA', `quota used up (${used} bytes)`, { component, field: 'quotaBytes' })
 *   }
 * }
 * try { ... } catch (error) {
 *   if (error instanceof ComponentError) console.error(error.code, error.component, error.field)
 * }
 * ```
 */
export class ComponentError<Code extends string = string> extends Error {
  /** The error's class name (`'ComponentError'`, or a subclass's own), so a log tells them apart. */
  override readonly name: string = 'ComponentError'
  /** A stable code for programs to match on (`"REJECTED"`, `"INVALID_TOPOLOGY"`). */
  readonly code: Code
  /** The id of the component concerned; `undefined` when the error is about no single component. */
  readonly component: string | undefined
  /** The field concerned; `undefined` when the error is about no single field. */
  readonly field: string | undefined

  constructor(code: Code, message: string, options: ComponentErrorOptions = {}) {
    const { component, field, ...errorOptions } = options
    super(ComponentError.describe(component, field, message), errorOptions)
    this.code = code
    this.component = component
    this.field = field
  }

  /** The message as thrown: `component (field): text`, with what is unknown left out. */
  static describe(component: string | undefined, field: string | undefined, message: string): string {
    if (component === undefined) return field === undefined ? message : `${field}: ${message}`
    return field === undefined ? `${component}: ${message}` : `${component} (${field}): ${message}`
  }
}
