// The disk buffer against the testkit's buffer conformance suite: through its factory
// (`diskBuffer`) on the real file system, in both acknowledgement modes, and, for the durability
// rule, on the in-memory file system whose crash keeps only what was synced.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { diskBuffer } from '@ackline/buffers'
import { Arbitraries, bufferConformance } from '@ackline/testkit'
import fc from 'fast-check'
import { afterAll, describe, it } from 'vitest'
import type { DiskBuffer } from '../../src/DiskBuffer.js'
import { DiskBufferHooks } from '../../src/internal/DiskBufferHooks.js'
import { openDiskBufferOn, PATH } from '../fixtures/MemoryBuffer.js'
import { MemoryFileSystem } from '../fixtures/MemoryFileSystem.js'

const runner = { describe, it }
const dir = mkdtempSync(join(tmpdir(), 'ackline-disk-conformance-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let count = 0
const context = () => ({ componentId: `sink${count++}`, dataDir: dir })

bufferConformance(
  'disk buffer conformance (on delivery)',
  async () => ({
    buffer: await diskBuffer().open(context()),
  }),
  { runner },
)

bufferConformance(
  'disk buffer conformance (on write)',
  async () => ({ buffer: await diskBuffer({ acknowledgements: 'on-write' }).open(context()) }),
  { acknowledgesOnWrite: true, runner },
)

const crashable = async () => {
  const fs = new MemoryFileSystem()
  const open = () =>
    openDiskBufferOn({
      path: PATH,
      sinkId: 'k',
      fileSystem: fs,
      acknowledgements: 'on-write',
      segmentBytes: 1024,
    })
  const buffer = await open()
  // A SIGKILL: the store stops without writing, closing or unlocking anything, and the disk
  // keeps only what was synced.
  const crash = () => {
    DiskBufferHooks.get().abandon((buffer as unknown as { store: DiskBuffer }).store)
    fs.crash()
  }
  return { buffer, crash, reopen: open }
}

bufferConformance(
  'disk buffer conformance (on write, crashed on a file system that keeps only synced data)',
  crashable,
  { acknowledgesOnWrite: true, runner },
)
// Records as a property draws them: deep and odd JSON, any Unicode (lone surrogates included),
// across segments of 1 KiB, out of the reopened buffer as they went in.
const drawn = fc.sample(Arbitraries.batches({ minSize: 1, maxSize: 6 }), { numRuns: 1, seed: 3 })[0]!.flat()
bufferConformance(
  'disk buffer conformance (on write, crashed, records drawn by Arbitraries, seed 3)',
  crashable,
  {
    records: drawn,
    acknowledgesOnWrite: true,
    runner,
  },
)
