/**
 * Batches kept as slots of a block of numbers, not as objects (RFC 0009, proposal A′): what a
 * runtime's batches cost when nobody asked for their receipt.
 *
 * A block holds {@link CHUNK} batches of one source, {@link STRIDE} numbers each. Events refer to
 * a small token, a {@link SlotChunk}, and carry their batch's index in the block (and their own
 * slot in the batch) in `LogEvent._slot`. The token is what the garbage collector is watched
 * for, as the notifiers' shared token is today (`LeakDetector.ts`): it is collected once no
 * event, group or notifier of its batches holds it, and then every batch of it not yet resolved
 * leaked. The block itself must never refer to its token (the registry keeps the block and the
 * generation, see `Generation`), or the token could never be collected.
 *
 * A batch that needs more than counting (a reason, an authoritative record, a merge, a detach,
 * a receiver, the runtime's forced stop) is *materialized*: a `BatchState` is made from its slot,
 * with the same id, opening time, events, live count and status, and from then on the state is
 * the batch; events still holding the token are moved to the state's notifier as they are next
 * touched. Its listeners are the block's owner and the block itself.
 *
 * Invariants:
 * - a slot's live count is exact while the slot is not materialized, and unused after;
 * - a block is reused only once every batch of it has resolved and no event holds its token
 *   (a full block, or one closed early: when its last batch resolves, since a resolved batch has
 *   no live handle; a batch lost by a buggy sink resolves when its token is found collected), with
 *   a new generation, so a late finalization callback of a token given up is ignored;
 * - a block keeps its token when it is reused only if no batch of the generation that ended got
 *   a state (so no notifier holds the token, and every handle that held it has ended): the token
 *   stays registered, its generation object moves on with the block's, and no token, generation
 *   object or registration is made per 64 batches (`recycle`);
 * - the owner hears of each batch once: `slotResolved` for a batch that resolved as a slot, its
 *   `batchResolved` (as any batch's listener) for a materialized one.
 */
import type { BatchNotifier } from '../BatchNotifier.js'
import type { BatchStatus } from '../BatchStatus.js'
import type { BatchResolvedListener, BatchStatusReceiver } from '../BatchStatusReceiver.js'
import type { LogEvent } from '../LogEvent.js'
import { BatchState } from './BatchState.js'
import { idOf, lastStampMs, nextSeq } from './batchIds.js'
import { endClockNow } from './endClock.js'
import { EPOCH_MS } from './epoch.js'
import { BATCH_UPDATE, batchStatusName, DELIVERED, ERRORED } from './statusCodes.js'

/** Batches per block. A power of two: an event's slot keeps its batch's index in the low bits. */
export const CHUNK = 64
/** `LogEvent._slot & INDEX_MASK` is the batch's index in its block; `>>> INDEX_BITS` the event's slot. */
export const INDEX_MASK = CHUNK - 1
export const INDEX_BITS = 6
/** The most events a slot batch may have (its events' slots stay small integers). */
export const MAX_SLOT_EVENTS = 2 ** 24

/** The numbers of one batch: live references, flags, opened (ms after the epoch), id counter, events, stamp ahead. */
const STRIDE = 6
const LIVE = 0
const FLAGS = 1
const OPENED = 2
const SEQ = 3
const EVENTS = 4
const AHEAD = 5
/** `FLAGS`: the status code in bits 0–2, then these. */
const CODE_BITS = 7
const MATERIALIZED = 8
const FINISHED = 16

/** Told what became of the batches of a block: the runtime that tracks them. */
export interface SlotOwner extends BatchResolvedListener {
  /**
   * A batch resolved as a slot. `openedAt` is when it was opened (ms since 1970), `now` the end
   * clock's reading; `block.batchId(index)` gives its id during this call (the slot may be reused
   * after). Must be quick, and must not end handles or call user code.
   */
  slotResolved(status: BatchStatus, openedAt: number, now: number, block: SlotBlock, index: number): void
}

/** Blocks free to reuse. */
const free: SlotBlock[] = []
/**
 * `freeTokens[i]`: the token `free[i]` may be reused with (its last generation's, which nothing
 * else refers to), or `undefined` when that block needs a new one (see `recycle`).
 */
