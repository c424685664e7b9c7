/**
 * The state behind one batch notifier, and every operation that changes it.
 *
 * Invariant: `pending` counts the live references to the batch: one for each event whose slot
 * still has a live handle, plus one for the source until it releases the notifier. The batch
 * resolves, exactly once, when `pending` reaches zero (or when the leak detector finds the
 * notifier collected with references outstanding).
 *
 * A slot is one event of the batch. Its number packs the count of live handles of that event
 * (above the low three bits) with the event's status code (the low three bits), so tracking an
 * event costs one small integer in one array: no object per event.
 */
import type { BatchStatusReceiver } from '../BatchStatusReceiver.js'
import { EventStatus } from '../EventStatus.js'
import { FinalizationError } from '../FinalizationError.js'
import {
  BATCH_UPDATE,
  batchStatusName,
  DELIVERED,
  ERRORED,
  EVENT_STATUS_NAMES,
  EVENT_UPDATE,
  INVALID,
  RECORDED,
} from './statusCodes.js'

/** One live handle in a slot's packed number. */
export const ONE_HANDLE = 8
const STATUS_MASK = 7

/** Called once when a batch with live references is found collected; set by the leak detector. */
export type LeakHook = (state: BatchState, handles: number) => void

export class BatchState {
  readonly slots: number[] = []
  pending = 1
  status = DELIVERED
  released = false
  resolved = false
  /** Set by the leak detector: forgets the notifier once the batch resolved normally. */
  unwatch: ((state: BatchState) => void) | undefined = undefined

  constructor(
    readonly id: string,
    readonly sourceId: string | undefined,
    readonly receiver: BatchStatusReceiver,
  ) {}

  addSlot(): number {
    return this.addSlots(1)
  }

  /** Adds `count` slots of one live handle each; returns the index of the first. */
  addSlots(count: number): number {
    if (this.released) {
      throw new FinalizationError(
        'NOTIFIER_RELEASED',
        'cannot attach a batch notifier after its source released it',
        this.sourceId,
        this.id,
      )
    }
    const slots = this.slots
    const first = slots.length
    for (let i = 0; i < count; i++) slots.push(ONE_HANDLE)
    this.pending += count
    return first
  }

  retain(slot: number): void {
    this.slots[slot]! += ONE_HANDLE
  }

  /** Folds `code` into the slot's status (the status is shared by every handle of the event). */
  update(slot: number, code: number): void {
    const value = this.live(slot)
    const current = value & STATUS_MASK
    const next = EVENT_UPDATE[current * 5 + code]!
    if (next === INVALID) EventStatus.invalidUpdate(EVENT_STATUS_NAMES[current]!, this.sourceId)
    else this.slots[slot] = value - current + next
  }

  /** Ends one handle of the slot, with a status code or without one (`code < 0`). */
  release(slot: number, code: number): void {
    // One read and one write of the slot: this is the hot path of every sink.
    let value = this.slots[slot]!
    if (code >= 0) {
      const current = value & STATUS_MASK
      const next = EVENT_UPDATE[current * 5 + code]!
      if (next === INVALID) EventStatus.invalidUpdate(EVENT_STATUS_NAMES[current]!, this.sourceId)
      else value += next - current
    }
    value -= ONE_HANDLE
    this.slots[slot] = value
    if (value < ONE_HANDLE) {
      this.status = BATCH_UPDATE[this.status * 5 + (value & STATUS_MASK)]!
      if (--this.pending === 0) this.finish()
    }
  }

  /** Sends the slot's current status to the batch now and marks it `recorded`. */
  record(slot: number): void {
    const value = this.live(slot)
    const current = value & STATUS_MASK
    if (current === RECORDED) return
    this.status = BATCH_UPDATE[this.status * 5 + current]!
    this.slots[slot] = value - current + RECORDED
  }

  statusOf(slot: number): number {
    return this.slots[slot]! & STATUS_MASK
  }

  releaseSource(): void {
    if (this.released) return
    this.released = true
    if (--this.pending === 0) this.finish()
  }

  /** The leak detector found the notifier collected: settle every outstanding share as errored. */
  leak(report: LeakHook): void {
    if (this.resolved) return
    let handles = this.released ? 0 : 1
    for (const value of this.slots) handles += value >>> 3
    this.status = BATCH_UPDATE[this.status * 5 + ERRORED]!
    report(this, handles)
    this.pending = 0
    this.finish()
  }

  private live(slot: number): number {
    const value = this.slots[slot]!
    if (value < ONE_HANDLE) {
      throw new FinalizationError(
        'USE_AFTER_END',
        'cannot update the status of an event whose every handle has ended',
        this.sourceId,
        this.id,
      )
    }
    return value
  }

  private finish(): void {
    this.resolved = true
    this.unwatch?.(this)
    this.receiver._resolve(batchStatusName(this.status))
  }
}
