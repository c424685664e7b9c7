/**
 * The leak detector's groups of batches, by number, so a batch finds its place in its group from
 * one small integer (`BatchState.watch`) and leaves it when it resolves: one field per batch,
 * where a reference to the group and an index would be two.
 *
 * Invariant: a group's number is given back only after its token was collected and every batch
 * of it resolved (leaked ones are resolved by the leak detector first), so a batch that resolves
 * never finds its number given to another group; `forget` checks it anyway.
 */
import type { BatchState } from './BatchState.js'

/** Batches per group. */
export const GROUP_SIZE = 64

/**
 * A group's batches: made at its full size (an array grown by pushes would keep about a fifth
 * more slots than it holds), so a group closed early by its timer ends in empty slots.
 */
export type Group = (BatchState | undefined)[]

/** The live groups by number; a number given back is `undefined` until used again. */
export const groups: (Group | undefined)[] = []
const freeNumbers: number[] = []

/** Numbers `group` and returns its number: a number given back, else the next one. */
export function addGroup(group: Group): number {
  const id = freeNumbers.pop() ?? groups.length
  groups[id] = group
  return id
}

/** Gives the number of a collected group back. */
export function freeGroup(id: number): void {
  groups[id] = undefined
  freeNumbers.push(id)
}

/** `state` resolved: it leaves the group its `watch` names (nothing is left to detect). */
export function forget(state: BatchState): void {
  const watch = state.watch
  if (watch < 0) return
  state.watch = -1
  const group = groups[(watch / GROUP_SIZE) | 0]
  const index = watch % GROUP_SIZE
  if (group !== undefined && group[index] === state) group[index] = undefined
}
