// Recovery: what `DiskBuffer.open` does with what a crash or damage left in the directory.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { BufferCheck, DiskBuffer, DiskBufferError } from '@ackline/buffers'
import { afterEach, describe, expect, it } from 'vitest'
import { CrashableDiskBuffer, Crc32c, drain, Frame, Ledger, PATH, setup } from './fixtures/MemoryBuffer.js'
import { type FileLike, type MemoryFileSystem, reopening } from './fixtures/MemoryFileSystem.js'

const record = (i: number): Buffer => Buffer.from(`record-${i}`) // 8 bytes for i < 10: 28-byte frames

const range = (n: number, from = 0): string[] => Array.from({ length: n }, (_, i) => `record-${from + i}`)

describe('DiskBuffer recovery', () => {
  it('cuts a torn last write off on open and keeps every record before it', async () => {
    const { fs, logs, open } = setup({ sync: { everyMs: 60_000, everyWrites: 1000 } })
    const buffer = await open()
    await buffer.append([0, 1, 2, 3, 4].map(record))
    await buffer.flush()
    await buffer.append([record(5)])
    buffer._abandon()
    fs.crash({ tear: true, random: () => 0.5 }) // half of record 5's frame reached the disk
    const reopened = await open()
    expect(reopened.metrics().tornBytesTruncated).toBe(14)
    expect(logs.some((m) => m.includes('torn write of 14 bytes'))).toBe(true)
    expect(await drain(reopened)).toEqual(range(5))
    await reopened.close()
  })

  it('appends after a truncated torn write and reads the new records back', async () => {
    const { fs, open } = setup({ sync: { everyMs: 60_000, everyWrites: 1000 } })
    const buffer = await open()
    await buffer.append([record(0)])
    await buffer.flush()
    await buffer.append([record(1)])
    buffer._abandon()
    fs.crash({ tear: true, random: () => 0.9 })
    const reopened = await open()
    await reopened.append([record(2)])
    expect(await drain(reopened)).toEqual(['record-0', 'record-2'])
    await reopened.close()
  })

  it('skips a record whose checksum fails mid-segment, counts it, logs segment and offset, and reads on', async () => {
    const { fs, logs, open } = setup()
    const buffer = await open()
    await buffer.append(range(5).map((s) => Buffer.from(s)))
    await buffer.close()
    fs.flip(`${PATH}/00000000000000000000.seg`, 2 * 28 + 20 + 3) // a payload byte of record 2
    const reopened = await open()
    expect(await drain(reopened)).toEqual(['record-0', 'record-1', 'record-3', 'record-4'])
    const m = reopened.metrics()
    expect(m.corruptRegions).toBe(1)
    expect(m.corruptBytes).toBe(28)
    expect(m.recordsLost).toBe(1)
    expect(logs).toContain(
      `disk buffer ${PATH}: checksum failure in segment 00000000000000000000.seg at offset 56; skipped 28 bytes`,
    )
    await reopened.close()
  })

  it('resynchronises on the framing when a damaged length field hides where the next frame starts', async () => {
    const { fs, open } = setup()
    const buffer = await open()
    await buffer.append(range(5).map((s) => Buffer.from(s)))
    await buffer.close()
    fs.flip(`${PATH}/00000000000000000000.seg`, 28 + 9) // the length of record 1
    const reopened = await open()
    expect(await drain(reopened)).toEqual(['record-0', 'record-2', 'record-3', 'record-4'])
    expect(reopened.metrics().corruptRegions).toBe(1)
    await reopened.close()
  })

  it("reads on at once past a frame numbered far ahead (another buffer's): the gap counts as lost, as one range", async () => {
    const { fs, logs, open } = setup()
    const buffer = await open()
    await buffer.append(range(2).map((s) => Buffer.from(s)))
    await buffer.close()
    const segment = `${PATH}/00000000000000000000.seg`
    const foreign = Frame.encode([Buffer.from('foreign')], 20_000_000).bytes
    fs.put(segment, Buffer.concat([fs.bytes(segment)!, foreign]))
    const reopened = await open()
    // Records 0 and 1 are still in flight when the gap is found: the prefix cannot pass it yet.
    const got = (await reopened.read(10))!
    expect(got.map((r) => r.seq)).toEqual([0, 1, 20_000_000])
    expect(reopened.metrics()).toMatchObject({ recordsLost: 19_999_998, unackedRecords: 3 })
    expect(logs).toContain(
      `disk buffer ${PATH}: records 2..19999999 missing before segment 00000000000000000000.seg; skipped`,
    )
    for (const r of got) reopened.ack(r.seq)
    expect(reopened.ackedBelow).toBe(20_000_001)
    const next = await reopened.append([Buffer.from('next')])
    expect(next).toMatchObject({ status: 'written', firstSeq: 20_000_001 })
    expect(await drain(reopened)).toEqual(['next'])
    await reopened.close()
    const again = await open()
    expect(await drain(again)).toEqual([])
    await again.close()
  })

  it('reads on at once into a segment copied from another buffer whose numbers lie far ahead', async () => {
    const { fs, logs, open } = setup()
    const buffer = await open()
    await buffer.append(range(2).map((s) => Buffer.from(s)))
    await buffer.close()
    const copied = Frame.encode([Buffer.from('copied-0'), Buffer.from('copied-1')], 30_000_000).bytes
    fs.put(`${PATH}/00000000000030000000.seg`, copied)
    const reopened = await open()
    const first = (await reopened.read(2))!
    expect(first.map((r) => r.seq)).toEqual([0, 1])
    const second = (await reopened.read(10))!
    expect(second.map((r) => r.seq)).toEqual([30_000_000, 30_000_001])
    expect(reopened.metrics().recordsLost).toBe(29_999_998)
    expect(logs).toContain(
      `disk buffer ${PATH}: records 2..29999999 missing before segment 00000000000030000000.seg; skipped`,
    )
    for (const r of [...second, ...first]) reopened.ack(r.seq)
    expect(reopened.ackedBelow).toBe(30_000_002)
    await reopened.close()
  })

  it('leaves alone a file named like a segment whose number is past 2^53 (no sequence number can reach it), and says so', async () => {
    const { fs, logs, open } = setup()
    const buffer = await open()
    await buffer.append(range(2).map((s) => Buffer.from(s)))
    await buffer.close()
    const stray = `${PATH}/99999999999999999999.seg`
    fs.put(stray, Buffer.alloc(0))
    const reopened = await open()
    expect(logs.some((m) => m.includes('99999999999999999999.seg') && m.includes('not a segment'))).toBe(true)
    expect(await reopened.append([Buffer.from('next')])).toMatchObject({ status: 'written', firstSeq: 2 })
    expect(await drain(reopened)).toEqual([...range(2), 'next'])
    await reopened.close()
    expect(fs.bytes(stray)).toEqual(Buffer.alloc(0))
    const report = await BufferCheck.run(PATH, { fileSystem: fs })
    expect(report.problems.some((p) => p.includes('99999999999999999999.seg'))).toBe(true)
  })

  it.each([
    ['numbered below its name (records lost once the segment before it went)', 1, 0],
    ['numbered past the next segment (drain never ended)', 1, 100],
    ['numbered between two segments of its own', 20, 5],
  ])(
    'leaves alone a segment file whose records do not fit its name, %s, and delivers every record of its own',
    async (_, name, from) => {
      const { fs, logs, open } = setup()
      const buffer = await open()
      for (let i = 0; i < 100; i++) await buffer.append([Buffer.from(`r${String(i).padStart(6, '0')}`)])
      await buffer.close()
      const foreign = `${PATH}/${String(name).padStart(20, '0')}.seg`
      expect(fs.bytes(foreign)).toBeUndefined()
      const bytes = Frame.encode([Buffer.from('foreign-0'), Buffer.from('foreign-1')], from).bytes
      fs.put(foreign, bytes)
      const reopened = await open()
      await reopened.append([Buffer.from('after')])
      reopened.endWrites()
      const got: string[] = []
      for (;;) {
        const records = await reopened.read(5)
        if (records === undefined) break
        for (const r of records) {
          got.push(Buffer.from(r.payload).toString())
          reopened.ack(r.seq)
        }
        await reopened.checkpoint() // segments all acknowledged go as the prefix passes them
      }
      expect(got).toEqual([
        ...Array.from({ length: 100 }, (_, i) => `r${String(i).padStart(6, '0')}`),
        'after',
      ])
      await reopened.close()
      expect(fs.bytes(foreign)).toEqual(Buffer.from(bytes))
      expect(
        logs.some((m) => m.includes(foreign.slice(PATH.length + 1)) && m.includes('not a segment')),
      ).toBe(true)
      const report = await BufferCheck.run(PATH, { fileSystem: fs })
      expect(
        report.problems.some(
          (p) => p.includes(foreign.slice(PATH.length + 1)) && p.includes('not a segment'),
        ),
      ).toBe(true)
    },
  )

  it.each([
    // Segments of 37 records: 0..36, 37..73, 74..99. Its first record fits its name.
    ['the segment before it (which went with records unread, the file read in their place)', 20],
    ['the last segment (the file was read from and appended to)', 90],
  ])(
    'leaves alone a segment file named inside the records of %s, and delivers every record of its own',
    async (_, name) => {
      const { fs, logs, open } = setup()
      const buffer = await open()
      for (let i = 0; i < 100; i++) await buffer.append([Buffer.from(`r${String(i).padStart(6, '0')}`)])
      await buffer.close()
      const foreign = `${String(name).padStart(20, '0')}.seg`
      expect(fs.bytes(`${PATH}/${foreign}`)).toBeUndefined()
      const bytes = Frame.encode([Buffer.from('foreign-0'), Buffer.from('foreign-1')], name).bytes
      fs.put(`${PATH}/${foreign}`, bytes)
      const inside = name < 37 ? '00000000000000000000.seg' : '00000000000000000074.seg'
      const report = await BufferCheck.run(PATH, { fileSystem: fs })
      expect(report.problems).toContainEqual(
        `${foreign}: its name lies inside the records of ${inside}, which run to ${name < 37 ? 36 : 99}: not a segment of this buffer (copied in, renamed or restored; opening leaves it alone; move it out)`,
      )
      const reopened = await open()
      expect(logs).toContain(
        `disk buffer ${PATH}: ${foreign} is not a segment of this buffer (its name lies inside the records of ${inside}, which run to ${name < 37 ? 36 : 99}); left alone`,
      )
      await reopened.append([Buffer.from('after')])
      reopened.endWrites()
      const got: string[] = []
      for (;;) {
        const records = await reopened.read(5)
        if (records === undefined) break
        for (const r of records) {
          got.push(Buffer.from(r.payload).toString())
          reopened.ack(r.seq)
        }
        await reopened.checkpoint() // segments all acknowledged go as the prefix passes them
      }
      expect(got).toEqual([
        ...Array.from({ length: 100 }, (_, i) => `r${String(i).padStart(6, '0')}`),
        'after',
      ])
      await reopened.close()
      expect(fs.bytes(`${PATH}/${foreign}`)).toEqual(Buffer.from(bytes))
    },
  )

  it.each([
    // Segments of 37 records: 0..36, 37..73, 74..99. Its first record fits its name.
    ['an older segment', 20],
    ['the last segment', 90],
  ])(
    'still leaves alone, in the runs after, a file named inside the records of %s once that segment was drained (it was taken in and deleted unread)',
    async (_, name) => {
      const { fs, logs, open } = setup()
      const buffer = await open()
      for (let i = 0; i < 100; i++) await buffer.append([Buffer.from(`r${String(i).padStart(6, '0')}`)])
      await buffer.close()
      const foreign = `${String(name).padStart(20, '0')}.seg`
      const bytes = Frame.encode([Buffer.from('foreign-0'), Buffer.from('foreign-1')], name).bytes
      fs.put(`${PATH}/${foreign}`, bytes)
      const got: string[] = []
      for (let run = 0; run < 3; run++) {
        const reopened = await open()
        // Enough to roll the segment the file is named inside, once it is the last.
        for (let i = 0; i < 40; i++)
          await reopened.append([Buffer.from(`s${run}-${String(i).padStart(3, '0')}`)])
        got.push(...(await drain(reopened)))
        await reopened.checkpoint()
        await reopened.close()
        expect(fs.bytes(`${PATH}/${foreign}`)).toEqual(Buffer.from(bytes))
      }
      expect(got.filter((p) => p.startsWith('foreign'))).toEqual([])
      expect(got).toHaveLength(100 + 3 * 40)
      expect(logs.filter((m) => m.includes(`${foreign} is not a segment of this buffer`))).toHaveLength(3)
      expect(
        logs.filter((m) => m.includes('kept segment') && m.includes(`${foreign}, left alone`)).length,
      ).toBeGreaterThan(0)
      // Once the file is moved out, the segment kept for it goes with the next drain.
      fs.unlink(`${PATH}/${foreign}`)
      const last = await open()
      await last.append(Array.from({ length: 40 }, (_, i) => Buffer.from(`t-${String(i).padStart(3, '0')}`)))
      expect(await drain(last)).toHaveLength(40)
      await last.checkpoint()
      await last.close()
      expect(fs.files(PATH).filter((p) => p.endsWith('.seg'))).toHaveLength(1)
    },
  )

  it('opens again after the last segment was reclaimed while a segment kept for a file left alone stayed on disk (it was refused as LEDGER_AHEAD)', async () => {
    const { fs, logs, open } = setup()
    const buffer = await open()
    // Segments of 37 records: 0..36, 37..73, 74..99.
    for (let i = 0; i < 100; i++) await buffer.append([Buffer.from(`r${String(i).padStart(6, '0')}`)])
    await buffer.close()
    const foreign = `${String(20).padStart(20, '0')}.seg`
    fs.put(`${PATH}/${foreign}`, Frame.encode([Buffer.from('foreign-0')], 20).bytes)
    const drained = await open()
    expect(await drain(drained)).toHaveLength(100)
    await drained.checkpoint()
    await drained.close() // 0 kept for the file, 74 the last
    const small = await CrashableDiskBuffer.open({
      path: PATH,
      fileSystem: fs,
      segmentBytes: 1024,
      maxBytes: 800,
      log: (m) => logs.push(m),
    })
    // The append waits for room, which reclaims 74; the segment it then starts cannot be made.
    const next = `${PATH}/${String(100).padStart(20, '0')}.seg`
    let failing = true
    fs.fault = (op, path) =>
      failing && op === 'open' && path === next
        ? Object.assign(new Error('ENOSPC'), { code: 'ENOSPC' })
        : undefined
    expect((await small.append([Buffer.alloc(300, 0x61)])).status).toBe('failed')
    failing = false
    await small.close()
    // 0 was the last segment on disk, its records ending below the ledger's prefix.
    const reopened = await open()
    expect(logs.filter((m) => m.includes(`${foreign} is not a segment of this buffer`))).toHaveLength(3)
    await reopened.append([Buffer.from('after')])
    expect(await drain(reopened)).toEqual(['after'])
    await reopened.close()
    expect(fs.bytes(`${PATH}/${foreign}`)).toEqual(Frame.encode([Buffer.from('foreign-0')], 20).bytes)
  })

  it('opens again after the last segment was reclaimed while a segment whose deletion waited on a failed ledger checkpoint stayed on disk (it was refused as LEDGER_AHEAD)', async () => {
    const { fs, logs, open } = setup()
    const buffer = await open()
    // Segments of 37 records: 0..36, 37..73.
    for (let i = 0; i < 74; i++) await buffer.append([Buffer.from(`r${String(i).padStart(6, '0')}`)])
    await buffer.close()
    const small = await CrashableDiskBuffer.open({
      path: PATH,
      fileSystem: fs,
      segmentBytes: 1024,
      maxBytes: 800,
      log: (m) => logs.push(m),
    })
    const next = `${PATH}/${String(74).padStart(20, '0')}.seg`
    let failing: 'ledger' | 'next' | undefined = 'ledger'
    fs.fault = (op, path) =>
      (failing === 'ledger' && path.includes('ledger.json')) ||
      (failing === 'next' && op === 'open' && path === next)
        ? Object.assign(new Error('ENOSPC'), { code: 'ENOSPC' })
        : undefined
    let acked = 0
    while (acked < 74) {
      for (const r of (await small.read(100)) ?? []) {
        small.ack(r.seq)
        acked++
      }
    }
    await small.flush() // 0's deletion waited for a checkpoint, which failed: 0 stays on disk
    expect(logs).toContainEqual(
      expect.stringContaining('could not save the ledger before deleting segment 00000000000000000000.seg'),
    )
    // The append waits for room, which reclaims 37; the segment it then starts cannot be made.
    failing = 'next'
    expect((await small.append([Buffer.alloc(300, 0x61)])).status).toBe('failed')
    failing = undefined
    await small.close()
    // 0 was the last segment on disk, its records ending below the ledger's prefix.
    const reopened = await open()
    await reopened.append([Buffer.from('after')])
    expect(await drain(reopened)).toEqual(['after'])
    await reopened.close()
  })

  it.each([
    ['fails (EIO: a bad sector)', 'read', 'EIO'],
    ['finds it gone (ENOENT: deleted between listing and reading)', 'open', 'ENOENT'],
  ] as const)(
    'opens when reading the tail of an older segment %s, keeping the segment after it, logging which one was not checked',
    async (_, op, code) => {
      const { fs, logs, open } = setup()
      const buffer = await open()
      for (let i = 0; i < 100; i++) await buffer.append([Buffer.from(`r${String(i).padStart(6, '0')}`)])
      for (const r of (await buffer.read(37))!) buffer.ack(r.seq)
      const oldest = `${PATH}/00000000000000000000.seg`
      const bytes = fs.bytes(oldest)!
      await buffer.close() // segments 0..36 (all acknowledged, so deleted), 37..73, 74..99
      expect(fs.bytes(oldest)).toBeUndefined()
      fs.put(oldest, bytes) // as a crash between the checkpoint and the deletion leaves it
      // Opening reads the first frame of each segment but the last, then its tail, through one
      // handle: every read of the oldest after its first is the tail's (an open that fails fails
      // both). The fault stays: the reader never goes there, its records being acknowledged.
      let reads = 0
      fs.fault = (o, path) => {
        if (o !== op || path !== oldest || (o === 'read' && reads++ === 0)) return undefined
        return Object.assign(new Error(`${code}: injected, ${o}`), { code })
      }
      const reopened = await open()
      expect(logs).toContain(
        `disk buffer ${PATH}: the tail of ${oldest} could not be read (${code}), so whether 00000000000000000037.seg is named inside its records was not checked; kept`,
      )
      expect(logs.filter((m) => m.includes('not a segment'))).toEqual([])
      expect(await drain(reopened)).toEqual(
        Array.from({ length: 63 }, (_, i) => `r${String(37 + i).padStart(6, '0')}`),
      )
      await reopened.close()
    },
  )

  it.each([
    ['fails (EIO: a bad sector)', 'read', 'EIO'],
    ['finds it gone (ENOENT: deleted between listing and reading)', 'open', 'ENOENT'],
  ] as const)(
    'opens when reading the first frame of an older segment %s, keeping that segment, logging it as not checked',
    async (_, op, code) => {
      const { fs, logs, open } = setup()
      const buffer = await open()
      for (let i = 0; i < 100; i++) await buffer.append([Buffer.from(`r${String(i).padStart(6, '0')}`)])
      for (const r of (await buffer.read(37))!) buffer.ack(r.seq)
      const oldest = `${PATH}/00000000000000000000.seg`
      const bytes = fs.bytes(oldest)!
      await buffer.close() // segments 0..36 (all acknowledged, so deleted), 37..73, 74..99
      expect(fs.bytes(oldest)).toBeUndefined()
      fs.put(oldest, bytes) // as a crash between the checkpoint and the deletion leaves it
      // Every read of it fails, its first frame's first; the reader never goes there, its records
      // being acknowledged.
      fs.fault = (o, path) =>
        o === op && path === oldest
          ? Object.assign(new Error(`${code}: injected, ${o}`), { code })
          : undefined
      const reopened = await open()
      expect(logs).toContain(
        `disk buffer ${PATH}: the first frame of ${oldest} could not be read (${code}), so whether its records fit its name was not checked; kept`,
      )
      expect(logs.filter((m) => m.includes('not a segment'))).toEqual([])
      expect(await drain(reopened)).toEqual(
        Array.from({ length: 63 }, (_, i) => `r${String(37 + i).padStart(6, '0')}`),
      )
      await reopened.close()
    },
  )

  it.each([
    ['the oldest segment, all acknowledged', '00000000000000000000.seg'],
    ['the last segment, holding records not yet delivered', '00000000000000000074.seg'],
  ])(
    'refuses to open when the size of a segment file cannot be read (EIO on stat: %s), naming the file and deleting nothing, and opens once it can',
    async (_, name) => {
      const { fs, open } = setup()
      const buffer = await open()
      for (let i = 0; i < 100; i++) await buffer.append([Buffer.from(`r${String(i).padStart(6, '0')}`)])
      for (const r of (await buffer.read(37))!) buffer.ack(r.seq)
      const oldest = `${PATH}/00000000000000000000.seg`
      const bytes = fs.bytes(oldest)!
      await buffer.close() // segments 0..36 (all acknowledged, so deleted), 37..73, 74..99
      fs.put(oldest, bytes) // as a crash between the checkpoint and the deletion leaves it
      const before = fs.files(PATH).map((p) => [p, fs.bytes(p)])
      fs.fault = (o, path) =>
        o === 'stat' && path === `${PATH}/${name}`
          ? Object.assign(new Error(`EIO: injected, stat '${path}'`), { code: 'EIO' })
          : undefined
      const failed = await open().then(
        () => undefined,
        (error: unknown) => error,
      )
      expect(failed).toBeInstanceOf(DiskBufferError)
      expect(failed).toMatchObject({ code: 'READ_FAILED', path: PATH })
      expect((failed as Error).message).toContain(`segment ${PATH}/${name} could not be read (EIO)`)
      expect(fs.files(PATH).map((p) => [p, fs.bytes(p)])).toEqual(before)
      expect(fs.openFiles).toBe(0)
      fs.fault = undefined
      const reopened = await open()
      expect(await drain(reopened)).toEqual(
        Array.from({ length: 63 }, (_, i) => `r${String(37 + i).padStart(6, '0')}`),
      )
      await reopened.close()
    },
  )

  it('takes a segment file deleted between the listing and its stat (ENOENT) as gone: the last one is not made again, empty, and appended to', async () => {
    const { fs, logs, open } = setup()
    const buffer = await open()
    for (let i = 0; i < 100; i++) await buffer.append([Buffer.from(`r${String(i).padStart(6, '0')}`)])
    for (const r of (await buffer.read(74))!) buffer.ack(r.seq)
    await buffer.close() // segments 74..99 left, the others deleted
    const last = `${PATH}/00000000000000000074.seg`
    fs.fault = (o, path) => {
      if (o === 'stat' && path === last) void fs.unlink(path) // deleted from outside, after the listing
      return undefined
    }
    const reopened = await open()
    fs.fault = undefined
    expect(fs.bytes(last)).toBeUndefined()
    expect(logs).toContainEqual(
      expect.stringContaining('records 74..99, which ledger.json counts unacknowledged, are gone'),
    )
    await reopened.append([Buffer.from('after')])
    expect(fs.bytes(last)).toBeUndefined()
    expect(await drain(reopened)).toEqual(['after'])
    await reopened.close()
  })

  it('takes the last segment file deleted between its stat and its open to append (ENOENT) as gone: not made again, empty, with its records reported as a torn write', async () => {
    const { fs, logs, open } = setup()
    const buffer = await open()
    for (let i = 0; i < 100; i++) await buffer.append([Buffer.from(`r${String(i).padStart(6, '0')}`)])
    for (const r of (await buffer.read(74))!) buffer.ack(r.seq)
    await buffer.close() // segments 74..99 left, the others deleted
    const last = `${PATH}/00000000000000000074.seg`
    fs.fault = (o, path) => {
      if (o === 'open' && path === last) void fs.unlink(path) // deleted from outside, after its stat
      return undefined
    }
    const reopened = await open()
    fs.fault = undefined
    expect(logs.filter((m) => m.includes('torn write'))).toEqual([])
    expect(logs).toContainEqual(
      expect.stringContaining('records 74..99, which ledger.json counts unacknowledged, are gone'),
    )
    expect(fs.bytes(last)).toBeUndefined()
    await reopened.append([Buffer.from('after')])
    expect(fs.bytes(last)).toBeUndefined()
    expect(await drain(reopened)).toEqual(['after'])
    await reopened.close()
  })

  it.each([
    ['a buffer of three segments', undefined],
    ['one with a file named inside the records of the segment before it', 20],
  ])(
    'opens each segment file once while opening %s (its first frame and its tail read through one handle)',
    async (_, name) => {
      const { fs, open } = setup()
      const buffer = await open()
      for (let i = 0; i < 100; i++) await buffer.append([Buffer.from(`r${String(i).padStart(6, '0')}`)])
      await buffer.close() // segments 0..36, 37..73, 74..99
      if (name !== undefined) {
        fs.put(
          `${PATH}/${String(name).padStart(20, '0')}.seg`,
          Frame.encode([Buffer.from('foreign')], name).bytes,
        )
      }
      const opened = new Map<string, number>()
      const counting = reopening(fs, (path, mode) => {
        if (path.endsWith('.seg'))
          opened.set(path.slice(PATH.length + 1), (opened.get(path.slice(PATH.length + 1)) ?? 0) + 1)
        return fs.open(path, mode)
      })
      const reopened = await CrashableDiskBuffer.open({
        path: PATH,
        fileSystem: counting,
        segmentBytes: 1024,
        log: () => {},
      })
      const segments = fs
        .files(PATH)
        .filter((p) => p.endsWith('.seg'))
        .map((p) => p.slice(PATH.length + 1))
      expect(Object.fromEntries(opened)).toEqual(Object.fromEntries(segments.map((seg) => [seg, 1])))
      await reopened.close()
    },
  )

  it('reads the tail of a segment whose last record is long about twice that record while opening, not up to 17 times', async () => {
    const { fs, open } = setup({ segmentBytes: 32 << 20 })
    const buffer = await open()
    await buffer.append(Array.from({ length: 17 }, (_, i) => Buffer.alloc(1 << 20, 97 + i)))
    const long = Buffer.alloc((1 << 20) + (100 << 10), 'z') // just past the 1 MiB a tail read grew to
    await buffer.append([long])
    await buffer.append([Buffer.alloc(16 << 20, 'y')]) // rolls: segment 18
    await buffer.close()
    const oldest = `${PATH}/00000000000000000000.seg`
    let read = 0
    const counting = reopening(fs, async (path, mode) => {
      const file = await fs.open(path, mode)
      if (path !== oldest) return file
      return {
        ...file,
        read: async (buf: Uint8Array, offset: number, length: number, position: number) => {
          const got = await file.read(buf, offset, length, position)
          read += got
          return got
        },
      }
    })
    const reopened = await CrashableDiskBuffer.open({
      path: PATH,
      fileSystem: counting,
      segmentBytes: 32 << 20,
    })
    await reopened.close()
    // Its first record (64 KiB, then the frame whole to check it), its last 64 KiB, then back to
    // the long record's header (1 MiB reads, each a header past its end) and the record itself
    // once: 4.2 MiB. Before, the tail read grew 16 times, to 16 MiB (28 MiB read in all).
    const first = (64 << 10) + (1 << 20) + 20
    expect(read).toBeLessThanOrEqual(first + (64 << 10) + 2 * ((1 << 20) + 19) + long.length + 20)
  })

  it('finds the last record of a segment whose last 64 KiB are damage, before a file named inside its records', async () => {
    const { fs, logs, open } = setup({ segmentBytes: 100 << 10 })
    const buffer = await open()
    await buffer.append([Buffer.alloc(60 << 10, 'x'), Buffer.from('a'), Buffer.from('b'), Buffer.from('c')])
    await buffer.append([Buffer.alloc(60 << 10, 'y')]) // rolls: segment 4
    await buffer.close()
    const oldest = `${PATH}/00000000000000000000.seg`
    fs.put(oldest, Buffer.concat([fs.bytes(oldest)!, Buffer.alloc(70 << 10, 0xee)])) // no frame in its tail
    fs.put(`${PATH}/00000000000000000003.seg`, Frame.encode([Buffer.from('foreign')], 3).bytes)
    const reopened = await open()
    expect(logs).toContain(
      `disk buffer ${PATH}: 00000000000000000003.seg is not a segment of this buffer (its name lies inside the records of 00000000000000000000.seg, which run to 3); left alone`,
    )
    await reopened.close()
  })

  it('finds the last record of a segment whose long last record holds a frame reaching into its last 64 KiB, before a file named inside its records (that frame was taken for it)', async () => {
    const { fs, logs, open } = setup({ segmentBytes: 300 << 10 })
    const buffer = await open()
    // A payload holding a frame of a buffer's (numbered 0), from 100 KiB to 50 KiB before the end.
    const long = Buffer.alloc(200 << 10, 'x')
    Frame.encode([Buffer.alloc(50 << 10, 'y')], 0).bytes.copy(long, long.length - (100 << 10))
    await buffer.append([Buffer.from('a'), Buffer.from('b'), long])
    await buffer.append([Buffer.alloc(200 << 10, 'z')]) // rolls: segment 3
    await buffer.close()
    fs.put(`${PATH}/00000000000000000002.seg`, Frame.encode([Buffer.from('foreign')], 2).bytes)
    const reopened = await open()
    expect(logs).toContain(
      `disk buffer ${PATH}: 00000000000000000002.seg is not a segment of this buffer (its name lies inside the records of 00000000000000000000.seg, which run to 2); left alone`,
    )
    await reopened.close()
  })

  it.each([0, 20, -4096])(
    'takes a stored segmentBytes no option may have (%d, with a good checksum: a tool wrote it) for damaged settings, and keeps appending',
    async (stored) => {
      const { fs, logs, open } = setup()
      const buffer = await open()
      await buffer.append([Buffer.from('before')])
      await buffer.close()
      const body = JSON.stringify({ version: 1, segmentBytes: stored })
      fs.put(
        `${PATH}/settings.json`,
        Buffer.from(`${body}\n${Crc32c.of(Buffer.from(body)).toString(16).padStart(8, '0')}\n`),
      )
      const reopened = await open()
      expect(logs).toContainEqual(expect.stringContaining('settings.json is damaged'))
      expect(await reopened.append([Buffer.from('after')])).toMatchObject({ status: 'written' })
      expect(await drain(reopened)).toEqual(['before', 'after'])
      await reopened.close()
    },
  )

  it('finds the last record of the segment before a file named inside it when that record is longer than the tail opening reads first', async () => {
    const { fs, logs, open } = setup({ segmentBytes: 200 << 10 })
    const buffer = await open()
    const long = 'x'.repeat(100 << 10) // past the 64 KiB opening reads of a segment's tail first
    await buffer.append([Buffer.from('a'), Buffer.from('b'), Buffer.from(long)])
    await buffer.append([Buffer.from(long)]) // rolls: segment 3
    await buffer.close()
    const foreign = `${PATH}/00000000000000000002.seg` // its record fits its name; record 2 is the long one
    fs.put(foreign, Frame.encode([Buffer.from('foreign')], 2).bytes)
    const reopened = await open()
    expect(logs).toContain(
      `disk buffer ${PATH}: 00000000000000000002.seg is not a segment of this buffer (its name lies inside the records of 00000000000000000000.seg, which run to 2); left alone`,
    )
    expect(await drain(reopened)).toEqual(['a', 'b', long, long])
    await reopened.close()
    expect(fs.bytes(foreign)).toBeDefined()
  })

  it('keeps a segment whose name a frame inside the payload of the last record before it seems to reach (read from the start, that is a payload)', async () => {
    const { fs, logs, open } = setup({ segmentBytes: 150 << 10 })
    const buffer = await open()
    // A payload that ends with a whole frame numbered 7: the tail read alone takes it for record 7.
    const inner = Buffer.concat([Buffer.alloc(100 << 10, 'x'), Frame.encode([Buffer.from('inner')], 7).bytes])
    await buffer.append([inner])
    await buffer.append([Buffer.alloc(100 << 10, 'y')]) // rolls: segment 1
    await buffer.close()
    expect(fs.bytes(`${PATH}/00000000000000000001.seg`)).toBeDefined()
    const reopened = await open()
    expect(logs.filter((m) => m.includes('not a segment'))).toEqual([])
    expect(await drain(reopened)).toEqual([inner.toString(), 'y'.repeat(100 << 10)])
    await reopened.close()
  })

  it('finds the last record of a segment whose long last record ends with whole frames numbered below the next file, before a file named inside its records (those frames were taken for it)', async () => {
    const { fs, logs, open } = setup({ segmentBytes: 300 << 10 })
    const buffer = await open()
    // A payload that ends with a whole frame numbered 0: the tail read alone takes it for the last record.
    const long = Buffer.concat([Buffer.alloc(100 << 10, 'x'), Frame.encode([Buffer.from('inner')], 0).bytes])
    await buffer.append([Buffer.from('a'), Buffer.from('b'), long])
    await buffer.append([Buffer.alloc(250 << 10, 'z')]) // rolls: segment 3
    await buffer.close()
    const foreign = `${PATH}/00000000000000000002.seg` // its record fits its name; record 2 is the long one
    fs.put(foreign, Frame.encode([Buffer.from('foreign')], 2).bytes)
    const reopened = await open()
    expect(logs).toContain(
      `disk buffer ${PATH}: 00000000000000000002.seg is not a segment of this buffer (its name lies inside the records of 00000000000000000000.seg, which run to 2); left alone`,
    )
    expect(await drain(reopened)).toEqual(['a', 'b', long.toString(), 'z'.repeat(250 << 10)])
    await reopened.close()
    expect(fs.bytes(foreign)).toBeDefined()
  })

  it("reads only the ends of a segment that ends below the next one's name when the ledger lists that one (numbers a failed roll skipped), not the whole segment on every open", async () => {
    const { fs, open } = setup({ segmentBytes: 512 << 10 })
    const buffer = await open()
    const payload = Buffer.alloc(1000, 'x')
    await buffer.append([payload]) // makes segment 0
    let failed = false
    fs.fault = (op, path) => {
      // The roll to the next segment: its first open fails while a later append is numbered.
      if (op !== 'open' || !path.endsWith('.seg') || fs.bytes(path) !== undefined || failed) return undefined
      failed = true
      void buffer.append([payload]) // numbered past the failing group: its number is skipped
      return Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' })
    }
    for (let i = 0; i < 600; i++) await buffer.append([payload])
    fs.fault = undefined
    await buffer.close()
    expect(failed).toBe(true)
    const first = `${PATH}/00000000000000000000.seg`
    const segs = fs.files(PATH).filter((f) => f.endsWith('.seg'))
    expect(segs).toHaveLength(2) // segment 0, and one named two past its last record, in the ledger
    let readOfFirst = 0
    const counting = reopening(fs, async (path, mode) => {
      const file = await fs.open(path, mode)
      if (path !== first) return file
      return {
        ...file,
        read: async (buf, offset, length, position) => {
          const n = await file.read(buf, offset, length, position)
          readOfFirst += n
          return n
        },
      }
    })
    const reopened = await CrashableDiskBuffer.open({
      path: PATH,
      fileSystem: counting,
      segmentBytes: 512 << 10,
      log: () => {},
    })
    expect(readOfFirst).toBeLessThan(fs.bytes(first)!.length / 2) // its first frame and its tail
    expect(await drain(reopened)).toHaveLength(601) // 602 appended, the one whose roll failed not written
    await reopened.close()
  })

  it('leaves alone a last segment whose records are numbered below its name, numbering on past its name, and the check says so', async () => {
    const { fs, logs, open } = setup()
    const buffer = await open()
    await buffer.append(range(2).map((s) => Buffer.from(s)))
    await buffer.close()
    const copied = Frame.encode([Buffer.from('copied')], 0).bytes
    fs.put(`${PATH}/00000000000000000150.seg`, copied)
    const report = await BufferCheck.run(PATH, { fileSystem: fs })
    expect(
      report.problems.filter((p) => p.includes('00000000000000000150.seg: its first record is numbered 0')),
    ).toHaveLength(1)
    const reopened = await open()
    expect(logs.filter((m) => m.includes('00000000000000000150.seg is not a segment'))).toHaveLength(1)
    // Past its name: a segment of this buffer named after it would append to it.
    expect(await reopened.append([Buffer.from('next')])).toMatchObject({ status: 'written', firstSeq: 151 })
    expect(await drain(reopened)).toEqual([...range(2), 'next'])
    await reopened.close()
    expect(fs.bytes(`${PATH}/00000000000000000150.seg`)).toEqual(Buffer.from(copied))
  })

  it('delivers every record appended after opening found a last segment numbered below its name, in the runs after it too', async () => {
    const { fs, open } = setup()
    const buffer = await open()
    await buffer.append(range(2).map((s) => Buffer.from(s)))
    await buffer.close()
    fs.put(`${PATH}/00000000000000000150.seg`, Frame.encode([Buffer.from('copied')], 0).bytes)
    const reopened = await open()
    const more = range(40, 150)
    for (const r of more) await reopened.append([Buffer.from(r)]) // 1024-byte segments: rolls once
    await reopened.close()
    const again = await open()
    // Once a segment followed the one numbered below its name, opening left the records appended there alone.
    expect(await drain(again)).toEqual([...range(2), ...more])
    await again.close()
  })

  it('takes a frame numbered past 2^53 for damage: the numbers after it stay exact', async () => {
    const { fs, logs, open } = setup()
    const buffer = await open()
    await buffer.append(range(2).map((s) => Buffer.from(s)))
    await buffer.close()
    const segment = `${PATH}/00000000000000000000.seg`
    const beyond = Frame.encode([Buffer.from('beyond')], 2 ** 53).bytes
    fs.put(segment, Buffer.concat([fs.bytes(segment)!, beyond]))
    const reopened = await open()
    expect(reopened.metrics().tornBytesTruncated).toBe(beyond.length)
    expect(logs.some((m) => m.includes('torn write'))).toBe(true)
    expect(await reopened.append([Buffer.from('next')])).toMatchObject({ status: 'written', firstSeq: 2 })
    expect(await drain(reopened)).toEqual([...range(2), 'next'])
    await reopened.close()
  })

  it('refuses an append that would number a record past the last safe sequence number, so every record answered written is read back', async () => {
    const { fs, open } = setup()
    // A segment copied from elsewhere (or edited) whose record is numbered just below 2^53.
    const first = 2 ** 53 - 3
    fs.put(
      `${PATH}/${String(first).padStart(20, '0')}.seg`,
      Frame.encode([Buffer.from('copied')], first).bytes,
    )
    const buffer = await open()
    const written: number[] = []
    let refused: unknown
    for (let i = 0; i < 3 && refused === undefined; i++) {
      try {
        const result = await buffer.append([Buffer.from(`next-${i}`)])
        if (result.status === 'written') written.push(result.firstSeq)
      } catch (error) {
        refused = error
      }
    }
    expect(refused).toBeInstanceOf(DiskBufferError)
    expect(refused).toMatchObject({ code: 'SEQUENCE_EXHAUSTED', path: PATH, field: 'nextSeq' })
    expect((refused as Error).message).toContain('numbers end at 2^53 − 1')
    const read: number[] = []
    buffer.endWrites()
    for (let got = await buffer.read(10); got !== undefined; got = await buffer.read(10)) {
      for (const r of got) {
        read.push(r.seq)
        buffer.ack(r.seq)
      }
    }
    expect(read).toEqual([first, ...written])
    await buffer.close()
  })

  it('refuses to open a buffer whose last record is numbered 2^53 − 1: no number is left for the next one', async () => {
    const { fs, open } = setup()
    const last = Number.MAX_SAFE_INTEGER
    fs.put(`${PATH}/${String(last).padStart(20, '0')}.seg`, Frame.encode([Buffer.from('copied')], last).bytes)
    const error = await open().then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(DiskBufferError)
    expect(error).toMatchObject({ code: 'SEQUENCE_EXHAUSTED', path: PATH, field: 'nextSeq' })
    expect((error as Error).message).toContain(`a record numbered ${last}`)
    // Nothing left open behind the refusal.
    expect(fs.openFiles).toBe(0)
  })

  it("reports, and removes on open or with --repair, the temporary files a crash left (the settings', a dead process's lock), keeping a live process's", async () => {
    const { fs, logs, open } = setup()
    const buffer = await open()
    await buffer.append(range(2).map((s) => Buffer.from(s)))
    await buffer.close()
    const gone = { pid: 2 ** 30, hostname: hostname(), since: '2026-01-01T00:00:00.000Z' }
    const live = { pid: process.ppid, hostname: hostname(), since: '2026-01-01T00:00:00.000Z' }
    const settingsTemp = `${PATH}/settings.json.tmp`
    const lockTemp = `${PATH}/lock.${gone.pid}.0.tmp`
    const guardTemp = `${PATH}/lock.takeover.${gone.pid}.3.tmp`
    const liveTemp = `${PATH}/lock.${live.pid}.0.tmp`
    const strays = [settingsTemp, lockTemp, guardTemp]
    const put = (): void => {
      fs.put(settingsTemp, Buffer.from('{"version":1,'))
      fs.put(lockTemp, Buffer.from(JSON.stringify(gone)))
      fs.put(guardTemp, Buffer.from(JSON.stringify(gone)))
      fs.put(liveTemp, Buffer.from(JSON.stringify(live)))
    }
    put()
    const report = await BufferCheck.run(PATH, { fileSystem: fs })
    for (const temp of strays) {
      expect(report.problems.some((p) => p.startsWith(temp.slice(PATH.length + 1)))).toBe(true)
    }
    expect(report.problems.some((p) => p.includes(liveTemp.slice(PATH.length + 1)))).toBe(false)
    const repaired = await BufferCheck.run(PATH, { fileSystem: fs, repair: true })
    expect(repaired.repairs).toEqual(
      expect.arrayContaining(strays.map((t) => `removed ${t.slice(PATH.length + 1)}`)),
    )
    for (const temp of strays) expect(fs.bytes(temp)).toBeUndefined()
    put()
    const reopened = await open()
    for (const temp of strays) {
      expect(fs.bytes(temp)).toBeUndefined()
      expect(logs.some((m) => m.includes(`discarded ${temp.slice(PATH.length + 1)}`))).toBe(true)
    }
    expect(fs.bytes(liveTemp)).toBeDefined()
    expect(await drain(reopened)).toEqual(range(2))
    await reopened.close()
  })

  it("removes an empty or cut-short lock temporary file whose writer died (a crash before it was written whole), keeping a live process's and this one's", async () => {
    const { fs, logs, open } = setup()
    const buffer = await open()
    await buffer.append(range(2).map((s) => Buffer.from(s)))
    await buffer.close()
    const gone = 2 ** 30
    const strays = [
      `${PATH}/lock.${gone}.0.tmp`,
      `${PATH}/lock.takeover.${gone}.1.tmp`,
      `${PATH}/lock.${gone}.tmp`,
    ]
    const kept = [`${PATH}/lock.${process.ppid}.0.tmp`, `${PATH}/lock.${process.pid}.999999.tmp`]
    const put = (): void => {
      fs.put(strays[0]!, Buffer.alloc(0))
      fs.put(strays[1]!, Buffer.from('{"pid":'))
      fs.put(strays[2]!, Buffer.alloc(0))
      for (const temp of kept) fs.put(temp, Buffer.alloc(0))
    }
    put()
    const report = await BufferCheck.run(PATH, { fileSystem: fs })
    for (const temp of strays) {
      expect(report.problems.some((p) => p.startsWith(temp.slice(PATH.length + 1)))).toBe(true)
    }
    for (const temp of kept) {
      expect(report.problems.some((p) => p.includes(temp.slice(PATH.length + 1)))).toBe(false)
    }
    const repaired = await BufferCheck.run(PATH, { fileSystem: fs, repair: true })
    expect(repaired.repairs).toEqual(strays.map((t) => `removed ${t.slice(PATH.length + 1)}`).sort())
    for (const temp of strays) expect(fs.bytes(temp)).toBeUndefined()
    put()
    const reopened = await open()
    for (const temp of strays) {
      expect(fs.bytes(temp)).toBeUndefined()
      expect(logs.some((m) => m.includes(`discarded ${temp.slice(PATH.length + 1)}`))).toBe(true)
    }
    for (const temp of kept) expect(fs.bytes(temp)).toEqual(Buffer.alloc(0))
    expect(await drain(reopened)).toEqual(range(2))
    await reopened.close()
  })

  it.each([
    ['placing the lock', 'datasync', (name: string) => /^lock\.\d+\.\d+\.tmp$/.test(name)],
    ['taking a stale lock over', 'write', (name: string) => name === `lock.${process.pid}.tmp`],
    [
      'putting a stale lock taken over in place',
      'rename',
      (name: string) => name === `lock.${process.pid}.tmp`,
    ],
  ] as const)(
    'leaves no lock temporary file behind when writing it fails while %s (this process keeps its own for ever)',
    async (_, op, failing) => {
      const { fs, open } = setup()
      if (op !== 'datasync') {
        const stale = await open()
        stale._abandon() // its lock stays, naming this process: the next open takes it over
      }
      fs.fault = (o, path) =>
        o === op && failing(path.slice(PATH.length + 1))
          ? Object.assign(new Error('EIO'), { code: 'EIO' })
          : undefined
      await expect(open()).rejects.toMatchObject({ code: 'EIO' })
      fs.fault = undefined
      expect(fs.files(PATH).filter((p) => p.endsWith('.tmp'))).toEqual([])
      const reopened = await open()
      await reopened.close()
      expect(fs.files(PATH).filter((p) => p.endsWith('.tmp'))).toEqual([])
    },
  )

  it('rebuilds a missing ledger by scanning the segments, redelivering rather than losing', async () => {
    const { fs, logs, open } = setup()
    const buffer = await open()
    await buffer.append(range(10).map((s) => Buffer.from(s)))
    const first = (await buffer.read(5))!
    for (const r of first) buffer.ack(r.seq)
    await buffer.close()
    expect((await Ledger.read(fs, PATH)).status).toBe('ok')
    await fs.unlink(`${PATH}/ledger.json`)
    const reopened = await open()
    expect(logs.some((m) => m.includes('ledger missing; rebuilt by scanning 1 segment(s)'))).toBe(true)
    expect(await drain(reopened)).toEqual(range(10))
    expect((await Ledger.read(fs, PATH)).status).toBe('ok')
    await reopened.close()
  })

  it('rebuilds a corrupt ledger by scanning the segments', async () => {
    const { fs, logs, open } = setup()
    const buffer = await open()
    await buffer.append(range(4).map((s) => Buffer.from(s)))
    const first = (await buffer.read(2))!
    for (const r of first) buffer.ack(r.seq)
    await buffer.close()
    // One checkpoint, damaged: nothing whole is left to go by.
    const read = await Ledger.read(fs, PATH)
    if (read.status !== 'ok') throw new Error(read.status)
    const ledger = Ledger.encode(read.ledger)
    ledger[12] = ledger[12]! ^ 1
    fs.put(`${PATH}/ledger.json`, ledger)
    const reopened = await open()
    expect(logs.some((m) => m.includes('ledger corrupt (checksum mismatch)'))).toBe(true)
    expect(await drain(reopened)).toEqual(range(4))
    await reopened.close()
  })

  it('uses the old ledger after a crash between writing the temporary ledger and renaming it', async () => {
    const { fs, logs, open } = setup()
    const earlier = await open()
    await earlier.append(range(10).map((s) => Buffer.from(s)))
    for (const r of (await earlier.read(5))!) earlier.ack(r.seq)
    await earlier.close()
    // A run's first checkpoint replaces the ledger (the later ones are appended to it).
    const buffer = await open()
    for (const r of (await buffer.read(3))!) buffer.ack(r.seq)
    fs.fault = (op, path) => (op === 'rename' && path.endsWith(Ledger.TEMP) ? new Error('crash') : undefined)
    await expect(buffer.checkpoint()).rejects.toThrow('crash')
    buffer._abandon()
    fs.fault = undefined
    expect(fs.bytes(`${PATH}/${Ledger.TEMP}`)).toBeDefined()
    const reopened = await open()
    expect(logs.some((m) => m.includes('discarded ledger.json.tmp'))).toBe(true)
    expect(fs.bytes(`${PATH}/${Ledger.TEMP}`)).toBeUndefined()
    expect(reopened.ackedBelow).toBe(5)
    expect(await drain(reopened)).toEqual(range(5, 5))
    await reopened.close()
  })

  it("goes by the ledger's last whole checkpoint: one torn by a crash, or damaged, after it is passed over and logged", async () => {
    for (const damage of ['torn', 'checksum mismatch'] as const) {
      const { fs, logs, open } = setup()
      const buffer = await open()
      await buffer.append(range(10).map((s) => Buffer.from(s)))
      for (const r of (await buffer.read(4))!) buffer.ack(r.seq)
      await buffer.checkpoint()
      for (const r of (await buffer.read(3))!) buffer.ack(r.seq)
      await buffer.checkpoint() // appended: the ledger holds both
      buffer._abandon()
      const bytes = fs.bytes(`${PATH}/ledger.json`)!
      const text = bytes.toString()
      const last = text.lastIndexOf('{')
      expect(text.indexOf('{')).toBeLessThan(last) // more than one checkpoint
      const damaged = Buffer.from(bytes)
      if (damage === 'checksum mismatch') damaged[last + 12] = damaged[last + 12]! ^ 1
      // A crash that tore the last append keeps part of it; damage keeps all of it.
      fs.put(`${PATH}/ledger.json`, damage === 'torn' ? damaged.subarray(0, last + 20) : damaged)
      const reopened = await open()
      expect(reopened.ackedBelow).toBe(4) // the checkpoint before the last
      expect(logs.filter((m) => m.includes('is not whole'))).toEqual([
        `disk buffer ${PATH}: the last checkpoint in ledger.json is not whole (${damage}); using the one before it`,
      ])
      expect(await drain(reopened)).toEqual(range(6, 4))
      await reopened.close()
    }
  })

  it('the buffer check reports a last checkpoint that is not whole, and --repair rewrites the ledger with the one before', async () => {
    const { fs, open } = setup()
    const buffer = await open()
    await buffer.append(range(10).map((s) => Buffer.from(s)))
    for (const r of (await buffer.read(4))!) buffer.ack(r.seq)
    await buffer.checkpoint()
    for (const r of (await buffer.read(3))!) buffer.ack(r.seq)
    await buffer.checkpoint()
    buffer._abandon()
    const bytes = fs.bytes(`${PATH}/ledger.json`)!
    const last = bytes.toString().lastIndexOf('{')
    bytes[last + 12] = bytes[last + 12]! ^ 1
    fs.put(`${PATH}/ledger.json`, bytes)
    const check = await BufferCheck.run(PATH, { fileSystem: fs })
    expect(check.problems).toContain(
      'the last checkpoint in the ledger is not whole (checksum mismatch): opening goes by the one before it',
    )
    const repaired = await BufferCheck.run(PATH, { fileSystem: fs, repair: true })
    expect(repaired.repairs).toContain('rewrote the ledger with its last whole checkpoint')
    expect(await Ledger.read(fs, PATH)).toMatchObject({ status: 'ok', ledger: { ackedBelow: 4 } })
    expect((await BufferCheck.run(PATH, { fileSystem: fs })).problems).toEqual([])
  })

  it('appends each checkpoint of a run to the ledger with one durable write, after the first replaced it', async () => {
    const { fs, open } = setup()
    const buffer = await open() // a new buffer's first checkpoint, at open
    await buffer.append(range(6).map((s) => Buffer.from(s)))
    const renames: string[] = []
    const rename = fs.rename.bind(fs)
    fs.rename = (from, to) => {
      renames.push(to)
      return rename(from, to)
    }
    const syncDirs = fs.counts.syncDir
    for (const r of (await buffer.read(6))!) {
      buffer.ack(r.seq)
      await buffer.checkpoint()
    }
    expect(renames).toEqual([])
    expect(fs.counts.syncDir).toBe(syncDirs)
    const read = await Ledger.read(fs, PATH)
    expect(read).toMatchObject({ status: 'ok', ledger: { ackedBelow: 6 } })
    expect(fs.bytes(`${PATH}/ledger.json`)!.toString().split('\n').length).toBe(2 * 7 + 1) // 7 checkpoints
    buffer._abandon()
    fs.crash() // appended under 'always' with O_DSYNC: durable each
    const reopened = await open()
    expect(reopened.ackedBelow).toBe(6)
    await reopened.close()
  })

  it('deletes segments wholly below the acknowledged position that a crash left behind', async () => {
    const { fs, open } = setup({ segmentBytes: 64 }) // two 28-byte frames per segment
    const buffer = await open()
    await buffer.append(range(6).map((s) => Buffer.from(s)))
    expect(fs.files(PATH).filter((p) => p.endsWith('.seg'))).toHaveLength(3)
    const segment0 = fs.bytes(`${PATH}/00000000000000000000.seg`)!
    for (const r of (await buffer.read(4))!) buffer.ack(r.seq)
    await buffer.close()
    fs.put(`${PATH}/00000000000000000000.seg`, segment0) // the delete did not reach the disk
    const reopened = await open()
    expect(await drain(reopened)).toEqual(['record-4', 'record-5'])
    expect(fs.bytes(`${PATH}/00000000000000000000.seg`)).toBeUndefined()
    await reopened.close()
  })
})

