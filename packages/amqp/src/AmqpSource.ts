/**
 * `amqp` source: consumes a RabbitMQ queue with manual acknowledgements and tells the broker, per
 * message, what became of it.
 *
 * Invariants:
 * - A message is acked only once every sink settled its event `delivered`, on the channel
 *   generation it was delivered on; an `errored` one is held for a back-off then requeued (at most
 *   `maxAttempts` deliveries in all, then dead-lettered); a `rejected` one is nacked without
 *   requeue so the queue's dead-letter exchange gets it. See `internal/ackMapping.ts`.
 * - Messages that have already arrived travel together, up to `batchSize`, as one batch sent with
 *   per-record outcomes: each message is settled by its own record's outcome, so one message's
 *   outcome never decides another's. The loop never waits to fill a batch.
 * - After a connection or channel loss, the deliveries of the dead generation are never acked on
 *   the new one: they are counted `abandoned` at once (the broker requeues them itself) and
 *   whatever their sinks report later is ignored; the source reconnects with back-off.
 * - Prefetch bounds what is in flight: the broker sends no more than `prefetch` unsettled
 *   messages, which is the back pressure of the whole pipeline on the queue.
 * - A payload that is not valid JSON, or not valid UTF-8, is passed on as the string field
 *   `message` or dead-lettered (option `invalidJson`), never dropped; a payload that is not UTF-8
 *   is never parsed into fields (its bad bytes would hide there as U+FFFD), and neither is one
 *   holding a number too large for a double (`1e400`: parsed, it would be `Infinity`, which every
 *   sink writes as `null`), which counts as invalid JSON too. A leading UTF-8 byte
 *   order mark is skipped, as the HTTP and NATS sources do. Broker metadata is under the field
 *   `metadataField` (`_amqp`).
 * - A batch the runtime did not accept (`send` rejected while the topology is not stopping: an
 *   event a buffer downstream cannot store) is sent again one message at a time; a message
 *   refused alone is `errored`, code `SEND_FAILED`, with a warning: held for the back-off, then
 *   requeued, dead-lettered once out of attempts. The source keeps consuming; only a stop ends it.
 * - With `deadLetterExchange`, copies are published on the consuming channel, and a copy the
 *   broker refuses (a 404, a 403, a 406 for a body over its `max_message_size`: any channel error
 *   on the publish) closes that channel: an ack or requeue is therefore sent only
 *   while no copy awaits its confirm, so the broker never drops one that was counted. Such a
 *   refusal is a configuration error, never a hot loop: it is warned naming the field and the
 *   broker's reason, refusals in a row back off the reconnects like failed attempts, and a message
 *   whose copy was in flight is nacked without requeue when it comes back, so it leaves the queue.
 *
 * @module
 */
import { isUtf8 } from 'node:buffer'
import { createHash } from 'node:crypto'
import type { JsonObject, NumberOutOfRange, RecordOutcome } from '@ackline/core'
import { JsonValue, RecordOutcomes } from '@ackline/core'
import {
  type BatchFailure,
  type BatchReceipt,
  ConfigIssue,
  codeOption,
  cutToBytes,
  defineOptions,
  type OptionsOf,
  type Source,
  type SourceContext,
  warningsTo,
} from '@ackline/topology'
import type { Channel, ConfirmChannel, ConsumeMessage } from 'amqplib'
import { z } from 'zod'
import { type BrokerAction, brokerAction, type RedeliveryPolicy } from './internal/ackMapping.js'
import { backoffDelay, Connection, connectionOptions, type Generation } from './internal/Connection.js'
import { declared } from './internal/declared.js'
import { delayCapIssue } from './internal/delayCapIssue.js'
import { headersToJson, ownHeader } from './internal/headersToJson.js'
import { ownTables } from './internal/ownTables.js'
import { shortString } from './internal/shortString.js'
import { urlIssue } from './internal/urlIssue.js'

/**
 * The longest value, in bytes of UTF-8, of an `x-ackline-*` header on a dead-letter copy: a longer
 * one (a sink's 200 KB rejection reason) is cut and ends in '…', so the copy's headers always fit
 * the frame amqplib encodes them in.
 */
const ACKLINE_HEADER_MAX_BYTES = 1024

/**
 * Options of the {@link amqpSource} source: its schema (`validate`, `jsonSchema`, …).
 *
 * @example
 * ```ts
 * amqpSource({ url: 'amqp://guest:guest@127.0.0.1:5672', queue: 'orders', prefetch: 200 })
 * ```
 */
