// The buffer suite against buffers that keep every rule, and each rule against a buffer broken on
// purpose in exactly that way (one of them acknowledges before its data is synced).
import { EventArray, type JsonObject } from '@ackline/core'
import { type BufferUnderTest, bufferConformance, checkBuffer } from '@ackline/testkit'
import type { EdgeBuffer } from '@ackline/topology'
import { describe, expect, it } from 'vitest'

/** An unbounded in-memory queue that hands out the handles it was given. */
function queue(
  options: {
    ackOnPush?: boolean
    lose?: boolean
    forget?: boolean
    nackOnPull?: boolean
    plainArrays?: boolean
    emptyWhenIdle?: boolean
    repeatLast?: boolean
    ignoreAbort?: boolean
    dropsRepeats?: boolean
  } = {},
): EdgeBuffer {
  const items: EventArray[] = []
  const seen = new Set<string>()
  let waiting: ((a: EventArray | undefined) => void) | undefined
  let closed = false
  let last: EventArray | undefined
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
      if (options.dropsRepeats === true) {
        // Broken: keeps one record of each content, ending (delivered) a repeat it pushed before.
        const kept = events.events.filter((e) => {
          const key = JSON.stringify(e.fields)
          if (!seen.has(key)) return seen.add(key)
          e.end('delivered')
          return false
        })
        events = new EventArray(kept)
      }
      // Broken: lets go of the first handle without ending it; nothing ever settles it.
      if (options.forget === true && events.length > 1) events = new EventArray(events.events.slice(1))
      if (waiting !== undefined) {
        const wake = waiting
        waiting = undefined
        wake(events)
      } else items.push(events)
    },
    pull(signal) {
      const next = items.shift()
      if (next !== undefined) last = next
      // Broken: an empty array instead of waiting (and instead of undefined at the end).
      if (next === undefined && options.emptyWhenIdle === true) return Promise.resolve(new EventArray([]))
      // Broken: hands the last array out again once drained.
      if (next === undefined && closed && options.repeatLast === true) return Promise.resolve(last)
      // Broken: hands out the array of handles, not the EventArray.
      if (next !== undefined && options.plainArrays === true) return Promise.resolve(next.events as never)
      if (next !== undefined && options.nackOnPull === true) {
        // Broken: settles the batch errored itself and hands out copies without its finalizers.
        const copy = EventArray.fromRecords(next.events.map((e) => ({ ...e.fields }) as JsonObject))
        next.end('errored')
        return Promise.resolve(copy)
      }
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
function diskLike(
  syncBeforeAck: boolean,
  forgetsOnPull: boolean | 'at-next-sync' = false,
  sortsKeys = false,
): () => Promise<BufferUnderTest> {
  return async () => {
    const disk = { synced: [] as JsonObject[], unsynced: [] as JsonObject[], handedOut: [] as JsonObject[] }
    const forget = (records: readonly JsonObject[]) => {
      for (const record of records) {
        const json = JSON.stringify(record)
        disk.synced.splice(
          disk.synced.findIndex((r) => JSON.stringify(r) === json),
          1,
        )
      }
    }
    const open = async (): Promise<EdgeBuffer> => {
      const inner = queue()
      for (const r of disk.synced.splice(0)) await inner.push(EventArray.fromRecords([r]))
      return {
        ...inner,
        async push(events) {
          // Stored as a jsonb column stores them ('sortsKeys'): the same records, keys in another order.
          const fields = events.events.map((e) =>
            sortsKeys
              ? (Object.fromEntries(
                  Object.entries(e.fields).sort(([x], [y]) => (x < y ? -1 : 1)),
                ) as JsonObject)
              : ({ ...e.fields } as JsonObject),
          )
          disk.unsynced.push(...fields)
          const sync = () => {
            disk.synced.push(...disk.unsynced.splice(0))
            // Broken ('at-next-sync'): what was handed out leaves the disk with the next sync.
            forget(disk.handedOut.splice(0))
          }
          if (syncBeforeAck) sync()
          else setTimeout(sync, 1000).unref()
          events.end('delivered')
          await inner.push(EventArray.fromRecords(fields))
        },
        async pull(signal) {
          const next = await inner.pull(signal)
          // Broken: takes the records off the disk when it hands them out, not once the sink ended them.
          if (forgetsOnPull !== false && next !== undefined) {
            const fields = next.events.map((e) => ({ ...e.fields }) as JsonObject)
            if (forgetsOnPull === true) forget(fields)
            else disk.handedOut.push(...fields)
          }
          return next
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

  it('passes a buffer that hands records out with their keys in another order (stored as jsonb)', async () => {
    // Compared as JSON text, the same records with their keys reordered were not the records pushed.
    expect(await codes(diskLike(true, false, true), true)).toEqual([])
  })

  it('buffer.hands-out-what-it-accepts: a buffer that drops the second of two equal records', async () => {
    const records = [{ n: 1 }, { n: 1 }, { n: 2 }, { n: 3 }, { n: 2 }, { n: 4 }]
    const found = await checkBuffer(async () => ({ buffer: queue({ dropsRepeats: true }) }), {
      records,
      timeoutMs: 300,
    })
    expect(found.map((f) => f.code)).toEqual(['buffer.hands-out-what-it-accepts'])
    expect(found[0]!.message).toContain('pushed 6 record(s), pulled [{"n":1},{"n":2},{"n":3},{"n":4}]')
  })

  it('buffer.durable-before-acknowledged: a buffer that acknowledges before fsync', async () => {
    const found = await checkBuffer(diskLike(false), { acknowledgesOnWrite: true })
    expect(found.map((f) => f.code)).toEqual(['buffer.durable-before-acknowledged'])
    expect(found[0]!.message).toMatch(
      /gone after a crash.*\n {2}fix: settle an event delivered on write only after its bytes are synced/,
    )
  })

  it('buffer.durable-before-acknowledged: a buffer that forgets a record on disk once pull hands it out, before the sink ended it', async () => {
    // Nothing was pulled before the crash, so records in a sink's hands at the crash were never at stake.
    const found = await checkBuffer(diskLike(true, true), { acknowledgesOnWrite: true, timeoutMs: 300 })
    expect(found.map((f) => f.code)).toEqual(['buffer.durable-before-acknowledged'])
    expect(found[0]!.message).toContain(
      '3 record(s) acknowledged delivered were gone after a crash, e.g. {"n":0,',
    )
  })

  it('buffer.durable-before-acknowledged: a buffer that forgets what it handed out at its next sync, before the sink ended it', async () => {
    // The read position moves at the pull and reaches the disk with the next push: the crash came
    // right after the pull, before any sync, so the records in the sink's hands were still there.
    const found = await checkBuffer(diskLike(true, 'at-next-sync'), {
      acknowledgesOnWrite: true,
      timeoutMs: 300,
    })
    expect(found.map((f) => f.code)).toEqual(['buffer.durable-before-acknowledged'])
    expect(found[0]!.message).toContain(
      'record(s) acknowledged delivered were gone after a crash, e.g. {"n":0,',
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

  it('buffer.hands-out-what-it-accepts: a buffer that forgets a handle fails, instead of waiting for its batch forever', async () => {
    const found = await checkBuffer(async () => ({ buffer: queue({ forget: true }) }), { timeoutMs: 300 })
    expect(found.map((f) => f.code)).toEqual([
      'buffer.hands-out-what-it-accepts',
      'buffer.never-acknowledges-before-the-sink',
    ])
    expect(found[1]!.message).toContain(
      '1 pushed batch(es) did not resolve within 300 ms of the sink ending every pulled event: 1 pushed event(s) were never handed out by pull nor ended',
    )
  })

  it('buffer.hands-out-what-it-accepts: a pull that resolves empty arrays instead of waiting fails, instead of spinning', async () => {
    const found = await checkBuffer(async () => ({ buffer: queue({ emptyWhenIdle: true }) }), {
      timeoutMs: 300,
    })
    expect(found.map((f) => f.code)).toEqual([
      'buffer.hands-out-what-it-accepts',
      'buffer.hands-out-what-it-accepts',
      'buffer.pull-waits',
    ])
    expect(found[0]!.message).toContain(
      'pull handed out 10 array(s) (6 record(s)) for 6 record(s) pushed in 3 array(s), and had still not resolved undefined',
    )
  })

  it('buffer.hands-out-what-it-accepts: a buffer that hands an array out twice is named, not a read of an ended handle', async () => {
    const found = await checkBuffer(async () => ({ buffer: queue({ repeatLast: true }) }), { timeoutMs: 300 })
    expect(found.map((f) => f.code)).toEqual([
      'buffer.hands-out-what-it-accepts',
      'buffer.hands-out-what-it-accepts',
    ])
    expect(found[0]!.message).toContain(
      'pull handed out an event that had already ended (after 6 record(s) came out)',
    )
  })

  it('buffer.never-acknowledges-before-the-sink: a buffer that settles every batch errored itself', async () => {
    const found = await checkBuffer(async () => ({ buffer: queue({ nackOnPull: true }) }), { timeoutMs: 300 })
    expect(found.map((f) => f.code)).toEqual(['buffer.never-acknowledges-before-the-sink'])
    expect(found[0]!.message).toContain(
      "the sink ended every event delivered, but 3 of 3 batch(es) resolved 'errored'",
    )
  })

  it('buffer.hands-out-what-it-accepts: a pull that resolves something else than an EventArray is named, and nothing is left live', async () => {
    const handed: EventArray[] = []
    const found = await checkBuffer(
      async () => {
        const buffer = queue({ plainArrays: true })
        const push = (events: EventArray) => {
          handed.push(events)
          return buffer.push(events)
        }
        return { buffer: { ...buffer, push } }
      },
      { timeoutMs: 300 },
    )
    expect(found.map((f) => f.code)).toEqual([
      'buffer.hands-out-what-it-accepts',
      'buffer.hands-out-what-it-accepts',
    ])
    expect(found[0]!.message).toContain('pull resolved [ LogEvent {')
    expect(found[0]!.message).toContain('which is neither an EventArray nor undefined')
    expect(handed.flatMap((a) => a.events).every((e) => e.isEnded)).toBe(true)
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

describe('a buffer step that never settles', () => {
  it('buffer.settles: a push or close that never settles fails the rules, not waits forever', async () => {
    const stuck = (what: 'push' | 'close') => async () => ({
      buffer: { ...queue(), [what]: () => new Promise<never>(() => {}) },
    })
    const push = await checkBuffer(stuck('push'), { timeoutMs: 100 })
    expect(new Set(push.map((f) => f.message.split('\n')[0]))).toEqual(
      new Set(['buffer.settles (buffer): push() did not settle within 100 ms']),
    )
    const close = await checkBuffer(stuck('close'), { timeoutMs: 100 })
    expect(new Set(close.map((f) => f.message.split('\n')[0]))).toEqual(
      new Set(['buffer.settles (buffer): close() did not settle within 100 ms']),
    )
  })
})

describe('the time a rule is given', () => {
  it("gives the runner's test the time of every call a rule waits for, each up to timeoutMs", async () => {
    // Each call of a correct buffer may take up to timeoutMs (an fsync per push, a read from disk
    // per pull); a rule that makes more calls than its runner timeout holds was ended by the
    // runner, named by no rule.
    let calls = 0
    const count = (buffer: EdgeBuffer): EdgeBuffer => ({
      push: (events) => {
        calls++
        return buffer.push(events)
      },
      pull: (signal) => {
        calls++
        return buffer.pull(signal)
      },
      close: () => {
        calls++
        return buffer.close()
      },
    })
    const counted = async (): Promise<BufferUnderTest> => {
      calls++
      const under = await diskLike(true)()
      return {
        buffer: count(under.buffer),
        crash: () => {
          calls++
          return under.crash!()
        },
        reopen: async () => {
          calls++
          return count(await under.reopen!())
        },
      }
    }
    const timeoutMs = 50
    const tests: { name: string; body: () => Promise<void>; timeout: number | undefined }[] = []
    bufferConformance('counted', counted, {
      acknowledgesOnWrite: true,
      timeoutMs,
      runner: {
        describe: (_, body) => body(),
        it: (name, body, timeout) => tests.push({ name, body, timeout }),
      },
    })
    expect(tests).toHaveLength(4)
    for (const test of tests) {
      calls = 0
      await test.body()
      expect(calls * timeoutMs, test.name).toBeLessThanOrEqual(test.timeout ?? 0)
    }
  })
})
