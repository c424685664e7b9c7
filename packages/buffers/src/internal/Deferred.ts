/**
 * A promise with its `resolve` at hand, for answers given from another place than the one that
 * waits (a write group answering its appends, a reader woken by a write).
 *
 * @module
 */

/** A promise and the function that resolves it; resolving twice keeps the first value. */
export interface Deferred<T> {
  readonly promise: Promise<T>
  readonly resolve: (value: T) => void
}

/** A new pending {@link Deferred}. */
export const deferred = <T>(): Deferred<T> => {
  let resolve!: (value: T) => void
  const promise = new Promise<T>((r) => {
    resolve = r
  })
  return { promise, resolve }
}
