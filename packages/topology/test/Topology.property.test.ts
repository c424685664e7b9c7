// Model-based property: random DAG topologies with random sink outcomes; every batch a source sends
// resolves exactly once, with the status a model computes from the paths its events took.
import type { BatchStatus, DeliveryStatus, LogEvent } from '@ackline/core'
import { type BatchFailure, type LifecycleEvent, TopologyBuilder, type Transform } from '@ackline/topology'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { passThrough, routeBy, testSink, testSource } from './support/TestComponents.js'

type Kind = 'pass' | 'filter' | 'route' | 'merge'
interface InputSpec {
  readonly from: number
  readonly port: number
}
interface TransformSpec {
  readonly kind: Kind
  readonly inputs: readonly InputSpec[]
  readonly rest: number
  readonly rejectDrops: boolean
  readonly maxEvents: number
}
interface SinkSpec {
  readonly inputs: readonly InputSpec[]
  readonly acks: boolean | undefined
  readonly outcomes: readonly DeliveryStatus[]
  readonly maxEvents: number
}
interface Spec {
  readonly global: boolean
  readonly sources: readonly (readonly number[])[]
  readonly transforms: readonly TransformSpec[]
  readonly sinks: readonly SinkSpec[]
}

const status = fc.constantFrom<DeliveryStatus>('delivered', 'delivered', 'errored', 'rejected')
const inputs = fc.array(fc.record({ from: fc.nat(20), port: fc.nat(3) }), { minLength: 1, maxLength: 2 })
const spec: fc.Arbitrary<Spec> = fc.record({
  global: fc.boolean(),
  sources: fc.array(fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 3 }), {
    minLength: 1,
    maxLength: 2,
  }),
  transforms: fc.array(
    fc.record({
      kind: fc.constantFrom<Kind>('pass', 'filter', 'route', 'merge'),
      inputs,
      rest: fc.nat(2),
      rejectDrops: fc.boolean(),
      maxEvents: fc.integer({ min: 1, max: 8 }),
    }),
    { maxLength: 4 },
  ),
  sinks: fc.array(
    fc.record({
      inputs,
      acks: fc.constantFrom(undefined, true, false),
      outcomes: fc.array(status, { minLength: 5, maxLength: 5 }),
      maxEvents: fc.integer({ min: 1, max: 8 }),
    }),
    { minLength: 1, maxLength: 2 },
  ),
})

const PORTS = ['', 'a', 'b', '_unmatched'] as const
const rank = { delivered: 0, errored: 1, rejected: 2 } as const
const worse = (a: BatchStatus, b: BatchStatus): BatchStatus => (rank[a] >= rank[b] ? a : b)

/** The producers a component at position `index` (among sources then transforms) may read, resolved to names. */
function resolveInputs(
  list: readonly InputSpec[],
  producers: readonly { id: string; kind: Kind | 'source' }[],
): string[] {
  const names = new Set<string>()
  for (const { from, port } of list) {
    const producer = producers[from % producers.length]!
    names.add(
      producer.kind === 'route' ? `${producer.id}${port === 0 ? '' : `.${PORTS[port]}`}` : producer.id,
    )
  }
  return [...names]
}

const mergePairs = (): Transform => ({
  kind: 'merge_pairs',
  process(events, context) {
    const list = events.events
    for (let i = 0; i < list.length; i += 2) {
      const next = list[i + 1]
      if (next !== undefined) list[i]!.merge(next)
      context.emit(list[i]!)
    }
  },
})

const dropWhen = (rest: number, rejectDrops: boolean): Transform => ({
  kind: 'filter',
  ...(rejectDrops ? { dropStatus: 'rejected' as const } : {}),
  process(events, context) {
    for (const event of events) {
      if ((event.get('n') as number) % 3 === rest) context.drop(event)
      else context.emit(event)
    }
  },
})

/** A token is one handle in the model: the event whose fields it carries and the events whose finalizers it holds. */
interface Token {
  readonly n: number
  readonly origins: ReadonlySet<number>
}

