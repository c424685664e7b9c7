// What a user's callback threw, as text for a failure message. Anything may be thrown: an object
// without a prototype or with a throwing `toString` makes `String()` throw, which inside an event
// handler is an uncaught exception, and inside a check a rejection that hides the real failure.
import { inspect } from 'node:util'

/** `String(value)` (an `Error`'s message alone with `messageOnly`), or what `inspect` shows when that throws. */
export function describeThrown(value: unknown, messageOnly = false): string {
  try {
    return messageOnly && value instanceof Error ? String(value.message) : String(value)
  } catch {
    try {
      return inspect(value, { depth: 2, breakLength: Number.POSITIVE_INFINITY })
    } catch {
      return 'a value that cannot be printed'
    }
  }
}