describe('DiskBuffer ledger that does not match the data', () => {
  /** Six records of 22-byte frames, two a 64-byte segment (0, 2, 4); 0..2 acknowledged and saved. */
  async function ackedBelow3() {
    const { fs, logs, open } = setup({ segmentBytes: 64 })
    const buffer = await open()
    for (let i = 0; i < 6; i++) await buffer.append([Buffer.from(`r${i}`)])
    for (const r of (await buffer.read(3))!) buffer.ack(r.seq)
    await buffer.close() // the ledger: acknowledged below 3, segments 2 and 4
    expect(fs.files(PATH).filter((p) => p.endsWith('.seg'))).toEqual([
      `${PATH}/00000000000000000002.seg`,
      `${PATH}/00000000000000000004.seg`,
    ])
    return { fs, logs, open }
  }

  it('warns when the first segment, holding records the ledger counts unacknowledged, is gone, and delivers the rest', async () => {
    // Segment 2 holds 2 (acknowledged) and 3 (not): deleted from outside, 3 was skipped silently,
    // as the ledger's own check only looked at segments starting at or past its prefix.
    const { fs, logs, open } = await ackedBelow3()
    await fs.unlink(`${PATH}/00000000000000000002.seg`)
    await fs.syncDir(PATH)
    const reopened = await open()
    expect(logs.filter((m) => m.includes('are gone'))).toEqual([
      expect.stringContaining(
        'records 3..3, which ledger.json counts unacknowledged, are gone: the segment(s) holding them are not on disk (the first one left is 00000000000000000004.seg)',
      ),
    ])
    expect(logs.at(-1)).toContain('deleted from outside the buffer')
    expect(await drain(reopened)).toEqual(['r4', 'r5'])
    await reopened.close()
  })

  it('warns when every segment is gone while the ledger counts records unacknowledged', async () => {
    const { fs, logs, open } = await ackedBelow3()
    await fs.unlink(`${PATH}/00000000000000000002.seg`)
    await fs.unlink(`${PATH}/00000000000000000004.seg`)
    await fs.syncDir(PATH)
    const reopened = await open()
    expect(logs.filter((m) => m.includes('are gone'))).toEqual([
      expect.stringContaining('records 3..5, which ledger.json counts unacknowledged, are gone'),
    ])
    expect(reopened.nextSeq).toBe(6) // never reused
    expect(await drain(reopened)).toEqual([])
    await reopened.close()
  })

  it('says nothing of records gone after a crash that follows the delete of an acknowledged segment: the ledger saved it first', async () => {
    // A segment went as soon as the prefix passed it and the checkpoint came later, so a crash
    // in between (every crash of a busy buffer, within ledgerIntervalMs of a delete) was warned
    // as records perhaps lost to a deletion from outside.
    const { fs, logs, open } = setup({ segmentBytes: 64, ledgerIntervalMs: 60_000 })
    const buffer = await open()
    for (let i = 0; i < 6; i++) await buffer.append([Buffer.from(`r${i}`)])
    await buffer.checkpoint() // acknowledged below 0, segments 0, 2 and 4
    for (const r of (await buffer.read(2))!) buffer.ack(r.seq) // segment 0 goes
    // A roll fsyncs the directory, so the delete is on disk.
    await buffer.append([Buffer.from('r6')])
    await buffer.append([Buffer.from('r7')])
    expect(fs.files(PATH)).not.toContain(`${PATH}/00000000000000000000.seg`)
    buffer._abandon()
    fs.crash()
    const reopened = await open()
    expect(logs.filter((m) => m.includes('are gone') || m.includes('missing'))).toEqual([])
    expect(await drain(reopened)).toEqual(['r2', 'r3', 'r4', 'r5', 'r6', 'r7'])
    await reopened.close()
  })

  it('says nothing of records gone after a crash that follows the reclaim of the only segment, and gives no number again', async () => {
    const { fs, logs, open } = setup({ segmentBytes: 64, maxBytes: 64, ledgerIntervalMs: 60_000 })
    const buffer = await open()
    await buffer.append([Buffer.from('r0'), Buffer.from('r1')]) // the segment is full
    await buffer.checkpoint() // acknowledged below 0
    const waiting = buffer.append([Buffer.from('r2')]) // waits for room
    for (const r of (await buffer.read(2))!) buffer.ack(r.seq) // the segment is reclaimed
    expect(await waiting).toMatchObject({ status: 'written', firstSeq: 2 })
    buffer._abandon()
    fs.crash()
    const reopened = await open()
    expect(logs.filter((m) => m.includes('are gone') || m.includes('missing'))).toEqual([])
    expect(reopened.nextSeq).toBeGreaterThanOrEqual(2)
    await reopened.close()
  })

  it('leaves an acknowledged segment on disk when the checkpoint before its delete fails, and the next open delivers its records again', async () => {
    const { fs, logs, open } = setup({ segmentBytes: 64, ledgerIntervalMs: 60_000 })
    const buffer = await open()
    for (let i = 0; i < 4; i++) await buffer.append([Buffer.from(`r${i}`)])
    await buffer.checkpoint() // acknowledged below 0, segments 0 and 2
    fs.fault = (_op, path) =>
      path.includes('ledger.json') ? Object.assign(new Error('ENOSPC: full'), { code: 'ENOSPC' }) : undefined
    for (const r of (await buffer.read(2))!) buffer.ack(r.seq)
    await buffer.append([Buffer.from('r4')]) // after the release, on the lane
    expect(
      logs.some((m) =>
        m.includes('could not save the ledger before deleting segment 00000000000000000000.seg'),
      ),
    ).toBe(true)
    expect(fs.files(PATH)).toContain(`${PATH}/00000000000000000000.seg`)
    fs.fault = undefined
    buffer._abandon()
    fs.crash()
    const reopened = await open()
    expect(logs.filter((m) => m.includes('are gone'))).toEqual([])
    expect(await drain(reopened)).toEqual(['r0', 'r1', 'r2', 'r3', 'r4'])
    await reopened.close()
  })

  it("says nothing of records gone when the segments below the ledger's prefix alone are gone", async () => {
    const { logs, open } = await ackedBelow3()
    const reopened = await open()
    expect(await drain(reopened)).toEqual(['r3', 'r4', 'r5'])
    await reopened.close()
    expect(logs.filter((m) => m.includes('are gone') || m.includes('missing'))).toEqual([])
  })

  it('refuses to open when the acknowledged position lies past the records on disk, names the numbers, and deletes nothing', async () => {
    const { fs, open } = setup({ segmentBytes: 64 }) // two 28-byte frames per segment
    const buffer = await open()
    await buffer.append(range(6).map((s) => Buffer.from(s)))
    await buffer.close()
    const before = fs.files(PATH).map((p) => [p, fs.bytes(p)!.toString('hex')])
    // A ledger restored from a later backup: it says everything below 40 was acknowledged.
    await Ledger.write(fs, PATH, { nextSeq: 50, ackedBelow: 40, segments: [30, 38] })
    const error = await open().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(DiskBufferError)
    expect(error).toMatchObject({ code: 'LEDGER_AHEAD' })
    const message = (error as DiskBufferError).message
    expect(message).toContain('below 40')
    expect(message).toContain('end at record 5')
    expect(message).toContain('--repair')
    const after = fs.files(PATH).map((p) => [p, fs.bytes(p)!.toString('hex')])
    expect(after.filter(([p]) => p!.endsWith('.seg'))).toEqual(before.filter(([p]) => p!.endsWith('.seg')))
    // The repair rebuilds the ledger from the segments: every record on disk comes again.
    const report = await BufferCheck.run(PATH, { fileSystem: fs, repair: true })
    expect(report.problems.some((p) => p.includes('past the records on disk'))).toBe(true)
    const reopened = await open()
    expect(await drain(reopened)).toEqual(range(6))
    await reopened.close()
    const again = await open() // and the next start is clean
    await again.close()
  })

  // Under group commit the checkpoint waits on the lane behind the write holding the next numbers:
  // the cases guard that order there; under 'always' (beside the lane) the cap does it.
  for (const [sync, then] of [
    ['always', 'crash'],
    [{ everyMs: 60_000, everyWrites: 1 }, 'crash'],
    ['always', 'write'],
    [{ everyMs: 60_000, everyWrites: 1 }, 'write'],
  ] as const) {
    it(`sync ${JSON.stringify(sync)}, then ${then}: a checkpoint never saves numbers a failed write skipped before the write holding the numbers after them${then === 'crash' ? ', so a crash then leaves a buffer that opens' : '; once it is written, the next checkpoint saves them'}`, async () => {
      const { fs: mem } = setup()
      // G1's write waits, then fails; G2's write waits until after the crash, or until released.
      let writes = 0
      let armed = false
      let failG1!: (error: Error) => void
      const g1Fails = new Promise<void>((_, reject) => {
        failG1 = reject
      })
      let releaseG2!: () => void
      const g2Waits = new Promise<void>((resolve) => {
        releaseG2 = resolve
      })
      const fs = reopening(mem, async (path, mode) => {
        const file = await mem.open(path, mode)
        if (!path.endsWith('.seg')) return file
        const wrapped: FileLike = {
          ...file,
          writev: async (buffers, position) => {
            if (armed) {
              writes++
              await (writes === 1 ? g1Fails : g2Waits)
            }
            return file.writev(buffers, position)
          },
        }
        return wrapped
      })
      const open = () =>
        CrashableDiskBuffer.open({
          path: PATH,
          fileSystem: fs,
          segmentBytes: 1024,
          ledgerEveryAcks: 1,
          ledgerIntervalMs: 600_000, // no timer saves anything within the test
          sync,
        })
      const buffer = await open()
      await buffer.append([record(0)])
      await buffer.flush()
      for (const r of (await buffer.read(10))!) buffer.ack(r.seq)
      await buffer.checkpoint()
      armed = true
      const g1 = buffer.append([record(1), record(2)]) // numbers 1 and 2
      while (writes === 0) await new Promise((resolve) => setImmediate(resolve))
      const g2 = buffer.append([record(3)]) // number 3: G1's numbers cannot be reused, so they are skipped
      failG1(Object.assign(new Error('EIO: injected'), { code: 'EIO' }))
      const answer = await g1
      expect(
        answer.status === 'failed' || (answer.status === 'written' && (await answer.durable) === 'failed'),
      ).toBe(true)
      expect(buffer.ackedBelow).toBe(3) // 1 and 2 count acknowledged
      // The checkpoint the advance queued runs now beside the lane ('always'), or waits on the
      // lane behind G2 (group commit); the lane itself never empties again in this run.
      for (let i = 0; i < 50; i++) await new Promise((resolve) => setImmediate(resolve))
      const saved = await Ledger.read(mem, PATH)
      expect(saved.status === 'ok' && saved.ledger.ackedBelow).toBe(1)
      if (then === 'write') {
        releaseG2()
        const written = await g2
        expect(written.status === 'written' && (await written.durable)).toBe('durable')
        await buffer.flush() // the lane, and the checkpoints queued
        const later = await Ledger.read(mem, PATH)
        expect(later.status === 'ok' && later.ledger.ackedBelow).toBe(3)
        await buffer.close()
        return
      }
      buffer._abandon()
      mem.crash()
      armed = false
      const reopened = await open()
      expect(reopened.ackedBelow).toBe(1)
      expect(await drain(reopened)).toEqual([]) // 0 was acknowledged, and nothing after it was written
      await reopened.close()
    })
  }

  it.each([
    ['acknowledged', 10],
    ['not yet acknowledged', 5],
  ] as const)(
    'opens again after opening cut a damaged tail whose records were %s (a ledger past the records left is ours)',
    async (_, acked) => {
      const { fs, logs, open } = setup()
      const buffer = await open()
      await buffer.append(range(10).map((s) => Buffer.from(s))) // one segment, 28-byte frames
      for (const r of (await buffer.read(acked))!) buffer.ack(r.seq)
      await buffer.close()
      fs.flip(`${PATH}/00000000000000000000.seg`, 9 * 28 + 22) // record 9's payload: a damaged tail
      const first = await open()
      expect(first.metrics().tornBytesTruncated).toBe(28)
      expect(await drain(first)).toEqual(range(9).slice(acked))
      await first.close() // checkpoints every record, 9 (lost) included, as acknowledged
      // The next open found the ledger acknowledging past the last record on disk (8) and no tail
      // to cut, took it for another buffer's (LEDGER_AHEAD) and refused to start.
      const second = await open()
      expect(second.ackedBelow).toBe(10)
      expect(await second.append([Buffer.from('next')])).toMatchObject({ status: 'written', firstSeq: 10 })
      expect(await drain(second)).toEqual(['next'])
      await second.close()
      expect(logs.filter((m) => m.includes('LEDGER_AHEAD'))).toEqual([])
    },
  )

  it.each([
    ['making the segment past the records left', 'open', `${PATH}/00000000000000000010.seg`],
    ['cutting the damaged tail', 'truncate', `${PATH}/00000000000000000000.seg`],
  ] as const)(
    'opens again after an open that found a damaged tail of acknowledged records failed %s',
    async (_, op, failing) => {
      const { fs, open } = setup()
      const buffer = await open()
      await buffer.append(range(10).map((s) => Buffer.from(s))) // one segment, 28-byte frames
      for (const r of (await buffer.read(10))!) buffer.ack(r.seq)
      await buffer.close() // acknowledged below 10
      fs.flip(`${PATH}/00000000000000000000.seg`, 9 * 28 + 22) // record 9's payload: a damaged tail
      // One step fails (EMFILE, EIO; or a kill there): the open rejects half-way.
      fs.fault = (o, path) =>
        o === op && path === failing ? Object.assign(new Error('EIO: failed'), { code: 'EIO' }) : undefined
      await expect(open()).rejects.toThrow(/EIO/)
      fs.fault = undefined
      // Had the failed open cut the tail before making the segment, the next one found the ledger
      // past the records left and no tail to cut, took it for another buffer's (LEDGER_AHEAD) and
      // refused to start.
      const reopened = await open()
      expect(await drain(reopened)).toEqual([])
      await reopened.close()
      const again = await open()
      expect(again.ackedBelow).toBe(10)
      expect(await again.append([Buffer.from('next')])).toMatchObject({ status: 'written', firstSeq: 10 })
      expect(await drain(again)).toEqual(['next'])
      await again.close()
    },
  )

  it('fsyncs the directory, on the next open, of the segment an open made past the records left when that fsync failed', async () => {
    // Without a lock (the dead-letter queue's case), nothing else of the next open syncs the
    // directory: its appends went durably into a file whose entry a crash of the machine lost.
    const { fs, open } = setup({ lock: false })
    const buffer = await open()
    await buffer.append(range(10).map((s) => Buffer.from(s))) // one segment, 28-byte frames
    for (const r of (await buffer.read(10))!) buffer.ack(r.seq)
    await buffer.close() // acknowledged below 10
    fs.flip(`${PATH}/00000000000000000000.seg`, 9 * 28 + 22) // a damaged tail: segment 10 is made
    let failures = 1
    fs.fault = (op, path) =>
      op === 'syncDir' && path === PATH && failures-- > 0
        ? Object.assign(new Error('EIO: failed'), { code: 'EIO' })
        : undefined
    await expect(open()).rejects.toThrow(/EIO/)
    fs.fault = undefined
    const reopened = await open()
    const written = await reopened.append([Buffer.from('next')])
    expect(written).toMatchObject({ status: 'written', firstSeq: 10 })
    expect(written.status === 'written' && (await written.durable)).toBe('durable')
    reopened._abandon()
    fs.crash()
    const after = await open()
    expect(await drain(after)).toEqual(['next'])
    await after.close()
  })

  it('opens a buffer whose every record was acknowledged and whose last segment is empty', async () => {
    const { open } = setup({ segmentBytes: 64 })
    const buffer = await open()
    await buffer.append(range(4).map((s) => Buffer.from(s)))
    expect(await drain(buffer)).toEqual(range(4))
    await buffer.close()
    const reopened = await open()
    expect(reopened.ackedBelow).toBe(4)
    await reopened.close()
  })
})

