/**
 * Random topologies: a shrinkable description (sources, transforms, sinks, wiring, outcomes), a
 * predictive model of what every batch resolves to, a runner that builds and runs the real
 * topology under a {@link DeliveryLedger}, a check of the delivery properties, and a readable
 * printout for counterexamples. The caller's own transforms and sinks mix in by name.
 *
 * Invariant: the description is plain data produced by fast-check combinators, so a failing
 * property shrinks to a small topology; the model reads only the description and the lattice
 * (through {@link DeliveryModel}), never the runtime.
 *
 * @module
 */

import { clearTimeout, setTimeout } from 'node:timers'
import type { BatchStatus, DeliveryStatus, JsonObject, LogEvent } from '@ackline/core'
import {
  type BatchReceipt,
  type LifecycleEvent,
  MAX_TIMER_MS,
  type Sink,
  type Source,
  type Topology,
  TopologyBuilder,
  type Transform,
} from '@ackline/topology'
import fc from 'fast-check'
import { DeliveryLedger } from './DeliveryLedger.js'
import { DeliveryModel } from './DeliveryModel.js'
import { describeSchedule, type FailureSchedule, faultySink, NO_FAULTS } from './FailureSchedule.js'
import { describeThrown } from './internal/describeThrown.js'

/** The transforms a random topology is made of; `user:<name>` is one of the caller's own. */
export type RandomTransformKind = 'pass' | 'filter' | 'route' | 'merge' | `user:${string}`

/** Where a component reads from: a producer (by position among sources, then transforms) and a port. */
export interface RandomInput {
  /** The producer's position: sources first, then transforms, in the spec's order. */
  readonly from: number
  /** The producer's output port (0 for a component with one output). */
  readonly port: number
}

/** One transform of a random topology. */
export interface RandomTransform {
  /** Which transform (a built-in kind, or one of the caller's own). */
  readonly kind: RandomTransformKind
  /** The producers it reads from: sources, or transforms before it. */
  readonly inputs: readonly RandomInput[]
  /** `filter`: drops events whose `n % 3 === rest`. */
  readonly rest: number
  /** `filter`: whether its drops count as `rejected`. */
  readonly rejectDrops: boolean
  /** The size of its input buffer (`buffer.maxEvents`), 1 to 8. */
  readonly maxEvents: number
}

/** The sinks a random topology is made of: `outcome` reports by `outcomes`; `user:<name>` is one of the caller's own. */
export type RandomSinkKind = 'outcome' | `user:${string}`

/** One sink of a random topology. */
export interface RandomSink {
  /** Which sink (default `'outcome'`, for specs written before user sinks existed). */
  readonly kind?: RandomSinkKind
  /** The producers it reads from. */
  readonly inputs: readonly RandomInput[]
  /** Its `acknowledgements` option (`undefined`: the topology's). */
  readonly acks: boolean | undefined
  /** What an `outcome` sink reports for event `n`: `outcomes[n % outcomes.length]` (a user sink ignores it). */
  readonly outcomes: readonly DeliveryStatus[]
  /** The size of its input buffer (`buffer.maxEvents`), 1 to 8. */
  readonly maxEvents: number
  /** Its `concurrency` option: writes pending at once (absent: 1). Outcomes do not depend on it. */
  readonly concurrency?: number
  /** Faults injected around it, user sinks included (retried writes do not change the outcome: see the model). */
  readonly faults: FailureSchedule
}

/** A random topology, as plain data. */
export interface RandomTopologySpec {
  /** The topology's `acknowledgements` option. */
  readonly global: boolean
  /** Per source, its batches' sizes. */
  readonly sources: readonly (readonly number[])[]
  /** Its transforms, in the order their inputs may refer to them. */
  readonly transforms: readonly RandomTransform[]
  /** Its sinks, one at least. */
  readonly sinks: readonly RandomSink[]
}

