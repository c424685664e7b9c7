// Model-based test: random sequences of write / flush / read / ack (out of order) / nack / reject
// / checkpoint / crash (drop unsynced bytes, tear the last write, flip a byte) / reopen, run against
// the real buffer on a crashable in-memory file system and checked against a model:
// - no record acknowledged to its writer (durable) is ever lost, unless a flipped byte hit it;
// - every such record is delivered at least once;
// - nothing rejected (dead-lettered) is ever handed to the sink again;
// - every record read back is byte for byte what was written, and an acknowledged record is not
//   handed out again before the next crash or restart.

import type { SyncPolicy } from '@ackline/buffers'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { CrashableDiskBuffer as DiskBuffer } from './fixtures/MemoryBuffer.js'
import { MemoryFileSystem } from './fixtures/MemoryFileSystem.js'

const PATH = '/buf'

type Op =
  | { readonly kind: 'write'; readonly count: number; readonly size: number }
  | { readonly kind: 'flush' }
  | { readonly kind: 'read'; readonly max: number }
  | { readonly kind: 'ack' | 'nack' | 'reject'; readonly pick: number }
  | { readonly kind: 'checkpoint' }
  | { readonly kind: 'crash'; readonly tear: number | undefined; readonly flip: number | undefined }
  | { readonly kind: 'reopen' }

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('write'),
      count: fc.integer({ min: 1, max: 6 }),
      size: fc.nat(40),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'flush' } as const) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('read'), max: fc.integer({ min: 1, max: 8 }) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('ack'), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('nack'), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('reject'), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'checkpoint' } as const) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('crash'),
      tear: fc.option(fc.double({ min: 0, max: 0.999, noNaN: true }), { nil: undefined }),
      flip: fc.option(fc.double({ min: 0, max: 0.999, noNaN: true }), { nil: undefined }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'reopen' } as const) },
)

const payloadOf = (id: number, size: number): Buffer =>
  Buffer.concat([Buffer.from(`id:${id}|`), Buffer.alloc(size, id % 251)])
const idOf = (payload: Uint8Array): number =>
  Number(/^id:(\d+)\|/.exec(Buffer.from(payload).toString('latin1'))![1])

/** The id in the frame that covers `offset` of a segment's bytes, found without the code under test. */
function idAt(bytes: Buffer, offset: number): number | undefined {
  for (let p = Math.min(offset, bytes.length - 4); p >= 0; p--) {
    if (bytes.readUInt32LE(p) !== 0x4c4b4341 || p + 20 > bytes.length) continue
    const length = bytes.readUInt32LE(p + 8)
    if (p + 20 + length <= offset) return undefined // offset lies between frames (torn garbage)
    const match = /^id:(\d+)\|/.exec(bytes.subarray(p + 20, p + 20 + Math.min(length, 24)).toString('latin1'))
    return match === null ? undefined : Number(match[1])
  }
  return undefined
}