describe('DiskBuffer settings stored with the files', () => {
  const big = (i: number): Buffer => Buffer.from(`big-${i}-${'x'.repeat(200)}`)

  it('keeps using the segment size the files were written with when reopened with another one, and says so', async () => {
    const { fs, logs, open } = setup({ segmentBytes: 1024 })
    const buffer = await open()
    await buffer.append([0, 1, 2, 3, 4, 5].map(big)) // 232-byte frames: longer than a 128-byte segment
    await buffer.close()
    const reopened = await setupOn(fs, logs, { segmentBytes: 128 })
    expect(reopened.maxRecordBytes).toBe(1024 - 20)
    expect(logs.some((m) => m.includes('segmentBytes') && m.includes('1024') && m.includes('128'))).toBe(true)
    expect(await drain(reopened)).toEqual([0, 1, 2, 3, 4, 5].map((i) => big(i).toString()))
    await reopened.close()
  })

  it('opens a buffer written before settings were stored as before, and stores them', async () => {
    const { fs, logs, open } = setup({ segmentBytes: 1024 })
    const buffer = await open()
    await buffer.append([0, 1, 2].map(big))
    await buffer.close()
    await fs.unlink(`${PATH}/settings.json`)
    // Even with a smaller segment size, nothing is cut off as a torn write.
    const reopened = await setupOn(fs, logs, { segmentBytes: 128 })
    expect(reopened.metrics().tornBytesTruncated).toBe(0)
    expect(fs.bytes(`${PATH}/settings.json`)).toBeDefined()
    expect(await drain(reopened)).toEqual([0, 1, 2].map((i) => big(i).toString()))
    await reopened.close()
  })

  it('takes the new segment size when the buffer holds no segment', async () => {
    const { fs, logs, open } = setup({ segmentBytes: 1024 })
    await (await open()).close()
    const reopened = await setupOn(fs, logs, { segmentBytes: 256 })
    expect(reopened.maxRecordBytes).toBe(256 - 20)
    await reopened.close()
  })
})

