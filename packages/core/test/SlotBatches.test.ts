// Batches kept as slots (RFC 0009) against the same programs run on batches with notifiers: the
// same statuses, reasons, and order of resolution, whatever a program does to the events (clone,
// merge, detach, authoritative ends, reasons, arrays ended in runs, reading finalizers, joining
// other batches); leaks are found through the block's token; the runtime's forced stop finds them.
import {
  type BatchStatusReceiver,
  EventArray,
  EventFinalizerGroups,
  type JsonObject,
  LeakDetector,
  type LeakReport,
  LogEvent,
  SlotBatches,
} from '@ackline/core'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { closeFillingBlocks, SlotOpener, type SlotOwner } from '../src/internal/slots.js'
import { DELIVERED as DELIVERED_CODE } from '../src/internal/statusCodes.js'
import { collectProvably, collectUntil, gc } from './support/collect.js'
import { compare, Owner, programOp } from './support/slotPrograms.js'

describe('SlotBatches', () => {
  it('resolves as batches with notifiers do, whatever a program does to the events', () => {
    const via = { slot: 0, state: 0 }
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 5 }),
        fc.array(programOp(false), { maxLength: 30 }),
        (sizes, ops) => {
          const { withNotifiers, asSlots, owner } = compare(sizes, ops)
          expect(owner.told.length).toBe(sizes.length) // each slot batch told exactly once
          expect(new Set(owner.told.map((t) => t.id)).size).toBe(sizes.length)
          expect(asSlots).toEqual(withNotifiers)
          for (const t of owner.told) via[t.via]++
        },
      ),
      { numRuns: 300 },
    )
    // Both ways a slot batch can end were taken, many times.
    expect(via.slot).toBeGreaterThan(100)
    expect(via.state).toBeGreaterThan(100)
  })
})

