// The buffer suite against buffers that keep every rule, and each rule against a buffer broken on
// purpose in exactly that way (one of them acknowledges before its data is synced).
import { EventArray, type JsonObject } from '@ackline/core'
import { type BufferUnderTest, bufferConformance, checkBuffer } from '@ackline/testkit'
import type { EdgeBuffer } from '@ackline/topology'
import { describe, expect, it } from 'vitest'

/** An unbounded in-memory queue that hands out the handles it was given. */
function queue(options: { ackOnPush?: boolean; lose?: boolean; ignoreAbort?: boolean } = {}): EdgeBuffer {
  const items: EventArray[] = []
  let waiting: ((a: EventArray | undefined) => void) | undefined
  let closed = false
  return {
    async push(events) {
      if (options.ackOnPush === true) {
        // Broken: tells the source delivered at once, and hands out copies without finalizers.
        const copy = EventArray.fromRecords(events.events.map((e) => ({ ...e.fields }) as JsonObject))
        events.end('delivered')
        events = copy
      }
      if (options.lose === true && events.length > 1) {
        const [first, ...rest] = events.events
        first!.end('delivered')
        events = new EventArray(rest)
      }
      if (waiting !== undefined) {
        const wake = waiting
        waiting = undefined
        wake(events)
      } else items.push(events)
    },
    pull(signal) {
      const next = items.shift()
      if (next !== undefined || closed) return Promise.resolve(next)
      return new Promise((resolve) => {
        waiting = resolve
        if (options.ignoreAbort !== true) {
          signal?.addEventListener('abort', () => {
            if (waiting === resolve) waiting = undefined
            resolve(undefined)
          })
        }
      })
    },
    async close() {
      closed = true
      if (items.length === 0) waiting?.(undefined)
    },
  }
}

/** A "disk" that loses unsynced records in a crash, and a buffer over it that acknowledges on write. */
function diskLike(syncBeforeAck: boolean): () => Promise<BufferUnderTest> {
  return async () => {
    const disk = { synced: [] as JsonObject[], unsynced: [] as JsonObject[] }
    const open = async (): Promise<EdgeBuffer> => {
      const inner = queue()
      for (const r of disk.synced.splice(0)) await inner.push(EventArray.fromRecords([r]))
      return {
        ...inner,
        async push(events) {
          const fields = events.events.map((e) => ({ ...e.fields }) as JsonObject)
          disk.unsynced.push(...fields)
          const sync = () => disk.synced.push(...disk.unsynced.splice(0))
          if (syncBeforeAck) sync()
          else setTimeout(sync, 1000).unref()
          events.end('delivered')
          await inner.push(EventArray.fromRecords(fields))
        },
      }
    }
    return {
      buffer: await open(),
      crash: () => {
        disk.unsynced.length = 0
      },
      reopen: open,
    }
  }
}

bufferConformance('an in-memory queue', async () => ({ buffer: queue() }), { runner: { describe, it } })
bufferConformance('a buffer that syncs before it acknowledges on write', diskLike(true), {
  acknowledgesOnWrite: true,
  runner: { describe, it },
})

const codes = async (make: () => Promise<BufferUnderTest>, acknowledgesOnWrite = false) =>
  (await checkBuffer(make, { acknowledgesOnWrite, timeoutMs: 300 })).map((f) => f.code)

describe('each buffer rule fails against a buffer broken that way', () => {
  it('passes the good ones', async () => {
    expect(await codes(async () => ({ buffer: queue() }))).toEqual([])
    expect(await codes(diskLike(true), true)).toEqual([])
  })

  it('buffer.durable-before-acknowledged: a buffer that acknowledges before fsync', async () => {
    const found = await checkBuffer(diskLike(false), { acknowledgesOnWrite: true })
    expect(found.map((f) => f.code)).toEqual(['buffer.durable-before-acknowledged'])
    expect(found[0]!.message).toMatch(
      /gone after a crash.*\n {2}fix: settle an event delivered on write only after its bytes are synced/,
    )
  })

  it('buffer.never-acknowledges-before-the-sink: a buffer that acknowledges on push', async () => {
    expect(await codes(async () => ({ buffer: queue({ ackOnPush: true }) }))).toEqual([
      'buffer.never-acknowledges-before-the-sink',
    ])
  })

  it('buffer.hands-out-what-it-accepts: a buffer that loses an event', async () => {
    expect(await codes(async () => ({ buffer: queue({ lose: true }) }))).toContain(
      'buffer.hands-out-what-it-accepts',
    )
  })

  it('buffer.pull-waits: a buffer whose pull ignores its signal', async () => {
    expect(await codes(async () => ({ buffer: queue({ ignoreAbort: true }) }))).toEqual(['buffer.pull-waits'])
  })

  it('buffer.settles: a make() that never settles fails every rule, not waits forever', async () => {
    const found = await checkBuffer(() => new Promise<never>(() => {}), { timeoutMs: 100 })
    expect(new Set(found.map((f) => f.message.split('\n')[0]))).toEqual(
      new Set(['buffer.settles (buffer): make() did not settle within 100 ms']),
    )
  })
})
