// A unit test of an internal module (src/internal/LedgerCheckpoints.ts), so it imports it by path:
// when a buffer writes its ledger is not part of the package's API. The write lane here is a
// plain promise chain that a test can hold shut; the files are in memory.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { AckLedger } from '../src/internal/AckLedger.js'
import { LedgerCheckpoints } from '../src/internal/LedgerCheckpoints.js'
import { Ledger, PATH } from './fixtures/MemoryBuffer.js'
import { gateLedgerWrites, MemoryFileSystem } from './fixtures/MemoryFileSystem.js'

function setup(
  options: {
    readonly ledgerIntervalMs?: number
    readonly ledgerEveryAcks?: number
    readonly visibleIsDurable?: boolean
  } = {},
) {
  const fs = new MemoryFileSystem()
  const logs: string[] = []
  const calls: string[] = []
  const acks = new AckLedger(0)
  let nextSeq = 10
  let lane: Promise<unknown> = Promise.resolve()
  let jobs = 0
  const serial = <T>(job: () => Promise<T>): Promise<T> => {
    jobs++
    const run = lane.then(job)
    lane = run.catch(() => undefined)
    return run
  }
  const checkpoints = new LedgerCheckpoints({
    settings: {
      fs,
      path: PATH,
      ledgerIntervalMs: options.ledgerIntervalMs ?? 1000,
      ledgerEveryAcks: options.ledgerEveryAcks ?? 100,
      log: (m) => logs.push(m),
    },
    acks,
    serial,
    visibleIsDurable: options.visibleIsDurable ?? false,
    sync: async () => {
      calls.push('sync')
    },
    position: () => {
      calls.push('position')
      return { nextSeq, segments: [0] }
    },
  })
  /** Acknowledges `seq` as the buffer does: the ledger hears of it when the prefix advances. */
  const ack = (seq: number): void => {
    if (acks.mark(seq)) checkpoints.advanced()
  }
  /** Holds the lane shut (once this resolves) until the function it resolves to is called. */
  const hold = (): Promise<() => void> =>
    new Promise((running) => {
      void serial(() => new Promise<void>((open) => running(open)))
    })
  const idle = (): Promise<unknown> => serial(async () => undefined)
  const saved = async (): Promise<number | undefined> => {
    const read = await Ledger.read(fs, PATH)
    return read.status === 'ok' ? read.ledger.ackedBelow : undefined
  }
  return {
    fs,
    logs,
    calls,
    acks,
    checkpoints,
    ack,
    hold,
    idle,
    saved,
    jobs: () => jobs,
    writes: () => calls.filter((c) => c === 'sync').length,
    positions: () => calls.filter((c) => c === 'position').length,
    setNextSeq: (n: number) => {
      nextSeq = n
    },
  }
}