/** Options of {@link RandomTopology.arbitrary}. */
export interface RandomTopologyOptions {
  /** Your own transforms, by name, mixed in with the built-in kinds (the model then cannot predict; use the ledger). */
  readonly transforms?: Readonly<Record<string, () => Transform>>
  /**
   * Your own sinks, by name: each sink of a random topology is an `outcome` sink or one of these
   * (a fresh one per sink per run, from the factory). The model then cannot predict statuses; the
   * ledger checks what your sinks reported against the lattice ({@link RandomTopology.check}).
   */
  readonly sinks?: Readonly<Record<string, () => Sink>>
  /** Whether sinks get failure schedules (default false). Scheduled errors are retried until they pass. */
  readonly faults?: boolean
  /** The most transforms a topology gets (default 4): a whole number of 0 or more, else a `RangeError`. */
  readonly maxTransforms?: number
  /** The most sinks a topology gets (default 2): a whole number of 1 or more, else a `RangeError`. */
  readonly maxSinks?: number
  /**
   * The bound on one run ({@link RandomTopology.run}, {@link RandomTopology.check}), from build to
   * done, in milliseconds of real time (default 4000, under the 5 s a test gets by default in
   * vitest and jest, so this error comes before the runner's timeout; keep it below your runner's;
   * at most 2^31 - 1, what a timer holds). A run still going then (a sink whose write never
   * settles, a transform that never returns) is stopped at once, and the run throws an `Error`
   * that names every component's counts and prints the topology. Runner fake timers do not move it.
   * At least 1: 0 is refused (`RangeError`), as it bounds nothing (a run would race a timer that
   * fires at once, and pass or fail by chance).
   */
  readonly timeoutMs?: number
}

/** What {@link RandomTopology.run} observed. */
export interface RandomRun {
  /** Per source, each batch's status, in send order. */
  readonly statuses: BatchStatus[][]
  /** Per source, each batch's receipt, in send order. */
  readonly receipts: BatchReceipt[][]
  /** Every lifecycle fact of the run, in order. */
  readonly facts: LifecycleEvent[]
  /**
   * What the ledger recorded of every record and copy (check it with {@link RandomTopology.check}).
   * Calling its `expectNoLoss` or `expectNoAckWithoutDelivery` yourself, pass `{ allowEmpty: true }`:
   * a drawn run may have acknowledgements off for every source, and they refuse such a run.
   */
  readonly ledger: DeliveryLedger
}

/**
 * Starts `topology` and waits for it to be done, for at most `timeoutMs` of real time (timers from
 * `node:timers`, which a runner's fake timers do not replace). Past it, stops the topology at once
 * and throws an `Error` with every component's counts, taken before the stop, and the topology.
 */
async function runWithin(topology: Topology, timeoutMs: number, spec: RandomTopologySpec): Promise<void> {
  const running = (async () => {
    await topology.start()
    await topology.done
  })()
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), timeoutMs)
  })
  try {
    if ((await Promise.race([running, late])) !== 'late') return
  } finally {
    clearTimeout(timer)
  }
  // Taken before the stop, which settles what was in flight.
  const counts = Object.entries(topology.metrics()).map(
    ([id, m]) =>
      `${id} (${m.role} ${m.kind}): received ${m.receivedEvents}, sent ${m.sentEvents}, discarded ${m.discardedEvents}, errored ${m.erroredEvents}, rejected ${m.rejectedEvents}, batches awaiting acknowledgement ${m.acksInFlight}`,
  )
  running.catch(() => {}) // a start the stop gives up rejects; the timeout is the error here
  // A second stop forces at once, with no timer: the drain's deadline would be a fake one.
  const stopped = topology.stop({ drainTimeoutMs: 0 })
  await topology.stop()
  await stopped
  throw new Error(
    `RandomTopology.run: the run did not finish within ${timeoutMs} ms (options.timeoutMs), and was stopped at once; a component's write or call never settled?\n${RandomTopology.describe(spec)}\ncounts before the stop:\n  ${counts.join('\n  ')}`,
  )
}