const freeTokens: (SlotChunk | undefined)[] = []
/** Blocks in use (handed to a source and not yet reused): what `forEachUnresolvedSlot` walks. */
const inUse = new Set<SlotBlock>()

/** What a leak is reported through; set by the leak detector (it owns the report). */
export type SlotLeakReport = (sourceId: string | undefined, batchId: string, handles: number) => void
let reportLeak: SlotLeakReport = () => {}
/** Called once by the leak detector with its report. */
export function setSlotLeakReport(
  report: SlotLeakReport,
  stateReport: (state: BatchState, handles: number) => void,
): void {
  reportLeak = report
  reportStateLeak = stateReport
}
let reportStateLeak: (state: BatchState, handles: number) => void = () => {}

/**
 * The generation of a block a token stands for, as the registry keeps it for the token: an
 * object of its own per token, so generations never wrap. A number packing the block and a
 * generation counted modulo some bound would let a token kept alive long enough (by a notifier
 * someone holds) be taken, once collected, for the token of the generation in use. A token
 * reused with its block (`recycle`) has its object's `gen` moved on; a token given up keeps its
 * object at its last generation, so its late callback is ignored.
 */
class Generation {
  constructor(
    readonly block: SlotBlock,
    /** Moved on only when the block is reused with this same token (see `recycle`). */
    public gen: number,
  ) {}
}

const registry = new FinalizationRegistry<Generation>(({ block, gen }) => {
  if (block.gen !== gen || block.owner === undefined) return // resolved and reused since
  block._leaked()
})

/** An owner's exception is rethrown in a microtask, as a batch's listeners' are: the end that resolved the batch goes on. */
function rethrowLater(error: unknown): void {
  queueMicrotask(() => {
    throw error
  })
}

/** The listener a materialized batch's state gets besides the owner: it tells the block. */
class SlotHook implements BatchResolvedListener {
  constructor(
    readonly block: SlotBlock,
    readonly gen: number,
    readonly index: number,
  ) {}

  batchResolved(): void {
    if (this.block.gen === this.gen) this.block._finished(this.index, undefined)
  }
}

/** The batches of one source, by slot: see the module's comment. */
export class SlotBlock {
  /** Bumped each time the block is reused. */
  gen = 0
  /** What the registry keeps for the block's current token (never the token itself). */
  generation: Generation | undefined = undefined
  /** Slots handed out in this generation. */
  used = 0
  /** Slots whose batch resolved in this generation. */
  finished = 0
  /**
   * Whether the block takes no more batches in this generation though it is not full: its opener
   * closed it (20 ms, `closeGroup()`). A slow source closes a block after a batch or two; such a
   * block is reused as soon as its batches resolved, not when its token is found collected (a
   * full collection later), so blocks do not pile up between full collections.
   */
  closed = false
  /** The owner of the batches in the block, told when they resolve; `undefined` while the block is free. */
  owner: SlotOwner | undefined = undefined
  /** The source id the block's batches were opened with; `undefined` while the block is free. */
  sourceId: string | undefined = undefined
  /** {@link STRIDE} numbers per slot. */
  readonly slots: number[]
  /**
   * The states of materialized batches, by index; made on the first. (Their notifiers are kept by
   * the token, never here: a notifier holds the token.)
   */
  states: (BatchState | undefined)[] | undefined = undefined
  /**
   * What the owner keeps for a batch beside its slot (a receipt), by index, for the batches it
   * gave one; made on the first. A materialized batch's state gets it as its `tracking`. It must
   * not refer to the token.
   */
  tracked: unknown[] | undefined = undefined

  constructor() {
    const slots = new Array<number>(CHUNK * STRIDE)
    for (let i = 0; i < slots.length; i++) slots[i] = 0
    this.slots = slots
  }

  /** The batch's id (a UUID v7, as a notifier's), written from its stamp. */
  batchId(index: number): string {
    const at = index * STRIDE
    return idOf(this.slots[at + OPENED]! + this.slots[at + AHEAD]!, this.slots[at + SEQ]!)
  }

  /** The id's millisecond (after the epoch) of the batch at `index`; with {@link SlotBlock.idSeq}, its id. */
  idMs(index: number): number {
    return this.slots[index * STRIDE + OPENED]! + this.slots[index * STRIDE + AHEAD]!
  }

