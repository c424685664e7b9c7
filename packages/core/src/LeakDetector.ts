/**
 * Detection of events that were garbage collected without having ended.
 *
 * Invariant: correctness never depends on garbage collection. Every handle must end explicitly;
 * this module only notices when one did not. When a batch notifier is collected while references
 * to it are outstanding, every outstanding share is settled `errored` (a leaked event is never
 * acknowledged as delivered), the leak is counted, reported on {@link LeakDetector.leaks} and
 * written as a process warning with code `ACKLINE_LEAK`.
 *
 * Every live handle holds its notifier, so the notifier is collected only once every handle that
 * did not end is gone: detection happens per batch, after the last live handle ended.
 *
 * @module
 */
import { type Observable, Subject } from 'rxjs'
import type { BatchState } from './internal/BatchState.js'

/** One leaked batch: which source, which batch, and how many handles were never ended. */
export interface LeakReport {
  readonly sourceId: string | undefined
  readonly batchId: string
  /** Handles collected without having ended (the source's own reference counts as one). */
  readonly handles: number
}

const subject = new Subject<LeakReport>()
let leakedHandles = 0
let warnings = true

const report = (state: BatchState, handles: number): void => {
  leakedHandles += handles
  const leak: LeakReport = { sourceId: state.sourceId, batchId: state.id, handles }
  if (warnings) {
    process.emitWarning(
      `${handles} event handle(s) of batch ${state.id} from source ${state.sourceId ?? 'unknown'} were garbage collected without having ended; settled as errored`,
      { code: 'ACKLINE_LEAK' },
    )
  }
  subject.next(leak)
}

const registry = new FinalizationRegistry<BatchState>((state) => state.leak(report))

const unwatch = (state: BatchState): void => {
  registry.unregister(state)
}

/**
 * Observes leaks of event handles. Only detects: a program that ends every handle never sees it.
 *
 * @example
 * ```ts
 * LeakDetector.leaks.subscribe((leak) => metrics.increment('leaked', leak.handles))
 * ```
 */
export const LeakDetector = {
  /** Every leak found, as it is found. */
  leaks: subject.asObservable() as Observable<LeakReport>,

  /** Handles found leaked since the process started. */
  get count(): number {
    return leakedHandles
  },

  /** Turns the process warning for each leak on or off (it is on by default). */
  setWarnings(enabled: boolean): void {
    warnings = enabled
  },

  /** @internal Starts watching a notifier whose state is `state`. */
  watch(notifier: object, state: BatchState): void {
    state.unwatch = unwatch
    registry.register(notifier, state, state)
  },
}
