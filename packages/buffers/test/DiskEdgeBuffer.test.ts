// The disk buffer as a sink's edge buffer: what happens to the sources' batches.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type DiskEdgeBuffer, type DiskEdgeBufferOptions, openDiskBuffer } from '@ackline/buffers'
import {
  BatchNotifier,
  type BatchStatusReceiver,
  EventArray,
  type JsonObject,
  LeakDetector,
  LogEvent,
} from '@ackline/core'
import { TopologyBuilder } from '@ackline/topology'
import { afterEach, describe, expect, it } from 'vitest'
import type { EdgeBuffer } from '../../topology/src/EdgeBuffer.js'
import { TailCache } from '../src/internal/TailCache.js'
import { openDiskBufferOn } from './fixtures/MemoryBuffer.js'
import { MemoryFileSystem } from './fixtures/MemoryFileSystem.js'

const dirs: string[] = []
const tempDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'ackline-edge-'))
  dirs.push(dir)
  return dir
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** A source batch of `n` events `{ n: from + i }`. */
function batch(n: number, from = 0): { array: EventArray; receiver: BatchStatusReceiver } {
  const events = Array.from(
    { length: n },
    (_, i) => new LogEvent({ n: from + i }, { sourceId: 'src', ingestTimestamp: 1000 + i }),
  )
  const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
  return { array: new EventArray(events).attach(notifier), receiver }
}

const open = (path: string, options: Partial<DiskEdgeBufferOptions> = {}): Promise<DiskEdgeBuffer> =>
  openDiskBuffer({ path, sinkId: 'out', log: () => {}, ...options })

/** A buffer that took two batches of one record (n 0 and 1) and handed both out in one pull. */
async function twoRecordsPulled() {
  const buffer = await open(tempDir())
  const first = batch(1, 0)
  const second = batch(1, 1)
  await buffer.push(first.array)
  await buffer.push(second.array)
  const out = (await buffer.pull())!
  return { buffer, first, second, out }
}

const ns = (array: EventArray | undefined): unknown[] => (array?.events ?? []).map((e) => e.get('n'))

const ticks = async (n = 20): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve))
}

