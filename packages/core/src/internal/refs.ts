/**
 * Operations on the reference a handle holds to its finalizers.
 *
 * A reference is `undefined` (no finalizers: acknowledgements off, or moved out), a
 * `BatchNotifier` plus a slot number (the compact form every event starts with: no object per
 * event), or an `EventFinalizers` set (after a merge, or once someone asked for the set), marked by
 * the slot number {@link SET}. Holding a reference means holding one live reference on every batch
 * it names. The slot number, not `instanceof`, tells those forms apart: it keeps the hot path free
 * of type checks. A handle may also hold a block's token (`SlotChunk`, a batch kept as a slot,
 * see `slots.ts`); `LogEvent` moves it to its batch's notifier before any of these operations, so
 * only `endEach`, which counts runs of such handles down on the block, ever sees one.
 */
import type { BatchNotifier } from '../BatchNotifier.js'
import { EventFinalizers } from '../EventFinalizers.js'
import type { LogEvent } from '../LogEvent.js'
import { enterEnd, leaveEnd } from './endClock.js'
import { SlotChunk } from './slots.js'
import { OUTCOME_UPDATE } from './statusCodes.js'

export type Ref = BatchNotifier | EventFinalizers | undefined

/** The slot number of a reference that is an `EventFinalizers` set. */
export const SET = -1

/** A second handle on the same finalizers (what a clone holds). */
export function retainRef(ref: Ref, slot: number): void {
  if (ref === undefined) return
  if (slot !== SET) {
    ;(ref as BatchNotifier)._state.retain()
    return
  }
  const set = ref as EventFinalizers
  set._owned = false // two handles share it now: a merge into either must copy
  for (let i = 0; i < set._notifiers.length; i++) set._notifiers[i]!._state.retain()
}

/** Ends one handle: folds `code` (when `>= 0`) into every batch and gives up its live reference on each. */
export function releaseRef(ref: Ref, slot: number, code: number): void {
  if (ref === undefined) return
  if (slot !== SET) {
    ;(ref as BatchNotifier)._state.release(slot, code)
    return
  }
  const set = ref as EventFinalizers
  for (let i = 0; i < set._notifiers.length; i++) set._notifiers[i]!._state.release(set._slots[i]!, code)
}

/** Folds `code` into every batch without ending the handle. */
function updateRef(ref: Ref, slot: number, code: number): void {
  if (ref === undefined) return
  if (slot !== SET) {
    ;(ref as BatchNotifier)._state.update(slot, code)
    return
  }
  const set = ref as EventFinalizers
  for (let i = 0; i < set._notifiers.length; i++) set._notifiers[i]!._state.update(set._slots[i]!, code)
}

/** Marks the event recorded in every batch: what it reported so far stays, later reports are ignored. */
function recordRef(ref: Ref, slot: number): void {
  if (ref === undefined) return
  if (slot !== SET) (ref as BatchNotifier)._state.record(slot)
  else (ref as EventFinalizers).updateSources()
}

/** Offers `reason` for `code` to every batch of the reference (see `BatchState.explain`). */
export function explainRef(ref: Ref, slot: number, code: number, reason: unknown): void {
  if (ref === undefined || ref === null) return
  if (slot !== SET) {
    ;(ref as BatchNotifier)._state.explain(slot, code, reason)
    return
  }
  const set = ref as EventFinalizers
  for (let i = 0; i < set._notifiers.length; i++)
    set._notifiers[i]!._state.explain(set._slots[i]!, code, reason)
}

/**
 * Ends one handle with a status code (or none: `code < 0`). Authoritatively, the status is folded
 * in and the event marked recorded first, so what its other copies report later is ignored.
 */
export function endRef(ref: Ref, slot: number, code: number, authoritative: boolean): void {
  if (authoritative && code >= 0) {
    updateRef(ref, slot, code)
    recordRef(ref, slot)
    releaseRef(ref, slot, -1)
  } else {
    releaseRef(ref, slot, code)
  }
}

export function asSet(ref: Ref, slot: number): EventFinalizers {
  if (ref === undefined) return EventFinalizers.EMPTY
  if (slot !== SET) return new EventFinalizers([ref as BatchNotifier], [slot])
  return ref as EventFinalizers
}

/**
 * One set holding what both `a` and `b` held (both defined). A pair present in both is kept once,
 * and `b`'s count on it is given up at once: `a` still holds it, so that never resolves anything.
 */
export function mergeRefs(a: Ref, aSlot: number, b: Ref, bSlot: number): EventFinalizers {
  let into: EventFinalizers
  if (aSlot === SET && (a as EventFinalizers)._owned) {
    into = a as EventFinalizers // only this handle holds it: grow it in place
  } else {
    const seed = asSet(a, aSlot)
    into = new EventFinalizers([...seed._notifiers], [...seed._slots])
    into._owned = true
  }
  if (bSlot !== SET) {
    mergePair(into, b as BatchNotifier, bSlot)
  } else {
    const from = b as EventFinalizers
    for (let i = 0; i < from._notifiers.length; i++) mergePair(into, from._notifiers[i]!, from._slots[i]!)
  }
  return into
}

function mergePair(into: EventFinalizers, notifier: BatchNotifier, slot: number): void {
  if (into._has(notifier, slot)) notifier._state.release(slot, -1)
  else into._push(notifier, slot)
}

/**
 * Ends one handle of every event, in order, all with the same code (never authoritatively). A run
 * of events that hold the same notifier in compact form is released with one update of the batch,
 * which is what a source's batch reaching a sink whole looks like. An ended handle throws as
 * `end` would, after every handle before it has ended.
 */
export function endRuns(events: readonly LogEvent[], code: number): void {
  enterEnd()
  try {
    endEach(events, code)
  } finally {
    leaveEnd()
  }
}

function endEach(events: readonly LogEvent[], code: number): void {
  const n = events.length
  let i = 0
  while (i < n) {
    const event = events[i]!
    const ref = event._ref
    if (ref === undefined) {
      // No finalizers (acknowledgements off): ending only ends the handle.
      event._ref = null
      i++
      continue
    }
    if (ref instanceof SlotChunk) {
      // Events of batches kept as slots, as long as they hold this block's token: counted down
      // on the block, run by run; a batch's state's path once it has one.
      const j = ref._block._endRuns(events, i, code, ref)
      if (j === i) event._unslot(ref) // then the same event again, now holding the notifier
      i = j
      continue
    }
    if (ref !== null && event._slot !== SET) {
      const notifier = ref as BatchNotifier
      const state = notifier._state
      const rare = state.rare
      if (rare === undefined || rare.recorded === undefined) {
        const outcomes = code >= 0 ? rare?.outcomeCodes : undefined
        let j = i
        for (; j < n; j++) {
          const next = events[j]!
          if (next._ref !== notifier || next._slot === SET) break
          next._ref = null
          if (outcomes !== undefined) outcomes[next._slot] = OUTCOME_UPDATE[outcomes[next._slot]! * 5 + code]!
        }
        state.releaseRun(j - i, code)
        i = j
        continue
      }
    }
    event._end(code, false)
    i++
  }
}