function model(s: Spec): { expected: BatchStatus[][]; sourceAcks: boolean[] } {
  // Names and wiring, exactly as the builder gets them.
  const producers: { id: string; kind: Kind | 'source' }[] = s.sources.map((_, i) => ({
    id: `src${i}`,
    kind: 'source',
  }))
  const transformInputs = s.transforms.map((t, i) => {
    const ins = resolveInputs(t.inputs, producers)
    producers.push({ id: `t${i}`, kind: t.kind })
    return ins
  })
  const sinkInputs = s.sinks.map((k) => resolveInputs(k.inputs, producers))
  const sinkAcks = s.sinks.map((k) => k.acks ?? s.global)

  // Which sources an acknowledging sink reaches, walking back through every input of every transform.
  const upstream = (name: string): string[] => {
    const id = name.split('.')[0]!
    if (id.startsWith('src')) return [id]
    return transformInputs[Number(id.slice(1))]!.flatMap(upstream)
  }
  const sourceAcks = s.sources.map(() => false)
  s.sinks.forEach((_, k) => {
    if (!sinkAcks[k]) return
    for (const name of sinkInputs[k]!.flatMap(upstream)) sourceAcks[Number(name.slice(3))] = true
  })

  // Events: numbered across all sources in send order; each array travels whole.
  const statuses = new Map<number, BatchStatus>()
  const settle = (token: Token, st: DeliveryStatus): void => {
    for (const origin of token.origins) statuses.set(origin, worse(statuses.get(origin) ?? 'delivered', st))
  }
  const outputs = new Map<string, Token[][]>()
  const emit = (name: string, array: Token[]): void => {
    if (array.length === 0) return
    outputs.set(name, [...(outputs.get(name) ?? []), array])
  }
  let counter = 0
  const batches = s.sources.map((sizes, i) =>
    sizes.map((size) => {
      const array = Array.from({ length: size }, () => counter++)
      emit(
        `src${i}`,
        array.map((n) => ({ n, origins: new Set([n]) })),
      )
      return array
    }),
  )
  s.transforms.forEach((t, i) => {
    const id = `t${i}`
    for (const array of transformInputs[i]!.flatMap((name) => outputs.get(name) ?? [])) {
      switch (t.kind) {
        case 'pass':
          emit(id, array)
          break
        case 'filter':
          emit(
            id,
            array.filter((token) => {
              const dropped = token.n % 3 === t.rest
              if (dropped && t.rejectDrops) settle(token, 'rejected')
              return !dropped
            }),
          )
          break
        case 'route': {
          const a = array.filter((x) => x.n % 2 === 0)
          const b = array.filter((x) => x.n % 3 === 0)
          emit(`${id}.a`, a)
          emit(`${id}.b`, b)
          emit(
            `${id}._unmatched`,
            array.filter((x) => x.n % 2 !== 0 && x.n % 3 !== 0),
          )
          break
        }
        case 'merge': {
          const merged: Token[] = []
          for (let j = 0; j < array.length; j += 2) {
            const next = array[j + 1]
            const first = array[j]!
            merged.push(
              next === undefined
                ? first
                : { n: first.n, origins: new Set([...first.origins, ...next.origins]) },
            )
          }
          emit(id, merged)
          break
        }
      }
    }
  })
  s.sinks.forEach((k, i) => {
    if (!sinkAcks[i]) return
    for (const array of sinkInputs[i]!.flatMap((name) => outputs.get(name) ?? [])) {
      for (const token of array) settle(token, k.outcomes[token.n % k.outcomes.length]!)
    }
  })
  const expected = batches.map((list, i) =>
    list.map((events) =>
      sourceAcks[i]
        ? events.reduce<BatchStatus>((acc, n) => worse(acc, statuses.get(n) ?? 'delivered'), 'delivered')
        : 'delivered',
    ),
  )
  return { expected, sourceAcks }
}

async function runReal(s: Spec): Promise<{
  statuses: BatchStatus[][]
  facts: LifecycleEvent[]
  batchIds: (string | undefined)[][]
  failures: (BatchFailure | undefined)[][]
}> {
  const builder = new TopologyBuilder<string>({ acknowledgements: s.global, onWarning: () => {} })
  const producers: { id: string; kind: Kind | 'source' }[] = []
  let counter = 0
  const sources = s.sources.map((sizes, i) => {
    const source = testSource(sizes.map((size) => Array.from({ length: size }, () => ({ n: counter++ }))))
    builder.source(`src${i}`, source)
    producers.push({ id: `src${i}`, kind: 'source' })
    return source
  })
  s.transforms.forEach((t, i) => {
    const ins = resolveInputs(t.inputs, producers)
    const transform: Transform =
      t.kind === 'pass'
        ? passThrough()
        : t.kind === 'filter'
          ? dropWhen(t.rest, t.rejectDrops)
          : t.kind === 'route'
            ? routeBy({
                a: (e: LogEvent) => (e.get('n') as number) % 2 === 0,
                b: (e: LogEvent) => (e.get('n') as number) % 3 === 0,
              })
            : mergePairs()
    // Small channels only change timing (more blocked producers), never outcomes.
    builder.transform(`t${i}`, ins, transform, { buffer: { maxEvents: t.maxEvents } })
    producers.push({ id: `t${i}`, kind: t.kind })
  })
  s.sinks.forEach((k, i) => {
    const sink = testSink({ outcome: (e) => k.outcomes[(e.get('n') as number) % k.outcomes.length]! })
    builder.sink(`k${i}`, resolveInputs(k.inputs, producers), sink, {
      buffer: { maxEvents: k.maxEvents },
      ...(k.acks === undefined ? {} : { acknowledgements: k.acks }),
    })
  })
  const topology = builder.build()
  const facts: LifecycleEvent[] = []
  topology.lifecycle.subscribe((f) => facts.push(f))
  await topology.start()
  await topology.done
  const statuses = await Promise.all(sources.map((source) => source.statuses()))
  return {
    statuses,
    facts,
    batchIds: sources.map((source) => source.receipts.map((r) => r.batchId)),
    failures: sources.map((source) => source.receipts.map((r) => r.failure)),
  }
}

describe('random topologies', () => {
  it('resolve every batch exactly once, with the status the model computes', async () => {
    await fc.assert(
      fc.asyncProperty(spec, async (s) => {
        const { expected, sourceAcks } = model(s)
        const { statuses, facts, batchIds, failures } = await runReal(s)
        expect(statuses).toEqual(expected)
        const resolved = facts.filter((f) => f.type === 'batch_resolved')
        const acked = batchIds.flatMap((ids, i) => (sourceAcks[i] ? ids : []))
        expect(resolved.map((f) => f.batchId).sort()).toEqual([...acked].sort())
        expect(new Set(resolved.map((f) => f.batchId)).size).toBe(resolved.length)
        for (const [i, ids] of batchIds.entries()) {
          for (const id of ids) expect(id === undefined).toBe(!sourceAcks[i])
        }
        expect(facts.filter((f) => f.type === 'component_error')).toEqual([])
        // A batch says why exactly when it was not delivered, and always names who decided.
        for (const [i, list] of failures.entries()) {
          for (const [j, failure] of list.entries()) {
            if (statuses[i]![j] === 'delivered') expect(failure).toBeUndefined()
            else expect(failure?.componentId).toMatch(/^(k|t)\d+$/)
          }
        }
      }),
      { numRuns: 300, verbose: true },
    )
  })
})
