// The `ackline-buffer` command: a read-only check, and `--repair`.
import { spawn, spawnSync } from 'node:child_process'
import {
  appendFileSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { BufferCheck, DiskBuffer } from '@ackline/buffers'
import { afterEach, describe, expect, it } from 'vitest'
import { drain, Frame, Ledger, PATH, records, setup } from './fixtures/MemoryBuffer.js'

const cli = new URL('../src/cli.ts', import.meta.url).pathname
const root = new URL('../../..', import.meta.url).pathname

const dirs: string[] = []
const tempDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'ackline-check-'))
  dirs.push(dir)
  return dir
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function runCli(...args: string[]): { code: number | null; out: string } {
  const r = spawnSync(process.execPath, ['--conditions=source', '--import', 'tsx', cli, ...args], {
    cwd: root,
    encoding: 'utf8',
  })
  return { code: r.status, out: r.stdout + r.stderr }
}

/** Every file under `dir` with its content, to prove a check changed nothing. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) {
      for (const [k, v] of Object.entries(snapshot(path))) out[`${name}/${k}`] = v
    } else {
      out[name] = readFileSync(path).toString('base64')
    }
  }
  return out
}

/** CRC-32C, bit by bit, as an independent reference (for writing a ledger by hand), in hex. */
function crc32c(bytes: Uint8Array): string {
  let crc = 0xffffffff
  for (const byte of bytes) {
    crc ^= byte
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0x82f63b78 : crc >>> 1
  }
  return ((crc ^ 0xffffffff) >>> 0).toString(16).padStart(8, '0')
}

/** A buffer of 10 records of `record-N` (28-byte frames), 4 per 128-byte segment, the first 3 acknowledged. */
async function makeBuffer(path: string): Promise<void> {
  const buffer = await DiskBuffer.open({ path, segmentBytes: 128, log: () => {} })
  await buffer.append(Array.from({ length: 10 }, (_, i) => Buffer.from(`record-${i}`)))
  for (const r of (await buffer.read(3))!) buffer.ack(r.seq)
  await buffer.close()
}