describe('openDiskBuffer', () => {
  it('is an EdgeBuffer of the topology', async () => {
    const buffer = await open(tempDir())
    const edge: EdgeBuffer = buffer
    expect(typeof edge.push).toBe('function')
    await buffer.dispose()
  })

  it("on delivery (default): settles the source's batch only once the sink delivered the events read back", async () => {
    const buffer = await open(tempDir())
    const { array, receiver } = batch(3)
    await buffer.push(array)
    await ticks()
    expect(receiver.status).toBeUndefined()
    const out = (await buffer.pull())!
    expect(ns(out)).toEqual([0, 1, 2])
    expect(out.events.map((e) => [e.metadata.sourceId, e.metadata.ingestTimestamp])).toEqual([
      ['src', 1000],
      ['src', 1001],
      ['src', 1002],
    ])
    expect([...out.events[0]!.metadata.finalizers].map((f) => f.sourceId)).toEqual(['out:buffer'])
    out.events[0]!.end('delivered')
    out.events[1]!.end('delivered')
    await ticks()
    expect(receiver.status).toBeUndefined()
    out.events[2]!.end('delivered')
    expect(await receiver).toBe('delivered')
    expect(buffer.store.ackedBelow).toBe(3)
    await buffer.dispose()
  })

  it("on write: settles the batch delivered once the records are durable, before push resolves under sync 'always'", async () => {
    const buffer = await open(tempDir(), { acknowledgements: 'on-write' })
    const { array, receiver } = batch(2)
    await buffer.push(array)
    expect(receiver.status).toBe('delivered')
    const out = (await buffer.pull())!
    out.end('delivered')
    await buffer.dispose()
  })

  it('on write with group commit: settles the batch only after the group fsync', async () => {
    const buffer = await open(tempDir(), {
      acknowledgements: 'on-write',
      sync: { everyMs: 60_000, everyWrites: 2 },
    })
    const first = batch(1)
    await buffer.push(first.array)
    await ticks()
    expect(first.receiver.status).toBeUndefined()
    const second = batch(1, 1)
    await buffer.push(second.array)
    expect(await first.receiver).toBe('delivered')
    expect(await second.receiver).toBe('delivered')
    ;(await buffer.pull())!.end('delivered')
    await buffer.dispose()
  })

  it('on write: a batch whose group fsync fails is settled errored, saying why (WRITE_FAILED, the sink)', async () => {
    const fs = new MemoryFileSystem()
    const buffer = await openDiskBufferOn({
      path: '/buf',
      sinkId: 'out',
      fileSystem: fs,
      log: () => {},
      acknowledgements: 'on-write',
      sync: { everyMs: 60_000, everyWrites: 2 },
    })
    const first = batch(1)
    await buffer.push(first.array) // written, not yet durable: the group fsync comes with the next
    fs.fault = (op) =>
      op === 'datasync' ? Object.assign(new Error('EIO: i/o error'), { code: 'EIO' }) : undefined
    await buffer.push(batch(1, 1).array)
    expect(await first.receiver).toBe('errored')
    expect(first.receiver.reason).toMatchObject({ componentId: 'out', code: 'WRITE_FAILED' })
    fs.fault = undefined
    await buffer.dispose()
  })

  it('on delivery with group commit: a batch stored under the numbers of a failed write is settled when delivered', async () => {
    const fs = new MemoryFileSystem()
    const buffer = await openDiskBufferOn({
      path: '/buf',
      sinkId: 'out',
      fileSystem: fs,
      log: () => {},
      sync: { everyMs: 60_000, everyWrites: 100 },
    })
    const first = batch(1, 0)
    await buffer.push(first.array) // record 0, waiting for the sink
    await buffer.store.flush() // written
    let failures = 1
    fs.fault = (op) =>
      op === 'write' && failures-- > 0
        ? Object.assign(new Error('EIO: i/o error'), { code: 'EIO' })
        : undefined
    const failed = batch(1, 1)
    await buffer.push(failed.array) // answered before its write, which fails: record 1 never was
    expect(await failed.receiver).toBe('errored')
    const third = batch(1, 2)
    await buffer.push(third.array) // gets number 1 again
    expect(buffer.store.nextSeq).toBe(2)
    const out = (await buffer.pull())!
    expect(ns(out)).toEqual([0, 2])
    out.events[1]!.end('delivered') // the sink delivers the third batch's event first
    await ticks()
    expect(third.receiver.status).toBe('delivered')
    out.events[0]!.end('delivered')
    expect(await first.receiver).toBe('delivered')
    await buffer.dispose()
  })

  it('redelivers what the sink reported errored after a back-off, and does not settle the source meanwhile', async () => {
    const buffer = await open(tempDir(), { retryBackoff: { initialMs: 1, maxMs: 1 } })
    const { array, receiver } = batch(2)
    await buffer.push(array)
    const out = (await buffer.pull())!
    out.events[0]!.end('errored')
    out.events[1]!.end('delivered')
    const again = (await buffer.pull())!
    expect(ns(again)).toEqual([0])
    expect(receiver.status).toBeUndefined()
    expect(buffer.metrics().redeliveries).toBe(1)
    again.end('delivered')
    expect(await receiver).toBe('delivered')
    await buffer.dispose()
  })

  it('settles each record as soon as the sink ends it, even when the rest of its pull is still out', async () => {
    const { buffer, first, second, out } = await twoRecordsPulled()
    expect(ns(out)).toEqual([0, 1])
    out.events[1]!.end('delivered')
    expect(await second.receiver).toBe('delivered')
    expect(first.receiver.status).toBeUndefined()
    expect(buffer.metrics().acked).toBe(1)
    expect(buffer.store.ackedBelow).toBe(0)
    out.events[0]!.end('delivered')
    expect(await first.receiver).toBe('delivered')
    expect(buffer.store.ackedBelow).toBe(2)
    await buffer.dispose()
  })

  it("passes each rejected record's own reason on to its source batch", async () => {
    const { buffer, first, second, out } = await twoRecordsPulled()
    out.events[0]!.end('rejected', { reason: 'first reason' })
    out.events[1]!.end('rejected', { reason: 'second reason' })
    expect(await first.receiver).toBe('rejected')
    expect(await second.receiver).toBe('rejected')
    expect([first.receiver.reason, second.receiver.reason]).toEqual(['first reason', 'second reason'])
    await buffer.dispose()
  })

  it('hands out again a record whose event the sink lost without ending it (found by the leak detector)', async () => {
    const gc = (globalThis as { gc?: () => void }).gc
    expect(typeof gc, 'run with --expose-gc').toBe('function')
    LeakDetector.setWarnings(false)
    try {
      const buffer = await open(tempDir(), { retryBackoff: { initialMs: 1, maxMs: 1 } })
      const { array, receiver } = batch(1)
      await buffer.push(array)
      // The leak detector watches notifiers in groups of 64 made one after another, and finds a
      // leak once its whole group is unreachable: the source's notifier (alive until its record
      // is delivered) must not share a group with the one the buffer makes for the record.
      for (let i = 0; i < 64; i++) BatchNotifier.create().notifier.release()
      // Pulled and forgotten in a function of its own, so nothing on this stack keeps the event.
      await (async () => {
        expect((await buffer.pull())!.length).toBe(1)
      })()
      for (let i = 0; i < 200 && buffer.metrics().redeliveries === 0; i++) {
        gc!()
        await new Promise((resolve) => setImmediate(resolve))
      }
      expect(buffer.metrics().redeliveries).toBe(1)
      expect(receiver.status).toBeUndefined()
      const again = (await buffer.pull())!
      expect(ns(again)).toEqual([0])
      again.end('delivered')
      expect(await receiver).toBe('delivered')
      await buffer.dispose()
    } finally {
      LeakDetector.setWarnings(true)
    }
  })

  it('dead-letters what the sink rejected, settles the source rejected, never redelivers it, and can replay it', async () => {
    const buffer = await open(tempDir())
    const { array, receiver } = batch(2)
    await buffer.push(array)
    const out = (await buffer.pull())!
    out.events[0]!.end('delivered')
    out.events[1]!.end('rejected')
    expect(await receiver).toBe('rejected')
    const letters = []
    for await (const letter of buffer.deadLetters()) letters.push(letter)
    expect(letters).toEqual([{ originalSeq: 1, fields: { n: 1 }, sourceId: 'src', ingestTimestamp: 1001 }])
    expect(buffer.metrics()).toMatchObject({ deadLettered: 1, deadLetteredThisRun: 1 })
    expect(await buffer.replayDeadLetters()).toEqual({ status: 'replayed', count: 1 })
    const replayed = (await buffer.pull())!
    expect(ns(replayed)).toEqual([1])
    replayed.end('delivered')
    await buffer.close()
    expect(await buffer.pull()).toBeUndefined()
  })

  it('drop_newest: settles the pushed events rejected at once when the buffer is full', async () => {
    const buffer = await open(tempDir(), { whenFull: 'drop_newest', segmentBytes: 200, maxBytes: 200 })
    const first = batch(4)
    await buffer.push(first.array)
    const dropped = batch(4, 4)
    await buffer.push(dropped.array)
    expect(await dropped.receiver).toBe('rejected')
    expect(buffer.metrics().droppedWhenFull).toBe(4)
    // Said why, naming the sink, as a full memory buffer does (not UNEXPLAINED).
    expect(dropped.receiver.reason).toMatchObject({ componentId: 'out', code: 'BUFFER_FULL' })
    const out = (await buffer.pull())!
    expect(ns(out)).toEqual([0, 1, 2, 3])
    out.end('delivered')
    expect(await first.receiver).toBe('delivered')
    await buffer.dispose()
  })

  it('block: a push waits at maxBytes until the sink catches up (back pressure)', async () => {
    // Each record is a 42-byte frame: two per 100-byte segment; eight fit under 340 bytes, ten do not.
    const buffer = await open(tempDir(), { segmentBytes: 100, maxBytes: 340 })
    await buffer.push(batch(4).array)
    await buffer.push(batch(4, 4).array)
    let pushed = false
    const third = batch(2, 8)
    const pending = buffer.push(third.array).then(() => {
      pushed = true
    })
    await ticks()
    expect(pushed).toBe(false)
    const out = (await buffer.pull())!
    out.end('delivered')
    await pending
    const rest = (await buffer.pull())!
    expect(ns(rest)).toEqual([8, 9])
    rest.end('delivered')
    await buffer.dispose()
  })

  it('rejects an event too large for a segment at once and stores the rest of the batch', async () => {
    const buffer = await open(tempDir(), { segmentBytes: 100 })
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
    const big = new LogEvent({ text: 'x'.repeat(200) })
    const small = new LogEvent({ n: 1 })
    notifier.attach(big)
    const { notifier: n2, receiver: smallReceiver } = BatchNotifier.create({ sourceId: 'src' })
    n2.attach(small)
    notifier.release()
    n2.release()
    await buffer.push(EventArray.of(big, small))
    expect(await receiver).toBe('rejected')
    expect(buffer.metrics().rejectedTooLarge).toBe(1)
    expect(receiver.reason).toMatchObject({
      componentId: 'out',
      code: 'RECORD_TOO_LARGE',
      message: expect.stringContaining('larger than a segment'),
    })
    const out = (await buffer.pull())!
    expect(ns(out)).toEqual([1])
    out.end('delivered')
    expect(await smallReceiver).toBe('delivered')
    await buffer.dispose()
  })

  it('measures an event against a segment in UTF-8 bytes: one too large in bytes only is rejected alone', async () => {
    const buffer = await open(tempDir(), { segmentBytes: 100 }) // 80 bytes of payload
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src', outcomes: true })
    // 22 '€' are 22 UTF-16 units but 66 bytes: the record is 51 units, 95 bytes.
    const euros = new LogEvent({ t: '€'.repeat(22) })
    // ASCII: its record is 75 bytes, over 80 only if counted 3 bytes to a unit.
    const ascii = new LogEvent({ t: 'x'.repeat(40), n: 2 })
    notifier.attach(euros)
    notifier.attach(ascii)
    notifier.release()
    await buffer.push(EventArray.of(euros, ascii))
    expect(buffer.metrics().rejectedTooLarge).toBe(1)
    const out = (await buffer.pull())!
    expect(ns(out)).toEqual([2])
    out.end('delivered')
    expect(await receiver).toBe('rejected')
    expect(receiver.outcomes!.toArray()).toEqual(['rejected', 'delivered'])
    await buffer.dispose()
  })

  it('rejects an event JSON cannot write (nested too deep, a BigInt, a cycle) with the reason, and stores the rest of the batch', async () => {
    const logs: string[] = []
    const buffer = await open(tempDir(), { log: (m) => logs.push(m) })
    let deep: JsonObject = { leaf: 1 }
    for (let i = 0; i < 20_000; i++) deep = { a: deep } // deeper than JSON.stringify recurses
    const cycle: Record<string, unknown> = { n: 'cycle' }
    cycle.self = cycle
    const fields = [{ n: 0 }, deep, { n: 1n }, cycle, { n: 4 }] as unknown as JsonObject[]
    const sent = fields.map((f) => {
      const event = new LogEvent(f)
      const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
      notifier.attach(event)
      notifier.release()
      return { event, receiver }
    })
    await buffer.push(EventArray.of(...sent.map((s) => s.event)))
    const refused = sent.slice(1, 4).map((s) => s.receiver)
    expect(await Promise.all(refused)).toEqual(['rejected', 'rejected', 'rejected'])
    for (const receiver of refused) {
      expect(receiver.reason).toMatchObject({ componentId: 'out', code: 'UNENCODABLE' })
    }
    expect((refused[0]!.reason as { message: string }).message).toContain('sink out')
    expect((refused[0]!.reason as { message: string }).message).toContain('RangeError')
    expect((refused[1]!.reason as { message: string }).message).toContain('BigInt')
    expect((refused[2]!.reason as { message: string }).message).toContain('circular')
    expect(logs.filter((m) => m.includes('cannot be written as JSON'))).toHaveLength(3)
    expect(buffer.metrics().rejectedUnencodable).toBe(3)
    const out = (await buffer.pull())!
    expect(ns(out)).toEqual([0, 4])
    out.end('delivered')
    expect([await sent[0]!.receiver, await sent[4]!.receiver]).toEqual(['delivered', 'delivered'])
    await buffer.dispose()
  })

  it('on write: rejects an event whose fields JSON writes as something else than an object (a toJSON, untyped fields), never settling it delivered', async () => {
    const logs: string[] = []
    const buffer = await open(tempDir(), { acknowledgements: 'on-write', log: (m) => logs.push(m) })
    // Read back, such a record is no event: it used to be settled delivered on write, then
    // dead-lettered by the pull, so the sink never saw what its source was told was delivered.
    const fields = [
      { n: 0 },
      { toJSON: () => 'a string' },
      { toJSON: () => undefined },
      [1, 2],
      null,
      { n: 5 },
    ] as unknown as JsonObject[]
    const sent = fields.map((f) => {
      const event = new LogEvent(f)
      const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
      notifier.attach(event)
      notifier.release()
      return { event, receiver }
    })
    await buffer.push(EventArray.of(...sent.map((s) => s.event)))
    const refused = sent.slice(1, 5).map((s) => s.receiver)
    expect(await Promise.all(refused)).toEqual(['rejected', 'rejected', 'rejected', 'rejected'])
    for (const receiver of refused) {
      expect(receiver.reason).toMatchObject({ componentId: 'out', code: 'UNENCODABLE' })
    }
    expect(buffer.metrics().rejectedUnencodable).toBe(4)
    expect([await sent[0]!.receiver, await sent[5]!.receiver]).toEqual(['delivered', 'delivered'])
    const out = (await buffer.pull())!
    expect(ns(out)).toEqual([0, 5])
    out.end('delivered')
    expect(logs.filter((m) => m.includes('not an event'))).toEqual([])
    await buffer.dispose()
  })

  it('stores fields as JSON writes them: a number that is not finite comes back null, an undefined member absent (documented, RFC 0003)', async () => {
    const buffer = await open(tempDir())
    // Untyped code (or arithmetic: 0 / 0) can put these in fields; the in-memory buffer keeps them.
    const fields = { n: 0, nan: Number.NaN, inf: -Infinity, gone: undefined, list: [undefined, 1] }
    const event = new LogEvent(fields as unknown as JsonObject)
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
    notifier.attach(event)
    notifier.release()
    await buffer.push(EventArray.of(event))
    const out = (await buffer.pull())!
    expect(out.events[0]!.fields).toStrictEqual({ n: 0, nan: null, inf: null, list: [null, 1] })
    out.end('delivered')
    expect(await receiver).toBe('delivered')
    await buffer.dispose()
  })

  it('delivers an event whose ingest timestamp is not a number (a source parsed a bad date): it comes back NaN, not dead-lettered', async () => {
    const buffer = await open(tempDir())
    const events = [Number.NaN, Infinity].map(
      (t, n) => new LogEvent({ n }, { sourceId: 'src', ingestTimestamp: t }), // as Date.parse('garbage') gives
    )
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'src' })
    await buffer.push(new EventArray(events).attach(notifier))
    const out = (await buffer.pull())!
    expect(ns(out)).toEqual([0, 1])
    expect(out.events.map((e) => e.metadata.ingestTimestamp)).toEqual([Number.NaN, Number.NaN])
    out.end('delivered')
    expect(await receiver).toBe('delivered')
    expect(buffer.metrics().deadLettered).toBe(0)
    await buffer.dispose()
  })

  it('settles every batch of a push whose log throws: none is left waiting for the leak detector', async () => {
    const buffer = await open(tempDir(), {
      segmentBytes: 100,
      log: () => {
        throw new Error('log broken')
      },
    })
    const big = batch(1)
    big.array.events[0]!.set('text', 'x'.repeat(200))
    const after = batch(2, 1)
    const events = EventArray.of(...big.array.events, ...after.array.events)
    await expect(buffer.push(events)).rejects.toThrow('log broken')
    expect(await big.receiver).toBe('rejected')
    expect(await after.receiver).toBe('errored')
    await buffer.dispose()
  })

  it('dispose during the close a draining pull started resolves only once the store is closed and unlocked', async () => {
    const fs = new MemoryFileSystem()
    // Hold the last step of closing the store (releasing its lock) until the test lets it go.
    let reached!: () => void
    const atUnlock = new Promise<void>((resolve) => (reached = resolve))
    let letGo!: () => void
    const gate = new Promise<void>((resolve) => (letGo = resolve))
    const gated: NonNullable<Parameters<typeof openDiskBufferOn>[0]['fileSystem']> = {
      mkdir: (path) => fs.mkdir(path),
      readdir: (path) => fs.readdir(path),
      open: (path, mode) => fs.open(path, mode),
      readFile: (path) => fs.readFile(path),
      size: (path) => fs.size(path),
      rename: (from, to) => fs.rename(from, to),
      link: (existing, target) => fs.link(existing, target),
      syncDir: (path) => fs.syncDir(path),
      unlink: async (path) => {
        if (path === '/buf/lock') {
          reached()
          await gate
        }
        return fs.unlink(path)
      },
    }
    const buffer = await openDiskBufferOn({ path: '/buf', sinkId: 'out', fileSystem: gated, log: () => {} })
    const pulled = buffer.pull()
    await buffer.close() // empty: the pull drains at once and closes the store
    await atUnlock
    let disposed = false
    const disposing = buffer.dispose().then(() => {
      disposed = true
    })
    await ticks()
    expect(disposed).toBe(false) // the store still holds its lock
    letGo()
    await disposing
    expect(fs.bytes('/buf/lock')).toBeUndefined()
    expect(await pulled).toBeUndefined()
  })

  it('settles the events errored when the write fails (ENOSPC) and stays usable', async () => {
    const fs = new MemoryFileSystem()
    const buffer = await openDiskBufferOn({ path: '/buf', sinkId: 'out', fileSystem: fs, log: () => {} })
    fs.capacity = fs.used() + 10
    const failed = batch(2)
    await buffer.push(failed.array)
    expect(await failed.receiver).toBe('errored')
    expect(buffer.metrics().writeErrored).toBe(2)
    expect(failed.receiver.reason).toMatchObject({ componentId: 'out', code: 'WRITE_FAILED' })
    fs.capacity = Number.POSITIVE_INFINITY
    const ok = batch(1, 7)
    await buffer.push(ok.array)
    const out = (await buffer.pull())!
    expect(ns(out)).toEqual([7])
    out.end('delivered')
    expect(await ok.receiver).toBe('delivered')
    await buffer.dispose()
  })

  it('dispose settles the waiting batches errored and releases the lock even when a file fails to close', async () => {
    const fs = new MemoryFileSystem()
    const buffer = await openDiskBufferOn({ path: '/buf', sinkId: 'out', fileSystem: fs, log: () => {} })
    const { array, receiver } = batch(2)
    await buffer.push(array)
    // The segment's file fails to close (the ledger's, kept open between checkpoints, closes).
    fs.fault = (op, path) =>
      op === 'close' && path.endsWith('.seg')
        ? Object.assign(new Error('EIO: i/o error'), { code: 'EIO' })
        : undefined
    await expect(buffer.dispose()).rejects.toMatchObject({ code: 'EIO' })
    expect(await receiver).toBe('errored')
    expect(fs.bytes('/buf/lock')).toBeUndefined()
  })

  it('after a restart delivers the records again with fresh notifiers; the old batches were settled errored on dispose', async () => {
    const path = tempDir()
    const buffer = await open(path)
    const { array, receiver } = batch(2)
    await buffer.push(array)
    await buffer.dispose()
    expect(await receiver).toBe('errored') // its source resends: at-least-once
    const reopened = await open(path)
    const out = (await reopened.pull())!
    expect(ns(out)).toEqual([0, 1])
    out.end('delivered')
    await reopened.close()
    expect(await reopened.pull()).toBeUndefined()
    const third = await open(path) // drained and closed: the lock was released, nothing is left
    await third.close()
    expect(await third.pull()).toBeUndefined()
  })

  it('close: pull drains what is left, then returns undefined; a push after close settles errored and throws', async () => {
    const buffer = await open(tempDir())
    await buffer.push(batch(2).array)
    await buffer.close()
    const late = batch(1)
    await expect(buffer.push(late.array)).rejects.toMatchObject({ code: 'CLOSED' })
    expect(await late.receiver).toBe('errored')
    const out = (await buffer.pull())!
    expect(ns(out)).toEqual([0, 1])
    out.end('delivered')
    expect(await buffer.pull()).toBeUndefined()
  })

  it('with group commit, close still drains the pushes whose writes were behind', async () => {
    const buffer = await open(tempDir(), { sync: { everyMs: 60_000, everyWrites: 1000 } })
    const { array, receiver } = batch(3)
    await buffer.push(array) // answered before its write (write-behind)
    await buffer.close()
    const out = (await buffer.pull())!
    expect(ns(out)).toEqual([0, 1, 2])
    out.end('delivered')
    expect(await buffer.pull()).toBeUndefined()
    expect(await receiver).toBe('delivered')
  })

  it('pull resolves undefined when its signal aborts', async () => {
    const buffer = await open(tempDir())
    const controller = new AbortController()
    const pending = buffer.pull(controller.signal)
    controller.abort()
    expect(await pending).toBeUndefined()
    await buffer.dispose()
  })

  it('pull resolves undefined when its signal aborts while it waits behind another pull, which goes on', async () => {
    const buffer = await open(tempDir())
    const first = buffer.pull() // waits for a record
    const controller = new AbortController()
    const second = buffer.pull(controller.signal) // waits for the first
    controller.abort()
    expect(await second).toBeUndefined()
    await buffer.push(batch(1).array)
    expect(ns(await first)).toEqual([0])
    await buffer.dispose()
  })

  it("accepts a topology's buffer config, with type 'disk' and explicit undefined options", async () => {
    const buffer = await openDiskBuffer({
      type: 'disk',
      path: tempDir(),
      sinkId: 'out',
      maxBytes: undefined,
      whenFull: undefined,
      sync: undefined,
      acknowledgements: undefined,
    })
    await buffer.dispose()
    const wrong = { type: 'memory', path: tempDir(), sinkId: 'out' } as unknown as DiskEdgeBufferOptions
    await expect(openDiskBuffer(wrong)).rejects.toMatchObject({ code: 'INVALID_OPTION', field: 'type' })
  })
})