export const AmqpSourceOptions = defineOptions({
  url: z
    .string()
    .min(1)
    .describe(
      'The broker, as an AMQP URL (`amqp://user:password@host:5672/vhost`, or `amqps://`); any other is refused at build.',
    ),
  queue: shortString()
    .min(1)
    .describe('The queue to consume; it must exist (it is checked at start). At most 255 bytes of UTF-8.'),
  prefetch: z
    .int()
    .min(1)
    .max(65_535)
    .default(100)
    .describe('Unsettled messages the broker may hand this consumer at once (QoS): the back pressure.'),
  batchSize: z
    .int()
    .min(1)
    .optional()
    .describe(
      'At most this many messages that already arrived travel in one batch (each settled by its own outcome); default: prefetch.',
    ),
  maxAttempts: z
    .int()
    .min(1)
    .default(5)
    .describe('Deliveries of one message in all; when the last one is errored it is dead-lettered.'),
  retryInitialDelayMs: z
    .number()
    .min(0)
    .default(1000)
    .describe('How long an errored message is held before its first requeue; doubles per attempt.'),
  retryMaxDelayMs: z
    .number()
    .min(0)
    .default(30_000)
    .describe(
      'The longest hold before a requeue; at least retryInitialDelayMs, which it would cut silently.',
    ),
  deadLetterExchange: shortString()
    .optional()
    .describe(
      'Where a rejected message goes with its reason: republished to this exchange (its routing key and ' +
        'properties kept, plus the headers `x-ackline-rejected-by`, `x-ackline-code`, `x-ackline-reason` and ' +
        '`x-ackline-copy-of`, which tells a copy no queue took apart; each `x-ackline-*` value is cut to ' +
        `${ACKLINE_HEADER_MAX_BYTES} bytes of UTF-8, ending in '…'; a per-message TTL is not kept, so the copy ` +
        'cannot expire in the dead-letter queue: it goes to the header `x-ackline-original-expiration`; nor is ' +
        'the user-id, which the broker refuses from any user but the producer: it goes to `x-ackline-original-user-id`; nor ' +
        'the CC and BCC headers, whose keys the broker would route the copy by too: CC goes to `x-ackline-original-cc`), ' +
        'then acked once the broker confirmed the copy (a crash between the two can copy it twice). ' +
        'It must exist: it is checked at start (`AMQP_DECLARATION_FAILED`). A copy that cannot be ' +
        'encoded or that the broker refuses or cannot route leaves the original to a nack without requeue. ' +
        'A copy the broker refuses (403 ACCESS_REFUSED: no write permission, an internal exchange; 404; ' +
        "406 PRECONDITION_FAILED: a body over the broker's max_message_size; any channel error on its publish) " +
        'closes the channel: the source warns, reconnects with the reconnect back-off (doubling while ' +
        'refusals follow each other), and nacks the message without requeue when it comes back (told apart ' +
        'by its message-id, else its body). ' +
        "Unset: nacked without requeue, so the queue's own dead-letter exchange gets it, without the reason.",
    ),
  invalidJson: z
    .enum(['raw', 'reject'])
    .default('raw')
    .describe(
      "A payload that is not valid JSON: 'raw' passes it as the string field `message`; 'reject' dead-letters it. " +
        "A payload that is not valid UTF-8 counts as invalid JSON ('raw': its bad bytes become U+FFFD in `message`), " +
        'and so does one holding a number too large for a double (such as 1e400, which would parse as Infinity).',
    ),
  metadataField: z
    .union([z.string().min(1), z.literal(false)])
    .default('_amqp')
    .describe(
      "The field that holds the broker metadata (exchange, routing key, redelivered, …); false: none. Not 'message', where a raw or non-object payload goes.",
    ),
  ...connectionOptions,
  onWarning: codeOption<(message: string) => void>('a function')
    .optional()
    .describe(
      'Where warnings go (reconnects, prefetch smaller than batchSize). Default: process.emitWarning, which also gets a warning this function threw on (or rejected, if async).',
    ),
})
/** Options of the {@link amqpSource} source. */
export type AmqpSourceOptions = OptionsOf<typeof AmqpSourceOptions>

/**
 * What the source has done so far, live: read `source.counters` again for newer figures.
 */
export interface AmqpSourceCounters {
  /** Messages the broker delivered. */
  readonly received: number
  /** Messages acked (every sink delivered them). */
  readonly acked: number
  /** Messages requeued after an errored outcome (`nack(requeue=true)`). */
  readonly nacked: number
  /**
   * Messages dead-lettered: rejected, unparseable, or out of attempts; nacked without requeue, or,
   * with `deadLetterExchange`, republished there with their reason and acked.
   */
  readonly rejected: number
  /** Of `rejected`, those republished to `deadLetterExchange` with their reason (and acked). */
  readonly deadLettered: number
  /** Deliveries the broker marked redelivered. */
  readonly redelivered: number
  /** Deliveries of a channel that died before they were settled: the broker redelivers them. */
  readonly abandoned: number
  /**
   * Payloads that were not valid JSON, not UTF-8, or held a number too large for a double (passed
   * raw or dead-lettered, per `invalidJson`).
   */
  readonly invalidJson: number
  /** Successful reconnects. */
  readonly reconnects: number
  /** Messages handed downstream and not yet settled with the broker. */
  readonly inFlight: number
}