async function run(ops: readonly Op[], sync: SyncPolicy): Promise<void> {
  const fs = new MemoryFileSystem()
  const open = () =>
    DiskBuffer.open({
      path: PATH,
      fileSystem: fs,
      segmentBytes: 160,
      sync,
      retryBackoff: { initialMs: 0, maxMs: 0 },
      ledgerIntervalMs: 60_000,
      log: () => {},
    })
  let buffer = await open()
  let nextId = 0
  const payloads = new Map<number, Buffer>()
  const durable = new Set<number>()
  const delivered = new Set<number>()
  const rejected = new Set<number>()
  const damaged = new Set<number>()
  let ackedThisRun = new Set<number>()
  let outstanding: { seq: number; id: number }[] = []

  const checkRead = (records: readonly { seq: number; payload: Uint8Array }[]): void => {
    for (const r of records) {
      const id = idOf(r.payload)
      expect(Buffer.from(r.payload).equals(payloads.get(id)!), `record ${id} read back intact`).toBe(true)
      expect(rejected.has(id), `rejected record ${id} redelivered`).toBe(false)
      expect(ackedThisRun.has(id), `acknowledged record ${id} handed out again in the same run`).toBe(false)
      delivered.add(id)
      outstanding.push({ seq: r.seq, id })
    }
  }
  const take = (pick: number): { seq: number; id: number } | undefined =>
    outstanding.length === 0 ? undefined : outstanding.splice(pick % outstanding.length, 1)[0]
  const restart = async (): Promise<void> => {
    buffer = await open()
    ackedThisRun = new Set()
    outstanding = []
  }

  for (const o of ops) {
    switch (o.kind) {
      case 'write': {
        const ids = Array.from({ length: o.count }, () => nextId++)
        const batch = ids.map((id) => payloadOf(id, o.size))
        for (const [i, id] of ids.entries()) payloads.set(id, batch[i]!)
        const result = await buffer.append(batch)
        expect(result.status).toBe('written')
        if (result.status === 'written') {
          void result.durable.then((status) => {
            if (status === 'durable') for (const id of ids) durable.add(id)
          })
        }
        break
      }
      case 'flush':
        await buffer.flush()
        break
      case 'read':
        checkRead((await buffer.read(o.max, { wait: false }))!)
        break
      case 'ack': {
        const r = take(o.pick)
        if (r === undefined) break
        buffer.ack(r.seq)
        ackedThisRun.add(r.id)
        break
      }
      case 'nack': {
        const r = take(o.pick)
        if (r !== undefined) buffer.nack(r.seq)
        break
      }
      case 'reject': {
        const r = take(o.pick)
        if (r === undefined) break
        expect(await buffer.deadLetter(r.seq)).toBe('dead-lettered')
        rejected.add(r.id)
        break
      }
      case 'checkpoint':
        await buffer.checkpoint()
        break
      case 'crash': {
        await Promise.resolve() // let settled durable promises report
        buffer._abandon()
        fs.crash({ tear: o.tear !== undefined, random: () => o.tear ?? 0 })
        if (o.flip !== undefined) {
          const segments = fs
            .files(PATH)
            .filter((p) => /^\/buf\/\d{20}\.seg$/.test(p) && fs.bytes(p)!.length > 0)
          if (segments.length > 0) {
            const path = segments[Math.floor(o.flip * segments.length)]!
            const bytes = fs.bytes(path)!
            const offset = Math.floor(((o.flip * 7919) % 1) * bytes.length)
            const id = idAt(bytes, offset)
            if (id !== undefined) damaged.add(id)
            fs.flip(path, offset)
          }
        }
        await restart()
        break
      }
      case 'reopen':
        await buffer.close()
        await restart()
        break
    }
  }

  // Finally: reopen, read and acknowledge everything left.
  await Promise.resolve()
  await buffer.close()
  await restart()
  buffer.endWrites()
  for (;;) {
    const records = await buffer.read(100)
    if (records === undefined) break
    checkRead(records)
    for (const r of records) buffer.ack(r.seq)
    outstanding = []
  }
  const mustHave = sync === 'always' ? [...payloads.keys()] : [...durable]
  for (const id of mustHave) {
    if (damaged.has(id) || rejected.has(id)) continue
    expect(delivered.has(id), `record ${id} (acknowledged to its writer) was never delivered`).toBe(true)
  }
  const letters = new Set<number>()
  for await (const letter of buffer.deadLetters()) letters.add(idOf(letter.payload))
  for (const id of rejected)
    expect(letters.has(id), `rejected record ${id} is in the dead-letter queue`).toBe(true)
  expect(buffer.metrics().unackedRecords).toBe(0)
  await buffer.close()
}

const seed = Number(process.env.FC_SEED ?? Date.now() % 2 ** 31)

describe('DiskBuffer model', () => {
  it("with sync 'always': loses nothing acknowledged, delivers everything at least once, never redelivers a rejected record", async () => {
    console.log(`DiskBuffer model ('always') seed: ${seed} (rerun with FC_SEED=${seed})`)
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 80 }), (ops) => run(ops, 'always')),
      { seed, numRuns: 150 },
    )
  })

  it('with group commit: loses nothing whose durable promise resolved, tearing and dropping unsynced writes', async () => {
    console.log(`DiskBuffer model (group commit) seed: ${seed} (rerun with FC_SEED=${seed})`)
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 80 }), (ops) =>
        run(ops, { everyMs: 60_000, everyWrites: 3 }),
      ),
      { seed, numRuns: 150 },
    )
  })
})
