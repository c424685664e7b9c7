/**
 * Expands the file source's include patterns. A pattern's directory is taken literally; its last
 * segment may hold `*` (any run of characters) and `?` (one character). Exclude patterns are
 * matched against whole paths with the same two wildcards, `*` not crossing a `/`.
 */
import { readdir } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'

const toRegExp = (pattern: string): RegExp =>
  new RegExp(
    `^${pattern
      .split('')
      .map((c) => (c === '*' ? '[^/]*' : c === '?' ? '[^/]' : c.replace(/[.+^${}()|[\]\\]/g, '\\$&')))
      .join('')}$`,
  )

/** Whether a pattern's directory holds a wildcard (not supported). */
export const hasWildcardDirectory = (pattern: string): boolean => /[*?]/.test(dirname(pattern))

/**
 * Every existing path that an include pattern matches and no exclude pattern does, sorted.
 * A directory that is missing or unreadable matches nothing (it may appear later).
 */
export async function matchFiles(include: readonly string[], exclude: readonly string[]): Promise<string[]> {
  const excluded = exclude.map((p) => toRegExp(resolve(p)))
  const out = new Set<string>()
  for (const pattern of include) {
    const absolute = resolve(pattern)
    const directory = dirname(absolute)
    const name = toRegExp(basename(absolute))
    let entries: string[]
    try {
      entries = await readdir(directory)
    } catch {
      continue
    }
    for (const entry of entries) {
      const path = join(directory, entry)
      if (name.test(entry) && !excluded.some((e) => e.test(path))) out.add(path)
    }
  }
  return [...out].sort()
}