describe('DiskBuffer recovery: a directory named like a segment', () => {
  const dirs: string[] = []
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
  })

  it.each([
    ['alone in the buffer', '00000000000000000000.seg', 0],
    ['after the segments', '00000000000000000099.seg', 60],
    ['named inside the records of a segment', '00000000000000000040.seg', 60],
  ])(
    'refuses to open with READ_FAILED naming it, not a raw EISDIR (%s), and opens once it is moved out',
    async (_, name, records) => {
      const path = mkdtempSync(join(tmpdir(), 'ackline-segdir-'))
      dirs.push(path)
      if (records > 0) {
        const buffer = await DiskBuffer.open({ path, segmentBytes: 1024 })
        for (let i = 0; i < records; i++) await buffer.append([Buffer.alloc(40, 0x61)])
        await buffer.close() // segments 0..33, 34..59 (named 0 and 34)
      }
      mkdirSync(join(path, name))
      const failed = await DiskBuffer.open({ path, log: () => undefined }).then(
        (buffer) => buffer.close(),
        (error: unknown) => error,
      )
      expect(failed).toBeInstanceOf(DiskBufferError)
      expect(failed).toMatchObject({ code: 'READ_FAILED', path })
      expect((failed as Error).message).toContain(`${path}/${name} is a directory`)
      rmSync(join(path, name), { recursive: true })
      const reopened = await DiskBuffer.open({ path })
      expect(reopened.metrics().unackedRecords).toBe(records)
      await reopened.close()
    },
  )
})

