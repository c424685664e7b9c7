// The leak detector over blocks reused with their tokens (RFC 0009 A′; run with --expose-gc): a
// lost batch of a reused block is found, once; a live one never is; an old token collected late is
// ignored; an idle opener whose block went to another source does not put it in the pool twice.
import { LeakDetector, type LeakReport, type LogEvent, SlotBatches } from '@ackline/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { collectProvably, collectUntil } from './support/collect.js'
import { Owner } from './support/slotPrograms.js'

const tokenOf = (event: LogEvent): unknown => (event as unknown as { _ref: unknown })._ref
const idOf = (slots: SlotBatches) => SlotBatches.idOf(slots.lastIdMs, slots.lastIdSeq)

describe('the leak detector over blocks reused with their tokens', () => {
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

  // An opener that filled its block and went idle still holds the block's token when another
  // source takes the block (and token) from the pool.
  function fillAndHandOver(a: SlotBatches, c: SlotBatches): { same: boolean; leakedId: string } {
    LeakDetector.closeGroup()
    const first = a.fromRecords([{ n: 0 }], Date.now())
    const token = tokenOf(first.events[0]!)
    first.end('delivered')
    for (let i = 1; i < 64; i++) a.fromRecords([{ n: i }], Date.now()).end('delivered')
    // a is idle, still in `filling` with its chunk; the block is free with its token.
    const { events } = c.fromRecords([{ n: 100 }], Date.now())
    const same = tokenOf(events[0]!) === token
    return { same, leakedId: idOf(c) } // the event is dropped: leaked
  }

  it('finds a leak in a block handed from an idle opener to another source, once', async () => {
    const owner = new Owner()
    const a = new SlotBatches('idle-a', owner)
    const c = new SlotBatches('taker-c', owner)
    const { same, leakedId } = fillAndHandOver(a, c)
    expect(same).toBe(true)
    const collections = await collectUntil(() => owner.told.length === 65)
    expect(owner.told, `after ${collections}`).toHaveLength(65)
    expect(leaks.filter((l) => l.sourceId === 'taker-c').map((l) => l.batchId)).toEqual([leakedId])
    expect(leaks.filter((l) => l.sourceId === 'idle-a')).toEqual([])
    // a opens again: a block of its own, and nothing is reported.
    a.fromRecords([{ n: 1 }], Date.now()).end('rejected')
    expect(owner.told.at(-1)!.status).toBe('rejected')
  })

  // A slow source: the block is closed (20 ms) with its batch live, the batch ends, the block is
  // reused with its token; the next generation's batch leaks.
  function slowThenLeak(slots: SlotBatches): { same: boolean; id: string } {
    const a = slots.fromRecords([{ n: 0 }], Date.now())
    const token = tokenOf(a.events[0]!)
    LeakDetector.closeGroup()
    a.end('delivered') // the closed block's last batch: reused with its token
    const b = slots.fromRecords([{ n: 1 }, { n: 2 }], Date.now())
    const same = tokenOf(b.events[0]!) === token
    b.events[0]!.end('delivered')
    return { same, id: idOf(slots) }
  }

  it('finds a leak in the next generation of a block closed early and reused with its token', async () => {
    const owner = new Owner()
    const slots = new SlotBatches('slow-leak', owner)
    const { same, id } = slowThenLeak(slots)
    expect(same).toBe(true)
    await collectUntil(() => owner.told.length === 2)
    expect(owner.told.map((t) => [t.status, t.via])).toEqual([
      ['delivered', 'slot'],
      ['errored', 'slot'],
    ])
    expect(leaks.filter((l) => l.sourceId === 'slow-leak')).toEqual([
      { sourceId: 'slow-leak', batchId: id, handles: 1 },
    ])
  })

  // Random: many generations over several sources; some batches dropped (every handle), some
  // kept live across the collections, the rest ended. Exactly the dropped ones are reported.
  function generations(
    sources: SlotBatches[],
    rounds: number,
    seed: number,
    kept: LogEvent[],
    dropped: Set<string>,
    ended: Set<string>,
  ): void {
    let state = seed
    const rand = (n: number) => {
      state = (state * 1103515245 + 12345) & 0x7fffffff
      return (state >>> 12) % n
    }
    let pending: LogEvent[] = []
    for (let r = 0; r < rounds; r++) {
      const slots = sources[rand(sources.length)]!
      const { events } = slots.fromRecords([{ r }, { r }], Date.now())
      const id = idOf(slots)
      const fate = rand(20)
      if (fate === 0)
        dropped.add(id) // leaked
      else if (fate === 1) kept.push(...events)
      else {
        ended.add(id)
        pending.push(...events)
      }
      if (rand(4) === 0) {
        // End what is pending, in one array or one by one.
        if (rand(2) === 0) for (const e of pending) e.end('delivered')
        else for (const e of pending.reverse()) e.end()
        pending = []
      }
      if (rand(30) === 0) LeakDetector.closeGroup()
    }
    for (const e of pending) e.end('delivered')
  }

  it('reports exactly the dropped batches, never a live one, over many reuses', async () => {
    const owner = new Owner()
    const sources = [0, 1, 2].map((i) => new SlotBatches(`rand${i}`, owner))
    const kept: LogEvent[] = []
    const dropped = new Set<string>()
    const ended = new Set<string>()
    generations(
      sources,
      Number(process.env.R4_ROUNDS ?? 3000),
      Number(process.env.R4_SEED ?? 12345),
      kept,
      dropped,
      ended,
    )
    await collectUntil(() => false) // 200 collections
    await collectProvably()
    const early = leaks.filter((l) => l.sourceId?.startsWith('rand'))
    // Nothing live or ended is ever reported.
    for (const l of early) expect(dropped.has(l.batchId), l.batchId).toBe(true)
    const keptIds = new Set<string>()
    for (const t of owner.told) expect(dropped.has(t.id) || ended.has(t.id), t.id).toBe(true)
    const before = owner.told.length
    for (const e of kept) e.end('rejected')
    for (const t of owner.told.slice(before)) keptIds.add(t.id)
    expect(owner.told.slice(before).every((t) => t.status === 'rejected')).toBe(true)
    expect(keptIds.size).toBe(kept.length / 2)
    kept.length = 0
    const total = dropped.size + ended.size + keptIds.size
    const collections = await collectUntil(() => owner.told.length === total)
    expect(owner.told.length, `after ${collections}`).toBe(total)
    await collectProvably()
    const mine = leaks.filter((l) => l.sourceId?.startsWith('rand'))
    expect(new Set(mine.map((l) => l.batchId))).toEqual(dropped)
    expect(mine.length).toBe(dropped.size)
    expect(owner.told.length).toBe(total)
    const told = new Map(owner.told.map((t) => [t.id, t.status]))
    for (const id of dropped) expect(told.get(id)).toBe('errored')
    for (const id of ended) expect(told.get(id)).toBe('delivered')
    expect(new Set(owner.told.map((t) => t.id)).size).toBe(owner.told.length)
    console.log(
      `dropped ${dropped.size}, ended ${ended.size}, kept ${keptIds.size}, found early ${early.length}`,
    )
  })

  // The stale opener: a fills the block and goes idle (its chunk still the block's first token);
  // c takes the block with that token and gives a batch a state; d takes it with a new token and
  // resolves everything; then the group closes. a's close must not touch the block (gen guard):
  // it would free it with a's old token, and e, taking it, would move d's generation object on.
  function staleOpener(a: SlotBatches, c: SlotBatches, d: SlotBatches, e: SlotBatches): LogEvent {
    LeakDetector.closeGroup()
    for (let i = 0; i < 64; i++) a.fromRecords([{ i }], Date.now()).end('delivered')
    const first = c.fromRecords([{ n: 0 }], Date.now())
    first.end('errored', { reason: 'stated' }) // a state: the block takes a new token next
    for (let i = 1; i < 64; i++) c.fromRecords([{ i }], Date.now()).end('delivered')
    d.fromRecords([{ n: 0 }], Date.now()).end('delivered') // d's batch done: finished === used
    LeakDetector.closeGroup() // a (stale), c (full), d: closed in one pass
    return e.fromRecords([{ n: 1 }], Date.now()).events[0]! // live, held by the test
  }

  it('never reports a live batch after an idle opener whose block was reused is closed', async () => {
    const owner = new Owner()
    const [a, c, d, e] = ['st-a', 'st-c', 'st-d', 'st-e'].map((s) => new SlotBatches(s, owner))
    const live = staleOpener(a!, c!, d!, e!)
    const before = owner.told.length
    await collectProvably()
    await collectProvably()
    expect(leaks.filter((l) => l.sourceId?.startsWith('st-'))).toEqual([])
    expect(owner.told.length).toBe(before)
    // Each block is in the pool once: two more sources get blocks of their own, and each owner
    // hears of its own batch only.
    const ownerF = new Owner()
    const ownerG = new Owner()
    const f = new SlotBatches('st-f', ownerF).fromRecords([{ f: 1 }], Date.now())
    const g = new SlotBatches('st-g', ownerG).fromRecords([{ g: 1 }], Date.now())
    const blockOf = (x: LogEvent) => (tokenOf(x) as { _block: unknown })._block
    expect(new Set([blockOf(live), blockOf(f.events[0]!), blockOf(g.events[0]!)]).size).toBe(3)
    live.end('delivered')
    expect(owner.told.at(-1)!.status).toBe('delivered')
    f.end('rejected')
    g.end('errored')
    expect(ownerF.told.map((t) => t.status)).toEqual(['rejected'])
    expect(ownerG.told.map((t) => t.status)).toEqual(['errored'])
  })

  // A token reused across generations, then given a state whose finalizers are kept; the block
  // goes on with a new token, reused in turn; the old token is collected late.
  function lateOldToken(slots: SlotBatches): { kept: unknown; same: boolean } {
    LeakDetector.closeGroup()
    for (let g = 0; g < 3; g++)
      for (let i = 0; i < 64; i++) slots.fromRecords([{ i }], Date.now()).end('delivered')
    const first = slots.fromRecords([{ n: 0 }], Date.now()).events[0]!
    const kept = first.metadata.finalizers // holds the notifier, which holds the token
    first.end('delivered')
    for (let i = 1; i < 64; i++) slots.fromRecords([{ i }], Date.now()).end('delivered')
    const t1 = tokenOf(slots.fromRecords([{ n: 0 }], Date.now()).events[0]!)
    // that batch is dropped (leaked); the rest of the block delivered; next generations reuse t1?
    for (let i = 1; i < 64; i++) slots.fromRecords([{ i }], Date.now()).end('delivered')
    return { kept, same: t1 !== undefined }
  }

  it('ignores an old token collected late, and finds the leak of the generation after it', async () => {
    const owner = new Owner()
    const slots = new SlotBatches('late-old', owner)
    let held: { kept: unknown; same: boolean } | undefined = lateOldToken(slots)
    const before = owner.told.length // every batch but the dropped one
    await collectUntil(() => owner.told.length === before + 1)
    const mine = () => leaks.filter((l) => l.sourceId === 'late-old')
    expect(mine().map((l) => l.handles)).toEqual([1])
    held = undefined
    void held
    await collectProvably()
    await collectProvably()
    expect(mine().map((l) => l.handles)).toEqual([1])
    expect(owner.told.length).toBe(before + 1)
    const live = slots.fromRecords([{ n: 9 }], Date.now())
    await collectProvably()
    expect(mine()).toHaveLength(1)
    live.end('rejected')
    expect(owner.told.at(-1)!.status).toBe('rejected')
  })
})
