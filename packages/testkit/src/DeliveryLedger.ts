/**
 * A delivery ledger: wraps the sources, transforms and sinks of a topology and records, for every
 * record a source sent, every copy's fate and what the source was told; then checks delivery
 * properties against the reference model ({@link DeliveryModel}).
 *
 * Invariant: the ledger only observes. It tags each record with one field (`options.field`,
 * removed again before a wrapped sink sees the event), keeps per-event bookkeeping in weak maps,
 * and passes every call, result and error through unchanged, so a run under the ledger is the run
 * without it.
 *
 * @module
 */
import type { BatchStatus, DeliveryStatus, JsonObject, LogEvent } from '@ackline/core'
import {
  type BatchReceipt,
  NO_RECEIPT,
  type Sink,
  type Source,
  type SourceContext,
  type Transform,
  type TransformContext,
} from '@ackline/topology'
import { type CopyReport, DeliveryModel, type RecordVerdict } from './DeliveryModel.js'
import { DeliveryViolation } from './DeliveryViolation.js'
import { classifyError, classifyResult } from './internal/classifyResult.js'
import { forwardMembers, SINK_MEMBERS, TRANSFORM_MEMBERS } from './internal/forwardMembers.js'
import { sameJsonValue, unboxed } from './internal/matchRecords.js'

/** Options of a {@link DeliveryLedger}. */
export interface DeliveryLedgerOptions {
  /** The topology's `acknowledgements` option: the default of every wrapped sink (default false). */
  readonly acknowledgements?: boolean
  /** The field the ledger tags records with (default `'_ledger'`); pick one your components ignore. */
  readonly field?: string
}

/**
 * Options of the ledger's checks. A check that had nothing to look at refuses to pass, so a
 * property is not green for having checked nothing:
 * - `NO_SOURCE`, always (`allowEmpty` does not lift it): no source was wrapped by this ledger, so
 *   no record was followed; a mistake (the builder got the sources themselves, or another ledger
 *   wrapped them).
 * - `NO_SINK`, always: no sink was wrapped by this ledger, or none of those wrapped was started
 *   by a topology or written to (the builder got the sinks themselves), so no copy's fate was
 *   recorded (a batch whose unwrapped sink failed it was told `errored`, and the checks skipped it).
 * - `NOTHING_CHECKED`, unless `allowEmpty`: the wrapped sources sent no batch through the ledger
 *   (the builder got the original source, or the source sends with `sendEvents`, which the ledger
 *   does not follow); or, for `expectNoLoss` and `expectNoAckWithoutDelivery`, which read only
 *   batches with an id, batches were sent and none had one (acknowledgements off).
 *
 * Wrapped sources that sent only empty batches pass: the run happened and sent nothing (a poll
 * that found nothing), which a property over `Arbitraries.batches()` draws.
 */
export interface LedgerCheckOptions {
  /**
   * Pass when the check had nothing to check (default false): for a property that draws runs
   * where that is expected, such as `RandomTopology`'s runs with acknowledgements off. It does
   * not lift `NO_SOURCE` or `NO_SINK`.
   */
  readonly allowEmpty?: boolean
}

/** Options of {@link DeliveryLedger.sink}: the same flags you give the builder for that sink. */
export interface LedgerSinkOptions {
  /** Whether the sink acknowledges (default: the ledger's `acknowledgements`). */
  readonly acknowledgements?: boolean
  /** Whether the sink is authoritative (default false). */
  readonly authoritative?: boolean
}

