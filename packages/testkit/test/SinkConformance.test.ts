// The sink suite against a sink that keeps every rule, and each rule against a sink broken on
// purpose in exactly that way (mutation-style: the rule must catch it).
import type { JsonObject } from '@ackline/core'
import { ConformanceError, checkSink, sinkConformance, sinkRules } from '@ackline/testkit'
import type { Sink } from '@ackline/topology'
import { describe, expect, it } from 'vitest'

interface StoreSink extends Sink {
  readonly stored: JsonObject[]
}

const good = (): StoreSink => {
  const stored: JsonObject[] = []
  return {
    kind: 'store',
    stored,
    async write(events) {
      for (const e of events) stored.push({ ...e.fields })
      return undefined
    },
  }
}
const read = (sink: StoreSink) => sink.stored

sinkConformance('a sink that keeps every rule', good, { read, runner: { describe, it } })

const codes = async (make: () => StoreSink) =>
  (await checkSink(make, { read, timeoutMs: 300 })).map((f) => f.code)

describe('each sink rule fails against a sink broken that way', () => {
  it('passes a good sink', async () => {
    expect(await codes(good)).toEqual([])
  })

  it('sink.never-ends-events: a sink that ends its events itself', async () => {
    const sink = good()
    const broken = {
      ...sink,
      write: async (events: Parameters<Sink['write']>[0]) => {
        await sink.write(events)
        events.end('delivered')
        return undefined
      },
    }
    const found = await checkSink(() => broken, { read: () => sink.stored })
    expect(found.map((f) => f.code)).toContain('sink.never-ends-events')
    expect(found[0]!.message).toMatch(/do not call event\.end\(\)/)
  })

  it('sink.written-before-resolved: a sink that resolves before it writes', async () => {
    const make = (): StoreSink => {
      const stored: JsonObject[] = []
      return {
        kind: 'lazy',
        stored,
        async write(events) {
          const fields = events.events.map((e) => ({ ...e.fields }))
          setTimeout(() => stored.push(...fields), 50)
          return undefined
        },
      }
    }
    expect(await codes(make)).toContain('sink.written-before-resolved')
  })

  it('sink.one-status-per-event: a sink that returns one status too few', async () => {
    const make = (): StoreSink => ({
      ...good(),
      write: async (events) => events.events.slice(1).map(() => 'delivered' as const),
    })
    expect(await codes(make)).toContain('sink.one-status-per-event')
  })

  it('sink.one-status-per-event: a sink that returns an array with a hole', async () => {
    const make = (): StoreSink => {
      const sink = good()
      return {
        ...sink,
        write: async (events) => {
          await sink.write(events)
          const result: ('delivered' | 'errored')[] = events.events.map(() => 'delivered')
          delete result[0]
          return result
        },
      }
    }
    const found = await checkSink(make, { read, timeoutMs: 300 })
    expect(found.map((f) => f.code)).toEqual([
      'sink.one-status-per-event',
      'sink.delivers-good-records',
      'sink.in-topology',
    ])
    expect(found[0]!.message).toContain('write of 6 event(s) returned [ <1 empty item>,')
  })

  it('sink.delivers-good-records: a sink that stores nothing and reports every record errored', async () => {
    const make = (): StoreSink => ({
      ...good(),
      kind: 'never',
      write: async (events) => events.events.map(() => 'errored' as const),
    })
    const found = await checkSink(make, { read, timeoutMs: 300 })
    expect(found.map((f) => f.code)).toEqual(['sink.delivers-good-records'])
    expect(found[0]!.message).toContain("write reported 6 of the suite's 6 record(s) 'errored'")
  })

  it('sink.delivers-good-records: without read, a sink that reports every record failed is caught too', async () => {
    // Only the rules that need `read` looked at the statuses a write reported: without it a sink
    // that delivered nothing (every record 'errored', or 'rejected') passed the whole suite.
    for (const status of ['errored', 'rejected'] as const) {
      const make = (): Sink => ({ kind: 'never', write: async (events) => events.events.map(() => status) })
      const found = await checkSink(make, { timeoutMs: 300 })
      expect(found.map((f) => f.code)).toEqual(['sink.delivers-good-records'])
      expect(found[0]!.message).toContain(`'${status}'`)
    }
  })

  it('sink.flushes-on-stop: a buffering sink whose stop() forgets the buffer', async () => {
    const make = (): StoreSink => {
      const stored: JsonObject[] = []
      const pending: JsonObject[] = []
      return {
        kind: 'buffering',
        stored,
        async write(events) {
          // Stores the previous batch when the next one comes: delivered too early, and lost at stop.
          stored.push(...pending.splice(0))
          for (const e of events) pending.push({ ...e.fields })
          return undefined
        },
        async stop() {},
      }
    }
    const found = await codes(make)
    expect(found).toContain('sink.flushes-on-stop')
    expect(found).toContain('sink.written-before-resolved')
  })

  it('sink.survives-stop-mid-write: a sink whose stop() waits for a write that never ends', async () => {
    const make = (): StoreSink => {
      let release: (() => void) | undefined
      return {
        ...good(),
        kind: 'stuck',
        write: () =>
          new Promise((resolve) => {
            release = () => resolve(undefined)
          }),
        stop: () =>
          new Promise<void>(() => {
            void release
          }),
      }
    }
    const found = await checkSink(make, { timeoutMs: 200 })
    expect(found.map((f) => f.code)).toContain('sink.survives-stop-mid-write')
  })

  it('sink.settles: a make(), start(), stop() or read that never settles fails the rules, not waits forever', async () => {
    const never = <T>() => new Promise<T>(() => {})
    const settles = async (make: () => StoreSink | Promise<StoreSink>, options = {}) =>
      (await checkSink(make, { read, timeoutMs: 100, ...options })).filter((f) => f.code === 'sink.settles')
    expect((await settles(() => never<StoreSink>()))[0]?.message).toMatch(
      /^sink\.settles \(sink\): make\(\) did not settle within 100 ms/,
    )
    expect((await settles(() => ({ ...good(), start: never })))[0]?.message).toMatch(
      /\(store\): start\(\) did not settle/,
    )
    expect((await settles(() => ({ ...good(), stop: never })))[0]?.message).toMatch(
      /\(store\): stop\(\) did not settle/,
    )
    expect((await settles(good, { read: never }))[0]?.message).toMatch(/the `read` option did not settle/)
  })

  it('a factory that throws fails each rule with a ConformanceError whose cause is what it threw', async () => {
    const boom = new Error('factory boom')
    const found = await checkSink(
      () => {
        throw boom
      },
      { read },
    )
    expect(found.length).toBeGreaterThan(0)
    for (const failure of found) {
      expect(failure).toBeInstanceOf(ConformanceError)
      expect(failure.message).toMatch(/^sink\.[a-z-]+ \(sink\): make\(\) threw: Error: factory boom/)
      expect(failure.cause).toBe(boom)
    }
  })

  it('sink.one-status-per-event: describes a result JSON cannot print (a BigInt)', async () => {
    const make = (): StoreSink => ({ ...good(), write: async () => [1n] as never })
    const found = await checkSink(make, { timeoutMs: 300 })
    expect(found.find((f) => f.code === 'sink.one-status-per-event')?.message).toMatch(
      /write of 6 event\(s\) returned \[ 1n \]/,
    )
  })

  it('stops every sink it started, also when the rule fails on it, and ends the events of a write that never settled', async () => {
    const open = new Set<NodeJS.Timeout>()
    const writes: Parameters<Sink['write']>[0][] = []
    const stuck = (): Sink => {
      let heartbeat: NodeJS.Timeout | undefined
      return {
        kind: 'stuck',
        async start() {
          heartbeat = setInterval(() => {}, 1000)
          open.add(heartbeat)
        },
        write(events) {
          writes.push(events)
          return new Promise<never>(() => {})
        },
        async stop() {
          clearInterval(heartbeat)
          open.delete(heartbeat!)
        },
      }
    }
    const direct = sinkRules.filter((rule) => rule.id !== 'sink.in-topology')
    const codes: string[] = []
    for (const rule of direct) {
      await rule.check({ make: stuck, timeoutMs: 100 }).catch((e: ConformanceError) => codes.push(e.code))
    }
    expect(codes).toEqual(['sink.write-settles', 'sink.write-settles', 'sink.survives-stop-mid-write'])
    expect(open.size).toBe(0)
    expect(writes).toHaveLength(3)
    expect(writes.flatMap((w) => w.events).every((e) => e.isEnded)).toBe(true)
    // In a topology, the rule that gives up stops it at once: the pending write's events are settled.
    const inTopology = sinkRules.find((rule) => rule.id === 'sink.in-topology')!
    await expect(inTopology.check({ make: stuck, timeoutMs: 100 })).rejects.toThrow(
      'sink.in-topology (stuck): the topology did not finish',
    )
    expect(writes).toHaveLength(4)
    expect(writes[3]!.events.every((e) => e.isEnded)).toBe(true)
  })

  it('refuses a timeoutMs no timer can wait, naming it, instead of failing every rule of a correct sink at once', async () => {
    for (const timeoutMs of [Number.NaN, 0, -5, 2 ** 31, Number.POSITIVE_INFINITY]) {
      await expect(checkSink(good, { read, timeoutMs })).rejects.toThrow(
        `the sink conformance check: 'timeoutMs' must be a number of milliseconds from 1 to 2147483647, got ${timeoutMs}`,
      )
      expect(() =>
        sinkConformance('mine', good, { read, timeoutMs, runner: { describe: () => {}, it: () => {} } }),
      ).toThrow(`conformance suite 'mine': 'timeoutMs' must be a number of milliseconds from 1 to 2147483647`)
    }
  })

  it('sink.never-ends-events: a sink that ends its events from a confirm after write returned, without an uncaught exception', async () => {
    const make = (): StoreSink => {
      const sink = good()
      const confirms = new Set<Promise<void>>()
      return {
        ...sink,
        kind: 'confirm_later',
        async write(events) {
          await sink.write(events)
          // Broken: ends the events when the confirm comes, after write returned.
          const confirm = new Promise<void>((resolve) =>
            setImmediate(() => {
              events.end('delivered')
              resolve()
            }),
          )
          confirms.add(confirm)
          return undefined
        },
        async stop() {
          await Promise.all(confirms)
        },
      }
    }
    const found = await checkSink(make, { read, timeoutMs: 500 })
    expect(found.map((f) => f.code)).toEqual(['sink.never-ends-events', 'sink.in-topology'])
    expect(found[0]!.message).toContain(
      'sink.never-ends-events (confirm_later): 6 event(s) were ended by the sink after its write returned (the runtime had ended them)',
    )
    expect(found[1]!.message).toContain('the sink ended 6 event(s) the runtime had ended')
  })

  it('sink.never-ends-events: a sink with no stop() that ends its events from a timer after write returned', async () => {
    // Its stop resolves at once: the late ends come after it, and were swallowed unseen.
    const make = (): StoreSink => {
      const sink = good()
      const { stop: _none, ...rest } = sink
      return {
        ...rest,
        kind: 'timer_ends',
        async write(events) {
          await sink.write(events)
          setTimeout(() => events.end('delivered'), 5)
          return undefined
        },
      }
    }
    const found = await checkSink(make, { read, timeoutMs: 500 })
    expect(found.map((f) => f.code)).toEqual(['sink.never-ends-events', 'sink.in-topology'])
  })

  it('sink.written-before-resolved: a sink that removes a field from the event while writing and stores what is left', async () => {
    // Compared with the event's fields after the write, the stored record matched what the sink
    // had made of the event, not what was sent.
    const make = (): StoreSink => {
      const sink = good()
      return {
        ...sink,
        kind: 'strips_message',
        async write(events) {
          for (const e of events) e.remove('message')
          return sink.write(events)
        },
      }
    }
    const found = await checkSink(make, { read, timeoutMs: 500 })
    expect(found.map((f) => f.code)).toEqual(['sink.written-before-resolved', 'sink.flushes-on-stop'])
    expect(found[0]!.message).toContain(
      '2 record(s) reported delivered were not stored when write resolved, e.g. {"n":0,"message":"record 0","level":"info"}',
    )
  })

  it('sink.written-before-resolved: a sink that stores one of two identical records, given records with duplicates', async () => {
    // Each delivered record was looked for among all stored ones: one stored copy matched both.
    const make = (): StoreSink => {
      const sink = good()
      return {
        ...sink,
        kind: 'dedup',
        async write(events) {
          for (const e of events) {
            const json = JSON.stringify(e.fields)
            if (!sink.stored.some((r) => JSON.stringify(r) === json)) sink.stored.push({ ...e.fields })
          }
          return undefined
        },
      }
    }
    const records = [{ n: 1 }, { n: 1 }, { n: 2 }, { n: 3 }, { n: 3 }]
    const found = await checkSink(make, { read, records, timeoutMs: 500 })
    expect(found.map((f) => f.code)).toEqual(['sink.written-before-resolved', 'sink.flushes-on-stop'])
    expect(found[0]!.message).toContain(
      '1 record(s) reported delivered were not stored when write resolved, e.g. {"n":1}',
    )
  })

  it('passes a correct sink whose store reads back the same JSON values as other objects (null-prototype rows) or numbers (-0 as 0)', async () => {
    // Records were compared with isDeepStrictEqual, which also compares prototypes and tells -0
    // from 0: a store whose driver hands rows back as null-prototype objects (node:sqlite does), or
    // that keeps JSON text (where -0 is written 0), failed both storage rules with records that are
    // the same JSON values.
    const rows = (sink: StoreSink) =>
      sink.stored.map((record) =>
        JSON.parse(JSON.stringify(record), (_, value: unknown) =>
          typeof value === 'object' && value !== null && !Array.isArray(value)
            ? Object.assign(Object.create(null), value)
            : value,
        ),
      )
    const records = [
      { n: 0, at: { x: -0, tags: ['a', { b: null }] } },
      { n: 1, at: { x: 1, tags: [] } },
    ]
    expect(await checkSink(good, { read: rows, records, timeoutMs: 500 })).toEqual([])
    // A store that does tell them apart is still held to it.
    const changed = (sink: StoreSink) => rows(sink).map((r: JsonObject) => ({ ...r, at: { x: 2 } }))
    const found = await checkSink(good, { read: changed, records, timeoutMs: 500 })
    expect(found.map((f) => f.code)).toEqual(['sink.written-before-resolved', 'sink.flushes-on-stop'])
  })

  it('passes a correct sink given a record that holds NaN, stored as given', async () => {
    // NaN !== NaN: the JSON-value comparison took a record holding NaN for another than itself,
    // so a correct sink failed both storage rules (isDeepStrictEqual, before, matched it).
    const records = [{ n: 0, x: Number.NaN, at: { y: [Number.NaN] } }, { n: 1 }]
    expect(await checkSink(good, { read, records, timeoutMs: 500 })).toEqual([])
  })

  it('catches a sink whose store turned an object into a Date; passes one that reads an ISO string back as its Date', async () => {
    // Records compare as the JSON they serialise to. The comparison looked at own keys only and
    // ignored prototypes, so a Date (no own keys) matched the {} sent, though JSON writes it as
    // its ISO string: a sink that stored another value passed both storage rules.
    const records = [
      { n: 0, at: {} },
      { n: 1, at: { when: '2026-12-02T18:00:00.000Z' } },
    ]
    const dated = (sink: StoreSink) =>
      sink.stored.map((record) =>
        // A driver's row holds what it holds; `read` is typed as the JSON it stands for.
        record.n === 0 ? ({ ...record, at: new Date(0) } as unknown as JsonObject) : record,
      )
    const found = await checkSink(good, { read: dated, records, timeoutMs: 500 })
    expect(found.map((f) => f.code)).toEqual(['sink.written-before-resolved', 'sink.flushes-on-stop'])
    // A store whose driver reads a timestamp back as a Date holds the same JSON: its ISO string.
    const timestamps = (sink: StoreSink) =>
      sink.stored.map((record) => {
        const at = record.at as { when?: string }
        return at.when === undefined
          ? record
          : ({ ...record, at: { when: new Date(at.when) } } as unknown as JsonObject)
      })
    expect(await checkSink(good, { read: timestamps, records, timeoutMs: 500 })).toEqual([])
  })

  it('catches a sink whose store read a record with a cycle back as another such record, with no stack overflow', async () => {
    // JSON.stringify throws on a cycle: such a value is no JSON value, so it matches only itself.
    // The comparison walked into both cycles alike, and the suite died of a RangeError (call
    // stack), which the suite reported as each check having thrown, not as the store's mismatch.
    const sent: Record<string, unknown> = { when: 'now' }
    sent.self = sent
    const records = [{ n: 0, at: sent } as unknown as JsonObject]
    const cyclic = (sink: StoreSink) =>
      sink.stored.map((record) => {
        const at: Record<string, unknown> = { when: 'now' }
        at.self = at
        return { ...record, at } as unknown as JsonObject
      })
    const found = await checkSink(good, { read: cyclic, records, timeoutMs: 500 })
    expect(found.map((f) => f.code)).toEqual(['sink.written-before-resolved', 'sink.flushes-on-stop'])
    for (const finding of found) expect(finding.message).not.toMatch(/threw|call stack/)
  })

  it('catches a sink whose store lost an element of an array, leaving a hole', async () => {
    // The JSON-value comparison walked arrays with every(), which skips holes: a stored array
    // with an element missing ([, 'b'], which JSON writes [null,"b"]) matched the one sent.
    const holey = (sink: StoreSink) =>
      sink.stored.map((record) => {
        const tags = record.tags as string[]
        const kept: string[] = new Array(tags.length)
        for (let i = 1; i < tags.length; i++) kept[i] = tags[i]!
        return { ...record, tags: kept }
      })
    const records = [
      { n: 0, tags: ['a', 'b'] },
      { n: 1, tags: ['c'] },
    ]
    const found = await checkSink(good, { read: holey, records, timeoutMs: 500 })
    expect(found.map((f) => f.code)).toEqual(['sink.written-before-resolved', 'sink.flushes-on-stop'])
  })

  it('sink.written-before-resolved: a sink that stores its first write at once and holds later ones until stop()', async () => {
    // Only one write was checked when it resolved; the later writes were checked after stop().
    const make = (): StoreSink => {
      const sink = good()
      const held: JsonObject[] = []
      let writes = 0
      return {
        ...sink,
        kind: 'holds_later_writes',
        async write(events) {
          const fields = events.events.map((e) => ({ ...e.fields }) as JsonObject)
          if (writes++ === 0) sink.stored.push(...fields)
          else held.push(...fields)
          return undefined
        },
        async stop() {
          sink.stored.push(...held.splice(0))
        },
      }
    }
    const found = await checkSink(make, { read, timeoutMs: 500 })
    expect(found.map((f) => f.code)).toEqual(['sink.written-before-resolved'])
    expect(found[0]!.message).toContain('were not stored when write resolved, e.g. {"n":2,')
  })

  it('sink.written-before-resolved and sink.flushes-on-stop: a sink that holds its writes until stop(), over a store every rule shares', async () => {
    // One table (a file, a queue) for all the rules, as `read: () => readBack(url)` gives: the
    // earlier rules' stops had stored each record already, so a write that stored nothing when it
    // resolved, and a stop that stored nothing, still found "their" records there.
    const shared: JsonObject[] = []
    const holding = (): StoreSink => {
      const held: JsonObject[] = []
      return {
        kind: 'holds_until_stop',
        stored: shared,
        async write(events) {
          held.push(...events.events.map((e) => ({ ...e.fields }) as JsonObject))
          return undefined
        },
        async stop() {
          shared.push(...held.splice(0))
        },
      }
    }
    const found = await checkSink(holding, { read, timeoutMs: 500 })
    expect(found.map((f) => f.code)).toEqual(['sink.written-before-resolved'])
    expect(found[0]!.message).toContain('2 record(s) reported delivered were not stored when write resolved')

    // And one that stores nothing past its first write ever: its stop loses the rest.
    const common: JsonObject[] = []
    let writes = 0
    const forgetting = (): StoreSink => ({
      kind: 'first_write_only',
      stored: common,
      async write(events) {
        if (writes++ === 0) common.push(...events.events.map((e) => ({ ...e.fields }) as JsonObject))
        return undefined
      },
    })
    const lost = await checkSink(forgetting, { read, timeoutMs: 500 })
    expect(lost.map((f) => f.code)).toEqual(['sink.written-before-resolved', 'sink.flushes-on-stop'])
  })

  it('sink.one-status-per-event: a sink whose result is one entry short only for batches of four and five', async () => {
    // Pages of three: the remainder's statuses are added only when there is no full page (`n < 3`
    // meant `n % 3 > 0`). Right for 1, 2, 3 and 6 events, the sizes the suite used to write alone.
    const PAGE = 3
    const make = (): StoreSink => {
      const sink = good()
      return {
        ...sink,
        kind: 'paged',
        async write(events) {
          await sink.write(events)
          const n = events.length
          const statuses: 'delivered'[] = []
          for (let i = 0; i + PAGE <= n; i += PAGE) statuses.push('delivered', 'delivered', 'delivered')
          if (n < PAGE) for (let i = 0; i < n; i++) statuses.push('delivered')
          return statuses
        },
      }
    }
    const found = await checkSink(make, { timeoutMs: 300 })
    expect(found.map((f) => f.code)).toEqual(['sink.one-status-per-event'])
    expect(found[0]!.message).toContain('write of 4 event(s) returned [')
  })
})

describe('the time a rule is given', () => {
  it("gives the runner's test the time of every call a rule waits for, each up to timeoutMs", async () => {
    // Each write of a correct sink may take up to timeoutMs (a remote bulk API); a rule that
    // makes more calls than its runner timeout holds was ended by the runner, named by no rule.
    let calls = 0
    const counted = (): StoreSink => {
      const inner = good()
      return {
        ...inner,
        async start() {
          calls++
        },
        write(events) {
          calls++
          return inner.write(events)
        },
        async stop() {
          calls++
        },
      }
    }
    const records = Array.from({ length: 30 }, (_, n) => ({ n }))
    const timeoutMs = 50
    const tests: { name: string; body: () => Promise<void>; timeout: number | undefined }[] = []
    sinkConformance('counted', counted, {
      records,
      timeoutMs,
      read: (sink) => {
        calls++
        return sink.stored
      },
      runner: {
        describe: (_, body) => body(),
        it: (name, body, timeout) => tests.push({ name, body, timeout }),
      },
    })
    for (const test of tests) {
      calls = 0
      await test.body()
      expect(calls * timeoutMs, test.name).toBeLessThanOrEqual(test.timeout ?? 0)
    }
  })
})
