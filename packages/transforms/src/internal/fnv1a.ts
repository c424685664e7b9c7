/**
 * FNV-1a, 32 bits, over UTF-16 code units: a fast, stable hash so `sample` keeps the same keys in
 * every process and every run. Not for anything adversarial.
 */

/** The unsigned 32-bit FNV-1a hash of `text`. */
export function fnv1a(text: string): number {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193)
  }
  return hash >>> 0
}