describe('ackline-buffer', () => {
  it('prints segments, record counts and the acknowledged position of a clean buffer, and exits 0', async () => {
    const path = tempDir()
    await makeBuffer(path)
    const before = snapshot(path)
    const { code, out } = runCli(path)
    expect(out).toContain(`buffer ${path}`)
    expect(out).toContain('ledger: ok (acknowledged below 3, next sequence 10)')
    expect(out).toContain('segments: 3, records: 10, unacknowledged: 7')
    expect(out).toContain('00000000000000000000.seg  112 bytes  4 records  seq 0..3')
    expect(out).toContain('00000000000000000008.seg  56 bytes  2 records  seq 8..9')
    expect(out).toContain('no problems found')
    expect(code).toBe(0)
    expect(snapshot(path)).toEqual(before)
  })

  it('reports a torn tail, a checksum failure, a missing ledger and a leftover temporary ledger without changing anything', async () => {
    const path = tempDir()
    await makeBuffer(path)
    appendFileSync(join(path, '00000000000000000008.seg'), Buffer.from('ACKL\x10\x00\x00\x00torn'))
    const first = join(path, '00000000000000000000.seg')
    const bytes = readFileSync(first)
    bytes[28 + 22] = bytes[28 + 22]! ^ 0xff // a payload byte of record 1
    writeFileSync(first, bytes)
    writeFileSync(join(path, 'ledger.json.tmp'), 'half a ledg')
    unlinkSync(join(path, 'ledger.json'))
    const before = snapshot(path)
    const { code, out } = runCli(path)
    expect(out).toContain('ledger: missing')
    expect(out).toContain('segment 00000000000000000000.seg: checksum failure at offset 28, 28 bytes damaged')
    expect(out).toContain('segment 00000000000000000008.seg: torn write of 12 bytes at offset 56')
    expect(out).toContain('ledger.json.tmp left by a crash')
    expect(code).toBe(1)
    expect(snapshot(path)).toEqual(before)
  })

  it('--repair fixes what it can, says what, and leaves a buffer that opens clean', async () => {
    const path = tempDir()
    await makeBuffer(path)
    appendFileSync(join(path, '00000000000000000008.seg'), Buffer.from('garbage!'))
    const first = join(path, '00000000000000000000.seg')
    const bytes = readFileSync(first)
    bytes[28 + 22] = bytes[28 + 22]! ^ 0xff
    writeFileSync(first, bytes)
    writeFileSync(join(path, 'ledger.json'), 'not a ledger')
    const { code, out } = runCli(path, '--repair')
    expect(out).toContain('segment 00000000000000000000.seg: rewrote without 1 damaged region(s)')
    expect(out).toContain('segment 00000000000000000008.seg: cut 8 torn bytes at offset 56')
    expect(out).toContain('rebuilt the ledger from the segments (acknowledged below 0, next 10)')
    expect(out).toContain('after repair: no problems found')
    expect(code).toBe(0)
    const logs: string[] = []
    const buffer = await DiskBuffer.open({ path, segmentBytes: 128, log: (m) => logs.push(m) })
    buffer.endWrites()
    const read: string[] = []
    for (;;) {
      const records = await buffer.read()
      if (records === undefined) break
      for (const r of records) {
        read.push(Buffer.from(r.payload).toString())
        buffer.ack(r.seq)
      }
    }
    expect(read).toEqual([0, 2, 3, 4, 5, 6, 7, 8, 9].map((i) => `record-${i}`))
    expect(buffer.metrics()).toMatchObject({ corruptRegions: 0, tornBytesTruncated: 0 })
    // The repaired segment has no damage left; the record the damage destroyed is a known gap.
    expect(logs).toEqual([
      `disk buffer ${path}: records 1..1 missing before segment 00000000000000000000.seg; skipped`,
    ])
    await buffer.close()
  })

  it('reports the copy a repair cut short left beside a segment (a crash, a full disk), and --repair removes it', async () => {
    const path = tempDir()
    await makeBuffer(path)
    writeFileSync(join(path, '00000000000000000000.seg.repair'), Buffer.alloc(40, 1))
    const check = runCli(path)
    expect(check.out).toContain(
      '00000000000000000000.seg.repair left by a repair cut short (a crash, a full disk): a partial copy of 00000000000000000000.seg, which it did not replace',
    )
    expect(check.code).toBe(1)
    const { code, out } = runCli(path, '--repair')
    expect(out).toContain('removed 00000000000000000000.seg.repair')
    expect(out).toContain('after repair: no problems found')
    expect(code).toBe(0)
    expect(existsSync(join(path, '00000000000000000000.seg.repair'))).toBe(false)
  })

  it('a repair whose rewrite of a segment fails (a full disk) removes its copy and leaves the segment as it was', async () => {
    const { fs, open } = setup({ segmentBytes: 1024 })
    const buffer = await open()
    await buffer.append(records(3))
    await buffer.close()
    const segment = `${PATH}/00000000000000000000.seg`
    fs.flip(segment, 22 + 20) // a payload byte of record 1
    const before = fs.bytes(segment)
    let room = 1
    fs.fault = (op, path) =>
      op === 'write' && path.endsWith('.repair') && room-- <= 0
        ? Object.assign(new Error(`ENOSPC: no space left on device, write '${path}'`), { code: 'ENOSPC' })
        : undefined
    await expect(BufferCheck.run(PATH, { repair: true, fileSystem: fs })).rejects.toThrow('ENOSPC')
    expect(fs.files(PATH).filter((p) => p.endsWith('.repair'))).toEqual([])
    expect(fs.bytes(segment)).toEqual(before)
  })

  it('a repair does not make again, zero-filled, a segment with a torn tail deleted from outside after the check read it: it says the segment is gone', async () => {
    const { fs, open } = setup({ segmentBytes: 1024 })
    const buffer = await open()
    await buffer.append(records(3))
    await buffer.close()
    const segment = `${PATH}/00000000000000000000.seg`
    fs.put(segment, Buffer.concat([fs.bytes(segment)!, Buffer.from('ACKL\x10\x00\x00\x00torn')]))
    let opens = 0
    fs.fault = (op, path) => {
      // The check opens it to read it; the repair then opens it to cut its tail.
      if (op === 'open' && path === segment && ++opens === 2) void fs.unlink(path)
      return undefined
    }
    const report = await BufferCheck.run(PATH, { repair: true, fileSystem: fs })
    fs.fault = undefined
    expect(opens).toBe(2)
    expect(fs.bytes(segment)).toBeUndefined()
    expect(report.repairs).toContain(
      'segment 00000000000000000000.seg: gone (deleted from outside) before its torn tail was cut; nothing cut',
    )
  })

  it('a repair does not count the records of a segment deleted from outside before its torn tail was cut: they are gone', async () => {
    const { fs, open } = setup({ segmentBytes: 1024 })
    const buffer = await open()
    await buffer.append(records(3))
    await buffer.close()
    const segment = `${PATH}/00000000000000000000.seg`
    fs.put(segment, Buffer.concat([fs.bytes(segment)!, Buffer.from('ACKL\x10\x00\x00\x00torn')]))
    let opens = 0
    fs.fault = (op, path) => {
      // The check opens it to read it; the repair then opens it to cut its tail.
      if (op === 'open' && path === segment && ++opens === 2) void fs.unlink(path)
      return undefined
    }
    const report = await BufferCheck.run(PATH, { repair: true, fileSystem: fs })
    fs.fault = undefined
    expect(fs.bytes(segment)).toBeUndefined()
    expect(report).toMatchObject({ records: 0, unacked: 0 })
    expect(BufferCheck.format(report)).toContain('segments: 1, records: 0, unacknowledged: 0')
  })

  it('a repair whose rename of the rewritten copy fails (EIO) removes the copy and leaves the segment as it was', async () => {
    const { fs, open } = setup({ segmentBytes: 1024 })
    const buffer = await open()
    await buffer.append(records(3))
    await buffer.close()
    const segment = `${PATH}/00000000000000000000.seg`
    fs.flip(segment, 22 + 20) // a payload byte of record 1
    const before = fs.bytes(segment)
    fs.fault = (op, path) =>
      op === 'rename' && path.endsWith('.repair')
        ? Object.assign(new Error(`EIO: i/o error, rename '${path}'`), { code: 'EIO' })
        : undefined
    await expect(BufferCheck.run(PATH, { repair: true, fileSystem: fs })).rejects.toThrow('EIO')
    expect(fs.files(PATH).filter((p) => p.endsWith('.repair'))).toEqual([])
    expect(fs.bytes(segment)).toEqual(before)
  })

  it('--repair cutting a damaged tail of acknowledged records leaves a buffer that opens, as opening without it does', async () => {
    const path = tempDir()
    const buffer = await DiskBuffer.open({ path, segmentBytes: 128, log: () => {} })
    await buffer.append(Array.from({ length: 10 }, (_, i) => Buffer.from(`record-${i}`)))
    for (const r of (await buffer.read())!) buffer.ack(r.seq)
    await buffer.close() // acknowledged below 10; the last segment holds records 8 and 9
    const last = join(path, '00000000000000000008.seg')
    const bytes = readFileSync(last)
    bytes[28 + 22] = bytes[28 + 22]! ^ 0xff // record 9, acknowledged, damaged: a torn tail
    writeFileSync(last, bytes)
    const report = await BufferCheck.run(path, { repair: true })
    expect(report.repairs).toContain('segment 00000000000000000008.seg: cut 28 torn bytes at offset 28')
    // The cut left the ledger acknowledging past the records on disk, which opening refused
    // (LEDGER_AHEAD), where opening without the repair cut the same tail and went on.
    expect(report.repairs.some((r) => r.includes('acknowledged position from 10 to 9'))).toBe(true)
    expect((await BufferCheck.run(path)).problems).toEqual([])
    const reopened = await DiskBuffer.open({ path, segmentBytes: 128, log: () => {} })
    expect(reopened.ackedBelow).toBe(9) // record 8 stays acknowledged: nothing comes again
    expect(await reopened.read(10, { wait: false })).toEqual([])
    await reopened.close() // checkpoints 9, the number past the records left, as acknowledged
    const again = await DiskBuffer.open({ path, segmentBytes: 128, log: () => {} })
    expect(again.ackedBelow).toBe(10)
    expect(await again.append([Buffer.from('next')])).toMatchObject({ status: 'written', firstSeq: 10 })
    await again.close()
  })

  it('refuses to repair a buffer a live process holds, and changes nothing', async () => {
    const path = tempDir()
    await makeBuffer(path)
    const buffer = await DiskBuffer.open({ path, segmentBytes: 128, log: () => {} })
    try {
      const before = snapshot(path)
      const { code, out } = runCli(path, '--repair')
      expect(out).toContain(`locked by live process ${process.pid}`)
      expect(out).toContain('not repairing a buffer a live process holds')
      expect(code).toBe(1)
      expect(snapshot(path)).toEqual(before)
    } finally {
      await buffer.close()
    }
  })

  it.each([
    ['another host', JSON.stringify({ pid: 4242, hostname: 'old-container-name', since: 'then' })],
    ['an unreadable lock', '{"pid":'],
  ])(
    'with %s, --repair refuses and says how; --repair --break-lock breaks it and the buffer opens',
    async (_, lock) => {
      const path = tempDir()
      await makeBuffer(path)
      writeFileSync(join(path, 'lock'), lock)
      const before = snapshot(path)
      const refused = runCli(path, '--repair')
      expect(refused.code).toBe(1)
      expect(refused.out).toContain('--break-lock')
      expect(snapshot(path)).toEqual(before)
      const broken = runCli(path, '--repair', '--break-lock')
      expect(broken.out).toContain('broke the lock')
      expect(broken.code).toBe(0)
      expect(readdirSync(path)).not.toContain('lock')
      const buffer = await DiskBuffer.open({ path, log: () => {} })
      await buffer.close()
    },
  )

  it('rejects --break-lock without --repair as a usage error', async () => {
    const path = tempDir()
    await makeBuffer(path)
    expect(runCli(path, '--break-lock').code).toBe(2)
  })

  it('reports a takeover guard a crashed takeover left (even an unreadable one), and --repair removes it', async () => {
    const path = tempDir()
    await makeBuffer(path)
    writeFileSync(join(path, 'lock.takeover'), '')
    const check = await BufferCheck.run(path)
    expect(check.problems).toContain(
      'lock.takeover left by a process that died while taking the lock over (unreadable)',
    )
    expect(readdirSync(path)).toContain('lock.takeover')
    const repaired = await BufferCheck.run(path, { repair: true })
    expect(repaired.repairs).toContain('removed lock.takeover')
    expect(readdirSync(path)).not.toContain('lock.takeover')
    const buffer = await DiskBuffer.open({ path, log: () => {} })
    await buffer.close()
  })

  it('exits 2 with usage on bad arguments, and on a path that is not a directory', () => {
    const { code, out } = runCli()
    expect(code).toBe(2)
    expect(out).toContain('usage: ackline-buffer <buffer-dir> [--repair]')
    const missing = runCli(join(tmpdir(), 'ackline-no-such-buffer'))
    expect(missing.code).toBe(2)
    expect(missing.out).toContain('is not a directory')
  })

  it('says the command is not built, and exits 2, from a checkout whose path has a space (not a stack trace)', () => {
    // The launcher as installed, in a package that was never built, under a directory with a space.
    const pkg = join(tempDir(), 'my checkout', 'buffers')
    mkdirSync(join(pkg, 'bin'), { recursive: true })
    writeFileSync(join(pkg, 'package.json'), '{"type":"module"}')
    const launcher = new URL('../bin/ackline-buffer.js', import.meta.url).pathname
    writeFileSync(join(pkg, 'bin', 'ackline-buffer.js'), readFileSync(launcher))
    const r = spawnSync(process.execPath, [join(pkg, 'bin', 'ackline-buffer.js'), tmpdir()], {
      encoding: 'utf8',
    })
    expect(r.stderr).toContain(`ackline-buffer: ${join(pkg, 'dist', 'cli.js')} is not built yet`)
    expect(r.stderr).toContain(`npx tsx --conditions=source ${join(pkg, 'src', 'cli.ts')} <buffer-dir>`)
    expect(r.stderr).not.toContain('ERR_MODULE_NOT_FOUND')
    expect(r.status).toBe(2)
  })

  it('does not call a built command that fails to load a module of its own "not built": the real error is shown', () => {
    // dist/cli.js is there, but something it imports is not (a dependency not installed, a
    // build cut short): the error names dist/cli.js too, as the module that imported it.
    const pkg = join(tempDir(), 'buffers')
    mkdirSync(join(pkg, 'bin'), { recursive: true })
    mkdirSync(join(pkg, 'dist'))
    writeFileSync(join(pkg, 'package.json'), '{"type":"module"}')
    writeFileSync(join(pkg, 'dist', 'cli.js'), "import '@ackline/not-installed'\n")
    const launcher = new URL('../bin/ackline-buffer.js', import.meta.url).pathname
    writeFileSync(join(pkg, 'bin', 'ackline-buffer.js'), readFileSync(launcher))
    const r = spawnSync(process.execPath, [join(pkg, 'bin', 'ackline-buffer.js'), tmpdir()], {
      encoding: 'utf8',
    })
    expect(r.stderr).not.toContain('is not built yet')
    expect(r.stderr).toContain('@ackline/not-installed')
    expect(r.status).not.toBe(0)
  })

  it('exits 2 with one line, not a stack trace, when its standard output is a pipe closed early (EPIPE)', async () => {
    const path = tempDir()
    await makeBuffer(path)
    const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', cli, path], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    // The reader goes away before the command has loaded, as `| head -c0` would.
    child.stdout.destroy()
    let err = ''
    child.stderr.on('data', (chunk: Buffer) => {
      err += chunk.toString()
    })
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
    expect(err).toBe('ackline-buffer: cannot print the report: standard output failed (EPIPE)\n')
    expect(code).toBe(2)
  })

  it.runIf(existsSync('/dev/full'))(
    'exits 2 with one line when its standard output cannot be written (ENOSPC)',
    async () => {
      const path = tempDir()
      await makeBuffer(path)
      const full = openSync('/dev/full', 'w')
      try {
        const r = spawnSync(process.execPath, ['--conditions=source', '--import', 'tsx', cli, path], {
          cwd: root,
          encoding: 'utf8',
          stdio: ['ignore', full, 'pipe'],
        })
        expect(r.stderr).toBe('ackline-buffer: cannot print the report: standard output failed (ENOSPC)\n')
        expect(r.status).toBe(2)
      } finally {
        closeSync(full)
      }
    },
  )

  it('names the entry it cannot read (a directory where a file belongs), and the command exits 2 with it', async () => {
    for (const entry of ['lock', 'lock.takeover', 'ledger.json', '00000000000000000000.seg']) {
      const path = tempDir()
      mkdirSync(join(path, entry))
      await expect(BufferCheck.run(path)).rejects.toThrow(`${path}/${entry}: EISDIR`)
    }
    const path = tempDir()
    mkdirSync(join(path, 'ledger.json'))
    const { code, out } = runCli(path)
    expect(out).toBe(`ackline-buffer: ${path}/ledger.json: EISDIR: illegal operation on a directory, read\n`)
    expect(code).toBe(2)
  })

  it('reads settings.json too: names it when it is a directory (opening fails on it), notes it when damaged', async () => {
    const path = tempDir()
    await makeBuffer(path)
    rmSync(join(path, 'settings.json'))
    mkdirSync(join(path, 'settings.json'))
    await expect(BufferCheck.run(path)).rejects.toThrow(`${path}/settings.json: EISDIR`)
    rmSync(join(path, 'settings.json'), { recursive: true })
    writeFileSync(join(path, 'settings.json'), '{"version":1,"segmentBytes":')
    const report = await BufferCheck.run(path)
    expect(report.problems).toEqual([])
    expect(report.notes).toContainEqual(expect.stringContaining('settings.json is damaged'))
  })

  it('reports records the ledger counts unacknowledged whose segment is gone (as opening warns), and --repair moves the ledger past them', async () => {
    const path = tempDir()
    await makeBuffer(path) // records 0..9, 0..2 acknowledged: record 3 is the first unacknowledged
    unlinkSync(join(path, '00000000000000000000.seg')) // deleted from outside, record 3 with it
    const { code, out } = runCli(path)
    expect(out).toContain(
      'records 3..3, which the ledger counts unacknowledged, are gone: the segment(s) holding them are not on disk (the first one left is 00000000000000000004.seg)',
    )
    expect(code).toBe(1)
    const repaired = runCli(path, '--repair')
    expect(repaired.out).toContain(
      "moved the ledger's acknowledged position from 3 to 4, where the records on disk resume (records 3..3 are gone)",
    )
    expect(repaired.out).toContain('after repair: no problems found')
    expect(repaired.code).toBe(0)
    const logs: string[] = []
    const buffer = await DiskBuffer.open({ path, segmentBytes: 128, log: (m) => logs.push(m) })
    expect(logs).toEqual([])
    expect(buffer.ackedBelow).toBe(4)
    await buffer.close()
    // With every segment gone, the records the ledger counts unacknowledged end at its next number.
    for (const name of readdirSync(path)) if (name.endsWith('.seg')) unlinkSync(join(path, name))
    const report = await BufferCheck.run(path)
    expect(report.problems).toContainEqual(
      expect.stringContaining('records 4..9, which the ledger counts unacknowledged, are gone'),
    )
  })

  it('reports the records a missing middle segment took, and --repair says they are lost, saves the ledger without it, and leaves the rest to deliver', async () => {
    const { fs, open } = setup({ log: () => {} })
    const buffer = await open()
    for (let i = 0; i < 100; i++) await buffer.append([Buffer.from(`r${String(i).padStart(6, '0')}`)])
    for (const r of (await buffer.read(10))!) buffer.ack(r.seq)
    await buffer.close()
    const segs = fs.files(PATH).filter((f) => f.endsWith('.seg'))
    const [first, middle, last] = segs.map((f) => Number(f.slice(PATH.length + 1, PATH.length + 21)))
    expect(segs.length).toBe(3)
    await fs.unlink(segs[1]!)
    const lost = `records ${middle}..${last! - 1}`
    const report = await BufferCheck.run(PATH, { fileSystem: fs })
    expect(report.problems).toContainEqual(expect.stringContaining(lost))
    const repaired = await BufferCheck.run(PATH, { fileSystem: fs, repair: true })
    expect(repaired.repairs).toContainEqual(
      expect.stringContaining(`${lost}, which the ledger counts unacknowledged, are lost`),
    )
    const after = await BufferCheck.run(PATH, { fileSystem: fs })
    expect(after.problems).toEqual([])
    // Every record left on disk, and only those, comes again: nothing acknowledged, nothing else.
    const reopened = await open()
    reopened.endWrites()
    const seqs: number[] = []
    for (let got = await reopened.read(100); got !== undefined; got = await reopened.read(100)) {
      for (const r of got) {
        seqs.push(r.seq)
        reopened.ack(r.seq)
      }
    }
    const expected = [
      ...Array.from({ length: middle! - 10 }, (_, i) => 10 + i),
      ...Array.from({ length: 100 - last! }, (_, i) => last! + i),
    ]
    expect(seqs).toEqual(expected)
    expect(first).toBe(0)
    await reopened.close()
  })

  it('reports the records segments missing after the last one left took, as far as the ledger knows, and --repair says they are lost', async () => {
    const { fs, logs, open } = setup()
    const buffer = await open()
    for (let i = 0; i < 100; i++) await buffer.append([Buffer.from(`r${String(i).padStart(6, '0')}`)])
    for (const r of (await buffer.read(10))!) buffer.ack(r.seq)
    await buffer.close() // segments 0, 37 and 74; the ledger lists them, next number 100
    await fs.unlink(`${PATH}/00000000000000000037.seg`)
    await fs.unlink(`${PATH}/00000000000000000074.seg`)
    const report = await BufferCheck.run(PATH, { fileSystem: fs })
    for (const [first, lost] of [
      [37, 'records 37..73'],
      [74, 'records 74..99'],
    ] as const) {
      expect(report.problems).toContainEqual(
        `segment starting at ${first} is listed in the ledger but missing: ${lost}, which the ledger counts unacknowledged, are lost with it (opening skips them as missing and delivers the rest)`,
      )
    }
    const repaired = await BufferCheck.run(PATH, { fileSystem: fs, repair: true })
    expect(repaired.repairs).toEqual([
      'rewrote the ledger listing the segments on disk',
      'segment starting at 37 is missing: records 37..73, which the ledger counts unacknowledged, are lost; the ledger no longer lists it',
      'segment starting at 74 is missing: records 74..99, which the ledger counts unacknowledged, are lost; the ledger no longer lists it',
    ])
    expect((await BufferCheck.run(PATH, { fileSystem: fs })).problems).toEqual([])
    // Opening delivers the records left and says the rest are missing; none of their numbers is given again.
    const reopened = await open()
    expect(reopened.nextSeq).toBe(100)
    expect(await drain(reopened)).toEqual(
      Array.from({ length: 27 }, (_, i) => `r${String(10 + i).padStart(6, '0')}`),
    )
    expect(reopened.metrics().recordsLost).toBe(63)
    expect(logs.some((m) => m.includes('records 37..99 missing'))).toBe(true)
    await reopened.close()
  })

  it('neither counts nor repairs a file opening leaves alone, and --repair rebuilds the ledger without it', async () => {
    const { fs, open } = setup({ log: () => {} })
    const buffer = await open()
    for (let i = 0; i < 100; i++) await buffer.append([Buffer.from(`r${String(i).padStart(6, '0')}`)])
    await buffer.close() // segments 0, 37 and 74
    // Copied in: numbered past the next segment's name, with a damaged frame and a torn tail.
    const foreign = '00000000000000000020.seg'
    const frames = Buffer.from(
      Frame.encode(
        ['foreign-0', 'foreign-1', 'foreign-2'].map((f) => Buffer.from(f)),
        5000,
      ).bytes,
    )
    frames[29 + 20 + 2]! ^= 0xff // a payload byte of foreign-1 (29-byte frames)
    const bytes = Buffer.concat([frames, Buffer.from('torn')])
    fs.put(`${PATH}/${foreign}`, bytes)
    const alone = `${foreign}: its first record is numbered 5000, outside 20..36: not a segment of this buffer (copied in or renamed; opening leaves it alone; move it out)`
    // With the ledger: its records past the ledger's next number are not taken for numbers given again.
    const report = await BufferCheck.run(PATH, { fileSystem: fs })
    expect(report.problems).toEqual([alone])
    expect(report).toMatchObject({ records: 100, unacked: 100, ackedBelow: 0 })
    expect(report.segments.map((seg) => [seg.name.slice(17, 20), seg.records, seg.leftAlone])).toEqual([
      ['000', 37, false],
      ['020', 2, true],
      ['037', 37, false],
      ['074', 26, false],
    ])
    // Without it: rebuilt from the segments opening keeps.
    await fs.unlink(`${PATH}/ledger.json`)
    const repaired = await BufferCheck.run(PATH, { fileSystem: fs, repair: true })
    expect(repaired.problems).toEqual([alone])
    expect(repaired.repairs).toEqual([
      'rebuilt the ledger from the segments (acknowledged below 0, next 100)',
    ])
    expect(fs.bytes(`${PATH}/${foreign}`)).toEqual(bytes)
    expect(await Ledger.read(fs, PATH)).toMatchObject({
      status: 'ok',
      ledger: { nextSeq: 100, ackedBelow: 0, segments: [0, 37, 74] },
    })
    const reopened = await open()
    expect(reopened.nextSeq).toBe(100)
    reopened.endWrites()
    let delivered = 0
    for (let got = await reopened.read(100); got !== undefined; got = await reopened.read(100)) {
      for (const r of got) reopened.ack(r.seq)
      delivered += got.length
    }
    expect(delivered).toBe(100)
    await reopened.close()
  })

  it('reports a ledger whose acknowledged position lies past the records on disk, and exits 1', async () => {
    const path = tempDir()
    await makeBuffer(path)
    const body = JSON.stringify({ version: 1, nextSeq: 120, ackedBelow: 100, segments: [96] })
    writeFileSync(join(path, 'ledger.json'), `${body}\n${crc32c(Buffer.from(body))}\n`)
    const { code, out } = runCli(path)
    expect(out).toContain('acknowledged position 100 lies past the records on disk (the last is 9)')
    expect(code).toBe(1)
  })

  it('counts a ledger checkpointed before the last records were written (a crash, a failed checkpoint at close) as clean, and exits 0', async () => {
    const path = tempDir()
    await makeBuffer(path) // records 0..9
    // The last checkpoint saved before records 8 and 9 were written: opening numbers from 10 all the same.
    const body = JSON.stringify({ version: 1, nextSeq: 8, ackedBelow: 3, segments: [0, 4] })
    writeFileSync(join(path, 'ledger.json'), `${body}\n${crc32c(Buffer.from(body))}\n`)
    const { code, out } = runCli(path)
    expect(out).toContain('no problems found')
    expect(code).toBe(0)
    const logs: string[] = []
    const buffer = await DiskBuffer.open({ path, segmentBytes: 128, log: (m) => logs.push(m) })
    expect(logs).toEqual([])
    expect(buffer.nextSeq).toBe(10)
    await buffer.close()
  })

  it('reports a last record numbered 2^53 − 1, which opening refuses (SEQUENCE_EXHAUSTED), and --repair writes no ledger numbered past it', async () => {
    // A segment copied from elsewhere: its last record leaves no number for the next one.
    const last = Number.MAX_SAFE_INTEGER
    const name = `${String(last - 1).padStart(20, '0')}.seg`
    const frames = [last - 1, last].map((seq) => Frame.encode([Buffer.from(`copied-${seq}`)], seq).bytes)
    for (const ledger of ['behind', 'missing'] as const) {
      const { fs, open } = setup()
      await fs.mkdir(PATH)
      fs.put(`${PATH}/${name}`, Buffer.concat(frames))
      // A checkpoint saved before the last record was written (as 46f2bb6 finds clean), or none.
      if (ledger === 'behind')
        fs.put(
          `${PATH}/ledger.json`,
          Ledger.encode({ nextSeq: last, ackedBelow: last - 1, segments: [last - 1] }),
        )
      await expect(open()).rejects.toMatchObject({ code: 'SEQUENCE_EXHAUSTED' })
      const report = await BufferCheck.run(PATH, { fileSystem: fs })
      expect(report.problems).toContainEqual(
        expect.stringContaining(
          `segment ${name} holds a record numbered ${last}, the last sequence number (2^53 − 1)`,
        ),
      )
      const repaired = await BufferCheck.run(PATH, { fileSystem: fs, repair: true })
      expect(repaired.repairs.filter((r) => r.includes('ledger'))).toEqual([])
      const after = await BufferCheck.run(PATH, { fileSystem: fs })
      expect(after.problems.some((p) => p.includes('ledger corrupt'))).toBe(false)
      expect(after.ledger.status).toBe(ledger === 'behind' ? 'ok' : 'missing')
    }
  })

  it('counts a healthy buffer with no checkpoint yet (as after a crash) as clean, with a note, and exits 0', async () => {
    const path = tempDir()
    await makeBuffer(path)
    unlinkSync(join(path, 'ledger.json'))
    const { code, out } = runCli(path)
    expect(out).toContain('ledger: missing')
    expect(out).toContain('no checkpoint yet')
    expect(out).toContain('no problems found')
    expect(code).toBe(0)
  })

  it('is also a function: BufferCheck.run reports the same without a process', async () => {
    const path = tempDir()
    await makeBuffer(path)
    const report = await BufferCheck.run(path)
    expect(report).toMatchObject({ records: 10, unacked: 7, ackedBelow: 3, problems: [], repairs: [] })
    expect(report.segments.map((s) => s.records)).toEqual([4, 4, 2])
  })
})
