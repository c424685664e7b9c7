/**
 * Handles the rejection of a promise a transform refuses (what an `async` user function returned):
 * nobody else will ever await it, and an unhandled rejection ends a Node.js process. Never throws,
 * whatever the thenable's `then` does.
 */
export function ignoreRejection(thenable: unknown): void {
  try {
    ;(thenable as PromiseLike<unknown>).then(undefined, ignore)
  } catch {
    // A `then` that throws has no rejection to leave unhandled.
  }
}

function ignore(): void {}