/** One copy's fate, as the ledger saw it. */
export interface CopyFate {
  /** The sink that ended the copy, or the transform that dropped it. */
  readonly component: string
  /** `'sink'` for a write's outcome, `'drop'` for a transform's drop. */
  readonly via: 'sink' | 'drop'
  /** The status reported (the last attempt's, for a retried write); `undefined` for a drop without one. */
  readonly status: DeliveryStatus | undefined
  /** Whether that report counts (an acknowledging sink, or a drop). */
  readonly acknowledges: boolean
  /** Whether the sink is authoritative: its report settles the record at once, whatever other copies report. */
  readonly authoritative: boolean
  /**
   * The transforms (with the port) that had emitted the record when this copy ended, in order.
   * It is the record's route, not this one copy's: a transform that emits one handle on two ports
   * hands the same object on, so the ledger cannot tell the copies apart before a sink sees them.
   */
  readonly path: readonly string[]
  /** The fields the sink got, without the ledger's tag. */
  readonly fields: JsonObject | undefined
}

/** One record a source sent, with everything the ledger learned about it. */
export interface LedgerRecord {
  /** `source/batch/index`: the source's id, the batch's number in that source, the record's index. */
  readonly tag: string
  /** The id of the source that sent it. */
  readonly source: string
  /** The number of its batch in that source (see {@link LedgerBatch.index}). */
  readonly batch: number
  /** The record as the source sent it, without the ledger's tag. */
  readonly record: JsonObject
  /** The copies' fates, in the order they ended. */
  readonly fates: CopyFate[]
  /** Transforms that neither emitted nor dropped it in the call that got it (merged, or held). */
  readonly absorbedBy: string[]
  /** The transforms (with the port) that emitted it, in order. */
  readonly hops: string[]
  /** What its source was told of its batch, once resolved. */
  told: BatchStatus | undefined
}

/** One batch a source sent. */
export interface LedgerBatch {
  /** The id of the source that sent it. */
  readonly source: string
  /** Its number among that source's sends, from 0, in send order (a send the runtime refused keeps its number). */
  readonly index: number
  /** The receipt the source's send returned. */
  readonly receipt: BatchReceipt
  /** The records it held, in order. */
  readonly records: readonly LedgerRecord[]
  /** What the source was told, once it resolved. */
  told: BatchStatus | undefined
}

/** A key a record is identified by across re-sends (for at-least-once and exactly-once). */
export type RecordKey = (record: JsonObject) => string

/**
 * `by` checked: a function whose every key is a string. A key that is none (a field the records
 * lack: `undefined` for all) would put unrelated records in one group, where one delivered record
 * passes the whole group.
 */
function keyBy(by: unknown): (record: JsonObject, tag: string) => string {
  if (typeof by !== 'function')
    throw new TypeError(`DeliveryLedger: 'by' must be a function, got ${typeof by}`)
  return (record, tag) => {
    const key: unknown = by(record)
    if (typeof key !== 'string')
      throw new TypeError(
        `DeliveryLedger: 'by' must return a string, got ${key === null ? 'null' : typeof key} for record ${tag}`,
      )
    return key
  }
}

/**
 * Records every copy's fate; see the module header.
 *
 * @example
 * ```ts
 * const ledger = new DeliveryLedger({ acknowledgements: true })
 * const topology = new TopologyBuilder({ acknowledgements: true })
 *   .source('in', ledger.source('in', mySource))
 *   .sink('db', ['in'], ledger.sink('db', mySink))
 *   .build()
 * await topology.start()
 * await topology.done
 * await ledger.expectNoLoss()
 * await ledger.expectMatchesModel()
 * ```
 */
export class DeliveryLedger {
  /** Every batch, in the order the sources sent them. */
  readonly batches: LedgerBatch[] = []
  readonly #records = new Map<string, LedgerRecord>()
  readonly #acknowledgements: boolean
  readonly #field: string
  readonly #tags = new WeakMap<LogEvent, string>()
  /**
   * The fate each handle's last write at each sink reported: a retry there replaces it; another
   * copy's, or the same handle's at another sink (a harness that writes one event to two), stays.
   */
  readonly #attempts = new WeakMap<LogEvent, Map<string, CopyFate>>()
  readonly #pending: Promise<unknown>[] = []
  /** Per source, how many sends it began: a batch's number is taken before its send is awaited. */
  readonly #sends = new Map<string, number>()
  /** The ids of the sources wrapped, in order: what a check that checked nothing names. */
  readonly #sources = new Set<string>()
  /** The ids of the sinks wrapped: named when no source was; none wrapped is `NO_SINK`. */
  readonly #sinks = new Set<string>()
  /**
   * The ids of the wrapped sinks a topology started or something wrote to: none, with sinks
   * wrapped, is `NO_SINK` too (the builder got the sinks themselves, not the wrappers).
   */
  readonly #used = new Set<string>()

