// The arbitraries draw what a pipeline meets (empty batches, deep and odd JSON, any Unicode, a
// sink that rejects everything), only values an event may carry (RFC 0010), and each draw occurs:
// counted over a fixed seed's samples.
import { isDeepStrictEqual } from 'node:util'
import type { JsonObject, JsonValue } from '@ackline/core'
import { Arbitraries, DeliveryLedger, faultySink } from '@ackline/testkit'
import { type Source, TopologyBuilder } from '@ackline/topology'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'

const SAMPLES = { numRuns: 500, seed: 42 }

const depth = (value: JsonValue): number =>
  value !== null && typeof value === 'object'
    ? 1 + Math.max(0, ...(Array.isArray(value) ? value : Object.values(value)).map(depth))
    : 0

/** Every string in `value`, keys included. */
const strings = (value: JsonValue): string[] =>
  typeof value === 'string'
    ? [value]
    : Array.isArray(value)
      ? value.flatMap(strings)
      : value !== null && typeof value === 'object'
        ? Object.entries(value).flatMap(([k, v]) => [k, ...strings(v)])
        : []

/** Whether `text` holds an unpaired UTF-16 surrogate. */
const hasLoneSurrogate = (text: string): boolean =>
  /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(text)

/** Whether `value` is exactly what JSON carries: what it writes reads back deeply equal. */
const carried = (value: JsonValue): boolean => isDeepStrictEqual(JSON.parse(JSON.stringify(value)), value)

describe('Arbitraries', () => {
  it('draws empty batches, deep objects and arrays, astral characters, lone surrogates and odd numbers', () => {
    const drawn = fc.sample(Arbitraries.batches(), SAMPLES)
    const batches = drawn.flat()
    const records = batches.flat()
    const payloads = records.map((r) => r.payload as JsonValue)
    const texts = records.flatMap((r) => strings(r as JsonValue))
    const seen = {
      emptyBatch: batches.filter((b) => b.length === 0).length,
      onlyEmpty: drawn.filter((list) => list.every((b) => b.length === 0)).length,
      deep: payloads.filter((p) => depth(p) >= 3).length,
      arrayInObject: payloads.filter(
        (p) =>
          p !== null && typeof p === 'object' && !Array.isArray(p) && Object.values(p).some(Array.isArray),
      ).length,
      astral: texts.filter((t) => /[\u{10000}-\u{10FFFF}]/u.test(t)).length,
      loneSurrogate: texts.filter(hasLoneSurrogate).length,
      fraction: payloads.filter((p) => typeof p === 'number' && !Number.isInteger(p)).length,
      huge: payloads.filter((p) => typeof p === 'number' && Math.abs(p) > 2 ** 53).length,
      nulls: payloads.filter((p) => p === null).length,
    }
    for (const [draw, count] of Object.entries(seen)) expect(count, draw).toBeGreaterThan(0)
    // Only what an event may carry, and the numbering still holds.
    for (const list of drawn) {
      expect(list.length).toBeGreaterThan(0)
      expect(list.flat().map((r) => r.n)).toEqual(list.flat().map((_, i) => i))
      for (const record of list.flat()) {
        expect(carried(record)).toBe(true)
        expect(Object.getPrototypeOf(record)).toBe(Object.prototype)
      }
    }
    expect(payloads.some((p) => Object.is(p, -0))).toBe(false)
  })

  it('draws a schedule that rejects every record', () => {
    const schedules = fc.sample(Arbitraries.failureSchedule(), SAMPLES)
    expect(schedules.filter((s) => s.rejectWhen?.modulo === 1).length).toBeGreaterThan(0)
    expect(schedules.filter((s) => s.rejectWhen?.modulo === 2).length).toBeGreaterThan(0)
    expect(schedules.filter((s) => s.rejectWhen === undefined).length).toBeGreaterThan(0)
  })

  it('narrows each wider draw by its option', () => {
    const batches = fc
      .sample(Arbitraries.batches({ minSize: 1, payload: false, loneSurrogates: false }), SAMPLES)
      .flat()
    expect(batches.every((b) => b.length > 0)).toBe(true)
    expect(batches.flat().every((r) => !('payload' in r))).toBe(true)
    expect(batches.flat().every((r) => strings(r as JsonValue).every((t) => !hasLoneSurrogate(t)))).toBe(true)
    const flat = fc.sample(Arbitraries.jsonValue({ maxDepth: 0 }), SAMPLES)
    expect(flat.every((v) => depth(v) === 0)).toBe(true)
    const shallow = fc.sample(Arbitraries.jsonValue({ maxDepth: 1 }), SAMPLES)
    expect(shallow.every((v) => depth(v) <= 1)).toBe(true)
    const schedules = fc.sample(Arbitraries.failureSchedule({ rejectAll: false }), SAMPLES)
    expect(schedules.every((s) => s.rejectWhen === undefined || s.rejectWhen.modulo >= 2)).toBe(true)
  })

  it('shrinks a batch, its records and a schedule towards the plain case', () => {
    // A property that fails on any record shrinks to one batch of one plain record.
    const failure = fc.check(
      fc.property(Arbitraries.batches(), (batches) => batches.flat().length === 0),
      { seed: 7 },
    )
    expect(failure.counterexample?.[0]).toEqual([[{ n: 0, level: 'info', message: '', payload: false }]])
    const rejects = fc.check(
      fc.property(Arbitraries.failureSchedule(), (s) => s.rejectWhen === undefined),
      { seed: 7 },
    )
    expect(rejects.counterexample?.[0]).toEqual({
      errorOnCalls: [],
      rejectWhen: { field: 'n', modulo: 2 },
      hangMs: 0,
    })
  })
})