describe('DiskBuffer recovery: a directory named like a segment, on a file system giving directories a size', () => {
  it.each([
    [4096, 'alone in the buffer', '00000000000000000000.seg', 0],
    [4096, 'after the segments', '00000000000000000099.seg', 60],
    [4096, 'named inside the records of a segment', '00000000000000000040.seg', 60],
    [0, 'alone in the buffer', '00000000000000000000.seg', 0],
    [0, 'after the segments', '00000000000000000099.seg', 60],
    [0, 'named inside the records of a segment', '00000000000000000040.seg', 60],
  ])(
    'of %d bytes refuses to open with READ_FAILED naming it (%s), and opens once it is moved out',
    async (directorySize, _, name, records) => {
      const { fs, open } = setup()
      fs.directorySize = directorySize
      if (records > 0) {
        const buffer = await open()
        for (let i = 0; i < records; i++) await buffer.append([Buffer.alloc(40, 0x61)])
        await buffer.close() // segments 0, 17, 34 (running to 50) and 51
      }
      await fs.mkdir(`${PATH}/${name}`)
      const failed = await open().then(
        (buffer) => buffer.close(),
        (error: unknown) => error,
      )
      expect(failed).toBeInstanceOf(DiskBufferError)
      expect(failed).toMatchObject({ code: 'READ_FAILED', path: PATH })
      expect((failed as Error).message).toContain(`${PATH}/${name} is a directory`)
      expect(fs.openFiles).toBe(0)
      fs.rmdir(`${PATH}/${name}`)
      const reopened = await open()
      expect(reopened.metrics().unackedRecords).toBe(records)
      await reopened.close()
    },
  )
})