describe('the disk buffer in a topology, on a disk whose reads fail for a while', () => {
  it('is read again after the sink reports each failed pull: every event is delivered', async () => {
    const fs = new MemoryFileSystem()
    let failures = 0
    // The first two loads of a segment fail (EIO), then the disk answers again.
    fs.fault = (op, path) => {
      if (op !== 'read' || !path.endsWith('.seg') || failures >= 2) return undefined
      failures++
      return Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO' })
    }
    const statuses: Promise<string>[] = []
    const received: unknown[] = []
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', {
        kind: 'test',
        canAcknowledge: true,
        async run(context) {
          // Each event larger than the writer's bytes held for the reader: read from the file.
          const pad = 'x'.repeat(TailCache.MAX_BYTES)
          for (const n of [1, 2, 3]) statuses.push((await context.send([{ n, pad }])).status)
        },
      })
      .sink(
        'out',
        ['in'],
        {
          kind: 'test',
          async write(events) {
            for (const event of events.events) received.push(event.get('n'))
            return undefined
          },
        },
        {
          retry: { initialBackoffMs: 1 },
          buffer: {
            kind: 'disk',
            open: () => openDiskBufferOn({ path: '/buf', sinkId: 'out', fileSystem: fs, log: () => {} }),
          },
        },
      )
      .build()
    const facts: string[] = []
    topology.lifecycle.subscribe((fact) => {
      if (fact.type === 'component_error') facts.push(`${fact.component} ${fact.code}`)
    })
    await topology.start()
    await topology.done
    expect(await Promise.all(statuses)).toEqual(['delivered', 'delivered', 'delivered'])
    expect(failures).toBe(2)
    expect(received.sort()).toEqual([1, 2, 3])
    expect(facts).toEqual(['out READ_FAILED', 'out READ_FAILED'])
  })
})