/** The source {@link amqpSource} returns. */
export interface AmqpSource extends Source {
  readonly kind: 'amqp'
  /** What the source has done since it was made, counted (see {@link AmqpSourceCounters}). */
  readonly counters: AmqpSourceCounters
  validate(): readonly ConfigIssue[]
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

/** One message in the source's hands. */
interface Delivery {
  readonly message: ConsumeMessage
  readonly generation: Generation<Channel>
  /** Set when its generation died: nothing is told to the broker any more. */
  abandoned: boolean
  /** Set once the delivery is settled with the broker or abandoned (see `finish`). */
  finished: boolean
  /** The batch it was sent in, told when the delivery is finished. */
  batch: SentBatch | undefined
}

/** A batch handed downstream: done once each of its deliveries is settled or abandoned. */
interface SentBatch {
  left: number
  readonly resolve: () => void
}

/** Marks a delivery finished (once) and resolves its batch after its last delivery. */
function finish(delivery: Delivery): void {
  if (delivery.finished) return
  delivery.finished = true
  const batch = delivery.batch
  if (batch !== undefined && --batch.left === 0) batch.resolve()
}

/** The dead-letter copies of one channel generation that await their confirm. */
interface CopyGate {
  pending: number
  /** Told when `pending` falls to 0. */
  readonly waiting: (() => void)[]
  /** The broker's error when it closed this channel over a copy (see {@link refusedCopy}). */
  refusal: Error | undefined
}

/**
 * Whether a channel error is the broker refusing a `basic.publish` (class 60, method 40), whatever
 * its code: 403 ACCESS_REFUSED, 404 NOT_FOUND, 406 PRECONDITION_FAILED (a body over its
 * `max_message_size`), or any other. On the source's channel only dead-letter copies are
 * published, and a refused copy's message would be refused again each time it came back: only
 * 403 and 404 counted once, and a 406 was taken for a lost connection, copied again every 100 ms.
 */
function refusedCopy(error: Error): boolean {
  const { classId, methodId } = error as Error & { classId?: unknown; methodId?: unknown }
  return classId === 60 && methodId === 40
}

/** What to fix for a copy the broker refused with `error` (see {@link refusedCopy}). */
function refusalHint(error: Error): string {
  switch ((error as Error & { code?: unknown }).code) {
    case 403:
      return "fix the option or the user's permissions (write on the exchange; it must not be internal)"
    case 404:
      return 'fix the option: the exchange is gone'
    case 406:
      return "the broker refuses the copy as it is (a body over its max_message_size, say): raise the broker's limit, or leave such messages to the queue's own dead-lettering"
    default:
      return 'the broker refuses the copy as it is (its reason above)'
  }
}

/**
 * Errored attempts counted in process, of at most this many messages (classic queues have no
 * delivery count, and one a message brought along from a quorum queue is stale); also bounds the
 * messages remembered for a refused dead-letter copy.
 */
const MAX_TRACKED_ATTEMPTS = 10_000

class AmqpConsumer implements AmqpSource {
  readonly kind = 'amqp'
  readonly canAcknowledge = true
  readonly #options: AmqpSourceOptions
  readonly #counters: Mutable<AmqpSourceCounters> = {
    received: 0,
    acked: 0,
    nacked: 0,
    rejected: 0,
    deadLettered: 0,
    redelivered: 0,
    abandoned: 0,
    invalidJson: 0,
    reconnects: 0,
    inFlight: 0,
  }
  readonly #attempts = new Map<string, number>()

  constructor(options: AmqpSourceOptions) {
    this.#options = options
  }