  /** The id's counter of the batch at `index`. */
  idSeq(index: number): number {
    return this.slots[index * STRIDE + SEQ]!
  }

  /** What the owner keeps for the batch at `index` (see {@link SlotBlock.tracked}). */
  trackingOf(index: number): unknown {
    return this.tracked?.[index]
  }

  /** Whether the batch at `index` is kept by a state now. */
  isMaterialized(index: number): boolean {
    return (this.slots[index * STRIDE + FLAGS]! & MATERIALIZED) !== 0
  }

  /** One more live reference (a clone) to the batch at `index`, which is not materialized. */
  retain(index: number): void {
    this.slots[index * STRIDE + LIVE]!++
  }

  /**
   * Ends `count` references of the batch at `index` (not materialized), all with `code` (or
   * none, `code < 0`). `token` is the token the ended handles held (the block's current one):
   * given, the block may keep it when it is reused (see `recycle`).
   */
  release(index: number, count: number, code: number, token?: SlotChunk): void {
    const slots = this.slots
    const at = index * STRIDE
    if (code >= 0) {
      const flags = slots[at + FLAGS]!
      slots[at + FLAGS] = (flags & ~CODE_BITS) | BATCH_UPDATE[(flags & CODE_BITS) * 5 + code]!
    }
    const live = slots[at + LIVE]! - count
    slots[at + LIVE] = live
    if (live === 0) this.#resolve(index, token)
  }

  /**
   * Ends every handle from `events[from]` on (which holds `token`, this block's current token) for
   * as long as they hold `token` and their batch has no state, all with `code`: each run of one
   * batch's events is one count down, and batch after batch of the block is one loop (a coalesced
   * array of small batches). Returns the index of the first event it did not end (`from` when that
   * event's batch has a state).
   */
  _endRuns(events: readonly LogEvent[], from: number, code: number, token: SlotChunk): number {
    const slots = this.slots
    const n = events.length
    // The end clock's reading (one per `endRuns` call), read when the first batch resolves.
    let now = -1
    let j = from
    let event = events[j]!
    for (;;) {
      const index = event._slot & INDEX_MASK
      const at = index * STRIDE
      let flags = slots[at + FLAGS]!
      if ((flags & MATERIALIZED) !== 0) break
      event._ref = null
      let k = j + 1
      let next: LogEvent | undefined
      for (; k < n; k++) {
        next = events[k]!
        if (next._ref !== token || (next._slot & INDEX_MASK) !== index) break
        next._ref = null
      }
      // The fold is idempotent: a status the batch has already (delivered, most often) changes nothing.
      if (code >= 0 && (flags & CODE_BITS) !== code) {
        flags = (flags & ~CODE_BITS) | BATCH_UPDATE[(flags & CODE_BITS) * 5 + code]!
        slots[at + FLAGS] = flags
      }
      const live = slots[at + LIVE]! - (k - j)
      slots[at + LIVE] = live
      if (live === 0) {
        if (now < 0) now = endClockNow()
        this.#told(index, flags, now, token)
      }
      j = k
      if (k === n || next!._ref !== token) break
      event = next!
    }
    return j
  }