describe('SlotBatches and the leak detector (run with --expose-gc)', () => {
  const leaks: LeakReport[] = []
  let subscription: { unsubscribe(): void } | undefined
  beforeAll(() => {
    LeakDetector.setWarnings(false)
    subscription = LeakDetector.leaks.subscribe((leak) => leaks.push(leak))
  })
  afterAll(() => {
    subscription?.unsubscribe()
    LeakDetector.setWarnings(true)
  })

  it('is run with --expose-gc', () => {
    expect(gc).toBeTypeOf('function')
  })

  // In functions of their own, so nothing on the test's stack keeps a handle reachable.
  function leakOneOfTwo(slots: SlotBatches): void {
    const { events } = slots.fromRecords([{ n: 1 }, { n: 2 }], Date.now())
    events[0]!.end('delivered')
  }
  function leakMaterialized(slots: SlotBatches): void {
    const { events } = slots.fromRecords([{ n: 1 }, { n: 2 }], Date.now())
    events[0]!.end('errored', { reason: 'first' }) // the batch gets a state
  }

  it('finds a slot batch whose handle was collected, reports it and settles it errored', async () => {
    const owner = new Owner()
    const slots = new SlotBatches('leaky', owner)
    leakOneOfTwo(slots)
    leakMaterialized(slots)
    const collections = await collectUntil(() => owner.told.length === 2)
    expect(owner.told, `after ${collections} collections`).toHaveLength(2)
    const mine = leaks.filter((leak) => leak.sourceId === 'leaky')
    expect(mine.map((leak) => leak.handles)).toEqual([1, 1])
    expect(owner.told.map((t) => [t.status, t.via]).sort()).toEqual([
      ['errored', 'slot'],
      ['errored', 'state'],
    ])
    expect(mine.map((leak) => leak.batchId).sort()).toEqual(owner.told.map((t) => t.id).sort())
  })

  it('reports no leak while a handle, a detached group or a notifier still holds the block', async () => {
    const owner = new Owner()
    // Two sources: two blocks, one held by a handle, the other only by a detached group.
    const kept = new SlotBatches('held', owner).fromRecords([{ n: 1 }], Date.now()).events[0]!
    const groups = (() => {
      const { events } = new SlotBatches('held', owner).fromRecords([{ n: 2 }], Date.now())
      return EventFinalizerGroups.detach(events) // the event itself is dropped
    })()
    const before = leaks.length
    await collectProvably()
    await collectProvably()
    expect(leaks.length).toBe(before)
    expect(owner.told).toHaveLength(0)
    groups.end(0, 'rejected')
    kept.end('delivered')
    expect(owner.told.map((t) => t.status).sort()).toEqual(['delivered', 'rejected'])
  })

  it('ignores the token of an earlier generation of a block, collected after the block was reused', async () => {
    const owner = new Owner()
    const slots = new SlotBatches('reused', owner)
    // Generation g: a batch whose finalizers someone keeps after its event ended (they hold the
    // token of g), then the rest of the block, all ended: the block is full, resolved and reused.
    const first = slots.fromRecords([{ n: 0 }], Date.now()).events[0]!
    let kept: unknown = first.metadata.finalizers
    first.end('delivered')
    for (let i = 1; i < 64; i++) slots.fromRecords([{ n: i }], Date.now()).end('delivered')
    expect(owner.told).toHaveLength(64)
    // The next generation (the pooled block again, most likely), with a batch still live.
    const live = slots.fromRecords([{ n: 64 }], Date.now()).events[0]!
    const before = leaks.filter((leak) => leak.sourceId === 'reused').length
    kept = undefined
    void kept
    await collectProvably()
    await collectProvably()
    expect(leaks.filter((leak) => leak.sourceId === 'reused').length).toBe(before)
    expect(owner.told).toHaveLength(64) // the live batch was not settled
    live.end('delivered')
    expect(owner.told).toHaveLength(65)
    expect(owner.told.at(-1)!.status).toBe('delivered')
  })

  /** What an event holds for its finalizers (internal: the public build's types omit it). */
  const tokenOf = (event: LogEvent): unknown => (event as unknown as { _ref: unknown })._ref

  /**
   * Fills and resolves one block of `slots` (64 batches, each ended at once); when `materialize`,
   * its first batch gets a state (an end with a reason). Returns whether the next batch opened
   * holds the same token as the block's batches did (without keeping either).
   */
  function nextBatchKeepsToken(slots: SlotBatches, materialize: boolean): boolean {
    const first = slots.fromRecords([{ n: 0 }], Date.now())
    const token = tokenOf(first.events[0]!)
    if (materialize) first.end('errored', { reason: 'why' })
    else first.end('delivered')
    for (let i = 1; i < 64; i++) slots.fromRecords([{ n: i }], Date.now()).end('delivered')
    const next = slots.fromRecords([{ n: 64 }], Date.now())
    const same = tokenOf(next.events[0]!) === token
    next.end('delivered')
    return same
  }

  // In a function of its own, so nothing on the test's stack keeps the token reachable.
  function leakInReusedBlock(slots: SlotBatches): boolean {
    const first = slots.fromRecords([{ n: 0 }], Date.now())
    const token = tokenOf(first.events[0]!)
    first.end('delivered')
    for (let i = 1; i < 64; i++) slots.fromRecords([{ n: i }], Date.now()).end('delivered')
    // The block is full and resolved: the next batch takes it again, with the same token.
    const { events } = slots.fromRecords([{ n: 64 }, { n: 65 }], Date.now())
    events[0]!.end('delivered')
    return tokenOf(events[1]!) === token
  }

  it('reuses a resolved block with its token, and finds a leak in its next generation', async () => {
    const owner = new Owner()
    const slots = new SlotBatches('same-token', owner)
    expect(leakInReusedBlock(slots)).toBe(true)
    LeakDetector.closeGroup() // the opener lets go of the token
    const collections = await collectUntil(() => owner.told.length === 65)
    expect(owner.told, `after ${collections} collections`).toHaveLength(65)
    const mine = leaks.filter((leak) => leak.sourceId === 'same-token')
    expect(mine.map((leak) => leak.handles)).toEqual([1])
    expect(owner.told.at(-1)).toMatchObject({ status: 'errored', via: 'slot', id: mine[0]!.batchId })
  })

  it('gives a block a new token once a batch of it got a state (a notifier may hold the old one)', () => {
    const owner = new Owner()
    expect(nextBatchKeepsToken(new SlotBatches('plain', owner), false)).toBe(true)
    expect(nextBatchKeepsToken(new SlotBatches('stated', owner), true)).toBe(false)
    expect(owner.told).toHaveLength(130)
  })

  it('hands the runtime a receiver for every slot batch not resolved (forEachUnresolved)', () => {
    const owner = new Owner()
    const slots = new SlotBatches('stopping', owner)
    const first = slots.fromRecords([{ n: 1 }, { n: 2 }], Date.now())
    const second = slots.fromRecords([{ n: 3 }], Date.now())
    first.end('delivered')
    const seen: BatchStatusReceiver[] = []
    LeakDetector.forEachUnresolved((receiver) => {
      if (receiver.hasListener(owner)) seen.push(receiver)
    })
    expect(seen).toHaveLength(1)
    expect(seen[0]!.status).toBeUndefined()
    expect(seen[0]!.eventCount).toBe(1)
    expect(seen[0]!.hasListener(owner)).toBe(true)
    second.end('rejected')
    expect(seen[0]!.status).toBe('rejected')
    // Told once each: the first as a slot, the second through its receiver, with the id it had.
    expect(owner.told.map((t) => t.via)).toEqual(['slot', 'state'])
    expect(owner.told[1]!.id).toBe(seen[0]!.batchId)
  })
})

