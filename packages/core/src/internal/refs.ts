/**
 * Operations on the reference a handle holds to its finalizers.
 *
 * A reference is `undefined` (no finalizers: acknowledgements off, or moved out), a
 * `BatchNotifier` plus a slot number (the compact form every event starts with: no object per
 * event), or an `EventFinalizers` set (after a merge, or once someone asked for the set). Holding
 * a reference means holding one handle count in every slot it names.
 */
import { BatchNotifier } from '../BatchNotifier.js'
import { EventFinalizers } from '../EventFinalizers.js'

export type Ref = BatchNotifier | EventFinalizers | undefined

/** A second handle on the same finalizers (what a clone holds). */
export function retainRef(ref: Ref, slot: number): void {
  if (ref === undefined) return
  if (ref instanceof BatchNotifier) {
    ref._state.retain(slot)
    return
  }
  for (let i = 0; i < ref._notifiers.length; i++) ref._notifiers[i]!._state.retain(ref._slots[i]!)
}

/** Ends one handle: folds `code` (when `>= 0`) and gives up the handle count in every slot. */
export function releaseRef(ref: Ref, slot: number, code: number): void {
  if (ref === undefined) return
  if (ref instanceof BatchNotifier) {
    ref._state.release(slot, code)
    return
  }
  for (let i = 0; i < ref._notifiers.length; i++) ref._notifiers[i]!._state.release(ref._slots[i]!, code)
}

/** Folds `code` into every slot's status without ending the handle. */
export function updateRef(ref: Ref, slot: number, code: number): void {
  if (ref === undefined) return
  if (ref instanceof BatchNotifier) {
    ref._state.update(slot, code)
    return
  }
  for (let i = 0; i < ref._notifiers.length; i++) ref._notifiers[i]!._state.update(ref._slots[i]!, code)
}

/** Sends the current status of every slot to its batch now and marks the slots recorded. */
export function recordRef(ref: Ref, slot: number): void {
  if (ref === undefined) return
  if (ref instanceof BatchNotifier) ref._state.record(slot)
  else ref.updateSources()
}

export function asSet(ref: Ref, slot: number): EventFinalizers {
  if (ref === undefined) return EventFinalizers.EMPTY
  if (ref instanceof BatchNotifier) return new EventFinalizers([ref], [slot])
  return ref
}

/**
 * One reference holding what both `a` and `b` held. A pair present in both is kept once, and
 * `b`'s count on it is given up at once: `a` still holds it, so that never resolves anything.
 */
export function mergeRefs(
  a: Ref,
  aSlot: number,
  b: Ref,
  bSlot: number,
): EventFinalizers | BatchNotifier | undefined {
  if (b === undefined) return a
  if (a === undefined) return b
  const into = asSet(a, aSlot)
  const from = asSet(b, bSlot)
  const notifiers = [...into._notifiers]
  const slots = [...into._slots]
  for (let i = 0; i < from._notifiers.length; i++) {
    const notifier = from._notifiers[i]!
    const s = from._slots[i]!
    if (into._has(notifier, s)) {
      notifier._state.release(s, -1)
    } else {
      notifiers.push(notifier)
      slots.push(s)
    }
  }
  return new EventFinalizers(notifiers, slots)
}
