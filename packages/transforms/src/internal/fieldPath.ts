/**
 * The option schema of a field path (`"http.status"`, `"tags.0"`), as `LogEvent.get` and `set`
 * read it: keys joined by dots. Every transform option that names fields takes it, so a path
 * that names a key no one means is refused at build, in one wording, naming the option.
 *
 * Invariant: a path is accepted exactly when none of its keys is empty. `LogEvent` reads an empty
 * key as the key `""`: `'a..b'` wrote `a[""].b`, `'a.'` wrote `a[""]` and `''` wrote a
 * top-level `""`, where the user meant another field (a typo).
 */
import { z } from 'zod'

/** What a field path must be, in the words of a config issue (`must be …, got 'a..b'`). */
export const FIELD_PATH = 'a field path: keys joined by dots, with no empty key'

/** Whether `path` names no empty key (see the module header). */
export function isFieldPath(path: string): boolean {
  return path.split('.').every((key) => key !== '')
}

/**
 * The schema of a field path option (see the module header). The refinement words the issue; the
 * length and the pattern say the same rule in the JSON Schema of config files.
 */
export const fieldPath = z
  .string()
  .refine(isFieldPath, FIELD_PATH)
  .min(1)
  .regex(/^[^.]+(\.[^.]+)*$/)