describe('SlotBatches over many blocks', () => {
  it('tells each batch once, with its own id and opening time, as blocks fill and are reused', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 300 }), fc.integer(), (count, seed) => {
        const owner = new Owner()
        const slots = new SlotBatches('many', owner)
        const arrays: EventArray[] = []
        const started = Date.now()
        for (let i = 0; i < count; i++) arrays.push(slots.fromRecords([{ i }, { i }], Date.now()))
        // End in a shuffled order, each array's two events on their own.
        let state = seed
        for (let i = arrays.length - 1; i > 0; i--) {
          state = (state * 1103515245 + 12345) & 0x7fffffff
          const j = state % (i + 1)
          ;[arrays[i], arrays[j]] = [arrays[j]!, arrays[i]!]
        }
        for (const array of arrays) {
          array.events[0]!.end('delivered')
          array.events[1]!.end('delivered')
        }
        expect(owner.told).toHaveLength(count)
        expect(new Set(owner.told.map((t) => t.id)).size).toBe(count)
        expect(owner.told.every((t) => t.status === 'delivered' && t.via === 'slot')).toBe(true)
        expect(owner.opened.every((at) => at >= started && at <= Date.now())).toBe(true)
      }),
      { numRuns: 40 },
    )
  })

  it('refuses an empty batch and one over its size, naming the bound', () => {
    const slots = new SlotBatches('bounds', new Owner())
    expect(() => slots.fromRecords([], Date.now())).toThrow(/1 to 16777215 records, not 0/)
  })

  it('refuses records without a length (a Set from untyped code), opening no batch', () => {
    const owner = new Owner()
    const slots = new SlotBatches('set', owner)
    const records = new Set([{ a: 1 }]) as unknown as JsonObject[]
    expect(() => slots.fromRecords(records, Date.now())).toThrow(RangeError)
    expect(() => slots.fromRecords(records, Date.now())).toThrow(/1 to 16777215 records, not undefined/)
    const array = slots.fromRecords([{ a: 2 }], Date.now())
    expect(array.events.every((event) => event instanceof LogEvent)).toBe(true)
    array.end('delivered')
    expect(owner.told.map((t) => t.status)).toEqual(['delivered'])
  })
})

describe('SlotBatches and the end clock', () => {
  it("tells the owner one clock reading for all the slot batches one array's end resolves", () => {
    let clock = 1_000
    const reads = vi.spyOn(Date, 'now').mockImplementation(() => ++clock)
    try {
      const told: [number, number][] = []
      const owner = new Owner()
      owner.slotResolved = (_status, _openedAt, now, _block, index) => {
        told.push([index, now])
      }
      const slots = new SlotBatches('clocked', owner)
      // Opened before the clock's readings (ingest 500), so no batch opened after the end's reading.
      const merged = [2, 1, 3].flatMap(
        (size) =>
          slots.fromRecords(
            Array.from({ length: size }, () => ({})),
            500,
          ).events,
      )
      const before = reads.mock.calls.length
      new EventArray(merged).end('delivered')
      expect(reads.mock.calls.length - before).toBe(1) // one reading for three batches
      expect(told.map(([, now]) => now)).toEqual([clock, clock, clock])
      expect(new Set(told.map(([index]) => index)).size).toBe(3)
    } finally {
      reads.mockRestore()
    }
  })
})