  get counters(): AmqpSourceCounters {
    return { ...this.#counters }
  }

  validate(): readonly ConfigIssue[] {
    const issues = AmqpSourceOptions.validate(this.#options)
    if (issues.length > 0) return issues
    const o = AmqpSourceOptions.resolve(this.#options)
    return [
      ...urlIssue(o.url),
      ...delayCapIssue('retryInitialDelayMs', o.retryInitialDelayMs, 'retryMaxDelayMs', o.retryMaxDelayMs),
      ...delayCapIssue(
        'reconnectInitialDelayMs',
        o.reconnectInitialDelayMs,
        'reconnectMaxDelayMs',
        o.reconnectMaxDelayMs,
      ),
      // The metadata is written after a raw or non-object payload, which goes to `message`: under
      // that name it replaced the payload, and the event was delivered (and acked) without it.
      ...(o.metadataField === 'message'
        ? [
            ConfigIssue.of(
              'metadataField',
              "not 'message', the field a raw or non-object payload goes to: the metadata would replace it",
              o.metadataField,
            ),
          ]
        : []),
    ]
  }

  async run(context: SourceContext): Promise<void> {
    const o = AmqpSourceOptions.resolve(this.#options)
    const warn = warningsTo(o.onWarning, context.id, 'ACKLINE_AMQP')
    const policy: RedeliveryPolicy = {
      maxAttempts: o.maxAttempts,
      initialDelayMs: o.retryInitialDelayMs,
      maxDelayMs: o.retryMaxDelayMs,
    }
    const batchSize = o.batchSize ?? o.prefetch
    if (o.prefetch < batchSize) {
      warn(
        `${context.id}: prefetch ${o.prefetch} is smaller than batchSize ${batchSize}: arrays never fill and the sinks downstream write smaller batches than they could; raise prefetch to at least the sinks' batch size`,
      )
    }
    const { signal } = context
    const counters = this.#counters
    const pending: Delivery[] = []
    /** Deliveries handed downstream, per generation, until settled or abandoned. */
    const held = new Map<Generation<Channel>, Set<Delivery>>()
    const settling = new Set<Promise<void>>()
    /** Dead-letter copies the broker returned unroutable (`x-ackline-copy-of`), until their confirm. */
    const returnedCopies = new Set<string>()
    let stopping = false
    let wake: (() => void) | undefined
    /**
     * Each generation's consumer, by the broker's answer to its consume (the tag): a stop cancels
     * the live generation's own. One tag kept across generations was still the dead channel's
     * while a reconnect's consume awaited its answer, so a stop then cancelled that unknown tag,
     * which the broker takes without error, and the new consumer went on taking messages.
     */
    const consumers = new WeakMap<Generation<Channel>, Promise<{ readonly consumerTag: string }>>()
    /** Whether the first connection is up: a loss before that fails `run` rather than warning. */
    let opened = false
    /** Dead-letter copies awaiting their confirm, per generation, and what waits for the last one. */
    const copyGates = new WeakMap<Generation<Channel>, CopyGate>()
    const gateOf = (generation: Generation<Channel>): CopyGate => {
      let gate = copyGates.get(generation)
      if (gate === undefined) {
        gate = { pending: 0, waiting: [], refusal: undefined }
        copyGates.set(generation, gate)
      }
      return gate
    }
    /**
     * Messages (`attemptKey`) whose copy was in flight when the broker refused one: nacked without
     * requeue when they come back, so a refusing exchange cannot keep them in the queue for ever.
     * A message without message-id is known by its body, so another one with the same body, also
     * rejected, may take that nack instead of a copy: only the route of a dead-letter can change.
     */
    const refusedCopies = new Set<string>()
    /** Refusals with no confirmed copy between them: the reconnect attempt the next one counts as. */
    let refusalsInARow = 0
    /** Whether `message` came back after its copy was refused; forgets it either way. */
    const copyWasRefused = (message: ConsumeMessage): boolean =>
      refusedCopies.size > 0 && message.fields.redelivered && refusedCopies.delete(attemptKey(message))
    /** Whether `message` came back after its copy was refused (see `copyWasRefused`), keeping it. */
    const refusedBefore = (message: ConsumeMessage): boolean =>
      refusedCopies.size > 0 && message.fields.redelivered && refusedCopies.has(attemptKey(message))

    const connection = new Connection<Channel>({
      url: o.url,
      component: context.id,
      heartbeatSeconds: o.heartbeatSeconds,
      connectTimeoutMs: o.connectTimeoutMs,
      closeTimeoutMs: o.closeTimeoutMs,
      backoff: { initialDelayMs: o.reconnectInitialDelayMs, maxDelayMs: o.reconnectMaxDelayMs },
      onWarning: warn,
      // Confirms only where a rejected message is republished with its reason.
      openChannel: (model) =>
        o.deadLetterExchange === undefined ? model.createChannel() : model.createConfirmChannel(),
      setup: async (generation) => {
        const channel = generation.channel
        // One listener per channel: a copy no queue took comes back (mandatory) before its confirm.
        if (o.deadLetterExchange !== undefined) {
          channel.on('return', (back: ConsumeMessage) => {
            const copyOf = back.properties.headers?.['x-ackline-copy-of'] as unknown
            if (typeof copyOf === 'string') returnedCopies.add(copyOf)
          })
          // Emitted before the 'close' that fails the copies in flight, so their callbacks know.
          channel.on('error', (error: Error) => {
            if (refusedCopy(error)) gateOf(generation).refusal = error
          })
        }
        const consumable = `the queue '${o.queue}' cannot be consumed`
        await declared(channel.checkQueue(o.queue), context.id, 'queue', consumable)
        if (o.deadLetterExchange !== undefined) {
          // Checked before consuming: a copy sent to a missing exchange would close the channel
          // (404) and the rejected message would come back for ever.
          const exchange = o.deadLetterExchange
          await declared(
            channel.checkExchange(exchange),
            context.id,
            'deadLetterExchange',
            `the dead-letter exchange '${exchange}' cannot be used`,
          )
        }
        await channel.prefetch(o.prefetch)
        // A stop came while this reconnect was being set up: no consumer to start (and to cancel).
        if (stopping) return
        const consuming = channel.consume(
          o.queue,
          (message) => {
            if (message === null) {
              // The server cancelled the consumer (queue deleted, node down): start over.
              connection.drop(new Error(`the server cancelled the consumer of queue ${o.queue}`))
              return
            }
            counters.received++
            if (message.fields.redelivered) counters.redelivered++
            pending.push({ message, generation, abandoned: false, finished: false, batch: undefined })
            // Arrived while the consumer was being cancelled: back to the queue with the rest of
            // `pending` once the cancel is answered. Nacked at once, the broker gave it straight
            // back to this consumer, not cancelled yet, again and again until then, each round a
            // delivery more (the redelivered flag, a quorum queue's x-delivery-count).
            if (!stopping) wake?.()
          },
          { noAck: false },
        )
        // Refused by the broker: no permission to read it, or another connection's exclusive queue.
        const reply = declared(consuming, context.id, 'queue', consumable)
        consumers.set(generation, reply)
        await reply
        if (generation.id > 1) counters.reconnects++
      },
      onLost: (generation, error, duringSetup) => {
        const refusal = copyGates.get(generation)?.refusal
        if (refusal !== undefined) refusalsInARow++
        if (refusal !== undefined && opened) {
          const delay = backoffDelay(
            { initialDelayMs: o.reconnectInitialDelayMs, maxDelayMs: o.reconnectMaxDelayMs },
            refusalsInARow,
          )
          warn(
            `${context.id} (deadLetterExchange): the broker refused a copy to the dead-letter exchange '${o.deadLetterExchange}' and closed the channel (${refusal.message}); ${refusalHint(refusal)}. The messages whose copy was refused are nacked without requeue (the queue's own dead-letter exchange) when they come back; reconnecting in ${delay} ms (refusal ${refusalsInARow} in a row)`,
          )
        } else if (opened && !duringSetup) {
          warn(`${context.id}: lost the connection to the broker (${error.message}); reconnecting`)
        }
        const deliveries = held.get(generation)
        held.delete(generation)
        for (const delivery of deliveries ?? []) {
          delivery.abandoned = true
          counters.abandoned++
          counters.inFlight--
          finish(delivery)
        }
        // Back off like failed attempts: the next rejected message may well be refused again.
        return refusal === undefined ? undefined : refusalsInARow
      },
    })

    // A stop while the first connect is pending (a server that accepts and never answers) ends the
    // run at once: the close cuts the attempt's socket, and its failure is ignored.
    const opening = connection.open()
    let onAbort: (() => void) | undefined
    const stopped = new Promise<'stopped'>((resolve) => {
      onAbort = () => resolve('stopped')
      if (signal.aborted) onAbort()
      else signal.addEventListener('abort', onAbort, { once: true })
    })
    try {
      if ((await Promise.race([opening, stopped])) === 'stopped') {
        opening.catch(() => undefined)
        await connection.close()
        return
      }
    } finally {
      if (onAbort !== undefined) signal.removeEventListener('abort', onAbort)
    }
    opened = true

    /** Held errored messages wake on their timer, or all at once when the topology stops. */
    const sleepers = new Set<() => void>()
    signal.addEventListener(
      'abort',
      () => {
        for (const wakeUp of sleepers) wakeUp()
      },
      { once: true },
    )
    const sleepFor = (ms: number): Promise<void> =>
      new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer)
          sleepers.delete(done)
          resolve()
        }
        const timer = setTimeout(done, ms)
        sleepers.add(done)
      })

    /** Resolves once no copy awaits its confirm on `generation`; `undefined` when none does now. */
    const copiesConfirmed = (generation: Generation<Channel>): Promise<void> | undefined => {
      if (o.deadLetterExchange === undefined) return undefined // no copies: the ack path stays as it was
      const gate = copyGates.get(generation)
      if (gate === undefined || gate.pending === 0) return undefined
      return new Promise<void>((resolve) => gate.waiting.push(resolve))
    }
    const copySettled = (generation: Generation<Channel>, gate: CopyGate): void => {
      if (--gate.pending === 0) for (const resolve of gate.waiting.splice(0)) resolve()
      awaitConfirms(generation)
    }
    /**
     * At a stop, cuts the connection when copies await their confirm and the broker confirmed none
     * for `closeTimeoutMs`: with heartbeats off, a broker that answered the cancel and then went
     * silent held the acks waiting behind the copies, and so the stop, for ever. What is then
     * unconfirmed is left to the broker: the original is not acked, so it is redelivered.
     */
    let silence: NodeJS.Timeout | undefined
    const awaitConfirms = (generation: Generation<Channel>): void => {
      // A dead generation's copies are settled already (amqplib failed their confirms).
      if (!stopping || generation !== connection.current) return
      clearTimeout(silence)
      const pending = copyGates.get(generation)?.pending ?? 0
      silence =
        pending === 0
          ? undefined
          : setTimeout(() => {
              if (generation === connection.current) void connection.cut()
            }, o.closeTimeoutMs)
    }

    /**
     * Tells the broker what became of a delivery: at once (no promise, the common path), or after
     * the back-off of an errored one, when the returned promise resolves.
     */
    const settle = (
      delivery: Delivery,
      outcome: RecordOutcome,
      failure?: BatchFailure,
    ): Promise<void> | undefined => {
      if (delivery.abandoned) return undefined
      const attempt = this.#attempt(delivery.message, outcome)
      const action = brokerAction(outcome, attempt, delivery.generation.live, policy)
      if (action.kind === 'requeue' && action.delayMs > 0 && !signal.aborted) {
        // Held, not requeued at once, so a failing sink does not turn the queue into a hot loop;
        // the message keeps its prefetch slot meanwhile, which slows the consumer down too.
        return sleepFor(action.delayMs).then(() => tell(delivery, outcome, attempt, failure))
      }
      return tell(delivery, outcome, attempt, failure)
    }

    /**
     * Applies the broker action for a delivery now, or, for an ack or a requeue, once no
     * dead-letter copy awaits its confirm on its channel: a refused copy closes the channel, and
     * the broker drops whatever was sent after it (see the module header).
     */
    const tell = (
      delivery: Delivery,
      outcome: RecordOutcome,
      attempt: number,
      failure: BatchFailure | undefined,
    ): Promise<void> | undefined => {
      if (delivery.abandoned) return undefined
      const action = brokerAction(outcome, attempt, delivery.generation.live, policy)
      // A message whose copy was refused before is nacked, not copied: that nack waits too.
      if (
        action.kind === 'ack' ||
        action.kind === 'requeue' ||
        (action.kind === 'deadLetter' && refusedBefore(delivery.message))
      ) {
        const confirmed = copiesConfirmed(delivery.generation)
        if (confirmed !== undefined) return confirmed.then(() => tell(delivery, outcome, attempt, failure))
      }
      apply(delivery, action, attempt, failure)
      return undefined
    }

    const apply = (
      delivery: Delivery,
      action: BrokerAction,
      attempt: number,
      failure: BatchFailure | undefined,
    ): void => {
      const { message, generation } = delivery
      held.get(generation)?.delete(delivery)
      counters.inFlight--
      try {
        switch (action.kind) {
          case 'ack':
            generation.channel.ack(message)
            this.#forget(message)
            copyWasRefused(message)
            counters.acked++
            return
          case 'requeue':
            generation.channel.nack(message, false, true)
            this.#remember(message, attempt)
            counters.nacked++
            return
          case 'deadLetter':
            if (o.deadLetterExchange !== undefined && !copyWasRefused(message)) {
              republish(delivery, o.deadLetterExchange, failure)
              return
            }
            generation.channel.nack(message, false, false)
            this.#forget(message)
            counters.rejected++
            return
          case 'abandon':
            counters.abandoned++
            return
          default:
            assertNever(action)
        }
      } catch {
        // amqplib throws on a channel it already knows closed, before our 'close' listener ran:
        // the broker requeues the message with the channel, like any abandoned delivery.
        counters.abandoned++
      }
    }

    /**
     * Copies a rejected message to the dead-letter exchange with its reason in headers, and acks
     * the original once the broker confirmed the copy. A copy that cannot be encoded, that the
     * broker refused, or that it could not route leaves the original to a nack without requeue
     * (the queue's own dead-lettering, no reason); a channel lost before the confirm leaves it
     * unacked, so the broker redelivers it.
     */
    const republish = (delivery: Delivery, exchange: string, failure: BatchFailure | undefined): void => {
      const { message, generation } = delivery
      const channel = generation.channel as ConfirmChannel
      // Tells the copy apart if the broker returns it (see `returnedCopies`).
      const copyId = `${generation.id}:${message.fields.deliveryTag}`
      // Without the original's per-message TTL, as RabbitMQ's own dead-lettering does: the copy
      // would expire in the dead-letter queue (nobody may read it for days) while its original
      // was acked, lost; with expiration '0' it vanished on arrival. Without its user-id: the
      // broker refuses a publish whose user-id is not the publishing user's (406, closing the
      // channel), so a message a producer marked with its own user was copied and refused for ever.
      const { expiration, userId, ...properties } = message.properties
      // Without its CC and BCC headers either: the broker routes a publish by their keys too, so
      // the copy went, beside the dead-letter queue, to every queue bound there with one of them.
      // Its own CC only: one inside a header named '__proto__' (the headers' prototype, amqplib) is
      // no CC of the original, and the broker routed the original by none.
      const {
        CC: _cc,
        BCC: _bcc,
        ...originalHeaders
      } = (message.properties.headers ?? {}) as Record<string, unknown>
      const cc = ownHeader(message.properties.headers, 'CC')
      const headers = {
        // A header named '__proto__' below the top, made the prototype of its table (amqplib),
        // an own key again: amqplib encodes by for...in, which flattened it into that table.
        ...(ownTables(originalHeaders) as Record<string, unknown>),
        'x-ackline-rejected-by': cutToBytes(failure?.componentId ?? context.id, ACKLINE_HEADER_MAX_BYTES),
        'x-ackline-code': cutToBytes(failure?.code ?? 'REJECTED', ACKLINE_HEADER_MAX_BYTES),
        'x-ackline-reason': cutToBytes(failure?.message ?? 'rejected', ACKLINE_HEADER_MAX_BYTES),
        'x-ackline-copy-of': copyId,
        // Kept as a header only: see `properties` below.
        ...(expiration === undefined ? {} : { 'x-ackline-original-expiration': String(expiration) }),
        ...(userId === undefined ? {} : { 'x-ackline-original-user-id': String(userId) }),
        ...(cc === undefined ? {} : { 'x-ackline-original-cc': cc }),
      }
      // A header named '__proto__' (a table, an array, void) is the prototype of the original's
      // headers (amqplib decodes by assignment), which the spread leaves out: an own key again,
      // defined, which amqplib encodes as any other.
      const prototype: unknown =
        message.properties.headers === undefined
          ? Object.prototype
          : Object.getPrototypeOf(message.properties.headers)
      if (prototype !== Object.prototype) {
        Object.defineProperty(headers, '__proto__', {
          value: ownTables(prototype),
          writable: true,
          enumerable: true,
          configurable: true,
        })
      }
      /** Tells the broker about the original once every copy sent before is confirmed. */
      const thenTell = (tellBroker: () => void): void => {
        const confirmed = copiesConfirmed(generation)
        if (confirmed === undefined) tellBroker()
        else void confirmed.then(tellBroker)
      }
      const fallBack = (): void => {
        try {
          if (!generation.live) throw new Error('channel closed')
          channel.nack(message, false, false)
          counters.rejected++
        } catch {
          counters.abandoned++
        }
      }
      const gate = gateOf(generation)
      gate.pending++
      if (gate.pending === 1) awaitConfirms(generation)
      try {
        channel.publish(
          exchange,
          message.fields.routingKey,
          message.content,
          { ...properties, headers, mandatory: true },
          (error) => {
            const returned = returnedCopies.delete(copyId)
            copySettled(generation, gate)
            if (error !== null && error !== undefined && gate.refusal !== undefined) {
              // The broker closed the channel over this copy or one before it: the original comes
              // back, and then leaves by a nack (see `refusedCopies`, and the warning of `onLost`).
              refusedCopies.add(attemptKey(message))
              if (refusedCopies.size > MAX_TRACKED_ATTEMPTS) {
                const oldest = refusedCopies.values().next().value
                if (oldest !== undefined) refusedCopies.delete(oldest)
              }
              counters.abandoned++
              return
            }
            if (!generation.live) {
              counters.abandoned++
              return
            }
            if (error !== null && error !== undefined) {
              warn(
                `${context.id}: the dead-letter exchange '${exchange}' refused a copy (${String(error)}); nacking it without requeue`,
              )
              thenTell(fallBack)
            } else if (returned) {
              warn(
                `${context.id}: the dead-letter exchange '${exchange}' has no queue bound for routing key '${message.fields.routingKey}'; nacking it without requeue`,
              )
              thenTell(fallBack)
            } else {
              refusalsInARow = 0
              thenTell(() => {
                try {
                  if (!generation.live) throw new Error('channel closed')
                  channel.ack(message)
                  counters.rejected++
                  counters.deadLettered++
                } catch {
                  counters.abandoned++
                }
              })
            }
            this.#forget(message)
          },
        )
      } catch (error) {
        // amqplib encodes the whole copy before writing any of it (headers too large for its
        // buffer, a closed channel), so nothing was sent and no confirm will come.
        copySettled(generation, gate)
        const reason = error instanceof Error ? error.message : String(error)
        warn(
          `${context.id}: cannot publish a copy to the dead-letter exchange '${exchange}' (${reason}); nacking it without requeue`,
        )
        thenTell(fallBack)
        this.#forget(message)
      }
    }

    const hold = (delivery: Delivery): void => {
      const set = held.get(delivery.generation)
      if (set === undefined) held.set(delivery.generation, new Set([delivery]))
      else set.add(delivery)
      counters.inFlight++
    }

    /** Settles each delivery of a sent batch by its record's outcome, once the batch resolved. */
    const track = (batch: readonly Delivery[], receipt: BatchReceipt): void => {
      const finished = new Promise<void>((resolve) => {
        const sent: SentBatch = { left: batch.length, resolve }
        for (const delivery of batch) {
          delivery.batch = sent
          // Abandoned while the batch waited for room downstream: it is already done.
          if (delivery.finished) sent.left--
        }
        if (sent.left === 0) resolve()
      })
      settling.add(finished)
      void finished.then(() => settling.delete(finished))
      void outcomesOf(receipt, batch.length).then((outcomes) => {
        for (let i = 0; i < batch.length; i++) {
          const delivery = batch[i]!
          const later = settle(delivery, outcomes.get(i), receipt.failure)
          if (later === undefined) finish(delivery)
          else
            later.then(
              () => finish(delivery),
              () => finish(delivery),
            )
        }
      })
    }

    /**
     * Sends a batch and tracks its outcomes. A batch the pipeline did not accept while running (a
     * buffer downstream could not store one of its events) is sent again one message at a time,
     * so only the culprit fails: a message refused alone is `errored` (see `notAccepted`), held,
     * requeued and in the end dead-lettered like any other, instead of stopping the source and
     * failing it again after a restart. Refused because the topology is stopping: the messages go
     * back to the queue and the error is thrown on.
     */
    const send = async (batch: readonly Delivery[], records: readonly JsonObject[]): Promise<void> => {
      let receipt: BatchReceipt
      try {
        receipt = await context.send(records, { outcomes: true })
      } catch (error) {
        if (signal.aborted) {
          requeueUnsent(batch)
          throw error
        }
        if (batch.length > 1) {
          for (let i = 0; i < batch.length; i++) {
            try {
              await send([batch[i]!], [records[i]!])
            } catch (stopped) {
              requeueUnsent(batch.slice(i + 1))
              throw stopped
            }
          }
          return
        }
        const reason = error instanceof Error ? error.message : String(error)
        warn(
          `${context.id}: the pipeline did not accept message ${batch[0]!.message.fields.deliveryTag} (${reason}); requeueing it after the back-off`,
        )
        receipt = notAccepted(context.id, reason)
      }
      track(batch, receipt)
    }

    /** Deliveries taken for a batch the pipeline never accepted: back to the queue at once. */
    const requeueUnsent = (batch: readonly Delivery[]): void => {
      for (const delivery of batch) {
        if (delivery.finished) continue
        held.get(delivery.generation)?.delete(delivery)
        counters.inFlight--
        finish(delivery)
        if (!delivery.generation.live) {
          counters.abandoned++
          continue
        }
        try {
          delivery.generation.channel.nack(delivery.message, false, true)
          counters.nacked++
        } catch {
          counters.abandoned++
        }
      }
    }

    try {
      while (!signal.aborted) {
        if (pending.length === 0) {
          await new Promise<void>((resolve) => {
            const done = (): void => {
              signal.removeEventListener('abort', done)
              resolve()
            }
            wake = done
            signal.addEventListener('abort', done, { once: true })
          })
          wake = undefined
          continue
        }
        // What has arrived so far, never waiting for more: a batch is as large as the backlog.
        const taken = pending.splice(0, batchSize)
        const batch: Delivery[] = []
        const records: JsonObject[] = []
        for (const delivery of taken) {
          if (!delivery.generation.live) {
            counters.abandoned++
            continue
          }
          const fields = this.#fields(delivery.message, o)
          if (typeof fields === 'string') {
            counters.invalidJson++
            hold(delivery)
            await settle(delivery, 'rejected', {
              componentId: context.id,
              code: 'INVALID_JSON',
              message: fields,
            })
            continue
          }
          hold(delivery)
          batch.push(delivery)
          records.push(fields)
        }
        if (batch.length === 0) continue
        await send(batch, records)
      }
    } finally {
      stopping = true
      const current = connection.current
      const consumer = current === undefined ? undefined : consumers.get(current)
      if (current !== undefined && consumer !== undefined) {
        // Unanswered within closeTimeoutMs (heartbeats off, a broker that stopped answering), the
        // connection is cut: what it held is abandoned, and no wait below is for its answers. A
        // consume still awaiting its answer (a reconnect) is cancelled once answered; a refused one
        // left no consumer.
        await connection.answered(consumer.then(({ consumerTag }) => current.channel.cancel(consumerTag)))
      }
      // Taken from the broker, never sent downstream (some during the cancel): back to the queue.
      for (const delivery of pending.splice(0)) {
        if (delivery.generation.live) {
          counters.nacked++
          delivery.generation.channel.nack(delivery.message, false, true)
        } else counters.abandoned++
      }
      if (connection.current !== undefined) awaitConfirms(connection.current)
      // Every batch settled, and no dead-letter copy awaiting its confirm: a copy's original is
      // acked only on that confirm, and one that came after the close found the generation dead,
      // so the original was redelivered and copied again. A silent broker is cut (`awaitConfirms`).
      for (;;) {
        if (settling.size > 0) {
          await Promise.all([...settling])
          continue
        }
        const live = connection.current
        const confirmed = live === undefined ? undefined : copiesConfirmed(live)
        if (confirmed === undefined) break
        await confirmed
      }
      clearTimeout(silence)
      await connection.close()
    }
  }