describe('the disk buffer in front of a sink with acknowledgements off', () => {
  it('tells the source errored for a copy whose write failed (ENOSPC), delivered for one it stored', async () => {
    const fs = new MemoryFileSystem()
    const statuses: Promise<string>[] = []
    const reasons: unknown[] = []
    const received: unknown[] = []
    let full = true
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', {
        kind: 'test',
        canAcknowledge: true,
        async run(context) {
          for (const n of [1, 2]) {
            const receipt = await context.send([{ n }])
            statuses.push(receipt.status)
            await receipt.status
            reasons.push(receipt.failure)
            full = false
            fs.capacity = Number.POSITIVE_INFINITY
          }
        },
      })
      .sink(
        'off',
        ['in'],
        {
          kind: 'test',
          async write(events) {
            for (const event of events.events) received.push(event.get('n'))
            return undefined
          },
        },
        {
          acknowledgements: false,
          buffer: {
            kind: 'disk',
            open: async () => {
              const buffer = await openDiskBufferOn({
                path: '/buf',
                sinkId: 'off',
                fileSystem: fs,
                log: () => {},
              })
              if (full) fs.capacity = fs.used() + 10 // the first append fails: no space left
              return buffer
            },
          },
        },
      )
      // An acknowledging sink: without one the source would not ask for statuses at all.
      .sink('kept', ['in'], { kind: 'test', write: async () => undefined })
      .build()
    await topology.start()
    await topology.done
    expect(await Promise.all(statuses)).toEqual(['errored', 'delivered'])
    expect(reasons[0]).toMatchObject({ componentId: 'off', code: 'WRITE_FAILED' })
    expect(received).toEqual([2])
  })
})