describe('SlotBatches ids and owners', () => {
  const msOf = (uuid: string): number => Number.parseInt(uuid.replace(/-/g, '').slice(0, 12), 16)

  it('keeps a batch id stamped ahead of its opening time when the batch gets a state', () => {
    const owner = new Owner()
    const slots = new SlotBatches('ahead', owner)
    const t = Date.now()
    slots.fromRecords([{ a: 1 }], t + 50).end() // the stamps move 50 ms ahead of the clock
    const asSlot = slots.fromRecords([{ a: 2 }], t) // stamped ahead of its opening time
    asSlot.end()
    const asState = slots.fromRecords([{ a: 3 }], t)
    const receiver = [...asState.events[0]!.metadata.finalizers][0]!.receiver // gets a state
    const id = receiver.batchId
    asState.end()
    expect(msOf(owner.told[1]!.id)).toBe(t + 50)
    expect(msOf(id)).toBe(t + 50)
    expect(owner.told[2]!.id).toBe(id) // what the owner is told is the id the state had
    expect(id > owner.told[1]!.id).toBe(true) // in creation order
    expect(receiver.openedAt).toBe(t) // the opening time is the batch's own
  })

  it("reads the last batch's id right after it was made, and refuses it once its block was reused", () => {
    const owner = new Owner()
    const slots = new SlotBatches('last', owner)
    const other = new SlotBatches('other', owner)
    expect(() => slots.lastIdMs).toThrow(/no batch was made yet/)
    LeakDetector.closeGroup() // the batch below opens a block of its own
    const array = slots.fromRecords([{ n: 1 }], Date.now())
    const id = SlotBatches.idOf(slots.lastIdMs, slots.lastIdSeq)
    LeakDetector.closeGroup() // closed with its batch live: reused once the batch resolves
    array.end('delivered')
    expect(owner.told.at(-1)!.id).toBe(id)
    const taken = other.fromRecords([{ n: 2 }], Date.now()) // may take the block just freed
    // Its slot reads NaN, or the batch another source made there: never an answer.
    expect(() => slots.lastIdMs).toThrow(expect.objectContaining({ code: 'USE_AFTER_END' }))
    expect(() => slots.lastIdSeq).toThrow(expect.objectContaining({ code: 'USE_AFTER_END' }))
    taken.end()
    slots.fromRecords([{ n: 3 }], Date.now()).end()
    expect(SlotBatches.idOf(slots.lastIdMs, slots.lastIdSeq)).toBe(owner.told.at(-1)!.id)
  })

  it('reads the clock for an ingest time that is not a clock reading', () => {
    const owner = new Owner()
    const slots = new SlotBatches('odd', owner)
    const before = Date.now()
    for (const odd of [Number.NaN, 1.5, -1, 2 ** 48]) slots.fromRecords([{ odd }], odd).end()
    expect(owner.told).toHaveLength(4)
    for (const t of owner.told) expect(msOf(t.id)).toBeGreaterThanOrEqual(before)
    expect(owner.opened.every((at) => at >= before && at <= Date.now())).toBe(true)
  })

  it('goes on when its owner throws: the error is rethrown later, the batch still counts as finished', () => {
    const rethrown: (() => void)[] = []
    const spy = vi.spyOn(globalThis, 'queueMicrotask').mockImplementation((task) => {
      rethrown.push(task)
    })
    try {
      let calls = 0
      const owner = new Owner()
      const throwing = Object.assign(Object.create(owner) as Owner, {
        slotResolved(...args: Parameters<Owner['slotResolved']>) {
          calls++
          owner.slotResolved(...args)
          throw new Error('owner failed')
        },
      })
      const slots = new SlotBatches('throws', throwing)
      // More than a block: the blocks fill, finish and are reused although every call threw.
      for (let i = 0; i < 70; i++) slots.fromRecords([{ i }], Date.now()).end('delivered')
      expect(calls).toBe(70)
      expect(owner.told).toHaveLength(70)
      expect(rethrown).toHaveLength(70)
      expect(() => rethrown[0]!()).toThrow('owner failed')
    } finally {
      spy.mockRestore()
    }
  })
})

describe('SlotBatches owners', () => {
  it('refuses an owner it could not tell (none, or one without both methods) at once, not when a batch resolves', () => {
    // Before, each resolution threw in a microtask (an uncaught exception inside the end), and a
    // block with no owner read as free, so a leak in it was never reported.
    for (const owner of [undefined, null, {}, { slotResolved() {} }, { batchResolved() {} }]) {
      expect(() => new SlotBatches('src', owner as never)).toThrow(
        /slot batches of source src: the owner must have slotResolved and batchResolved methods/,
      )
    }
    const owner = new Owner()
    new SlotBatches('src', owner).fromRecords([{ n: 1 }], Date.now()).end('delivered')
    expect(owner.told.map((t) => t.status)).toEqual(['delivered'])
  })
})