/** A source that sends each batch in turn (empty ones too). */
const listSource = (batches: readonly (readonly JsonObject[])[]): Source => ({
  kind: 'list',
  canAcknowledge: true,
  async run(context) {
    for (const batch of batches) await context.send(batch)
  },
})

describe('the wider draws through a topology', () => {
  it('every batch is told what its records got, and a sink stores exactly what was sent', async () => {
    await fc.assert(
      fc.asyncProperty(
        Arbitraries.batches(),
        Arbitraries.failureSchedule({ maxHangMs: 1 }),
        async (batches, faults) => {
          const stored: JsonObject[] = []
          const ledger = new DeliveryLedger({ acknowledgements: true })
          const store = {
            kind: 'store',
            async write(events: Parameters<ReturnType<typeof faultySink>['write']>[0]) {
              for (const e of events) stored.push(structuredClone(e.fields) as JsonObject)
              return undefined
            },
          }
          const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
            .source('in', ledger.source('in', listSource(batches)))
            .sink('db', ['in'], ledger.sink('db', faultySink(store, faults)), {
              retry: { attempts: faults.errorOnCalls.length + 1, initialBackoffMs: 0 },
            })
            .build()
          await topology.start()
          await topology.done
          await ledger.expectMatchesModel()
          await ledger.expectNoAckWithoutDelivery()
          const reject = faults.rejectWhen
          const owed = batches
            .flat()
            .filter((r) => reject === undefined || (r.n as number) % reject.modulo !== 0)
          // A scheduled failure throws before the inner write: each record is stored once.
          expect(stored.filter((r) => reject === undefined || (r.n as number) % reject.modulo !== 0)).toEqual(
            owed,
          )
        },
      ),
      { numRuns: 60, seed: 11 },
    )
  })
})

describe('Arbitraries.statusAssignment', () => {
  it('refuses a length that gives no status for any event (0, negative, fractional, NaN), naming it', () => {
    for (const length of [0, -1, 1.5, Number.NaN])
      expect(() => Arbitraries.statusAssignment(length)).toThrow(
        /'length' must be a whole number of 1 or more/,
      )
    const drawn = fc.sample(Arbitraries.statusAssignment(3), { numRuns: 20, seed: 1 })
    expect(drawn.every((a) => a.length === 3)).toBe(true)
  })
})

describe('Arbitraries options', () => {
  it('refuses a bound no draw can follow, naming the arbitrary and the option, instead of a fast-check error or a bad draw', () => {
    // They reached fast-check ("fc.integer maximum value should be equal or greater than the
    // minimum one", naming no option), or were drawn as they were: maxHangMs -5 or NaN gave
    // schedules faultySink refuses at the first run, maxDepth NaN values of any depth.
    const bad = [
      [() => Arbitraries.batches({ minSize: 3, maxSize: 1 }), "Arbitraries.batches: 'maxSize'"],
      [() => Arbitraries.batches({ maxBatches: 0 }), "Arbitraries.batches: 'maxBatches'"],
      [() => Arbitraries.batches({ minSize: -1 }), "Arbitraries.batches: 'minSize'"],
      [() => Arbitraries.failureSchedule({ maxCalls: 0 }), "Arbitraries.failureSchedule: 'maxCalls'"],
      [() => Arbitraries.failureSchedule({ maxHangMs: -5 }), "Arbitraries.failureSchedule: 'maxHangMs'"],
      [
        () => Arbitraries.failureSchedule({ maxHangMs: Number.NaN }),
        "Arbitraries.failureSchedule: 'maxHangMs'",
      ],
      [() => Arbitraries.jsonValue({ maxDepth: -1 }), "Arbitraries.jsonValue: 'maxDepth'"],
      [() => Arbitraries.jsonValue({ maxDepth: Number.NaN }), "Arbitraries.jsonValue: 'maxDepth'"],
      [() => Arbitraries.record({ maxDepth: 1.5 }), "Arbitraries.record: 'maxDepth'"],
    ] as const
    for (const [draw, message] of bad) expect(draw).toThrow(message)
    for (const [draw] of bad) expect(draw).toThrow(RangeError)
  })

  it('takes the bounds at their edges, and never hangs longer than maxHangMs', () => {
    // maxHangMs: 0 still drew hangs of 1 ms.
    fc.assert(
      fc.property(Arbitraries.batches({ minSize: 0, maxSize: 0, maxBatches: 1 }), (b) => b.length === 1),
    )
    fc.assert(fc.property(Arbitraries.jsonValue({ maxDepth: 0 }), (v) => depth(v) === 0))
    fc.assert(fc.property(Arbitraries.failureSchedule({ maxCalls: 1, maxHangMs: 0 }), (s) => s.hangMs === 0))
  })

  it('refuses a minSize above the default maxSize without maxSize, naming both, instead of a fast-check error', () => {
    // The default maxSize (4) was not checked against minSize: batches({ minSize: 5 }) reached
    // fast-check ("fc.integer maximum value should be equal or greater than the minimum one").
    expect(() => Arbitraries.batches({ minSize: 5 })).toThrow(RangeError)
    expect(() => Arbitraries.batches({ minSize: 5 })).toThrow(/Arbitraries\.batches: 'minSize' 5 .*'maxSize'/)
    fc.assert(
      fc.property(Arbitraries.batches({ minSize: 5, maxSize: 5 }), (b) => b.every((x) => x.length === 5)),
    )
  })
})