  /** `token`: the block's current token, when the caller has it (it may then be reused with the block). */
  #resolve(index: number, token: SlotChunk | undefined): void {
    this.#told(index, this.slots[index * STRIDE + FLAGS]!, endClockNow(), token)
  }

  /**
   * Tells the owner that the batch at `index` resolved (`flags` its flags, `now` the end clock's
   * reading, or the clock's when the batch opened after it), then counts it finished.
   */
  #told(index: number, flags: number, now: number, token: SlotChunk | undefined): void {
    const owner = this.owner!
    const openedAt = this.slots[index * STRIDE + OPENED]! + EPOCH_MS
    if (now < openedAt) now = Date.now()
    try {
      owner.slotResolved(batchStatusName(flags & CODE_BITS), openedAt, now, this, index)
    } catch (error) {
      rethrowLater(error)
    }
    this._finished(index, token)
  }

  /**
   * The batch at `index` resolved (as a slot, or its state did). Once every batch of a block
   * that takes no more (full, or closed) has, no live handle holds its token: it is reused at once.
   */
  _finished(index: number, token: SlotChunk | undefined): void {
    this.slots[index * STRIDE + FLAGS]! |= FINISHED
    if (++this.finished === this.used && (this.used === CHUNK || this.closed)) recycle(this, token)
  }

  /**
   * The state of the batch at `index`, made now if it is not yet (see the module's comment). The
   * batch must not have resolved.
   */
  stateOf(index: number): BatchState {
    if (this.states === undefined) this.states = new Array<BatchState | undefined>(CHUNK)
    const states = this.states
    let state = states[index]
    if (state === undefined) {
      const slots = this.slots
      const at = index * STRIDE
      state = BatchState._restore(
        this.sourceId,
        slots[at + OPENED]!,
        slots[at + SEQ]!,
        slots[at + AHEAD]!,
        slots[at + EVENTS]!,
        slots[at + LIVE]!,
        slots[at + FLAGS]! & CODE_BITS,
      )
      state.listeners = [this.owner!, new SlotHook(this, this.gen, index)]
      const tracking = this.tracked?.[index]
      if (tracking !== undefined) state.tracking = tracking
      slots[at + FLAGS]! |= MATERIALIZED
      states[index] = state
    }
    return state
  }

  /** Every batch of the block not resolved yet was leaked: its token was collected. */
  _leaked(): void {
    const slots = this.slots
    for (let index = 0; index < this.used; index++) {
      const at = index * STRIDE
      const flags = slots[at + FLAGS]!
      if ((flags & FINISHED) !== 0) continue
      if ((flags & MATERIALIZED) !== 0) {
        this.states![index]!.leak(reportStateLeak)
        continue
      }
      const handles = slots[at + LIVE]!
      reportLeak(this.sourceId, this.batchId(index), handles)
      slots[at + LIVE] = 0
      slots[at + FLAGS] = (flags & ~CODE_BITS) | BATCH_UPDATE[(flags & CODE_BITS) * 5 + ERRORED]!
      this.#resolve(index, undefined)
    }
    // Reused now if `_finished` did not already (a block whose opener was dropped while filling it
    // was never closed).
    if (this.owner !== undefined && this.finished === this.used) recycle(this, undefined)
  }
}

/**
 * Frees `block`, every batch of which resolved. `token` is its current token when the caller
 * has it: the block is then reused with it, with no new token, registration or generation
 * object, when no batch of this generation got a state. Then nothing refers to the token but
 * handles that ended (whose references are cleared) and an opener that let go of it or will
 * not use it again: no notifier was made for it, and every handle that held it ended, since a
 * slot's count is exact. Otherwise (a notifier may hold the token, or the token was collected)
 * the next use gets a new token and a new generation object, and a late callback of the old
 * token is ignored as before.
 */
function recycle(block: SlotBlock, token: SlotChunk | undefined): void {
  const reusable = token !== undefined && block.states === undefined && token._block === block
  block.gen++ // a double: exact far beyond any count of reuses
  block.used = 0
  block.finished = 0
  block.closed = false
  block.owner = undefined
  block.sourceId = undefined
  block.states = undefined
  block.tracked = undefined
  inUse.delete(block)
  free.push(block)
  freeTokens.push(reusable ? token : undefined)
}

/** The token events of a block's batches hold: the garbage collector's view of the block. */
export class SlotChunk {
  /**
   * The notifiers of the block's materialized batches, by index, made when an event holding the
   * token is moved to one. Kept here, not by the block: each holds the token.
   */
  _notifiers: (BatchNotifier | undefined)[] | undefined = undefined

  constructor(readonly _block: SlotBlock) {}
}

/** The openers whose block is being filled (their token held), until the open group closes. */
const filling = new Set<SlotOpener>()

/**
 * Closes every block being filled, with the leak detector's open group (when full, 20 ms after it
 * opened, or `LeakDetector.closeGroup()`): its opener lets go of the token, so a leak in it can be
 * found as soon as one among notifiers could. The next batch opens a new block.
 */
export function closeFillingBlocks(): void {
  for (const opener of filling) opener._close()
  filling.clear()
}