  /**
   * The event's fields, or why the payload must be dead-lettered as invalid JSON. A payload that is
   * not UTF-8 is invalid whatever it parses to: decoded, its bad bytes would become U+FFFD inside
   * fields that look whole.
   */
  #fields(message: ConsumeMessage, o: ReturnType<typeof AmqpSourceOptions.resolve>): JsonObject | string {
    const bom = message.content[0] === 0xef && message.content[1] === 0xbb && message.content[2] === 0xbf
    const content = bom ? message.content.subarray(3) : message.content
    const utf8 = isUtf8(content)
    const text = content.toString('utf8')
    let fields: JsonObject | undefined
    let huge: NumberOutOfRange | undefined
    if (utf8) {
      try {
        const value = JSON.parse(text) as JsonValue
        // A number a double cannot hold parsed as Infinity, which would reach the sinks as null.
        huge = JsonValue.numberOutOfRange(text, value)
        if (huge === undefined)
          fields =
            typeof value === 'object' && value !== null && !Array.isArray(value) ? value : { message: value }
      } catch {}
    }
    if (fields === undefined) {
      if (o.invalidJson === 'reject')
        return !utf8
          ? 'the payload is not valid UTF-8'
          : huge !== undefined
            ? `the payload holds a number too large for a double (${huge.shown})`
            : 'the payload is not valid JSON'
      this.#counters.invalidJson++
      fields = { message: text }
    }
    if (o.metadataField === false) return fields
    const { fields: f, properties } = message
    const metadata: JsonObject = {
      exchange: f.exchange,
      routingKey: f.routingKey,
      redelivered: f.redelivered,
      deliveryTag: f.deliveryTag,
      queue: o.queue,
    }
    if (properties.messageId !== undefined) metadata.messageId = String(properties.messageId)
    const count = deliveryCount(message)
    if (count !== undefined) metadata.deliveryCount = count
    if (properties.headers !== undefined) {
      // Made first, then asked for keys: a header named '__proto__' alone is no own key of the
      // decoded headers (amqplib made it their prototype), but one of their JSON.
      const headers = headersToJson(properties.headers)
      if (Object.keys(headers).length > 0) metadata.headers = headers
    }
    if (o.metadataField === '__proto__') {
      // Defined, not assigned: the assignment replaced the payload's prototype, the metadata lost.
      Object.defineProperty(fields, o.metadataField, {
        value: metadata,
        writable: true,
        enumerable: true,
        configurable: true,
      })
    } else fields[o.metadataField] = metadata
    return fields
  }

  /**
   * This delivery's number, 1 for the first: the larger of the quorum queue's count and what this
   * process saw. Never the header alone: a message dead-lettered or shovelled from a quorum queue
   * into a classic one keeps an `x-delivery-count` that no redelivery changes any more, and taken
   * as the count it kept an errored message requeued for ever, never out of attempts.
   */
  #attempt(message: ConsumeMessage, status: RecordOutcome): number {
    const count = deliveryCount(message) ?? 0
    if (status !== 'errored' && !message.fields.redelivered) return count + 1
    return Math.max(count, this.#attempts.get(attemptKey(message)) ?? 0) + 1
  }

  #remember(message: ConsumeMessage, attempt: number): void {
    const key = attemptKey(message)
    this.#attempts.delete(key)
    this.#attempts.set(key, attempt)
    if (this.#attempts.size > MAX_TRACKED_ATTEMPTS) {
      const oldest = this.#attempts.keys().next().value
      if (oldest !== undefined) this.#attempts.delete(oldest)
    }
  }

  #forget(message: ConsumeMessage): void {
    if (message.fields.redelivered) this.#attempts.delete(attemptKey(message))
  }
}

