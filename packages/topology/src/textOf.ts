/**
 * A value some component threw (or returned), as text for a message: what `String(value)` makes
 * of it (`'Error: boom'` for an error). Never throws: `String` throws for an object without a
 * prototype (`Object.create(null)`) or whose `toString` throws, and a message built in a catch
 * block must not turn one component's failure into a runner's (or a sink's into a wrong status).
 *
 * @example
 * ```ts
 * try { await send() } catch (error) { warn(`send failed: ${textOf(error)}`) }
 * ```
 */
export function textOf(value: unknown): string {
  try {
    return String(value)
  } catch {
    return 'a value that cannot be converted to a string'
  }
}