/** `RandomTopologyOptions.timeoutMs` by default: under a test runner's default timeout (5 s). */
const DEFAULT_RUN_TIMEOUT_MS = 4000

const PORTS = ['', 'a', 'b', '_unmatched'] as const

/** A token of the model: the event whose fields it carries and the events whose finalizers it holds. */
interface Token {
  readonly n: number
  readonly origins: ReadonlySet<number>
}

interface Producer {
  readonly id: string
  readonly kind: RandomTransformKind | 'source'
}

function resolveInputs(list: readonly RandomInput[], producers: readonly Producer[]): string[] {
  const names = new Set<string>()
  for (const { from, port } of list) {
    const producer = producers[from % producers.length]!
    names.add(
      producer.kind === 'route' ? `${producer.id}${port === 0 ? '' : `.${PORTS[port]}`}` : producer.id,
    )
  }
  return [...names]
}

/** The wiring of `spec`: each transform's and sink's input names, as the builder gets them. */
function wiring(spec: RandomTopologySpec) {
  const producers: Producer[] = spec.sources.map((_, i) => ({ id: `src${i}`, kind: 'source' }))
  const transformInputs = spec.transforms.map((t, i) => {
    const inputs = resolveInputs(t.inputs, producers)
    producers.push({ id: `t${i}`, kind: t.kind })
    return inputs
  })
  const sinkInputs = spec.sinks.map((k) => resolveInputs(k.inputs, producers))
  return { transformInputs, sinkInputs }
}

/**
 * Per transform, whether what it emits reaches a transform that acts on array boundaries (a
 * `merge_pairs`, or a user transform, which might), directly or through others. Such a transform
 * must not coalesce its input: it would pass on merged arrays, and the model pairs events within
 * the arrays as the sources sent them.
 */
function feedsBoundaries(spec: RandomTopologySpec, transformInputs: readonly string[][]): boolean[] {
  const feeds = spec.transforms.map(() => false)
  // A transform reads only from sources and earlier transforms: walk from the last one back.
  for (let j = spec.transforms.length - 1; j >= 0; j--) {
    const kind = spec.transforms[j]!.kind
    if (kind !== 'merge' && !kind.startsWith('user:') && !feeds[j]) continue
    for (const name of transformInputs[j]!) {
      const id = name.split('.')[0]!
      if (id.startsWith('t')) feeds[Number(id.slice(1))] = true
    }
  }
  return feeds
}

/**
 * How the records of `spec` go through its built-in transforms, from the spec alone (no runtime):
 * each batch's record numbers, per sink the copies it writes (a token each, in no particular
 * order), and per record the reports of the drops that rejected it. Not for a user transform,
 * whose routing is the user's.
 */
function flow(spec: RandomTopologySpec) {
  const { transformInputs, sinkInputs } = wiring(spec)
  const drops = new Map<number, DeliveryStatus[]>()
  const rejected = (token: Token) => {
    for (const origin of token.origins) drops.set(origin, [...(drops.get(origin) ?? []), 'rejected'])
  }
  const outputs = new Map<string, Token[][]>()
  const emit = (name: string, array: Token[]) => {
    if (array.length > 0) outputs.set(name, [...(outputs.get(name) ?? []), array])
  }
  let counter = 0
  const batches = spec.sources.map((sizes, i) =>
    sizes.map((size) => {
      const array = Array.from({ length: size }, () => counter++)
      emit(
        `src${i}`,
        array.map((n) => ({ n, origins: new Set([n]) })),
      )
      return array
    }),
  )
  spec.transforms.forEach((t, i) => {
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
              if (dropped && t.rejectDrops) rejected(token)
              return !dropped
            }),
          )
          break
        case 'route':
          emit(
            `${id}.a`,
            array.filter((x) => x.n % 2 === 0),
          )
          emit(
            `${id}.b`,
            array.filter((x) => x.n % 3 === 0),
          )
          emit(
            `${id}._unmatched`,
            array.filter((x) => x.n % 2 !== 0 && x.n % 3 !== 0),
          )
          break
        case 'merge': {
          const merged: Token[] = []
          for (let j = 0; j < array.length; j += 2) {
            const first = array[j]!
            const next = array[j + 1]
            merged.push(
              next === undefined
                ? first
                : { n: first.n, origins: new Set([...first.origins, ...next.origins]) },
            )
          }
          emit(id, merged)
          break
        }
        default:
          throw new TypeError(`unreachable: user transform '${t.kind}'`)
      }
    }
  })
  const arrivals = sinkInputs.map((names) => names.flatMap((name) => outputs.get(name) ?? []).flat())
  return { transformInputs, sinkInputs, batches, arrivals, drops }
}

