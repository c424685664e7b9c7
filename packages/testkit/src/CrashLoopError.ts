/**
 * The error a {@link crashLoop} throws when a run cannot be checked (a child that exits on its
 * own, reports nothing, or never finishes) or when a check fails (what a child reported delivered
 * is missing afterwards). It names the round and the seed, so the run can be replayed.
 *
 * @module
 */

/** What went wrong in a crash loop. */
export type CrashLoopErrorCode =
  /** The child could not be started. */
  | 'SPAWN_FAILED'
  /**
   * The child exited before the loop killed or stopped it (a killed round's child that said its
   * input was finished, `CrashReporter.finished()`, and exited with code 0 is not a failure).
   */
  | 'CHILD_EXITED'
  /**
   * No round was killed: every child said its input was finished and exited on its own first (the
   * input is smaller than the kill points), so nothing was crash-tested.
   */
  | 'NO_KILL'
  /** The last run exited with a failure (a non-zero code, or a signal other than the stop). */
  | 'CHILD_FAILED'
  /** A child reported nothing new for `stallMs` before it reached its kill point. */
  | 'NO_PROGRESS'
  /**
   * The child exited, but its output stayed open for `stallMs`: a process it started outside its
   * process group holds it, which no kill of the loop reaches.
   */
  | 'OUTPUT_HELD'
  /** The last run did not finish (or stop) within its `timeoutMs`. */
  | 'LAST_RUN_TIMEOUT'
  /** A line started with the report marker but did not follow the protocol. */
  | 'BAD_REPORT'
  /** `last.until` or `onOutput` threw. */
  | 'CALLBACK_FAILED'
  /** Keys a child reported were missing afterwards (`CrashLoopReport.expectNoLoss`). */
  | 'LOST'
  /**
   * `CrashLoopReport.expectNoLoss` found no key reported under its kind (the child reported
   * counts without keys, or the kind is misspelt): there was nothing to check.
   */
  | 'NOTHING_CHECKED'

/**
 * A crash loop that could not run, or a loss it found.
 *
 * @example
 * ```ts
 * try { await crashLoop(options) } catch (e) { if (e instanceof CrashLoopError) console.log(e.code, e.seed) }
 * ```
 */
export class CrashLoopError extends Error {
  /** `'CrashLoopError'`, so a test report tells it from other errors. */
  override readonly name = 'CrashLoopError'

  constructor(
    /** What went wrong. */
    readonly code: CrashLoopErrorCode,
    /** The round it happened in (0-based; the last run is round `rounds`), or `undefined` after the loop. */
    readonly round: number | undefined,
    /** The loop's seed: pass it as `seed` to replay the same kill points. */
    readonly seed: number,
    message: string,
    /** The child's process id (killed by then), when the error is about one child. */
    readonly pid?: number,
  ) {
    super(
      `crashLoop ${code}${round === undefined ? '' : ` in round ${round}`}${pid === undefined ? '' : ` (pid ${pid})`} (seed ${seed}): ${message}`,
    )
  }
}