describe('LedgerCheckpoints', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('saves an advance of the acknowledged prefix ledgerIntervalMs later, not before', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    const t = setup({ ledgerIntervalMs: 1000 })
    await t.fs.mkdir(PATH)
    t.ack(0)
    t.ack(1)
    await vi.advanceTimersByTimeAsync(999)
    await t.idle()
    expect(await t.saved()).toBeUndefined()
    await vi.advanceTimersByTimeAsync(1)
    await t.idle()
    expect(await t.saved()).toBe(2)
    expect(t.writes()).toBe(1) // one timer for both advances
    expect(t.acks.unsaved).toBe(0)
  })

  it('queues a checkpoint at once after ledgerEveryAcks unsaved advances, and cancels the timer', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    const t = setup({ ledgerIntervalMs: 1000, ledgerEveryAcks: 3 })
    await t.fs.mkdir(PATH)
    t.ack(0)
    t.ack(1)
    await t.idle()
    expect(await t.saved()).toBeUndefined()
    t.ack(2)
    await t.idle()
    expect(await t.saved()).toBe(3)
    expect(vi.getTimerCount()).toBe(0)
    await vi.advanceTimersByTimeAsync(5000)
    await t.idle()
    expect(t.writes()).toBe(1)
  })

  it('keeps at most one checkpoint queued on the lane, which saves the state as it is when it runs', async () => {
    const t = setup({ ledgerEveryAcks: 1 })
    await t.fs.mkdir(PATH)
    const open = await t.hold()
    const before = t.jobs()
    for (let seq = 0; seq < 50; seq++) t.ack(seq)
    expect(t.jobs() - before).toBe(1)
    t.setNextSeq(60)
    open()
    await t.idle()
    expect(t.writes()).toBe(1)
    const read = await Ledger.read(t.fs, PATH)
    expect(read).toEqual({ status: 'ok', ledger: { nextSeq: 60, ackedBelow: 50, segments: [0] } })
    // Once it ran, the next advance queues another.
    t.ack(50)
    await t.idle()
    expect(await t.saved()).toBe(51)
  })

  it('fsyncs what was written before it reads the position it saves', async () => {
    const t = setup()
    await t.fs.mkdir(PATH)
    await t.checkpoints.now()
    expect(t.calls).toEqual(['sync', 'position'])
  })

  it('a scheduled checkpoint writes nothing when nothing changed since the last one; a change alone schedules none', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    const t = setup({ ledgerIntervalMs: 1000 })
    await t.fs.mkdir(PATH)
    t.ack(0)
    await t.checkpoints.now() // saves the advance before the timer fires
    expect(t.writes()).toBe(1)
    await vi.advanceTimersByTimeAsync(1000)
    await t.idle()
    expect(t.writes()).toBe(1)
    // A change the ledger records (a segment added) schedules nothing by itself…
    t.checkpoints.changed()
    expect(vi.getTimerCount()).toBe(0)
    // …the next advance does.
    t.ack(1)
    await vi.advanceTimersByTimeAsync(1000)
    await t.idle()
    expect(t.writes()).toBe(2)
  })

  it('once stopped, cancels its timer and schedules nothing again; asked, it still writes', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    const t = setup({ ledgerIntervalMs: 1000, ledgerEveryAcks: 2 })
    await t.fs.mkdir(PATH)
    t.ack(0)
    expect(vi.getTimerCount()).toBe(1)
    t.checkpoints.stop()
    t.checkpoints.stop() // idempotent
    expect(vi.getTimerCount()).toBe(0)
    for (let seq = 1; seq < 10; seq++) t.ack(seq)
    await vi.advanceTimersByTimeAsync(5000)
    await t.idle()
    expect(t.writes()).toBe(0)
    expect(vi.getTimerCount()).toBe(0)
    // close() writes the last ledger itself, on the lane.
    await t.checkpoints.now()
    expect(await t.saved()).toBe(10)
  })

  it('a queued checkpoint that fails is logged, naming the buffer, and the next one is queued again', async () => {
    const t = setup({ ledgerEveryAcks: 1 })
    await t.fs.mkdir(PATH)
    t.fs.fault = (op) =>
      op === 'rename' ? Object.assign(new Error('EIO: rename'), { code: 'EIO' }) : undefined
    t.ack(0)
    await t.idle()
    expect(t.logs).toEqual([`disk buffer ${PATH}: ledger checkpoint failed (EIO: rename)`])
    expect(await t.saved()).toBeUndefined()
    t.fs.fault = undefined
    t.ack(1)
    await t.idle()
    expect(await t.saved()).toBe(2)
  })
})

/** Turns of the event loop until `done()` holds (at most 1000): what a checkpoint beside the lane needs to finish. */
async function until(done: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (await done()) return
    await new Promise((resolve) => setImmediate(resolve))
  }
  throw new Error('the condition never held')
}

