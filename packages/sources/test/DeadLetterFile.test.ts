// The file source's dead-letter file holds whole entries only, whatever an earlier process left.
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { DeadLetterFile } from '../src/internal/DeadLetterFile.js'

const dirs: string[] = []
const tempFile = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'ackline-dead-letter-'))
  dirs.push(dir)
  return join(dir, 'dead-letter.ndjson')
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

describe('DeadLetterFile', () => {
  it('cuts away a piece of an entry an earlier process left at the end when it opens the file', async () => {
    const path = tempFile()
    // A whole entry, then a piece of one (a process killed mid-append), over two read chunks.
    writeFileSync(
      path,
      `${JSON.stringify({ n: 1 })}\n${JSON.stringify({ n: 2, text: 'x'.repeat(100_000) }).slice(0, 70_000)}`,
    )
    const file = await DeadLetterFile.open(path)
    await file.append(`${JSON.stringify({ n: 3 })}\n`)
    await file.close()
    const lines = readFileSync(path, 'utf8')
      .split('\n')
      .filter((l) => l !== '')
    expect(lines.map((l) => (JSON.parse(l) as { n: number }).n)).toEqual([1, 3])
  })

  it('writes to the file at its path again once it was deleted or rotated away, instead of to the old inode', async () => {
    const path = tempFile()
    const file = await DeadLetterFile.open(path)
    await file.append(`${JSON.stringify({ n: 1 })}\n`)
    // An operator deletes it: entries written to the unlinked inode would be lost without a trace.
    rmSync(path)
    await file.append(`${JSON.stringify({ n: 2 })}\n`)
    expect(readFileSync(path, 'utf8')).toBe(`${JSON.stringify({ n: 2 })}\n`)
    // Rotated by rename: the old entries stay in the rotated file, new ones go to the path.
    renameSync(path, `${path}.1`)
    await file.append(`${JSON.stringify({ n: 3 })}\n`)
    await file.sync()
    await file.close()
    expect(readFileSync(`${path}.1`, 'utf8')).toBe(`${JSON.stringify({ n: 2 })}\n`)
    expect(readFileSync(path, 'utf8')).toBe(`${JSON.stringify({ n: 3 })}\n`)
  })

  it('keeps a file of whole entries as it is, and an empty one', async () => {
    for (const before of ['', `${JSON.stringify({ n: 1 })}\n`]) {
      const path = tempFile()
      writeFileSync(path, before)
      const file = await DeadLetterFile.open(path)
      await file.append(`${JSON.stringify({ n: 2 })}\n`)
      await file.close()
      expect(readFileSync(path, 'utf8')).toBe(`${before}${JSON.stringify({ n: 2 })}\n`)
    }
  })
})