const n = (event: LogEvent): number => event.get('n') as number

/** A built-in transform; `coalesce` for one whose output no boundary-sensitive transform reads. */
const builtIn = (t: RandomTransform, coalesce: boolean): Transform => {
  switch (t.kind) {
    case 'pass':
      return {
        kind: 'pass',
        coalesce,
        synchronous: true,
        process(events, context) {
          context.emitAll(events)
        },
      }
    case 'filter':
      return {
        kind: 'filter',
        coalesce,
        synchronous: true,
        ...(t.rejectDrops ? { dropStatus: 'rejected' as const } : {}),
        process(events, context) {
          for (const e of events) n(e) % 3 === t.rest ? context.drop(e) : context.emit(e)
        },
      }
    case 'route':
      return {
        kind: 'route',
        coalesce,
        synchronous: true,
        outputs: ['a', 'b', '_unmatched'],
        process(events, context) {
          for (const e of events) {
            if (n(e) % 2 === 0) context.emit(e, 'a')
            if (n(e) % 3 === 0) context.emit(e, 'b')
            if (n(e) % 2 !== 0 && n(e) % 3 !== 0) context.emit(e, '_unmatched')
          }
        },
      }
    case 'merge':
      return {
        kind: 'merge_pairs',
        synchronous: true,
        // Pairs events within one array: it must see each array as its producer emitted it.
        process(events, context) {
          const list = events.events
          for (let i = 0; i < list.length; i += 2) {
            const next = list[i + 1]
            if (next !== undefined) list[i]!.merge(next)
            context.emit(list[i]!)
          }
        },
      }
    default:
      throw new TypeError(`unknown built-in transform kind '${t.kind}'`)
  }
}

const isUserSink = (k: RandomSink): boolean => k.kind?.startsWith('user:') === true

const makeSink = (k: RandomSink, options: RandomTopologyOptions): Sink => {
  if (!isUserSink(k)) return outcomeSink(k.outcomes)
  const name = k.kind!.slice(5)
  const make = options.sinks?.[name]
  if (make === undefined)
    throw new TypeError(
      `RandomTopology.run: the spec has sink kind 'user:${name}', but options.sinks has no factory '${name}'`,
    )
  return fromFactory(make, `options.sinks.${name}`)
}

/** What a factory of the caller's returns; a throw is rethrown naming the factory, with it as the cause. */
function fromFactory<T>(make: () => T, name: string): T {
  try {
    return make()
  } catch (cause) {
    throw new Error(`RandomTopology.run: ${name}() threw: ${describeThrown(cause, true)}`, {
      cause,
    })
  }
}

const outcomeSink = (outcomes: readonly DeliveryStatus[]): Sink => ({
  kind: 'outcome',
  async write(events) {
    return events.events.map((e) => outcomes[n(e) % outcomes.length]!)
  },
})

const listSource = (batches: readonly (readonly JsonObject[])[], receipts: BatchReceipt[]): Source => ({
  kind: 'list',
  canAcknowledge: true,
  async run(context) {
    for (const batch of batches) receipts.push(await context.send(batch))
  },
})

