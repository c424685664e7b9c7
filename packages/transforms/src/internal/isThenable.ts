/**
 * Whether `value` is a promise (or any thenable): what an `async` user function returns. Never
 * throws: a value whose `then` cannot be read (a Proxy whose `get` trap throws, a revoked Proxy)
 * is no promise anyone can await, and a user function's bad answer must fail as the transform's
 * own error, not as what reading it threw.
 */
export function isThenable(value: unknown): boolean {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return false
  try {
    return typeof (value as { then?: unknown }).then === 'function'
  } catch {
    return false
  }
}
