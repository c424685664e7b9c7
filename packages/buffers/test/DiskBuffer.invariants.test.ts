// Invariants: durability before acknowledgement, segment bounds, back pressure, limits.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DiskBufferError } from '@ackline/buffers'
import { describe, expect, it } from 'vitest'
import { drain, PATH, records, setup, text } from './fixtures/MemoryBuffer.js'

const ticks = async (n = 20): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve))
}

describe('DiskBuffer invariants', () => {
  it("under sync 'always' an append resolves only after its fdatasync, so a crash right after loses nothing", async () => {
    const { fs, open } = setup()
    const buffer = await open()
    const before = fs.counts.datasync
    const result = await buffer.append(records(3))
    expect(result.status).toBe('written')
    expect(fs.counts.datasync).toBeGreaterThan(before)
    buffer._abandon()
    fs.crash()
    const reopened = await open()
    expect(await drain(reopened)).toEqual(['r0', 'r1', 'r2'])
    await reopened.close()
  })

  it('with group commit, durable resolves only after the fsync: a crash keeps what was durable and loses the rest', async () => {
    const { fs, open } = setup({ sync: { everyMs: 60_000, everyWrites: 3 } })
    const buffer = await open()
    const first = await buffer.append(records(1, 0))
    const second = await buffer.append(records(1, 1))
    let durable = false
    if (first.status !== 'written' || second.status !== 'written') throw new Error('not written')
    void first.durable.then(() => {
      durable = true
    })
    await ticks()
    expect(durable).toBe(false) // two writes of three: no fsync yet
    const third = await buffer.append(records(1, 2)) // the third write triggers the group fsync
    if (third.status !== 'written') throw new Error('not written')
    expect(await first.durable).toBe('durable')
    expect(await third.durable).toBe('durable')
    await buffer.append(records(1, 3)) // written, never fsynced
    buffer._abandon()
    fs.crash()
    const reopened = await open()
    expect(await drain(reopened)).toEqual(['r0', 'r1', 'r2'])
    await reopened.close()
  })

  it('with group commit, the timer fsyncs within everyMs', async () => {
    const { fs, open } = setup({ sync: { everyMs: 1, everyWrites: 1000 } })
    const buffer = await open()
    const result = await buffer.append(records(1))
    if (result.status !== 'written') throw new Error('not written')
    expect(await result.durable).toBe('durable')
    buffer._abandon()
    fs.crash()
    const reopened = await open()
    expect(await drain(reopened)).toEqual(['r0'])
    await reopened.close()
  })

  it('with group commit, a pending fsync holds the process open: a program awaiting durable is answered', () => {
    // The child's buffer is all it has: an fsync timer that let the process exit left the promise
    // unresolved and the rest of the program (its close) unrun.
    const dir = mkdtempSync(join(tmpdir(), 'ackline-durable-'))
    try {
      const child = spawnSync(
        process.execPath,
        [
          '--conditions=source',
          '--import',
          'tsx',
          new URL('./fixtures/durableChild.ts', import.meta.url).pathname,
          dir,
        ],
        { cwd: new URL('../../..', import.meta.url).pathname, encoding: 'utf8', timeout: 60_000 },
      )
      expect({ status: child.status, stdout: child.stdout.trim().split('\n') }).toEqual({
        status: 0,
        stdout: ['written', 'durable durable', 'closed'],
      })
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('never lets a record span two segments, nor a segment pass segmentBytes', async () => {
    const { fs, open } = setup({ segmentBytes: 100 })
    const buffer = await open()
    for (let i = 0; i < 20; i++) await buffer.append(records(3, i * 3))
    const segments = fs.files(PATH).filter((p) => p.endsWith('.seg'))
    expect(segments.length).toBeGreaterThan(5)
    for (const p of segments) expect(fs.bytes(p)!.length).toBeLessThanOrEqual(100)
    expect(await drain(buffer)).toEqual(records(60).map(text))
    await buffer.close()
  })

  it('names each segment after its first sequence number and keeps sequence numbers across restarts', async () => {
    const { open } = setup({ segmentBytes: 46 })
    const buffer = await open()
    const a = await buffer.append(records(3))
    await buffer.close()
    const reopened = await open()
    const b = await reopened.append(records(2, 3))
    expect(a).toMatchObject({ status: 'written', firstSeq: 0, count: 3 })
    expect(b).toMatchObject({ status: 'written', firstSeq: 3, count: 2 })
    await reopened.close()
  })

  it('does not reuse the sequence numbers of acknowledged records after everything was deleted', async () => {
    const { open } = setup()
    const buffer = await open()
    await buffer.append(records(3))
    expect(await drain(buffer)).toHaveLength(3)
    await buffer.close()
    const reopened = await open()
    expect(await reopened.append(records(1, 3))).toMatchObject({ firstSeq: 3 })
    await reopened.close()
  })

  it('makes an append wait at maxBytes until acknowledgements free a segment (back pressure)', async () => {
    const { open } = setup({ segmentBytes: 46, maxBytes: 92 }) // two segments of two 22-byte frames
    const buffer = await open()
    await buffer.append(records(4))
    let done = false
    const blocked = buffer.append(records(1, 4)).then((r) => {
      done = true
      return r
    })
    await ticks()
    expect(done).toBe(false)
    const got = (await buffer.read(2))!
    buffer.ack(got[0]!.seq)
    await ticks()
    expect(done).toBe(false) // half a segment acknowledged frees nothing
    buffer.ack(got[1]!.seq)
    expect(await blocked).toMatchObject({ status: 'written', firstSeq: 4 })
    await buffer.close()
  })

  it('refuses a payload that shrank while its append waited for room, and numbers and counts nothing for it', async () => {
    const { open } = setup({ segmentBytes: 1024, maxBytes: 50 })
    const buffer = await open()
    await buffer.append(records(2))
    // A view on a resizable buffer (ES2024, in Node 20; not in this project's type library): its
    // length follows the buffer's.
    const Resizable = ArrayBuffer as unknown as new (
      length: number,
      options: { maxByteLength: number },
    ) => ArrayBuffer & { resize(length: number): void }
    const resizable = new Resizable(8, { maxByteLength: 8 })
    const shrinking = new Uint8Array(resizable).fill(0x61)
    const blocked = buffer.append([shrinking]).catch((e: unknown) => e)
    await ticks()
    resizable.resize(2)
    for (const r of (await buffer.read(2))!) buffer.ack(r.seq)
    const error = await blocked
    expect(error).toBeInstanceOf(RangeError)
    expect((error as Error).message).toContain('counted as 8 bytes but is 2')
    // The next append gets the next number, and only what was written is read back.
    expect(await buffer.append(records(1, 2))).toMatchObject({ status: 'written', firstSeq: 2 })
    expect(await drain(buffer)).toEqual(['r2'])
    await buffer.close()
  })

  it('reclaims the segment being written when everything is acknowledged and a writer waits', async () => {
    const { open } = setup({ segmentBytes: 1024, maxBytes: 50 })
    const buffer = await open()
    await buffer.append(records(2))
    const blocked = buffer.append(records(2, 2))
    for (const r of (await buffer.read(2))!) buffer.ack(r.seq)
    expect(await blocked).toMatchObject({ status: 'written', firstSeq: 2 })
    expect(await drain(buffer)).toEqual(['r2', 'r3'])
    await buffer.close()
  })

  it("refuses at maxBytes when asked to ('full'), at once", async () => {
    const { open } = setup({ segmentBytes: 46, maxBytes: 46 })
    const buffer = await open()
    await buffer.append(records(2))
    expect(await buffer.append(records(1), { whenFull: 'refuse' })).toEqual({ status: 'full' })
    await buffer.close()
  })

  it('hands out at most maxInFlight unsettled records, and goes on once one is settled', async () => {
    const { open } = setup({ maxInFlight: 2 })
    const buffer = await open()
    await buffer.append(records(3))
    const first = (await buffer.read(10))!
    expect(first.map((r) => r.seq)).toEqual([0, 1])
    let next: unknown
    const pending = buffer.read(10).then((r) => {
      next = r
    })
    await ticks()
    expect(next).toBeUndefined()
    buffer.ack(first[1]!.seq)
    await pending
    expect((next as { seq: number }[]).map((r) => r.seq)).toEqual([2])
    await buffer.close()
  })

  it('once closed, settling a record touches no file: what was not acknowledged before close is read again', async () => {
    const { fs, open } = setup({ segmentBytes: 46 }) // two 22-byte frames a segment
    const buffer = await open()
    await buffer.append(records(4))
    const got = (await buffer.read(4))!
    buffer.ack(got[0]!.seq)
    await buffer.close()
    const files = fs.files(PATH).sort()
    for (const r of got.slice(1)) buffer.ack(r.seq) // would free the first segment while open
    buffer.nack(got[1]!.seq)
    expect(await buffer.deadLetter(got[2]!.seq)).toBe('unknown')
    await buffer.checkpoint()
    await buffer.flush()
    await ticks()
    expect(fs.files(PATH).sort()).toEqual(files)
    // The counters stay readable, as they were at close.
    expect(buffer.metrics()).toMatchObject({ segments: 2, acked: 1, unackedRecords: 3, redeliveries: 0 })
    expect(buffer.ackedBelow).toBe(1)
    expect(await buffer.read(10)).toBeUndefined()
    const reopened = await open()
    expect(await drain(reopened)).toEqual(['r1', 'r2', 'r3'])
    await reopened.close()
  })

  it('rejects a record larger than a segment at once with an error naming segmentBytes', async () => {
    const { open } = setup({ segmentBytes: 64 })
    const buffer = await open()
    const error = await buffer.append([Buffer.alloc(45)]).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(DiskBufferError)
    expect(error).toMatchObject({ code: 'RECORD_TOO_LARGE', field: 'segmentBytes' })
    expect(await buffer.append([Buffer.alloc(44)])).toMatchObject({ status: 'written' })
    await buffer.close()
  })

  it('refuses a payload longer than the frame can say (2^32 − 1 bytes) even when segments are larger', async () => {
    // A frame's length is 32 bits: with segments over 4 GiB, a longer payload was framed with its
    // length cut to 32 bits (Node 22 allocates such buffers; Node 20 threw a bare RangeError).
    // Without a dead-letter queue, whose header takes 12 bytes more (see the next test).
    const { open } = setup({ segmentBytes: 2 ** 33, deadLetters: false })
    const buffer = await open()
    expect(buffer.maxRecordBytes).toBe(2 ** 32 - 1)
    // Bytes that say they are one longer than a frame holds, without allocating 4 GiB.
    class Huge extends Uint8Array {
      override get length(): number {
        return 2 ** 32
      }
    }
    const error = await buffer.append([new Huge(1)]).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(DiskBufferError)
    expect(error).toMatchObject({
      code: 'RECORD_TOO_LARGE',
      message: expect.stringContaining(
        `a record of ${2 ** 32} bytes does not fit a frame (at most ${2 ** 32 - 1} bytes)`,
      ),
    })
    expect(buffer.nextSeq).toBe(0)
    await buffer.close()
  })

  it('refuses a record whose dead letter could not be framed (2^32 − 12 to 2^32 − 1 bytes), so every record it takes can be dead-lettered', async () => {
    // A dead letter is the record and a 12-byte header, in a frame of at most 2^32 − 1 bytes: a
    // record of 2^32 − 12 bytes or more was taken, and then `deadLetter` threw RECORD_TOO_LARGE.
    const { open } = setup({ segmentBytes: 2 ** 33 })
    const buffer = await open()
    expect(buffer.maxRecordBytes).toBe(2 ** 32 - 1 - 12)
    const sized = (length: number) =>
      new (class extends Uint8Array {
        override get length(): number {
          return length
        }
      })(1)
    for (const length of [2 ** 32 - 12, 2 ** 32 - 1]) {
      const error = await buffer.append([sized(length)]).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(DiskBufferError)
      expect(error).toMatchObject({
        code: 'RECORD_TOO_LARGE',
        message: expect.stringContaining(
          `a record of ${length} bytes does not fit a frame with its dead-letter header (at most ${2 ** 32 - 13} bytes)`,
        ),
      })
    }
    expect(buffer.nextSeq).toBe(0)
    await buffer.close()
    // A buffer without a dead-letter queue (one itself) keeps the frame's whole length.
    const { open: openBare } = setup({ segmentBytes: 2 ** 33, deadLetters: false })
    const bare = await openBare()
    expect(bare.maxRecordBytes).toBe(2 ** 32 - 1)
    await bare.close()
  })

  it('refuses at once a payload that is neither bytes nor a string (untyped code), storing and numbering nothing', async () => {
    const { open } = setup()
    const buffer = await open()
    await buffer.append(records(1))
    // A Uint16Array was stored as `length` bytes, each element cut to one. An ArrayBuffer has no
    // length: counted as NaN bytes, its append waited for room for ever.
    for (const bad of [Uint16Array.of(1, 256, 513), new ArrayBuffer(4), {}, 5, null]) {
      const error = await buffer.append([Buffer.from('ok'), bad] as never).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(TypeError)
      expect((error as Error).message).toContain('payload 1')
    }
    expect(buffer.nextSeq).toBe(1)
    expect(await drain(buffer)).toEqual(['r0'])
    await buffer.close()
  })

  it('refuses at once payloads that are not an array (untyped code), storing and numbering nothing', async () => {
    const { open } = setup()
    const buffer = await open()
    await buffer.append(records(1))
    // A string was stored as one record per character; a Buffer failed on its first byte, a
    // missing list with a bare "Cannot read properties of undefined".
    for (const bad of ['abc', Buffer.from('abc'), undefined, null, { length: 1, 0: 'x' }]) {
      const error = await buffer.append(bad as never).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(TypeError)
      expect((error as Error).message).toContain(`disk buffer ${PATH}: append's payloads must be an array`)
    }
    expect(buffer.nextSeq).toBe(1)
    expect(await drain(buffer)).toEqual(['r0'])
    await buffer.close()
  })

  it('stores a string payload as its UTF-8 bytes, and measures it in bytes against a segment', async () => {
    const { open } = setup({ segmentBytes: 64 })
    const buffer = await open()
    // 'é' is 2 bytes, '€' 3 and '𝄞' 4 in UTF-8: 44 bytes in all, the most a segment takes.
    const fits = `${'é'.repeat(10)}${'€'.repeat(4)}𝄞${'a'.repeat(8)}`
    expect(Buffer.byteLength(fits)).toBe(44)
    expect(await buffer.append([fits, Buffer.from('raw'), ''])).toMatchObject({ status: 'written', count: 3 })
    const error = await buffer.append([`${fits}a`]).catch((e: unknown) => e)
    expect(error).toMatchObject({ code: 'RECORD_TOO_LARGE', field: 'segmentBytes' })
    const read = (await buffer.read(10))!
    expect(read.map((r) => Buffer.from(r.payload).toString('utf8'))).toEqual([fits, 'raw', ''])
    for (const r of read) buffer.ack(r.seq)
    await buffer.close()
    const reopened = await open()
    expect(await drain(reopened)).toEqual([])
    await reopened.close()
  })
})