/**
 * Random topologies.
 *
 * @example
 * ```ts
 * await fc.assert(fc.asyncProperty(RandomTopology.arbitrary(), async (spec) => {
 *   const run = await RandomTopology.run(spec)
 *   expect(run.statuses).toEqual(RandomTopology.expected(spec))
 * }))
 * ```
 */
export const RandomTopology = {
  /**
   * Shrinkable random topologies: 1–2 sources (1–3 batches of up to 4 records each, now and then
   * an empty one), up to 4 transforms, 1–2 sinks, any wiring.
   */
  arbitrary(options: RandomTopologyOptions = {}): fc.Arbitrary<RandomTopologySpec> {
    // Checked here: fast-check's own error for a bad length names no option.
    const most = (field: 'maxTransforms' | 'maxSinks', min: number, fallback: number): number => {
      const value: unknown = options[field]
      if (value === undefined) return fallback
      if (typeof value === 'number' && Number.isSafeInteger(value) && value >= min) return value
      throw new RangeError(
        `RandomTopology.arbitrary: '${field}' must be a whole number of ${min} or more, got ${typeof value === 'number' ? String(value) : typeof value}`,
      )
    }
    const maxTransforms = most('maxTransforms', 0, 4)
    const maxSinks = most('maxSinks', 1, 2)
    const users = Object.keys(options.transforms ?? {}).map((name) => `user:${name}` as const)
    const userSinks = Object.keys(options.sinks ?? {}).map((name) => `user:${name}` as const)
    const inputs = fc.array(fc.record({ from: fc.nat(20), port: fc.nat(3) }), { minLength: 1, maxLength: 2 })
    const noFaults = fc.constant<FailureSchedule>(NO_FAULTS)
    const faults: fc.Arbitrary<FailureSchedule> =
      options.faults === true
        ? fc.oneof(
            noFaults,
            fc.record({
              errorOnCalls: fc.uniqueArray(fc.integer({ min: 1, max: 4 }), { maxLength: 2 }),
              rejectWhen: fc.constant(undefined),
              hangMs: fc.constantFrom(0, 1, 5),
            }),
          )
        : noFaults
    const batchSize = fc.oneof(
      { arbitrary: fc.integer({ min: 1, max: 4 }), weight: 5 },
      { arbitrary: fc.constant(0), weight: 1 },
    )
    return fc.record({
      global: fc.boolean(),
      // A batch may be empty (a poll that found nothing), drawn now and then; a size shrinks to 1.
      sources: fc.array(fc.array(batchSize, { minLength: 1, maxLength: 3 }), {
        minLength: 1,
        maxLength: 2,
      }),
      transforms: fc.array(
        fc.record({
          kind: fc.constantFrom<RandomTransformKind>('pass', 'filter', 'route', 'merge', ...users),
          inputs,
          rest: fc.nat(2),
          rejectDrops: fc.boolean(),
          maxEvents: fc.integer({ min: 1, max: 8 }),
        }),
        { maxLength: maxTransforms },
      ),
      sinks: fc.array(
        fc.record({
          kind: fc.constantFrom<RandomSinkKind>('outcome', ...userSinks),
          inputs,
          acks: fc.constantFrom(undefined, true, false),
          outcomes: fc.array(
            fc.constantFrom<DeliveryStatus>('delivered', 'delivered', 'errored', 'rejected'),
            {
              minLength: 5,
              maxLength: 5,
            },
          ),
          maxEvents: fc.integer({ min: 1, max: 8 }),
          concurrency: fc.integer({ min: 1, max: 3 }),
          faults,
        }),
        { minLength: 1, maxLength: maxSinks },
      ),
    })
  },

  /**
   * What every batch must resolve to, per source in send order, and whether each source
   * acknowledges; `undefined` when the spec has a user transform or sink (its behaviour is yours:
   * check the run with its ledger instead, as {@link RandomTopology.check} does).
   */
  expected(spec: RandomTopologySpec): { statuses: BatchStatus[][]; sourceAcks: boolean[] } | undefined {
    if (spec.transforms.some((t) => t.kind.startsWith('user:'))) return undefined
    if (spec.sinks.some((k) => isUserSink(k))) return undefined
    const { transformInputs, sinkInputs, batches, arrivals, drops } = flow(spec)
    const sinkAcks = spec.sinks.map((k) => k.acks ?? spec.global)
    const upstream = (name: string): string[] => {
      const id = name.split('.')[0]!
      return id.startsWith('src') ? [id] : transformInputs[Number(id.slice(1))]!.flatMap(upstream)
    }
    const sourceAcks = spec.sources.map(() => false)
    spec.sinks.forEach((_, k) => {
      if (!sinkAcks[k]) return
      for (const name of sinkInputs[k]!.flatMap(upstream)) sourceAcks[Number(name.slice(3))] = true
    })
    // Each event's copy reports, in no particular order (no sink here is authoritative).
    const reports = new Map(drops)
    spec.sinks.forEach((k, i) => {
      if (!sinkAcks[i]) return
      for (const token of arrivals[i]!) {
        for (const origin of token.origins)
          reports.set(origin, [...(reports.get(origin) ?? []), k.outcomes[token.n % k.outcomes.length]!])
      }
    })
    const statuses = batches.map((list, i) =>
      list.map((events) =>
        DeliveryModel.told(
          sourceAcks[i]!,
          events.map((n) =>
            DeliveryModel.record(
              (reports.get(n) ?? []).map((status) => ({ status, acknowledges: true, authoritative: false })),
            ),
          ),
        ),
      ),
    )
    return { statuses, sourceAcks }
  },

  /**
   * How many copies of each record every sink writes, from the wiring alone: per record (by its
   * `n`, in send order: the first source's batches, then the next one's), per sink (in the spec's
   * order). A record merged into another counts as none of its own (the merged event is the
   * first record's copy). A sink writes each copy once, whatever it then reports (a retried write
   * counts once), so this holds over the user's sinks too; `undefined` when the spec has a user
   * transform, whose routing is the user's. {@link RandomTopology.check} compares the ledger with it.
   *
   * @example
   * ```ts
   * RandomTopology.expectedCopies(spec)?.[0] // [1, 0]: record 0 is written once by k0, never by k1
   * ```
   */
  expectedCopies(spec: RandomTopologySpec): number[][] | undefined {
    if (spec.transforms.some((t) => t.kind.startsWith('user:'))) return undefined
    const { batches, arrivals } = flow(spec)
    const copies = batches.flat(2).map(() => spec.sinks.map(() => 0))
    arrivals.forEach((tokens, k) => {
      for (const token of tokens) copies[token.n]![k]!++
    })
    return copies
  },

  /**
   * Builds `spec` (every component under a ledger; `user:` kinds from `options.transforms` and
   * `options.sinks`), runs it to the end, and returns what happened. Throws a `TypeError` when the
   * spec names a user transform or sink that `options.transforms` or `options.sinks` lacks, an
   * `Error` naming the factory (its `cause` what was thrown) when one of those factories throws, a
   * `RangeError` for a bad `options.timeoutMs`, and an `Error` (after stopping the topology at
   * once) when the run does not finish within it.
   */
  async run(spec: RandomTopologySpec, options: RandomTopologyOptions = {}): Promise<RandomRun> {
    const timeoutMs = options.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS
    // 0 bounds nothing: a timer of 0 fires before or after a quick run by chance.
    if (!(typeof timeoutMs === 'number' && timeoutMs >= 1 && timeoutMs <= MAX_TIMER_MS))
      throw new RangeError(
        `RandomTopology.run: 'timeoutMs' must be a number of milliseconds from 1 to ${MAX_TIMER_MS}, got ${Object.is(timeoutMs, -0) ? '-0' : String(timeoutMs)}`,
      )
    const ledger = new DeliveryLedger({ acknowledgements: spec.global })
    const { transformInputs, sinkInputs } = wiring(spec)
    const coalesce = feedsBoundaries(spec, transformInputs).map((feeds) => !feeds)
    const builder = new TopologyBuilder<string>({ acknowledgements: spec.global, onWarning: () => {} })
    let counter = 0
    const receipts = spec.sources.map((sizes, i) => {
      const list: BatchReceipt[] = []
      const batches = sizes.map((size) => Array.from({ length: size }, () => ({ n: counter++ })))
      builder.source(`src${i}`, ledger.source(`src${i}`, listSource(batches, list)))
      return list
    })
    spec.transforms.forEach((t, i) => {
      const name = t.kind.startsWith('user:') ? t.kind.slice(5) : undefined
      const user = name === undefined ? undefined : options.transforms?.[name]
      if (name !== undefined && user === undefined)
        throw new TypeError(
          `RandomTopology.run: the spec has transform kind 'user:${name}', but options.transforms has no factory '${name}'`,
        )
      const transform =
        user === undefined ? builtIn(t, coalesce[i]!) : fromFactory(user, `options.transforms.${name}`)
      // Small channels only change timing (more blocked producers), never outcomes.
      builder.transform(`t${i}`, transformInputs[i]!, ledger.transform(`t${i}`, transform), {
        buffer: { maxEvents: t.maxEvents },
      })
    })
    spec.sinks.forEach((k, i) => {
      const acks = k.acks ?? spec.global
      const sink = faultySink(makeSink(k, options), k.faults)
      builder.sink(`k${i}`, sinkInputs[i]!, ledger.sink(`k${i}`, sink, { acknowledgements: acks }), {
        buffer: { maxEvents: k.maxEvents },
        // Scheduled errors are transient: enough attempts, no backoff, so the outcome is the sink's.
        // (Each scheduled error uses a call number up, so it holds with writes in flight too.)
        retry: { attempts: k.faults.errorOnCalls.length + 1, initialBackoffMs: 0 },
        ...(k.concurrency === undefined ? {} : { concurrency: k.concurrency }),
        ...(k.acks === undefined ? {} : { acknowledgements: k.acks }),
      })
    })
    const topology = builder.build()
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((f) => facts.push(f))
    await runWithin(topology, timeoutMs, spec)
    const statuses = await Promise.all(receipts.map((list) => Promise.all(list.map((r) => r.status))))
    await ledger.settled()
    return { statuses, receipts, facts, ledger }
  },

  /**
   * Runs `spec` (with your `transforms` and `sinks`) and checks the delivery properties: no
   * component reported an error (other than the failed attempts the spec's schedule injects), every batch was told what the lattice computes from what the
   * sinks reported (`expectMatchesModel`), no source heard `delivered` for a record a sink failed
   * (`expectNoAckWithoutDelivery`, with `allowEmpty`: a drawn run may have acknowledgements off
   * for every source; a hand-written spec whose sources send no batch fails `NOTHING_CHECKED`),
   * every sink wrote as many copies of each record as the wiring
   * sends it ({@link RandomTopology.expectedCopies}, for a spec without user transforms), and —
   * for a spec of built-in kinds only — the statuses {@link RandomTopology.expected} predicts. Throws an `Error` whose message starts with the
   * topology as {@link RandomTopology.describe} prints it, then what broke; returns the run.
   *
   * @example
   * ```ts
   * const sinks = { db: () => mySink() }
   * await fc.assert(fc.asyncProperty(RandomTopology.arbitrary({ sinks }), (spec) => RandomTopology.check(spec, { sinks })))
   * ```
   */
  async check(spec: RandomTopologySpec, options: RandomTopologyOptions = {}): Promise<RandomRun> {
    const run = await RandomTopology.run(spec, options)
    const fail = (what: string): never => {
      throw new Error(`RandomTopology.check failed for\n${RandomTopology.describe(spec)}\n${what}`)
    }
    // A failed attempt the spec's failure schedule caused is expected (it is retried until it passes).
    const errors = run.facts.flatMap((f) =>
      f.type === 'component_error' && !(f.code === 'WRITE_FAILED' && f.message.includes('scheduled failure'))
        ? [`${f.component}: ${f.code}: ${f.message}`]
        : [],
    )
    if (errors.length > 0) fail(`component errors:\n  ${errors.join('\n  ')}`)
    try {
      await run.ledger.expectMatchesModel()
      // A drawn run may have acknowledgements off for every source (no batch with an id): the
      // model and the copies still check it, so this check may find nothing to read.
      await run.ledger.expectNoAckWithoutDelivery({ allowEmpty: true })
    } catch (error) {
      fail(describeThrown(error, true))
    }
    // A copy the runtime loses (or makes twice) on its way to a sink shows in no status when that
    // sink would have delivered it, and never with the user's own sinks: count what each sink wrote.
    const copies = RandomTopology.expectedCopies(spec)
    if (copies !== undefined) {
      for (const record of run.ledger.records) {
        const want = copies[record.record.n as number]!
        const got = spec.sinks.map(
          (_, k) => record.fates.filter((f) => f.via === 'sink' && f.component === `k${k}`).length,
        )
        const k = got.findIndex((count, i) => count !== want[i])
        if (k >= 0)
          fail(
            `sink k${k} wrote ${got[k]} copies of record ${record.tag} ${JSON.stringify(record.record)}, the wiring sends it ${want[k]}: the runtime ${got[k]! < want[k]! ? 'lost' : 'duplicated'} a copy (told its source '${record.told}'; copies: ${record.fates.map((f) => `${f.component} ${f.status ?? 'no status'}`).join(', ') || 'none'})`,
          )
      }
    }
    const expected = RandomTopology.expected(spec)
    if (expected !== undefined && JSON.stringify(expected.statuses) !== JSON.stringify(run.statuses))
      fail(
        `batch statuses ${JSON.stringify(run.statuses)}, the model predicts ${JSON.stringify(expected.statuses)}`,
      )
    return run
  },

  /**
   * `spec` as a reader would draw it, one component a line, for a counterexample:
   * ```
   * acknowledgements: on (topology default)
   * src0 = source(batches of 2, 1)
   * t0 = filter(drops n % 3 == 1, as rejected) ← src0
   * k0 = sink(reports delivered,errored,delivered,delivered,rejected by n % 5; acks on; errors on calls 1) ← t0
   * k1 = my_db(acks default; no faults) ← src0
   * ```
   */
  describe(spec: RandomTopologySpec): string {
    const { transformInputs, sinkInputs } = wiring(spec)
    const lines = [
      `acknowledgements: ${spec.global ? 'on' : 'off'} (topology default)`,
      ...spec.sources.map((sizes, i) => `src${i} = source(batches of ${sizes.join(', ')})`),
      ...spec.transforms.map((t, i) => {
        const what =
          t.kind === 'filter'
            ? `filter(drops n % 3 == ${t.rest}${t.rejectDrops ? ', as rejected' : ''})`
            : t.kind === 'route'
              ? 'route(a: n even, b: n % 3 == 0, _unmatched)'
              : t.kind === 'merge'
                ? 'merge_pairs()'
                : t.kind === 'pass'
                  ? 'pass()'
                  : `${t.kind.slice(5)}()`
        return `t${i} = ${what} ← ${transformInputs[i]!.join(', ')}`
      }),
      ...spec.sinks.map((k, i) => {
        const settings = `acks ${k.acks === undefined ? 'default' : k.acks ? 'on' : 'off'}; ${k.concurrency ?? 1} write(s) in flight; ${describeSchedule(k.faults)}`
        const what = isUserSink(k)
          ? `${k.kind!.slice(5)}(${settings})`
          : `sink(reports ${k.outcomes.join(',')} by n % ${k.outcomes.length}; ${settings})`
        return `k${i} = ${what} ← ${sinkInputs[i]!.join(', ')}`
      }),
    ]
    return lines.join('\n')
  },
} as const