describe('SlotBatches.adopt', () => {
  it("makes a fresh event the one event of a new batch, keeping the event's own source and ingest time", () => {
    const owner = new Owner()
    const slots = new SlotBatches('out:buffer', owner)
    const read = new LogEvent({ n: 1 }, { sourceId: 'http', ingestTimestamp: 1_700_000_000_000 })
    const other = new LogEvent({ n: 2 }, { sourceId: 'http' })
    slots.adopt(read, Date.now(), 41)
    slots.adopt(other, Date.now(), 42)
    expect(read.metadata.sourceId).toBe('http')
    expect(read.metadata.ingestTimestamp).toBe(1_700_000_000_000)
    expect(read.metadata.hasFinalizers).toBe(true)
    other.end('rejected', { reason: 'bad' }) // a reason: its batch gets a state, tracking kept
    read.end('errored')
    expect(owner.told.map((t) => [t.status, t.via, t.reason])).toEqual([
      ['rejected', 'state', 'bad'],
      ['errored', 'slot', undefined],
    ])
  })

  it("hands the owner each batch's tracking, as a slot and through the state it may get", () => {
    const tracked: unknown[] = []
    const slots = new SlotBatches('out:buffer', {
      slotResolved: (_status, _openedAt, _now, block, index) => tracked.push(block.trackingOf(index)),
      batchResolved: (_status, receiver) => tracked.push(receiver.tracking),
    })
    const events = [0, 1, 2].map((n) => new LogEvent({ n }))
    for (const [n, event] of events.entries()) slots.adopt(event, Date.now(), n === 2 ? 0 : 100 + n)
    events[1]!.end('rejected', { reason: 'why' }) // through its state
    events[0]!.end('delivered')
    events[2]!.end('delivered') // a tracking of 0 is kept too
    expect(tracked).toEqual([101, 100, 0])
  })

  it('refuses an ended event and one that already has finalizers', () => {
    const slots = new SlotBatches('out:buffer', new Owner())
    const ended = new LogEvent({})
    ended.end()
    expect(() => slots.adopt(ended, Date.now())).toThrow(/handle has ended/)
    const attached = new LogEvent({})
    slots.adopt(attached, Date.now())
    expect(() => slots.adopt(attached, Date.now())).toThrow(TypeError)
    attached.end()
  })
})

describe('SlotBatches blocks of a slow source', () => {
  it('reuses a block closed early as soon as its batches resolved, not after a full collection', () => {
    const owner = new Owner()
    // The internal opener, with the test's owner (typed against the public build's `SlotBlock`).
    const opener = new SlotOpener('slow', owner as unknown as SlotOwner, () => {})
    const seen = new Set<unknown>()
    // A slow source: every batch finds its block closed (20 ms passed), and ends before the next.
    for (let i = 0; i < 500; i++) {
      const index = opener.open(1, Date.now(), 0, undefined)
      seen.add(opener.block!)
      closeFillingBlocks()
      opener.block!.release(index, 1, DELIVERED_CODE)
    }
    expect(owner.told).toHaveLength(500)
    expect(seen.size).toBeLessThanOrEqual(2) // the same pooled block, again and again
    // A block still in use when closed is reused once its last batch resolves, not before.
    const first = opener.open(1, Date.now(), 0, undefined)
    const block = opener.block!
    const gen = block.gen
    const second = opener.open(1, Date.now(), 0, undefined)
    closeFillingBlocks()
    block.release(first, 1, DELIVERED_CODE)
    expect(block.gen).toBe(gen) // one batch left
    block.release(second, 1, DELIVERED_CODE)
    expect(block.gen).toBe(gen + 1)
  })

  it('refuses a length that is a number but no integer before it opens a slot (an array-like from untyped code)', () => {
    // 1.5 passed the range check: a slot with 1.5 live handles was opened, never resolved by any
    // event, then 'Invalid array length' was thrown.
    const slots = new SlotBatches('len', new Owner())
    const records = { length: 1.5, 0: { n: 0 }, 1: { n: 1 } } as never
    expect(() => slots.fromRecords(records, Date.now())).toThrow('a slot batch has 1 to')
    expect(() => slots.lastIdMs).toThrow(TypeError) // no batch was made
  })
})