/** Opens slot batches for one source, one block at a time. */
export class SlotOpener {
  /** The token of the block being filled; `undefined` once it closed. */
  chunk: SlotChunk | undefined = undefined
  block: SlotBlock | undefined = undefined
  #gen = 0
  /**
   * Batches the block being filled still takes: 0 once it is full or closed, when the next batch
   * takes a new block. While it is above 0 the block is this opener's (not full, not closed, so
   * not reused, and its token is held by `chunk`, so not found leaked): one test per batch.
   */
  #room = 0

  /**
   * The index in {@link SlotOpener.block} of the batch opened last; -1 when none was, or when
   * that block was reused since (its slot may hold another source's batch now).
   */
  lastIndex(): number {
    const block = this.block
    return block !== undefined && block.gen === this.#gen ? block.used - 1 : -1
  }

  /** Closes the block being filled (see {@link closeFillingBlocks}), reusing it if it is done. */
  _close(): void {
    const token = this.chunk
    this.chunk = undefined
    this.#room = 0
    const block = this.block
    if (block === undefined || block.gen !== this.#gen) return // reused already
    block.closed = true
    if (block.finished === block.used) recycle(block, token)
  }

  /** `arm` (the leak detector's) makes sure a block being filled closes in time. */
  constructor(
    readonly sourceId: string | undefined,
    readonly owner: SlotOwner,
    readonly arm: () => void,
  ) {}

  /**
   * Opens a batch of `events` events (none of which is the source's own reference) at `now` (ms
   * since 1970), which is `opened` ms after the epoch (`msSinceEpoch(now)`, which the caller has
   * for its events); returns the batch's index in the block.
   */
  open(events: number, now: number, opened: number, tracking: unknown): number {
    if (this.#room === 0) this.#take()
    this.#room--
    const block = this.block!
    const index = block.used++
    const slots = block.slots
    const at = index * STRIDE
    slots[at + LIVE] = events
    slots[at + FLAGS] = DELIVERED
    slots[at + OPENED] = opened
    slots[at + SEQ] = nextSeq(now)
    slots[at + EVENTS] = events
    slots[at + AHEAD] = lastStampMs() - now
    if (tracking !== undefined) {
      if (block.tracked === undefined) block.tracked = new Array<unknown>(CHUNK)
      block.tracked[index] = tracking
    }
    return index
  }

  /** Takes a block to fill: a free one (with its token, when it can keep it; see `recycle`) or a new one. */
  #take(): void {
    let chunk = freeTokens.pop()
    let block = free.pop()
    if (block === undefined) block = new SlotBlock()
    block.owner = this.owner
    block.sourceId = this.sourceId
    inUse.add(block)
    this.block = block
    this.#gen = block.gen
    this.#room = CHUNK
    if (chunk === undefined) {
      chunk = new SlotChunk(block)
      block.generation = new Generation(block, block.gen)
      registry.register(chunk, block.generation)
    } else {
      // Reused with its block (see `recycle`): still registered, for this generation now.
      block.generation!.gen = block.gen
    }
    this.chunk = chunk
    filling.add(this)
    this.arm()
  }
}

/** The notifier an event holding `chunk` with slot `slot` moves to (see the module's comment). */
export function notifierOf(
  chunk: SlotChunk,
  slot: number,
  adopt: (state: BatchState, watched: object) => BatchNotifier,
): BatchNotifier {
  const block = chunk._block
  const index = slot & INDEX_MASK
  if (chunk._notifiers === undefined) chunk._notifiers = new Array<BatchNotifier | undefined>(CHUNK)
  const notifiers = chunk._notifiers
  let notifier = notifiers[index]
  if (notifier === undefined) {
    // The notifier holds the token: whoever keeps it (a group, a finalizer) keeps the block's
    // batches watched, as an event holding the token would.
    notifier = adopt(block.stateOf(index), chunk)
    notifiers[index] = notifier
  }
  return notifier
}

/**
 * Calls `visit` with the receiver of every slot batch not resolved yet, materializing it: for
 * `LeakDetector.forEachUnresolved`.
 */
export function forEachUnresolvedSlot(visit: (receiver: BatchStatusReceiver) => void): void {
  for (const block of [...inUse]) {
    const gen = block.gen
    for (let index = 0; index < block.used && block.gen === gen; index++) {
      const flags = block.slots[index * STRIDE + FLAGS]!
      if ((flags & FINISHED) === 0) visit(block.stateOf(index))
    }
  }
}