/** Opens the buffer at PATH on `fs` with other options. */
function setupOn(fs: MemoryFileSystem, logs: string[], options: { segmentBytes: number }) {
  return CrashableDiskBuffer.open({ path: PATH, fileSystem: fs, log: (m) => logs.push(m), ...options })
}

describe('DiskBuffer lock', () => {
  const dirs: string[] = []
  const tempDir = (): string => {
    const dir = mkdtempSync(join(tmpdir(), 'ackline-lock-'))
    dirs.push(dir)
    return dir
  }
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
  })

  it('takes over a stale lock left by a dead process', async () => {
    const path = tempDir()
    const dead = spawnSync(process.execPath, ['-e', '']).pid!
    writeFileSync(join(path, 'lock'), JSON.stringify({ pid: dead, hostname: hostname(), since: 'then' }))
    const logs: string[] = []
    const buffer = await DiskBuffer.open({ path, log: (m) => logs.push(m) })
    expect(logs).toContain(
      `disk buffer ${path}: took over the stale lock of process ${dead} on ${hostname()}`,
    )
    await buffer.close()
  })

  it('refuses a directory a live process holds, naming the holder', async () => {
    const path = tempDir()
    const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' })
    try {
      writeFileSync(
        join(path, 'lock'),
        JSON.stringify({ pid: child.pid, hostname: hostname(), since: 'now' }),
      )
      const error = await DiskBuffer.open({ path }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(DiskBufferError)
      expect((error as DiskBufferError).code).toBe('LOCKED')
      expect((error as DiskBufferError).message).toContain(`locked by process ${child.pid} on ${hostname()}`)
    } finally {
      child.kill('SIGKILL')
    }
  })

  it('refuses a lock naming another host and says how to break it if its process is gone', async () => {
    const path = tempDir()
    writeFileSync(join(path, 'lock'), JSON.stringify({ pid: 4242, hostname: 'old-name', since: 'then' }))
    const error = await DiskBuffer.open({ path, log: () => {} }).catch((e: unknown) => e)
    expect(error).toMatchObject({ code: 'LOCKED' })
    const message = (error as DiskBufferError).message
    expect(message).toContain('locked by process 4242 on old-name')
    expect(message).toContain('another host')
    expect(message).toContain(`ackline-buffer ${path} --repair --break-lock`)
  })

  it('refuses a second open in the same process and allows one after close', async () => {
    const path = tempDir()
    const buffer = await DiskBuffer.open({ path })
    await expect(DiskBuffer.open({ path })).rejects.toMatchObject({ code: 'LOCKED' })
    await buffer.close()
    const again = await DiskBuffer.open({ path })
    await again.close()
  })

  it('refuses a second open of the same directory spelled another way, a symbolic link included, and keeps the first lock', async () => {
    const path = tempDir()
    const link = `${tempDir()}/link`
    symlinkSync(path, link)
    const buffer = await DiskBuffer.open({ path })
    for (const other of [`${path}/`, `${path}/.`, relative(process.cwd(), path), link, `${link}/`]) {
      await expect(DiskBuffer.open({ path: other })).rejects.toMatchObject({ code: 'LOCKED' })
    }
    expect(existsSync(join(path, 'lock'))).toBe(true)
    await buffer.close()
    const again = await DiskBuffer.open({ path: `${path}/` })
    await again.close()
  })

  it('resolves a second close only once the first released the lock', async () => {
    const path = tempDir()
    const buffer = await DiskBuffer.open({ path })
    await buffer.append([Buffer.from('a')])
    void buffer.close()
    await buffer.close()
    // The lock is released: the directory opens again at once.
    const again = await DiskBuffer.open({ path })
    await again.close()
  })

  it('refuses a second open started while the first is still taking a stale lock over', async () => {
    const path = tempDir()
    writeFileSync(join(path, 'lock'), JSON.stringify({ pid: deadPid(), hostname: hostname(), since: 'then' }))
    // Whichever gets to the lock first takes it over; the other is refused.
    const results = await Promise.allSettled([DiskBuffer.open({ path }), DiskBuffer.open({ path })])
    const opened = results.filter((r) => r.status === 'fulfilled')
    const refused = results.filter((r) => r.status === 'rejected')
    expect(opened).toHaveLength(1)
    expect(refused).toMatchObject([{ reason: { code: 'LOCKED' } }])
    for (const r of opened) await r.value.close()
  })

  it('lets only one of two processes take the same stale lock over, even when both found it stale', async () => {
    const path = tempDir()
    writeFileSync(join(path, 'lock'), JSON.stringify({ pid: deadPid(), hostname: hostname(), since: 'then' }))
    const a = lockChild(path)
    let b: ReturnType<typeof lockChild> | undefined
    try {
      // A found the lock stale and stands just before renaming its own into place.
      expect(await a.line()).toBe('paused')
      // B finds the same stale lock. It must not reach the rename while A is taking over.
      b = lockChild(path)
      const bFirst = await b.line()
      expect(bFirst).toMatch(/^refused LOCKED .*being taken over by process \d+/)
      a.send('go')
      expect(await a.line()).toBe('acquired')
      // A third opener, after the takeover, sees A's live lock.
      const c = lockChild(path)
      expect(await c.line()).toMatch(/^refused LOCKED .*locked by process \d+/)
      expect(readdirSync(path)).not.toContain('lock.takeover')
    } finally {
      a.kill()
      b?.kill()
      await a.exited
    }
  })

  it.each([
    ['empty', ''],
    ['partly written', '{"pid":12'],
  ])('reads an %s lock as held (its writer may be alive) and says how to break it', async (_, content) => {
    const path = tempDir()
    writeFileSync(join(path, 'lock'), content)
    const error = await DiskBuffer.open({ path, log: () => {} }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(DiskBufferError)
    expect(error).toMatchObject({ code: 'LOCKED' })
    expect((error as DiskBufferError).message).toContain('unreadable')
    expect((error as DiskBufferError).message).toContain('ackline-buffer')
    expect((error as DiskBufferError).message).toContain('--break-lock')
    expect(readdirSync(path)).toContain('lock')
  })

  it('gives the lock to exactly one of three processes opening at once, round after round', async () => {
    // Three processes, each told to open at the same moment, many times over: even rounds race
    // for a free directory, odd ones for a stale lock. Raise LOCK_RACE_ROUNDS to hunt for races.
    const rounds = Number(process.env.LOCK_RACE_ROUNDS ?? 60)
    const path = tempDir()
    const dead = deadPid()
    const children = [0, 1, 2].map(() => lockChild(path, ['--race']))
    let raced = 0
    try {
      for (let round = 0; round < rounds; round++) {
        if (round % 2 === 1) {
          writeFileSync(
            join(path, 'lock'),
            JSON.stringify({ pid: dead, hostname: hostname(), since: 'then' }),
          )
        }
        for (const c of children) c.send('go')
        const results = await Promise.all(children.map((c) => c.line()))
        const holders = children.filter((_, i) => results[i] === 'acquired')
        expect(holders, `round ${round}: ${results.join(' | ')}`).toHaveLength(1)
        for (const r of results) if (r !== 'acquired') expect(r).toMatch(/^refused LOCKED /)
        raced++
        holders[0]!.send('release')
        expect(await holders[0]!.line()).toBe('released')
        expect(readdirSync(path).filter((n) => n.startsWith('lock'))).toEqual([])
      }
    } finally {
      for (const c of children) c.kill()
    }
    console.log(`lock race: ${raced} rounds of three processes, one holder in each`)
    expect(raced).toBe(rounds)
  }, 120_000)

  it('removes a takeover guard left by a process that died during its takeover', async () => {
    const path = tempDir()
    const dead = deadPid()
    writeFileSync(join(path, 'lock'), JSON.stringify({ pid: dead, hostname: hostname(), since: 'then' }))
    writeFileSync(
      join(path, 'lock.takeover'),
      JSON.stringify({ pid: dead, hostname: hostname(), since: 'then' }),
    )
    const buffer = await DiskBuffer.open({ path })
    expect(readdirSync(path)).not.toContain('lock.takeover')
    await buffer.close()
  })

  it('refuses while a live process holds the takeover guard, and says what to do if none does', async () => {
    const path = tempDir()
    const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' })
    try {
      writeFileSync(
        join(path, 'lock'),
        JSON.stringify({ pid: deadPid(), hostname: hostname(), since: 'then' }),
      )
      writeFileSync(
        join(path, 'lock.takeover'),
        JSON.stringify({ pid: child.pid, hostname: hostname(), since: 'now' }),
      )
      const error = await DiskBuffer.open({ path }).catch((e: unknown) => e)
      expect(error).toMatchObject({ code: 'LOCKED' })
      expect((error as DiskBufferError).message).toContain(`being taken over by process ${child.pid}`)
      expect((error as DiskBufferError).message).toContain('ackline-buffer --repair')
    } finally {
      child.kill('SIGKILL')
    }
  })
})

