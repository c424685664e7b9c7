/**
 * A value as an error message shows it; never throws. Strings are quoted as JSON; a `BigInt` reads
 * `10n`; a value `String` cannot print (an object without a prototype, one whose `toString`
 * throws) reads as its tag (`[object Object]`).
 */
export function shown(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value)
  if (typeof value === 'bigint') return `${value}n`
  try {
    return String(value)
  } catch {
    try {
      return Object.prototype.toString.call(value)
    } catch {
      return 'a value that cannot be printed'
    }
  }
}
