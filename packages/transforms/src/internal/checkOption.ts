/**
 * Checks of option values shared by the transforms, each returning `ConfigIssue`s that name the
 * field, so `validate()` reports every problem at once instead of throwing at the first.
 */
import type { ConfigIssue } from '@ackline/topology'

const show = (value: unknown): string =>
  typeof value === 'function' ? 'a function' : (JSON.stringify(value) ?? String(value))

export const checkOption = {
  /** `value` is a function. */
  isFunction(field: string, value: unknown): ConfigIssue[] {
    return typeof value === 'function' ? [] : [{ field, message: `must be a function, got ${show(value)}` }]
  },

  /** `value` is unset or an integer of at least `min`. */
  integerAtLeast(field: string, value: unknown, min: number): ConfigIssue[] {
    if (value === undefined) return []
    return Number.isSafeInteger(value) && (value as number) >= min
      ? []
      : [{ field, message: `must be an integer of at least ${min}, got ${show(value)}` }]
  },

  /** `value` is an array of non-empty field paths (at least `min` of them). */
  fieldPaths(field: string, value: unknown, min: number): ConfigIssue[] {
    if (!Array.isArray(value))
      return [{ field, message: `must be an array of field paths, got ${show(value)}` }]
    const issues: ConfigIssue[] = []
    if (value.length < min) issues.push({ field, message: `must name at least ${min} field path(s)` })
    value.forEach((path, i) => {
      if (typeof path !== 'string' || path === '') {
        issues.push({ field: `${field}.${i}`, message: `must be a non-empty field path, got ${show(path)}` })
      }
    })
    return issues
  },
} as const
