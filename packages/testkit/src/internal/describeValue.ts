// A value a component under test gave (a record read back from its store, pulled from its buffer,
// emitted by its transform), as text for a failure message. It may be no JSON at all (a BigInt a
// driver read a column as, a cycle): `JSON.stringify` throws on those, and the failure it was
// to describe became "the check threw", hiding what the component did.
import { inspect } from 'node:util'

/** `JSON.stringify(value)`, or what `inspect` shows where that throws or gives nothing. */
export function describeValue(value: unknown): string {
  try {
    const json = JSON.stringify(value)
    if (json !== undefined) return json
  } catch {}
  try {
    return inspect(value, { depth: 4, breakLength: Number.POSITIVE_INFINITY })
  } catch {
    return 'a value that cannot be printed'
  }
}
