/**
 * Boxed numbers, strings and booleans (`new Number(1)`, which untyped code may set in a field):
 * JSON writes each as the primitive it holds, so what identifies or merges a field's value takes
 * them as that primitive.
 */

/**
 * `value`, or, when it is a box, the primitive JSON writes for it (`new Number(2)`: 2). A number
 * box JSON writes as `null` because what it holds is not finite (`NaN`, `Infinity`) gives that
 * number, as the same number unboxed is given: read as `null`, which `sum`, `min` and `max` skip, a
 * boxed `NaN` left a group's sum a number where a `NaN` made it `NaN`. Anything else is returned
 * as it is, at the cost of a `typeof`.
 */
export function unboxed(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || !isBox(value)) return value
  try {
    // As JSON writes it (through its valueOf, as JSON.stringify reads a box), not by another rule.
    const written: unknown = JSON.parse(JSON.stringify(value))
    if (written !== null || typeof (value as { toJSON?: unknown }).toJSON === 'function') return written
    // The number JSON read from it (ToNumber, through its valueOf) before writing it as null.
    return holds(Number.prototype.valueOf, value) ? Number(value) : written
  } catch {
    // A valueOf or toJSON of its own that throws: JSON writes nothing; left as it is.
    return value
  }
}

/**
 * Whether JSON writes `value` as the primitive it holds: told as JSON tells it, by that value, not
 * by its prototype, so a box made in another realm (a `vm` context) is one (taken for an object
 * of no keys, `new Number(1)` and `new Number(2)` there made one key), and an object that only
 * inherits from `Number.prototype` is not. The tag names the box of any realm; an object that only
 * claims it (its own `Symbol.toStringTag`) is found out by the `valueOf` that refuses it, and a box
 * of a class that names itself (`class Cents extends Number` with a `Symbol.toStringTag`) by the
 * `valueOf` that takes it (taken for an object of no keys, 1 and 2 there made one key).
 */
export function isBox(value: object): boolean {
  switch (objectTag.call(value)) {
    case '[object Object]':
      // A plain object, a class instance, a Proxy: no box, and no valueOf tried.
      return false
    case '[object Number]':
      return holds(Number.prototype.valueOf, value)
    case '[object String]':
      return holds(String.prototype.valueOf, value)
    case '[object Boolean]':
      return holds(Boolean.prototype.valueOf, value)
    default:
      return (
        holds(Number.prototype.valueOf, value) ||
        holds(String.prototype.valueOf, value) ||
        holds(Boolean.prototype.valueOf, value)
      )
  }
}

const objectTag = Object.prototype.toString

/** Whether `value` holds the primitive `unbox` (a `valueOf`) reads: it throws for any other object. */
function holds(unbox: (this: unknown) => unknown, value: object): boolean {
  try {
    unbox.call(value)
    return true
  } catch {
    return false
  }
}