/**
 * Each record's outcome; a context that ignores `{ outcomes: true }` (a test double, an older
 * runtime) gives the batch status, which then stands for every record.
 */
async function outcomesOf(receipt: BatchReceipt, length: number): Promise<RecordOutcomes> {
  const outcomes = await receipt.outcomes
  return outcomes ?? RecordOutcomes.all(await receipt.status, length)
}

/** The receipt of a one-message batch `send` refused: `errored`, code `SEND_FAILED`. */
function notAccepted(componentId: string, reason: string): BatchReceipt {
  return {
    batchId: undefined,
    status: Promise.resolve('errored'),
    failure: { componentId, code: 'SEND_FAILED', message: `the pipeline did not accept it: ${reason}` },
    outcomes: Promise.resolve(RecordOutcomes.all('errored', 1)),
  }
}

/** The `x-delivery-count` header quorum queues set on redeliveries, if any. */
function deliveryCount(message: ConsumeMessage): number | undefined {
  // Its own: a header named '__proto__' holding a table became the headers' prototype (amqplib).
  const value = ownHeader(message.properties.headers, 'x-delivery-count')
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined
}

/** What identifies a message across redeliveries: its message-id (when it has one) and a hash of its body. */
function attemptKey(message: ConsumeMessage): string {
  const id = message.properties.messageId as unknown
  const body = createHash('sha1').update(message.content).digest('base64')
  // The body too, with an id: ids may repeat (a `messageIdField`, an upstream id), and two messages
  // sharing a key share an attempt count, which would give one of them fewer than `maxAttempts`.
  return typeof id === 'string' && id !== '' ? `id:${id}/sha1:${body}` : `sha1:${body}`
}

function assertNever(value: never): never {
  throw new Error(`unknown broker action ${JSON.stringify(value)}`)
}

/**
 * A RabbitMQ source: consumes `queue` with manual acknowledgements; a message is acked only once
 * delivered, requeued after a back-off when errored (at most `maxAttempts` deliveries), and
 * dead-lettered when rejected. Broker metadata is under `_amqp`.
 *
 * @example
 * ```ts
 * new TopologyBuilder({ acknowledgements: true })
 *   .source('orders', amqpSource({ url: 'amqp://guest:guest@127.0.0.1:5672', queue: 'orders', prefetch: 200 }))
 *   .sink('archive', ['orders'], file({ path: './orders.ndjson' }))
 * ```
 */
export function amqpSource(options: AmqpSourceOptions): AmqpSource {
  return new AmqpConsumer(options)
}
