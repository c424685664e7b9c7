// Model-based test: random sequences of write / flush / read / ack (out of order) / nack / reject
// / replay (of the dead letters) / checkpoint / crash (drop unsynced bytes, tear the last write,
// flip a byte) / reopen / fault (the next file operation of a kind fails with EIO), run against
// the real buffer on a crashable in-memory file system and checked against a model:
// - no record acknowledged to its writer (durable) is ever lost, unless a flipped byte hit it;
// - every such record is delivered at least once;
// - nothing rejected (dead-lettered) is ever handed to the sink again, until it is replayed, and
//   every record replayed is delivered again;
// - every record read back is byte for byte what was written, and an acknowledged record is not
//   handed out again before the next crash or restart.
// Once a fault was armed, an operation may fail as documented (an append `failed`, a dead letter
// `failed`, a read, checkpoint or open rejecting); what succeeded is held to the same rules.

import type { SyncPolicy } from '@ackline/buffers'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { CrashableDiskBuffer as DiskBuffer } from './fixtures/MemoryBuffer.js'
import { type FaultOp, MemoryFileSystem } from './fixtures/MemoryFileSystem.js'

const PATH = '/buf'

type Op =
  | { readonly kind: 'write'; readonly count: number; readonly size: number }
  | { readonly kind: 'flush' }
  | { readonly kind: 'read'; readonly max: number }
  | { readonly kind: 'ack' | 'nack' | 'reject'; readonly pick: number }
  | { readonly kind: 'checkpoint' }
  | { readonly kind: 'crash'; readonly tear: number | undefined; readonly flip: number | undefined }
  | { readonly kind: 'reopen' }
  | { readonly kind: 'replay' }
  | { readonly kind: 'fault'; readonly op: FaultOp }

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
  { weight: 1, arbitrary: fc.constant({ kind: 'replay' } as const) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('fault'),
      op: fc.constantFrom<FaultOp>('write', 'datasync', 'truncate', 'open', 'syncDir', 'rename'),
    }),
  },
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
  /** Appends answered `written` (under `'always'`, durable). */
  const answered = new Set<number>()
  /** Records moved back from the dead-letter queue and not delivered since. */
  const replayed = new Set<number>()
  /** A fault was armed: from here on an operation may fail, as documented. */
  let faulted = false
  const unlessFaulted = (error: unknown): void => {
    if (!faulted) throw error
  }

  const checkRead = (records: readonly { seq: number; payload: Uint8Array }[]): void => {
    for (const r of records) {
      const id = idOf(r.payload)
      expect(Buffer.from(r.payload).equals(payloads.get(id)!), `record ${id} read back intact`).toBe(true)
      expect(rejected.has(id), `rejected record ${id} redelivered`).toBe(false)
      expect(ackedThisRun.has(id), `acknowledged record ${id} handed out again in the same run`).toBe(false)
      delivered.add(id)
      replayed.delete(id)
      outstanding.push({ seq: r.seq, id })
    }
  }
  const take = (pick: number): { seq: number; id: number } | undefined =>
    outstanding.length === 0 ? undefined : outstanding.splice(pick % outstanding.length, 1)[0]
  const restart = async (): Promise<void> => {
    // An open the armed fault failed is opened again without it (the fault was its one failure).
    buffer = await open().catch((error: unknown) => {
      unlessFaulted(error)
      fs.fault = undefined
      return open()
    })
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
        if (!faulted) expect(result.status).toBe('written')
        if (result.status === 'written') {
          for (const id of ids) answered.add(id)
          void result.durable.then((status) => {
            if (status === 'durable') for (const id of ids) durable.add(id)
          })
        }
        break
      }
      case 'flush':
        await buffer.flush().catch(unlessFaulted)
        break
      case 'read': {
        const records = await buffer.read(o.max, { wait: false }).catch(unlessFaulted)
        if (records !== undefined) checkRead(records)
        break
      }
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
        const outcome = await buffer.deadLetter(r.seq)
        if (outcome === 'dead-lettered') rejected.add(r.id)
        else {
          // Its dead-letter write failed: it stays in flight, to be settled again.
          expect(outcome, 'a dead letter fails only under a fault').toBe(faulted ? 'failed' : 'dead-lettered')
          outstanding.push(r)
        }
        break
      }
      case 'checkpoint':
        await buffer.checkpoint().catch(unlessFaulted)
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
        await buffer.close().catch(unlessFaulted)
        await restart()
        break
      case 'replay': {
        const letters = new Set<number>()
        try {
          for await (const letter of buffer.deadLetters()) letters.add(idOf(letter.payload))
        } catch (error) {
          unlessFaulted(error)
          break
        }
        const replay = buffer.replayDeadLetters()
        let done = false
        void replay.finally(() => {
          done = true
        })
        // It waits for the fsync of what it moved back: under group commit, give it one.
        while (!done) {
          await buffer.flush().catch(() => undefined)
          await new Promise((resolve) => setImmediate(resolve))
        }
        const result = await replay
        if (!faulted) expect(result.status).toBe('replayed')
        // A failed replay keeps moved what it moved (one whose closing checkpoint failed moved
        // everything): what left the dead-letter queue was replayed.
        fs.fault = undefined
        const left = new Set<number>()
        for await (const letter of buffer.deadLetters()) left.add(idOf(letter.payload))
        for (const id of letters) {
          if (left.has(id) || !rejected.delete(id)) continue
          if (!damaged.has(id)) replayed.add(id)
        }
        break
      }
      case 'fault': {
        faulted = true
        let armed = true
        fs.fault = (op, path) => {
          // The lock is not the buffer's data: its failures are the lock tests' concern.
          if (!armed || op !== o.op || path.endsWith('/lock') || path.includes('/lock.')) return undefined
          armed = false
          return Object.assign(new Error(`EIO: i/o error, ${op} '${path}'`), { code: 'EIO' })
        }
        break
      }
    }
  }

  // Finally: reopen, read and acknowledge everything left.
  fs.fault = undefined
  await Promise.resolve()
  await buffer.close().catch(unlessFaulted)
  await restart()
  buffer.endWrites()
  for (;;) {
    const records = await buffer.read(100)
    if (records === undefined) break
    checkRead(records)
    for (const r of records) buffer.ack(r.seq)
    outstanding = []
  }
  const mustHave = sync === 'always' ? [...answered] : [...durable]
  for (const id of mustHave) {
    if (damaged.has(id) || rejected.has(id)) continue
    expect(delivered.has(id), `record ${id} (acknowledged to its writer) was never delivered`).toBe(true)
  }
  const letters = new Set<number>()
  for await (const letter of buffer.deadLetters()) letters.add(idOf(letter.payload))
  for (const id of rejected)
    expect(letters.has(id), `rejected record ${id} is in the dead-letter queue`).toBe(true)
  for (const id of replayed) {
    expect(damaged.has(id) || delivered.has(id), `replayed record ${id} was never delivered`).toBe(true)
  }
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
