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
 * did not end is gone. Batches are watched in groups of up to 64 created one after another (and
 * within 20 ms of each other), so a leak is found once every notifier of its group is
 * unreachable: a batch created next to a long-lived one is detected only after that one ends too.
 *
 * @module
 */
import { type Observable, Subject } from 'rxjs'
import type { BatchStatusReceiver } from './BatchStatusReceiver.js'
import type { BatchState } from './internal/BatchState.js'
import { closeFillingBlocks, forEachUnresolvedSlot, setSlotLeakReport } from './internal/slots.js'
import { addGroup, freeGroup, GROUP_SIZE, type Group, groups } from './internal/watchGroups.js'

/** One leaked batch: which source, which batch, and how many handles were never ended. */
export interface LeakReport {
  /** The id of the source that made the batch, if it had one. */
  readonly sourceId: string | undefined
  /** The batch's id, as its receiver and the lifecycle facts give it. */
  readonly batchId: string
  /** Handles collected without having ended (the source's own reference counts as one). */
  readonly handles: number
}

const subject = new Subject<LeakReport>()
let leakedHandles = 0
let warnings = true

/** Counts a leak, writes its process warning (unless turned off) and tells the subscribers. */
function reportLeak(sourceId: string | undefined, batchId: string, handles: number): void {
  leakedHandles += handles
  const leak: LeakReport = { sourceId, batchId, handles }
  if (warnings) {
    process.emitWarning(
      `${leak.handles} event handle(s) of batch ${leak.batchId} from source ${leak.sourceId ?? 'unknown'} were garbage collected without having ended; settled as errored`,
      { code: 'ACKLINE_LEAK' },
    )
  }
  subject.next(leak)
}

const report = (state: BatchState, handles: number): void => reportLeak(state.sourceId, state.id, handles)

/**
 * Batches are watched in groups of up to {@link GROUP_SIZE} created one after another, with one
 * registration per group rather than per batch (a registration costs about as much as the rest
 * of a batch's bookkeeping, and weak cells slow every collection). The registry watches a token
 * that every notifier of the group holds, so the token is collected once every notifier of the
 * group is; its held value is the group's number in a table of groups (see `watchGroups.ts`),
 * whose list of batches each batch leaves when it resolves normally. What is left in the list
 * when the token is collected leaked. (A batch left in its list after it resolved would be kept
 * until its group's token is found collected: batches then outlive young collections, which costs
 * more than the field that lets a batch leave.)
 */

/**
 * The groups whose token has not been collected: every batch not resolved yet is in one of them
 * (its notifier is alive, or its leak is about to be reported), which is how a runtime finds the
 * batches still pending when it must give up on them (`LeakDetector.forEachUnresolved`).
 */
const liveGroups = new Set<Group>()

const registry = new FinalizationRegistry<number>((id) => {
  const group = groups[id]!
  // Leaked batches resolve (and leave the group) before the group's number is given back.
  for (const state of group) state?.leak(report)
  liveGroups.delete(group)
  freeGroup(id)
})

/**
 * How long a group stays open at most, in ms. The open group's token is held strongly (reading a
 * weak reference on every batch costs more than the rest of the batch's bookkeeping), so a leak
 * in the open group can be found only once the group is closed: when it is full, or this long
 * after it was opened, whichever comes first. The timer is unreferenced (it never keeps a
 * process alive) and is armed only while groups are being opened.
 */
const OPEN_GROUP_MS = 20
/** The timer functions as the process had them when this module loaded (fake timers in tests must not hold a group open). */
const realSetTimeout = globalThis.setTimeout

let openToken: object | undefined
let openGroup: Group = []
/** The open group's number (see `watchGroups.ts`). */
let openId = 0
/** Batches in the open group so far. */
let openCount = 0
let closing = false
const closeOpenGroup = (): void => {
  openToken = undefined
  closing = false
  closeFillingBlocks()
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

  /**
   * Closes the group of batches being filled now (and every source's block of slot batches, see
   * `SlotBatches`), as if its 20 ms had passed: a leak in it can then be found at the next
   * collection. For tests that force collections (`--expose-gc`) and
   * must not wait on the clock; a running program never needs it.
   */
  closeGroup(): void {
    openToken = undefined
    closeFillingBlocks()
  },

  /** @internal Starts watching a notifier whose state is `state`. */
  watch(notifier: { _watched: object | undefined }, state: BatchState): void {
    let token = openToken
    if (token === undefined || openCount >= GROUP_SIZE) {
      token = {}
      openGroup = new Array<BatchState | undefined>(GROUP_SIZE)
      openId = addGroup(openGroup)
      openCount = 0
      openToken = token
      registry.register(token, openId)
      liveGroups.add(openGroup)
      LeakDetector._arm()
    }
    notifier._watched = token
    state.watch = openId * GROUP_SIZE + openCount
    openGroup[openCount++] = state
  },

  /**
   * Calls `visit` with the receiver of every batch of this process not resolved yet: those with
   * notifiers oldest group first, then those kept as slots (`SlotBatches`), each given a receiver
   * (a `BatchState`) for the visit, which it keeps. `visit` may resolve batches. For a runtime
   * that must give up on every batch it still tracks (a stop's deadline) without keeping a list of
   * them: it costs a pass over every batch whose group or block is alive (resolved ones included),
   * so it belongs on no per-batch path.
   */
  forEachUnresolved(visit: (receiver: BatchStatusReceiver) => void): void {
    for (const group of [...liveGroups]) {
      for (const state of group) if (state !== undefined && !state.resolved) visit(state)
    }
    // Batches kept as slots (`SlotBatches`) get a receiver made for them here.
    forEachUnresolvedSlot(visit)
  },

  /** @internal Arms the open group's closing timer (a block of slot batches was opened). */
  _arm(): void {
    if (!closing) {
      closing = true
      realSetTimeout(closeOpenGroup, OPEN_GROUP_MS).unref()
    }
  },
}

setSlotLeakReport(reportLeak, report)
