// Acknowledgements: out of order, negative (redelivery), rejection (dead letters), and what a
// restart redelivers.
import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  type Crashable,
  CrashableDiskBuffer,
  drain,
  Ledger,
  PATH,
  records,
  setup,
  text,
} from './fixtures/MemoryBuffer.js'
import { gateLedgerWrites, MemoryFileSystem } from './fixtures/MemoryFileSystem.js'

afterEach(() => {
  vi.useRealTimers()
})

describe('DiskBuffer acknowledgements', () => {
  it('keeps the contiguous acknowledged prefix when acknowledgements arrive out of order', async () => {
    const { open } = setup()
    const buffer = await open()
    await buffer.append(records(5))
    const got = (await buffer.read(5))!
    buffer.ack(got[3]!.seq)
    buffer.ack(got[1]!.seq)
    expect(buffer.ackedBelow).toBe(0)
    buffer.ack(got[0]!.seq)
    expect(buffer.ackedBelow).toBe(2)
    buffer.ack(got[2]!.seq)
    expect(buffer.ackedBelow).toBe(4)
    expect(buffer.metrics().unackedRecords).toBe(1)
    await buffer.close()
  })

  it('acknowledging twice is harmless', async () => {
    const { open } = setup()
    const buffer = await open()
    await buffer.append(records(2))
    const got = (await buffer.read(2))!
    buffer.ack(got[1]!.seq)
    buffer.ack(got[1]!.seq)
    buffer.ack(got[0]!.seq)
    buffer.ack(got[0]!.seq)
    expect(buffer.ackedBelow).toBe(2)
    expect(buffer.metrics().acked).toBe(2)
    await buffer.close()
  })

  it('after a restart redelivers everything from the first unacknowledged record, including acknowledged ones above the gap', async () => {
    const { open } = setup()
    const buffer = await open()
    await buffer.append(records(6))
    const got = (await buffer.read(6))!
    for (const i of [0, 1, 3, 5]) buffer.ack(got[i]!.seq)
    await buffer.close()
    const reopened = await open()
    expect(await drain(reopened)).toEqual(['r2', 'r3', 'r4', 'r5'])
    await reopened.close()
  })

  it('deletes a segment only once every record in it is acknowledged', async () => {
    const { fs, open } = setup({ segmentBytes: 46 }) // two 22-byte frames per segment
    const buffer = await open()
    await buffer.append(records(4))
    const segment0 = `${PATH}/00000000000000000000.seg`
    const got = (await buffer.read(4))!
    buffer.ack(got[1]!.seq)
    buffer.ack(got[2]!.seq)
    buffer.ack(got[3]!.seq)
    await buffer.checkpoint()
    expect(fs.bytes(segment0)).toBeDefined()
    buffer.ack(got[0]!.seq)
    await buffer.checkpoint()
    expect(fs.bytes(segment0)).toBeUndefined()
    await buffer.close()
  })

  it('redelivers a negatively acknowledged record after a back-off that doubles, and never deletes it', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] })
    const { open } = setup({ retryBackoff: { initialMs: 100, maxMs: 1000 } })
    const buffer = await open()
    await buffer.append(records(2))
    const [a, b] = (await buffer.read(2))!
    buffer.ack(b!.seq)
    buffer.nack(a!.seq)
    let again: Awaited<ReturnType<Crashable['read']>> | 'waiting' = 'waiting'
    const pending = buffer.read(10).then((r) => {
      again = r
    })
    await vi.advanceTimersByTimeAsync(99)
    expect(again).toBe('waiting')
    await vi.advanceTimersByTimeAsync(1)
    await pending
    expect(again).toEqual([{ seq: a!.seq, payload: a!.payload, attempt: 1 }])
    buffer.nack(a!.seq)
    const third = buffer.read(10)
    await vi.advanceTimersByTimeAsync(199)
    expect(buffer.metrics().retryPending).toBe(1)
    await vi.advanceTimersByTimeAsync(1)
    expect((await third)![0]!.attempt).toBe(2)
    expect(buffer.metrics().redeliveries).toBe(2)
    expect(buffer.ackedBelow).toBe(0) // not deleted, not acknowledged
    buffer.ack(a!.seq)
    expect(buffer.ackedBelow).toBe(2)
    await buffer.close()
  })

  it('waits out a back-off longer than a timer can (30 days) in timers of at most 2^31 - 1 ms, not in a loop of 1 ms ones', async () => {
    const days30 = 30 * 24 * 3_600_000
    const { open } = setup({ retryBackoff: { initialMs: days30, maxMs: days30 } })
    const buffer = await open()
    await buffer.append(records(1))
    const timers = vi.spyOn(globalThis, 'setTimeout')
    try {
      buffer.nack((await buffer.read(1))![0]!.seq)
      const waiting = buffer.read(1)
      await new Promise((resolve) => setImmediate(resolve)) // it got to the wait
      const delays = timers.mock.calls.map((call) => call[1] ?? 0)
      expect(delays.length).toBeGreaterThan(0)
      expect(delays.every((ms) => ms <= 2_147_483_647)).toBe(true)
      await buffer.close()
      expect(await waiting).toBeUndefined()
    } finally {
      timers.mockRestore()
    }
  })

  it('hands a record out again after its 1025th nack with retryBackoff.initialMs 0 (0 · 2^1024 is NaN, which no time passes)', async () => {
    const { open } = setup({ retryBackoff: { initialMs: 0, maxMs: 30_000 } })
    const buffer = await open()
    await buffer.append(records(1))
    let seq = (await buffer.read(1))![0]!.seq
    for (let attempt = 1; attempt <= 1100; attempt++) {
      buffer.nack(seq)
      const again = await buffer.read(1, { wait: false })
      expect(again?.map((r) => [text(r.payload), r.attempt])).toEqual([['r0', attempt]])
      seq = again![0]!.seq
    }
    buffer.ack(seq)
    expect(buffer.metrics().retryPending).toBe(0)
    await buffer.close()
  })
  it('ends a drain once the last record in flight is acknowledged, leaving one that waits out its back-off for the next run', async () => {
    const { open } = setup({ retryBackoff: { initialMs: 600_000, maxMs: 600_000 } })
    const buffer = await open()
    await buffer.append(records(2))
    const got = (await buffer.read(2))!
    buffer.nack(got[0]!.seq) // waits ten minutes for its redelivery
    buffer.endWrites()
    let drained: unknown = 'waiting'
    void buffer.read().then((records) => {
      drained = records
    })
    const turns = async (): Promise<void> => {
      for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve))
    }
    await turns()
    expect(drained).toBe('waiting') // record 1 is still in flight
    buffer.ack(got[1]!.seq) // above the prefix: record 0 is not acknowledged
    await turns()
    expect(drained).toBeUndefined()
    expect(buffer.metrics()).toMatchObject({ inFlight: 0, retryPending: 1 })
    await buffer.close()
  })

  it('counts records waiting for redelivery against maxInFlight: a failing sink does not pull the backlog into memory', async () => {
    const { open } = setup({ maxInFlight: 2, retryBackoff: { initialMs: 60_000, maxMs: 60_000 } })
    const buffer = await open()
    await buffer.append(records(4))
    const got = (await buffer.read(10))!
    expect(got.map((r) => text(r.payload))).toEqual(['r0', 'r1'])
    for (const r of got) buffer.nack(r.seq)
    expect(await buffer.read(10, { wait: false })).toEqual([]) // both still unsettled
    const next = buffer.read(10)
    buffer.ack(got[0]!.seq) // settled while waiting for its retry: room for one
    expect((await next)!.map((r) => text(r.payload))).toEqual(['r2'])
    expect(buffer.metrics()).toMatchObject({ inFlight: 1, retryPending: 1 })
    await buffer.close()
  })

  it('reads on while more records wait for redelivery than a call can take as arguments', async () => {
    const n = 150_000
    const { open } = setup({
      segmentBytes: 16 << 20,
      maxInFlight: n,
      retryBackoff: { initialMs: 60_000, maxMs: 60_000 },
    })
    const buffer = await open()
    await buffer.append(Array.from({ length: n }, () => 'x'))
    for (const r of (await buffer.read(n))!) buffer.nack(r.seq)
    const waiting = buffer.read(10) // waits for the first retry to be due
    await new Promise((resolve) => setImmediate(resolve)) // it got to the wait
    expect(buffer.metrics().retryPending).toBe(n)
    await buffer.close()
    expect(await waiting).toBeUndefined()
  })

  it('moves a rejected record to the dead-letter queue, acknowledges it, and never redelivers it', async () => {
    const { open } = setup()
    const buffer = await open()
    await buffer.append(records(3))
    const got = (await buffer.read(3))!
    expect(await buffer.deadLetter(got[1]!.seq)).toBe('dead-lettered')
    buffer.ack(got[0]!.seq)
    buffer.ack(got[2]!.seq)
    expect(buffer.ackedBelow).toBe(3)
    expect(buffer.metrics().deadLettered).toBe(1)
    const letters = []
    for await (const letter of buffer.deadLetters()) letters.push(letter)
    expect(letters.map((l) => [l.originalSeq, text(l.payload)])).toEqual([[1, 'r1']])
    expect(await drain(buffer)).toEqual([])
    await buffer.close()
  })

  it('dead-letters a record as large as a segment allows (its dead letter is longer by its header)', async () => {
    const { open } = setup({ segmentBytes: 1024 })
    const buffer = await open()
    const largest = Buffer.alloc(buffer.maxRecordBytes, 'x')
    await buffer.append([Buffer.from('small'), largest])
    const got = (await buffer.read(2))!
    expect(await buffer.deadLetter(got[0]!.seq)).toBe('dead-lettered')
    expect(await buffer.deadLetter(got[1]!.seq)).toBe('dead-lettered')
    await buffer.close()
    const reopened = await open()
    const letters = []
    for await (const letter of reopened.deadLetters()) letters.push(letter)
    expect(letters.map((l) => [l.originalSeq, l.payload.length])).toEqual([
      [0, 5],
      [1, largest.length],
    ])
    expect(Buffer.from(letters[1]!.payload).equals(largest)).toBe(true)
    expect(await drain(reopened)).toEqual([])
    await reopened.close()
  })

  it('does not redeliver a dead-lettered record after a crash that came before its acknowledgement was checkpointed', async () => {
    const { fs, open } = setup()
    const buffer = await open()
    await buffer.append(records(3))
    const got = (await buffer.read(3))!
    await buffer.deadLetter(got[0]!.seq) // fsynced to the dead-letter queue; the ledger still says 0
    buffer._abandon()
    fs.crash()
    const reopened = await open()
    expect(await drain(reopened)).toEqual(['r1', 'r2'])
    expect(reopened.metrics().deadLettered).toBe(1)
    await reopened.close()
  })

  it('delivers a replayed letter whose record a crash took from the queue (its number given again)', async () => {
    // Group commit: the reader sees a record before its fsync, so the sink may reject it and it
    // is dead-lettered (fsynced there) while the queue's own copy is lost by a power failure.
    const fs = new MemoryFileSystem()
    const open = (sync: 'always' | { everyMs: number; everyWrites: number }) =>
      CrashableDiskBuffer.open({ path: PATH, fileSystem: fs, segmentBytes: 1024, log: () => {}, sync })
    const buffer = await open({ everyMs: 60_000, everyWrites: 1000 })
    await buffer.append(records(1))
    const got = (await buffer.read(1))!
    expect(await buffer.deadLetter(got[0]!.seq)).toBe('dead-lettered')
    buffer._abandon()
    fs.crash()
    const reopened = await open('always')
    expect(reopened.nextSeq).toBe(0) // record 0 is gone: its number is given again
    expect(await reopened.replayDeadLetters()).toEqual({ status: 'replayed', count: 1 })
    expect(reopened.metrics().deadLettered).toBe(0)
    // Replayed as record 0, with the letter's payload: the same frame, the same checksum.
    expect(await drain(reopened)).toEqual(['r0'])
    await reopened.close()
  })

  it('replays dead letters into the queue and empties the dead-letter queue', async () => {
    const { open } = setup()
    const buffer = await open()
    await buffer.append(records(2))
    const got = (await buffer.read(2))!
    await buffer.deadLetter(got[0]!.seq)
    await buffer.deadLetter(got[1]!.seq)
    expect(await buffer.replayDeadLetters()).toEqual({ status: 'replayed', count: 2 })
    expect(buffer.metrics().deadLettered).toBe(0)
    await buffer.close()
    const reopened = await open()
    expect(reopened.metrics().deadLettered).toBe(0)
    expect(await drain(reopened)).toEqual(['r0', 'r1'])
    await reopened.close()
  })

  it('keeps a record dead-lettered while a replay runs: only what was replayed leaves the dead-letter queue', async () => {
    const { open } = setup()
    const buffer = await open()
    await buffer.append(records(2))
    const got = (await buffer.read(2))!
    await buffer.deadLetter(got[0]!.seq)
    const replay = buffer.replayDeadLetters()
    const rejected = buffer.deadLetter(got[1]!.seq) // the sink rejects another one meanwhile
    expect(await replay).toEqual({ status: 'replayed', count: 1 })
    expect(await rejected).toBe('dead-lettered')
    const letters: string[] = []
    for await (const letter of buffer.deadLetters()) letters.push(text(letter.payload))
    expect(letters).toEqual(['r1'])
    expect(buffer.metrics().deadLettered).toBe(1)
    await buffer.close()
    const reopened = await open()
    expect(await drain(reopened)).toEqual(['r0'])
    expect(reopened.metrics().deadLettered).toBe(1)
    await reopened.close()
  })

  it('replays a dead letter once across restarts when a damaged letter below it could not be replayed', async () => {
    const { fs, open } = setup()
    const buffer = await open()
    await buffer.append(records(3))
    for (const r of (await buffer.read(3))!) await buffer.deadLetter(r.seq)
    // The second letter's payload is damaged: it can never be replayed.
    const first = (fs as MemoryFileSystem).bytes(`${PATH}/dead-letter/00000000000000000000.seg`)!.length / 3
    ;(fs as MemoryFileSystem).flip(`${PATH}/dead-letter/00000000000000000000.seg`, first + 30)
    expect(await buffer.replayDeadLetters()).toEqual({ status: 'replayed', count: 2 })
    await buffer.close()
    for (let restart = 0; restart < 2; restart++) {
      const again = await open()
      expect(await again.replayDeadLetters()).toEqual({ status: 'replayed', count: 0 })
      await again.close()
    }
    const last = await open()
    expect(await drain(last)).toEqual(['r0', 'r2'])
    await last.close()
  })

  it('keeps the letters of a dead-letter segment it cannot open for a later replay, not taking them for missing ones', async () => {
    const { fs, open } = setup({ segmentBytes: 60 }) // one letter a segment
    const buffer = await open()
    await buffer.append(records(6))
    for (const r of (await buffer.read(6))!) await buffer.deadLetter(r.seq)
    const first = `${PATH}/dead-letter/00000000000000000000.seg`
    ;(fs as MemoryFileSystem).fault = (op, path) =>
      op === 'open' && path === first
        ? Object.assign(new Error('EIO: i/o error'), { code: 'EIO' })
        : undefined
    const failed = await buffer.replayDeadLetters()
    expect(failed).toMatchObject({ status: 'failed', error: { code: 'READ_FAILED' } })
    ;(fs as MemoryFileSystem).fault = undefined
    expect(await buffer.replayDeadLetters()).toEqual({ status: 'replayed', count: 6 })
    await buffer.close()
    const again = await open()
    expect((await drain(again)).sort()).toEqual(['r0', 'r1', 'r2', 'r3', 'r4', 'r5'])
    await again.close()
  })

  it('reports a replay whose closing checkpoint fails as failed, not by rejecting, and keeps the letters it moved', async () => {
    const { fs, open } = setup()
    const buffer = await open()
    await buffer.append(records(2))
    for (const r of (await buffer.read(2))!) await buffer.deadLetter(r.seq)
    const disk = fs as MemoryFileSystem
    // The disk fills up once the letters are back in the queue: only the ledgers cannot be written.
    disk.fault = (op, path) =>
      (op === 'write' || op === 'rename') && path.includes('ledger')
        ? Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' })
        : undefined
    const result = await buffer.replayDeadLetters()
    expect(result).toMatchObject({ status: 'failed', error: { code: 'WRITE_FAILED', path: PATH } })
    expect(result.status === 'failed' && result.error.message).toContain('2 replayed')
    disk.fault = undefined
    // The letters were moved all the same, and a later replay finds none left.
    expect(buffer.metrics().deadLettered).toBe(0)
    expect(await buffer.replayDeadLetters()).toEqual({ status: 'replayed', count: 0 })
    expect(await drain(buffer)).toEqual(['r0', 'r1'])
    await buffer.close()
  })

  it('replays each dead letter once when two replays are asked for at once', async () => {
    const { open } = setup()
    const buffer = await open()
    await buffer.append(records(2))
    for (const r of (await buffer.read(2))!) await buffer.deadLetter(r.seq)
    const both = await Promise.all([buffer.replayDeadLetters(), buffer.replayDeadLetters()])
    expect(both).toEqual([
      { status: 'replayed', count: 2 },
      { status: 'replayed', count: 0 },
    ])
    expect(await drain(buffer)).toEqual(['r0', 'r1'])
    await buffer.close()
  })
})

