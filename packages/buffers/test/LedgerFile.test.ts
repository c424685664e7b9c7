// The ledger of an open buffer: replaced once, then appended to; compacted past a size; a failed
// append starts a new file; closed, it keeps nothing open.
import { describe, expect, it } from 'vitest'
import { Ledger, LedgerFile } from '../src/internal/Ledger.js'
import { MemoryFileSystem, reopening } from './fixtures/MemoryFileSystem.js'

const DIR = '/buf'
const state = (n: number) => ({ nextSeq: n + 10, ackedBelow: n, segments: [0, 5] })

async function setup() {
  const fs = new MemoryFileSystem()
  await fs.mkdir(DIR)
  let renames = 0
  const rename = fs.rename.bind(fs)
  fs.rename = (from, to) => {
    renames++
    return rename(from, to)
  }
  return { fs, renames: () => renames }
}

describe('LedgerFile', () => {
  it('replaces the file at its first checkpoint, appends the next ones, and reads back the last', async () => {
    const { fs, renames } = await setup()
    const file = new LedgerFile(fs, DIR)
    for (let n = 1; n <= 5; n++) await file.write(state(n))
    expect(renames()).toBe(1)
    expect(await Ledger.read(fs, DIR)).toEqual({ status: 'ok', ledger: state(5) })
    fs.crash() // every checkpoint was durable when its write resolved
    expect(await Ledger.read(fs, DIR)).toEqual({ status: 'ok', ledger: state(5) })
    await file.close()
  })

  it('replaces the file again once it passed COMPACT_BYTES, so it stays bounded', async () => {
    const { fs, renames } = await setup()
    const file = new LedgerFile(fs, DIR)
    const one = Ledger.encode(state(1000)).length
    const count = Math.ceil((3 * LedgerFile.COMPACT_BYTES) / one)
    let largest = 0
    for (let n = 1000; n < 1000 + count; n++) {
      await file.write(state(n))
      largest = Math.max(largest, (await fs.size(`${DIR}/${Ledger.FILE}`))!)
    }
    expect(largest).toBeLessThanOrEqual(LedgerFile.COMPACT_BYTES)
    expect(renames()).toBeGreaterThanOrEqual(3)
    expect(renames()).toBeLessThan(count / 100)
    expect(await Ledger.read(fs, DIR)).toEqual({ status: 'ok', ledger: state(999 + count) })
    await file.close()
  })

  it('after a failed append, closes the file and replaces it at the next checkpoint', async () => {
    const { fs, renames } = await setup()
    const file = new LedgerFile(fs, DIR)
    await file.write(state(1))
    await file.write(state(2))
    fs.fault = (op, path) =>
      op === 'write' && path.endsWith(Ledger.FILE)
        ? Object.assign(new Error('EIO'), { code: 'EIO' })
        : undefined
    await expect(file.write(state(3))).rejects.toThrow('EIO')
    expect(fs.openFiles).toBe(0)
    fs.fault = undefined
    await file.write(state(4))
    expect(renames()).toBe(2)
    expect(await Ledger.read(fs, DIR)).toEqual({ status: 'ok', ledger: state(4) })
    await file.close()
    expect(fs.openFiles).toBe(0)
  })

  it('once closed, each checkpoint replaces the file and keeps nothing open', async () => {
    const { fs, renames } = await setup()
    const file = new LedgerFile(fs, DIR)
    await file.write(state(1))
    expect(fs.openFiles).toBe(1)
    await file.close()
    expect(fs.openFiles).toBe(0)
    await file.write(state(2))
    expect(fs.openFiles).toBe(0)
    expect(renames()).toBe(2)
    expect(await Ledger.read(fs, DIR)).toEqual({ status: 'ok', ledger: state(2) })
  })

  it('where writes are not durable by themselves (no O_DSYNC), fdatasyncs each appended checkpoint', async () => {
    const { fs } = await setup()
    // Files opened plain, saying so: only a datasync makes a write durable.
    const plain = reopening(fs, async (path, mode) =>
      fs.open(path, mode === 'append-dsync' ? 'append' : mode),
    )
    const file = new LedgerFile(plain, DIR)
    for (let n = 1; n <= 3; n++) await file.write(state(n))
    fs.crash({ tear: true, random: () => 0.5 })
    expect(await Ledger.read(fs, DIR)).toEqual({ status: 'ok', ledger: state(3) })
  })

  it('reads a ledger of one checkpoint as before (the format of earlier versions), its checksum in either case', () => {
    expect(Ledger.decode(Ledger.encode(state(7)))).toEqual({ status: 'ok', ledger: state(7) })
    const [body, crc] = Ledger.encode(state(7)).toString().split('\n')
    expect(Ledger.decode(Buffer.from(`${body}\n${crc!.toUpperCase()}\n`))).toEqual({
      status: 'ok',
      ledger: state(7),
    })
    expect(Ledger.decode(Buffer.from('{"version":1}\n'))).toEqual({
      status: 'corrupt',
      reason: 'not a ledger (no checksum line)',
    })
  })
})