  constructor(options: DeliveryLedgerOptions = {}) {
    this.#acknowledgements = options.acknowledgements ?? false
    this.#field = options.field ?? '_ledger'
  }

  /** Every record, in send order. */
  get records(): LedgerRecord[] {
    return [...this.#records.values()]
  }

  /** Wraps a source: every record it sends through `context.send` is tagged and followed. */
  source(id: string, source: Source): Source {
    const ledger = this
    this.#sources.add(id)
    return {
      ...source,
      ...forwardMembers(source, ['validate']),
      kind: source.kind,
      canAcknowledge: source.canAcknowledge,
      run(context: SourceContext) {
        const wrapped: SourceContext = {
          id: context.id,
          acknowledgements: context.acknowledgements,
          signal: context.signal,
          sendEvents: (events) => context.sendEvents(events),
          send: async (records, options) => {
            const quiet = options?.receipt === false
            if (quiet && options.outcomes === true) {
              // Refused as the runtime refuses it, before anything is recorded.
              throw new TypeError(
                `source '${context.id}': a send with outcomes: true needs its receipt (it was sent with receipt: false)`,
              )
            }
            // Numbered now, not once accepted: sends in flight together get distinct numbers (and tags).
            const index = ledger.#sends.get(id) ?? 0
            ledger.#sends.set(id, index + 1)
            const list = [...records]
            const entries = list.map((record, i) => ledger.#open(id, index, i, record))
            // The source's options go through (outcomes), but the ledger reads every receipt: it
            // asks for it, and hands the source what the source asked for (`NO_RECEIPT` or it).
            let receipt: BatchReceipt
            try {
              receipt = await context.send(
                // Only a record is tagged: anything else goes on as it is, for the runtime to refuse
                // (a spread would make `null` or a string an object, and the run would accept it).
                list.map((record, i) =>
                  isRecord(record) ? { ...record, [ledger.#field]: entries[i]!.tag } : record,
                ),
                options === undefined ? undefined : { ...options, receipt: true },
              )
            } catch (error) {
              // Refused: these records were never sent.
              for (const entry of entries) ledger.#records.delete(entry.tag)
              throw error
            }
            const batch: LedgerBatch = { source: id, index, receipt, records: entries, told: undefined }
            ledger.batches.push(batch)
            ledger.#pending.push(
              receipt.status.then((status) => {
                batch.told = status
                for (const record of entries) record.told = status
              }),
            )
            return quiet ? NO_RECEIPT : receipt
          },
        }
        return source.run(wrapped)
      },
    }
  }

  /** Wraps a transform: records which records it emitted (on which port), dropped, or absorbed. */
  transform<P extends string>(
    id: string,
    transform: Transform<P>,
    dropStatus?: 'delivered' | 'rejected',
  ): Transform<P> {
    const ledger = this
    const drops = dropStatus ?? transform.dropStatus ?? 'delivered'
    const wrap = (context: TransformContext, seen: Set<LogEvent>): TransformContext => ({
      id: context.id,
      acknowledgements: context.acknowledgements,
      create: (fields, inheritFrom) => context.create(fields, inheritFrom),
      emit: (event, port) => {
        seen.add(event)
        ledger.#retag(event)
        ledger.#hop(event, port === undefined ? id : `${id}.${port}`)
        context.emit(event, port)
      },
      emitAll: (events, port) => {
        for (const event of events) {
          seen.add(event)
          ledger.#retag(event)
          ledger.#hop(event, port === undefined ? id : `${id}.${port}`)
        }
        context.emitAll(events, port)
      },
      drop: (event) => {
        seen.add(event)
        const record = ledger.#recordOf(event)
        record?.fates.push({
          component: id,
          via: 'drop',
          status: drops === 'rejected' ? 'rejected' : undefined,
          acknowledges: true,
          authoritative: false,
          path: [...(record?.hops ?? [])],
          fields: undefined,
        })
        context.drop(event)
      },
    })
    return {
      ...transform,
      ...forwardMembers(transform, TRANSFORM_MEMBERS),
      // Synchronous when the transform's call is (a `synchronous` transform keeps its promise
      // through the wrapper, so the runtime's shared context is exercised too).
      process(events, context) {
        const seen = new Set<LogEvent>()
        // Read before processing: a merged-away handle cannot be read afterwards.
        const tags = events.events.map((event) => ledger.#tagOf(event))
        events.events.forEach((event, i) => {
          if (tags[i] !== undefined) ledger.#tags.set(event, tags[i])
        })
        const absorbed = (): void => {
          events.events.forEach((event, i) => {
            const tag = tags[i]
            if (!seen.has(event) && tag !== undefined) ledger.#records.get(tag)?.absorbedBy.push(id)
          })
        }
        const pending = transform.process(events, wrap(context, seen))
        if (pending === undefined) {
          absorbed()
          return undefined
        }
        return Promise.resolve(pending).then(absorbed)
      },
      ...(transform.flush === undefined
        ? {}
        : { flush: (context: TransformContext) => transform.flush!(wrap(context, new Set())) }),
    }
  }

  /**
   * Wraps a sink: records each copy's reported status (the last attempt's, for a retried write).
   * The wrapper always has a `start` (calling the sink's, if any): a wrapper the runtime started,
   * or one written to, is what tells the checks a wrapped sink was in the run (else `NO_SINK`).
   */
  sink(id: string, sink: Sink, options: LedgerSinkOptions = {}): Sink {
    const ledger = this
    const acknowledges = options.acknowledgements ?? this.#acknowledgements
    const authoritative = options.authoritative ?? false
    this.#sinks.add(id)
    const report = (
      events: readonly LogEvent[],
      statuses: readonly DeliveryStatus[],
      fields: readonly JsonObject[],
    ) => {
      events.forEach((event, i) => {
        const record = ledger.#recordOf(event)
        if (record === undefined) return
        const fate: CopyFate = {
          component: id,
          via: 'sink',
          status: statuses[i],
          acknowledges,
          authoritative,
          path: [...record.hops],
          fields: fields[i],
        }
        record.fates.push(fate)
        const bySink = ledger.#attempts.get(event) ?? new Map<string, CopyFate>()
        bySink.set(id, fate)
        ledger.#attempts.set(event, bySink)
      })
    }
    const members = forwardMembers(sink, SINK_MEMBERS)
    return {
      ...sink,
      ...members,
      // Always there, so the runtime's start marks the wrapper used (it calls start?.() anyway).
      async start() {
        ledger.#used.add(id)
        await members.start?.()
      },
      async write(events) {
        ledger.#used.add(id)
        for (const event of events) ledger.#untag(event)
        // Read before the write: a broken sink may end the events, and an ended handle cannot be read.
        const fields = events.events.map((event) => ({ ...event.fields }))
        let result: Awaited<ReturnType<Sink['write']>>
        try {
          result = await sink.write(events)
        } catch (error) {
          // A failed attempt: the runtime may retry; the ledger keeps the last attempt's word.
          ledger.#forget(events.events, id)
          report(
            events.events,
            events.events.map(() => classifyError(error)),
            fields,
          )
          throw error
        }
        ledger.#forget(events.events, id)
        report(events.events, classifyResult(result, events.length), fields)
        return result
      },
    }
  }

  /**
   * Resolves once every batch sent so far has told its source its status. It waits without a
   * bound (as do the `expect*` checks, which call it first): await `topology.done` before, so that
   * a batch the runtime never resolves is settled by the stop, or bound the test's own timeout.
   */
  async settled(): Promise<void> {
    while (this.#pending.length > 0) await Promise.all(this.#pending.splice(0))
  }

  /** The model's verdict on one record, from its copies' fates. */
  verdict(record: LedgerRecord): RecordVerdict {
    return DeliveryModel.record(record.fates.map(asReport))
  }

  /**
   * Every batch told its source what the model computes from the copies' reports.
   * Throws a {@link DeliveryViolation} (`MODEL_MISMATCH`) naming the batch and its records' copies;
   * one that checked nothing, `NO_SOURCE`, `NO_SINK` or `NOTHING_CHECKED` (see
   * {@link LedgerCheckOptions}).
   */
  async expectMatchesModel(options: LedgerCheckOptions = {}): Promise<void> {
    await this.settled()
    this.#refuseVacuous('expectMatchesModel', false, options)
    for (const batch of this.batches) {
      const expected = DeliveryModel.told(
        batch.receipt.batchId !== undefined,
        batch.records.map((r) => this.verdict(r)),
      )
      if (batch.told !== expected) {
        throw new DeliveryViolation(
          'MODEL_MISMATCH',
          `batch ${batch.index} of source '${batch.source}' was told '${batch.told}', but its copies' reports make it '${expected}'`,
          batch.records.map(describeRecord),
          'the runtime or a wrapped component settled events other than as reported: look for a component that ends events itself, or one missing from the ledger',
        )
      }
    }
  }

  /**
   * No source was told `delivered` for a record that an acknowledging sink (or a rejecting drop)
   * failed, unless an authoritative sink had already recorded it. `NACK_LOST`. It reads the
   * batches that had an id (acknowledgements on for their source): when none had one, it checked
   * nothing and says so (`NOTHING_CHECKED`, see {@link LedgerCheckOptions}).
   */
  async expectNoAckWithoutDelivery(options: LedgerCheckOptions = {}): Promise<void> {
    await this.settled()
    this.#refuseVacuous('expectNoAckWithoutDelivery', true, options)
    for (const batch of this.batches) {
      if (batch.told !== 'delivered' || batch.receipt.batchId === undefined) continue
      for (const record of batch.records) {
        const verdict = this.verdict(record)
        if (verdict === 'errored' || verdict === 'rejected') {
          const culprit = record.fates.find((f) => f.acknowledges && f.status === verdict)
          throw new DeliveryViolation(
            'NACK_LOST',
            `record ${record.tag} was acknowledged to source '${record.source}' although ${culprit?.component ?? 'a component'} reported it '${verdict}'`,
            [describeRecord(record)],
            `a source must hear '${verdict}' here; check that '${culprit?.component}' reports its failure (throw or return it) instead of swallowing it`,
          )
        }
      }
    }
  }

  /**
   * Every record whose source was told `delivered` (with acknowledgements on) was delivered by at
   * least one acknowledging sink, or dropped on purpose by a transform, or merged into a copy that
   * was delivered. `LOST`. A record that no acknowledging sink could see (it left on a port no
   * sink reads, or only reached sinks with acknowledgements off) counts as lost too: use this on
   * topologies where every record is meant to reach an acknowledging sink. It reads the batches
   * that had an id: when none had one, it checked nothing and says so (`NOTHING_CHECKED`, see
   * {@link LedgerCheckOptions}).
   */
  async expectNoLoss(options: LedgerCheckOptions = {}): Promise<void> {
    await this.settled()
    this.#refuseVacuous('expectNoLoss', true, options)
    for (const batch of this.batches) {
      if (batch.told !== 'delivered' || batch.receipt.batchId === undefined) continue
      for (const record of batch.records) {
        if (this.#accounted(record)) continue
        const last = record.fates.at(-1)
        throw new DeliveryViolation(
          'LOST',
          `record ${record.tag} was acknowledged to source '${record.source}' but no acknowledging sink delivered it`,
          [describeRecord(record)],
          last === undefined
            ? 'no sink ever wrote it: a transform forgot it, or a sink was not wrapped by the ledger'
            : `its last copy ended at '${last.component}' as '${last.status ?? 'no status'}': that component reported delivery it did not make`,
        )
      }
    }
  }

  /**
   * Every distinct record (by `by`, default the whole record without the tag, its keys in any
   * order) that any source sent was delivered at least once by an acknowledging sink, across
   * re-sends. `NOT_DELIVERED`. A `by` that is no function, or returns anything but a string for a
   * record, is a `TypeError` naming it (such keys would group unrelated records). A run that gave
   * it nothing to check is `NO_SOURCE`, `NO_SINK` or `NOTHING_CHECKED` (see
   * {@link LedgerCheckOptions}).
   */
  async expectAtLeastOnce(options: LedgerCheckOptions & { by?: RecordKey } = {}): Promise<void> {
    await this.#atLeastOnce('expectAtLeastOnce', options)
  }

  async #atLeastOnce(check: string, options: LedgerCheckOptions & { by?: RecordKey }): Promise<void> {
    await this.settled()
    this.#refuseVacuous(check, false, options)
    const by = options.by === undefined ? sortedJson : keyBy(options.by)
    const groups = new Map<string, LedgerRecord[]>()
    for (const record of this.#records.values()) {
      const key = by(record.record, record.tag)
      groups.set(key, [...(groups.get(key) ?? []), record])
    }
    for (const [key, records] of groups) {
      if (records.some((r) => this.#accounted(r))) continue
      throw new DeliveryViolation(
        'NOT_DELIVERED',
        `record with key ${key} was sent ${records.length} time(s) and never delivered by an acknowledging sink`,
        records.map(describeRecord),
        'a source must re-send (or nack to its upstream) what was not delivered; check the source reads its receipts',
      )
    }
  }

  /**
   * At least once (see {@link DeliveryLedger.expectAtLeastOnce}), and every delivered copy of one
   * key at one sink carried the same fields (the same JSON, keys in any order), so a sink that
   * writes idempotently by `by` ends with exactly one, correct, entry per key.
   * `DIVERGENT_DUPLICATE`. A run that gave it nothing to check is `NO_SOURCE`, `NO_SINK` or
   * `NOTHING_CHECKED` (see {@link LedgerCheckOptions}).
   */
  async expectExactlyOnce(options: LedgerCheckOptions & { by: RecordKey }): Promise<void> {
    const by = keyBy(options.by)
    await this.#atLeastOnce('expectExactlyOnce', options)
    const seen = new Map<string, { fields: JsonObject; record: LedgerRecord }>()
    for (const record of this.#records.values()) {
      for (const fate of record.fates) {
        if (fate.via !== 'sink' || fate.status !== 'delivered' || fate.fields === undefined) continue
        const key = `${fate.component}\u0000${by(record.record, record.tag)}`
        const fields = fate.fields
        const before = seen.get(key)
        if (before === undefined) seen.set(key, { fields, record })
        else if (!sameJsonValue(before.fields, fields)) {
          throw new DeliveryViolation(
            'DIVERGENT_DUPLICATE',
            `sink '${fate.component}' delivered key ${by(record.record, record.tag)} twice with different fields`,
            [describeRecord(before.record), describeRecord(record)],
            'an idempotent write by key needs every re-send to carry the same fields: make the transforms on this path deterministic',
          )
        }
      }
    }
  }

  /** A readable account of every record, for a failing property's message. */
  describe(): string {
    return this.records.map(describeRecord).join('\n')
  }

  /**
   * Throws when `check` had nothing to check (see {@link LedgerCheckOptions}): `NO_SOURCE` when no
   * source was wrapped, `NO_SINK` when no sink was (or none wrapped was started or written to); unless `allowEmpty`, `NOTHING_CHECKED` when no batch was sent, or (for a
   * check that reads only batches with an id, `needsIds`) when none had an id.
   */
  #refuseVacuous(check: string, needsIds: boolean, options: LedgerCheckOptions): void {
    if (this.#sources.size === 0)
      throw new DeliveryViolation(
        'NO_SOURCE',
        `${check} checked nothing: no source was wrapped by this ledger (ledger.source(id, source)), so no record was followed`,
        [`sinks wrapped: ${[...this.#sinks].map((id) => `'${id}'`).join(', ') || 'none'}`],
        'give the builder each source wrapped by this same ledger: .source(id, ledger.source(id, mySource))',
      )
    if (this.#sinks.size === 0)
      throw new DeliveryViolation(
        'NO_SINK',
        `${check} checked nothing: no sink was wrapped by this ledger (ledger.sink(id, sink)), so no copy's fate was recorded`,
        this.#perSource(),
        'give the builder each sink wrapped by this same ledger: .sink(id, inputs, ledger.sink(id, mySink))',
      )
    if (this.#used.size === 0)
      throw new DeliveryViolation(
        'NO_SINK',
        `${check} checked nothing: no sink wrapped by this ledger was started or written to (${[...this.#sinks].map((id) => `'${id}'`).join(', ')} wrapped), so no copy's fate was recorded`,
        this.#perSource(),
        'give the builder the wrapper ledger.sink(id, mySink) returns, not mySink itself: .sink(id, inputs, ledger.sink(id, mySink))',
      )
    if (options.allowEmpty === true) return
    if (this.batches.length === 0)
      throw new DeliveryViolation(
        'NOTHING_CHECKED',
        `${check} checked nothing: the wrapped sources sent no batch through the ledger`,
        this.#perSource(),
        'give the builder the wrapped source (ledger.source(id, s)), not s itself; a source that sends with sendEvents is not followed; pass { allowEmpty: true } where a run that sends nothing is expected',
      )
    if (!needsIds || this.batches.some((b) => b.receipt.batchId !== undefined)) return
    throw new DeliveryViolation(
      'NOTHING_CHECKED',
      `${check} checked nothing: no batch had an id (acknowledgements off for every wrapped source?)`,
      this.#perSource(),
      "turn acknowledgements on (the topology's option, or a sink's) and wire each source to a sink that acknowledges: the ledger's own option only sets its sinks' default; pass { allowEmpty: true } where runs without acknowledgements are expected",
    )
  }

  /** `source 'in': 2 batch(es) sent, 1 with an id, 3 record(s)`, per wrapped source. */
  #perSource(): string[] {
    return [...this.#sources].map((id) => {
      const batches = this.batches.filter((b) => b.source === id)
      const ids = batches.filter((b) => b.receipt.batchId !== undefined).length
      const records = batches.reduce((sum, b) => sum + b.records.length, 0)
      return `source '${id}': ${batches.length} batch(es) sent, ${ids} with an id, ${records} record(s)`
    })
  }

  #open(source: string, batch: number, index: number, record: JsonObject): LedgerRecord {
    const entry: LedgerRecord = {
      tag: `${source}/${batch}/${index}`,
      source,
      batch,
      record,
      fates: [],
      absorbedBy: [],
      hops: [],
      told: undefined,
    }
    this.#records.set(entry.tag, entry)
    return entry
  }

  #tagOf(event: LogEvent): string | undefined {
    const tag = this.#tags.get(event) ?? event.get(this.#field)
    return typeof tag === 'string' ? tag : undefined
  }

  #recordOf(event: LogEvent): LedgerRecord | undefined {
    const tag = this.#tagOf(event)
    return tag === undefined ? undefined : this.#records.get(tag)
  }

  /**
   * Puts the tag back on an input the transform emits with new fields (`replaceFields`). Events
   * it builds anew (a clone with new fields, `create`) carry no tag: the ledger does not follow
   * them, and their record is accounted for by the copies it does follow.
   */
  #retag(event: LogEvent): void {
    const tag = this.#tags.get(event)
    if (tag !== undefined && !event.isEnded && event.get(this.#field) === undefined)
      event.set(this.#field, tag)
  }

  #hop(event: LogEvent, hop: string): void {
    this.#recordOf(event)?.hops.push(hop)
  }

  /** Removes the tag from the fields a sink sees, keeping it aside for the report. */
  #untag(event: LogEvent): void {
    const tag = this.#tagOf(event)
    if (tag === undefined) return
    this.#tags.set(event, tag)
    if (event.get(this.#field) !== undefined) event.remove(this.#field)
  }

  /**
   * Drops what this handle's previous attempt at `sink` reported, so a retry's report replaces it.
   * Only that handle's at that sink: another copy of the record written to the same sink (two
   * paths into it) keeps its own report, and so does this handle's at another sink.
   */
  #forget(events: readonly LogEvent[], sink: string): void {
    for (const event of events) {
      const fate = this.#attempts.get(event)?.get(sink)
      if (fate === undefined) continue
      const fates = this.#recordOf(event)?.fates
      const i = fates?.indexOf(fate) ?? -1
      if (i >= 0) fates!.splice(i, 1)
    }
  }

  #accounted(record: LedgerRecord): boolean {
    if (record.fates.some((f) => f.acknowledges && (f.via === 'drop' || f.status === 'delivered')))
      return true
    // Merged into another event (or held for a later flush): the ledger cannot follow its fields
    // further; the event it joined carries its batch along, so a delivered batch vouches for it.
    // (A forgotten event is settled errored by the runtime, so its batch is not delivered.)
    return record.absorbedBy.length > 0 && record.told === 'delivered'
  }
}

/** Whether `value` is what a source may send as a record: an object that is not an array. */
const isRecord = (value: unknown): value is JsonObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

const asReport = (fate: CopyFate): CopyReport => ({
  status: fate.status,
  acknowledges: fate.acknowledges,
  authoritative: fate.authoritative,
})

/** `src/0/1 {"n":1}: in → t.a → db: delivered; in → t.b → dead: errored`. */
function describeRecord(record: LedgerRecord): string {
  const fates = record.fates.map(
    (f) =>
      `${[record.source, ...f.path, f.component].join(' → ')}${f.via === 'drop' ? ' (dropped)' : ''}: ${f.status ?? 'no status'}${f.acknowledges ? '' : ' (acknowledgements off)'}${f.authoritative ? ' (authoritative)' : ''}`,
  )
  const absorbed = record.absorbedBy.map((t) => `absorbed by ${t}`)
  const all = [...fates, ...absorbed]
  return `${record.tag} ${JSON.stringify(record.record)}: ${all.length === 0 ? 'no copy reached a sink' : all.join('; ')}`
}

/**
 * A record's JSON with every object's keys sorted: the default key of
 * {@link DeliveryLedger.expectAtLeastOnce}, so a re-send whose keys come in another order (read
 * back from a store that orders them otherwise) is the same record.
 */
function sortedJson(record: JsonObject): string {
  return JSON.stringify(record, (_key, value: unknown) => {
    // A boxed number, string or boolean is left for JSON to write as its primitive (copied, it
    // was `{}` or its characters by index, and `new Number(1)` keyed as `new Number(2)`).
    if (typeof value !== 'object' || value === null || Array.isArray(value) || unboxed(value) !== value)
      return value
    const sorted: Record<string, unknown> = {}
    for (const key of Object.keys(value).sort())
      Object.defineProperty(sorted, key, {
        value: (value as Record<string, unknown>)[key],
        enumerable: true,
        writable: true,
        configurable: true,
      })
    return sorted
  })
}