describe('DiskBuffer checkpoints of what was acknowledged', () => {
  for (const [sync, beside] of [
    ['always', true],
    [{ everyMs: 60_000, everyWrites: 1 }, false],
  ] as const) {
    it(`sync ${JSON.stringify(sync)}: appends ${beside ? 'go on while' : 'wait behind'} a scheduled checkpoint whose ledger write has not finished`, async () => {
      const { fs, open } = setup({ ledgerEveryAcks: 1, sync })
      // Once armed, a write to the ledger (appended to it, or to the file replacing it) waits
      // until opened: the checkpoint is stuck inside its write.
      const gate = gateLedgerWrites(fs)
      const buffer = await open()
      await buffer.append(records(2))
      await buffer.flush()
      gate.arm()
      const [first] = (await buffer.read(1))!
      buffer.ack(first!.seq) // queues a checkpoint
      for (let i = 0; i < 50 && gate.started() === 0; i++) await new Promise((r) => setImmediate(r))
      expect(gate.started()).toBe(1) // the checkpoint is inside its write (on the lane, or beside it)
      // What an append waits for: its answer under 'always'; under group commit, which answers
      // before the write, its durable promise (its write and fsync queue on the lane).
      let done = false
      const appended = buffer.append(records(1)).then(async (result) => {
        if (result.status === 'written') await result.durable
        done = true
        return result
      })
      for (let i = 0; i < 50 && !done; i++) await new Promise((r) => setImmediate(r))
      expect(done).toBe(beside)
      gate.open()
      expect((await appended).status).toBe('written')
      await buffer.flush()
      expect(await checkpointed(fs)).toBe(1)
      await buffer.close()
    })
  }

  /** What a crash now would leave: the acknowledged position in the ledger on disk. */
  const checkpointed = async (fs: MemoryFileSystem): Promise<number | undefined> => {
    const read = await Ledger.read(fs, PATH)
    return read.status === 'ok' ? read.ledger.ackedBelow : undefined
  }

  it('checkpoints at once after ledgerEveryAcks acknowledgements, else ledgerIntervalMs after one', async () => {
    vi.useFakeTimers()
    const { fs, open } = setup({ ledgerIntervalMs: 5000, ledgerEveryAcks: 4 })
    const buffer = await open()
    await buffer.append(records(10))
    const got = (await buffer.read(10))!
    for (const r of got.slice(0, 3)) buffer.ack(r.seq)
    await buffer.flush() // runs whatever the lane holds
    expect(await checkpointed(fs)).toBe(0)
    buffer.ack(got[3]!.seq) // the fourth: saved without waiting for the interval
    await buffer.flush()
    expect(await checkpointed(fs)).toBe(4)
    buffer.ack(got[4]!.seq)
    await buffer.flush()
    expect(await checkpointed(fs)).toBe(4)
    await vi.advanceTimersByTimeAsync(5000)
    await buffer.flush()
    expect(await checkpointed(fs)).toBe(5)
    buffer.ack(got[5]!.seq)
    await buffer.close() // and at close
    expect(await checkpointed(fs)).toBe(6)
  })

  it('after a crash, redelivers at most the acknowledgements not yet checkpointed', async () => {
    const { fs, open } = setup({ ledgerIntervalMs: 60_000, ledgerEveryAcks: 10 })
    const buffer = await open()
    await buffer.append(records(100))
    for (const r of (await buffer.read(100))!) buffer.ack(r.seq)
    await buffer.flush()
    buffer._abandon()
    fs.crash()
    const reopened = await open()
    // 100 acknowledged, checkpointed every 10: nothing comes again.
    expect(await drain(reopened)).toEqual([])
    await reopened.close()
  })

  it('names ledgerEveryAcks when it is not a positive integer', async () => {
    const { open } = setup({ ledgerEveryAcks: 0 })
    await expect(open()).rejects.toMatchObject({ code: 'INVALID_OPTION', field: 'ledgerEveryAcks' })
  })
})