describe('LedgerCheckpoints caps the prefix it saves at what is written', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  for (const visibleIsDurable of [false, true]) {
    it(`${visibleIsDurable ? 'beside the lane' : 'on the lane'}: saves no acknowledged position past the end of the last group written, the rest once a group is written, and nothing again while nothing is`, async () => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
      const t = setup({ ledgerIntervalMs: 1000, ledgerEveryAcks: 1, visibleIsDurable })
      await t.fs.mkdir(PATH)
      const settled = async (): Promise<void> => {
        await t.idle()
        await t.checkpoints.settled()
      }
      t.setNextSeq(2) // numbers 2..4 were skipped by a failed group: acknowledged, never written
      for (let seq = 0; seq < 5; seq++) t.ack(seq)
      await settled()
      expect(await Ledger.read(t.fs, PATH)).toEqual({
        status: 'ok',
        ledger: { nextSeq: 2, ackedBelow: 2, segments: [0] },
      })
      expect(t.acks.unsaved).toBe(3)
      // Nothing is written: no timer rewrites the same ledger again and again.
      const positions = t.positions()
      await vi.advanceTimersByTimeAsync(10_000)
      await settled()
      expect(t.positions()).toBe(positions)
      expect(vi.getTimerCount()).toBe(0)
      // The group after them is written: that change queues the checkpoint that saves the rest.
      t.setNextSeq(6)
      t.checkpoints.changed()
      await settled()
      expect(await t.saved()).toBe(5)
      expect(t.acks.unsaved).toBe(0)
    })
  }
})

describe('LedgerCheckpoints beside the write lane (every visible record durable)', () => {
  it('saves a scheduled checkpoint while the lane is held shut, without an fsync', async () => {
    const t = setup({ ledgerEveryAcks: 1, visibleIsDurable: true })
    await t.fs.mkdir(PATH)
    const open = await t.hold()
    const jobs = t.jobs()
    t.setNextSeq(5)
    for (let seq = 0; seq < 3; seq++) t.ack(seq)
    await until(async () => (await t.saved()) === 3)
    expect(t.jobs()).toBe(jobs) // nothing queued on the lane
    expect(t.calls).not.toContain('sync')
    expect(await Ledger.read(t.fs, PATH)).toEqual({
      status: 'ok',
      ledger: { nextSeq: 5, ackedBelow: 3, segments: [0] },
    })
    open()
  })

  it('writes one checkpoint at a time, each after the one before, a checkpoint asked for on the lane too', async () => {
    const t = setup({ ledgerEveryAcks: 1, visibleIsDurable: true })
    await t.fs.mkdir(PATH)
    const gate = gateLedgerWrites(t.fs, { armed: true })
    t.ack(0) // a checkpoint starts, and waits in its write
    await until(() => gate.running() === 1)
    t.ack(1) // queued behind it
    t.ack(2)
    const asked = t.checkpoints.now() // on the lane, behind both
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve))
    expect(gate.running()).toBe(1)
    expect(t.positions()).toBe(1) // the others have not read the position yet
    gate.open()
    await asked
    expect(gate.most()).toBe(1)
    expect(t.positions()).toBe(3) // the first, one for both queued advances, the one asked for
    expect(await t.saved()).toBe(3)
    expect(t.acks.unsaved).toBe(0)
  })

  it('a checkpoint queued beside the lane and not started when it is stopped writes nothing', async () => {
    const t = setup({ ledgerEveryAcks: 1, visibleIsDurable: true })
    await t.fs.mkdir(PATH)
    const gate = gateLedgerWrites(t.fs, { armed: true })
    t.ack(0)
    await until(() => gate.running() === 1)
    t.ack(1) // queued
    t.checkpoints.stop()
    gate.open()
    await until(() => gate.running() === 0)
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve))
    expect(t.positions()).toBe(1)
    expect(await t.saved()).toBe(1)
  })

  it('an advance made while a checkpoint writes is saved by the next one', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    try {
      const t = setup({ ledgerIntervalMs: 1000, ledgerEveryAcks: 1000, visibleIsDurable: true })
      await t.fs.mkdir(PATH)
      const gate = gateLedgerWrites(t.fs, { armed: true })
      t.ack(0)
      await vi.advanceTimersByTimeAsync(1000) // the timer queues the checkpoint
      await until(() => gate.running() === 1)
      t.ack(1) // after it read the position: schedules the next
      gate.open()
      await until(() => gate.running() === 0)
      expect(await t.saved()).toBe(1)
      await vi.advanceTimersByTimeAsync(1000)
      await until(async () => (await t.saved()) === 2)
      expect(t.positions()).toBe(2)
    } finally {
      vi.useRealTimers()
    }
  })
})