/** The pid of a process that has exited. */
function deadPid(): number {
  return spawnSync(process.execPath, ['-e', '']).pid!
}

/** A child process opening the buffer in `path` (see `fixtures/lockChild.ts`), read line by line. */
function lockChild(path: string, args: readonly string[] = []) {
  const script = new URL('./fixtures/lockChild.ts', import.meta.url).pathname
  const root = new URL('../../..', import.meta.url).pathname
  const proc = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', script, path, ...args], {
    cwd: root,
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  const lines: string[] = []
  const waiting: ((line: string) => void)[] = []
  let pending = ''
  let stderr = ''
  proc.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  proc.stdout.on('data', (chunk: Buffer) => {
    const parts = (pending + chunk.toString()).split('\n')
    pending = parts.pop()!
    for (const line of parts) {
      const next = waiting.shift()
      if (next === undefined) lines.push(line)
      else next(line)
    }
  })
  const exited = new Promise<void>((resolve) => proc.on('exit', () => resolve()))
  return {
    exited,
    line: (): Promise<string> =>
      lines.length > 0
        ? Promise.resolve(lines.shift()!)
        : new Promise<string>((resolve, reject) => {
            waiting.push(resolve)
            exited.then(() => reject(new Error(`lockChild exited: ${stderr}`)))
          }),
    send: (line: string): void => {
      if (proc.exitCode === null) proc.stdin.write(`${line}\n`)
    },
    kill: (): void => {
      proc.kill('SIGKILL')
    },
  }
}
