// Tiny inline sources, sinks and transforms for the topology's own tests: each does one thing and
// records what happened, so a test asserts on statuses rather than on timing.
import type { BatchStatus, DeliveryStatus, EventArray, JsonObject, LogEvent } from '@ackline/core'
import type {
  BatchReceipt,
  ConfigIssue,
  EdgeBuffer,
  Sink,
  SinkResult,
  Source,
  Transform,
  TransformContext,
} from '@ackline/topology'

/**
 * A source that sends the given batches in order, then (optionally) waits for the stop signal.
 * `afterSend(sent)`, when given, is awaited after each send (`sent` batches sent so far): a test
 * that needs a batch to reach a component before the next ones are sent waits for it there (sent
 * in one burst, batches that queue are coalesced by a consumer that wakes after the burst).
 */
export interface TestSource extends Source {
  readonly receipts: BatchReceipt[]
  /** Every batch's status, in send order, once all resolved. */
  statuses(): Promise<BatchStatus[]>
  /** What the context said about acknowledgements, once run. */
  acknowledgements: boolean | undefined
}

export function testSource(
  batches: readonly (readonly JsonObject[])[],
  options: {
    canAcknowledge?: boolean
    untilStopped?: boolean
    issues?: ConfigIssue[]
    afterSend?: (sent: number) => Promise<void> | void
  } = {},
): TestSource {
  const receipts: BatchReceipt[] = []
  return {
    kind: 'test_source',
    canAcknowledge: options.canAcknowledge ?? true,
    receipts,
    acknowledgements: undefined,
    validate: () => options.issues ?? [],
    statuses: () => Promise.all(receipts.map((r) => r.status)),
    async run(context) {
      this.acknowledgements = context.acknowledgements
      for (const batch of batches) {
        receipts.push(await context.send(batch))
        await options.afterSend?.(receipts.length)
      }
      if (options.untilStopped === true && !context.signal.aborted) {
        await new Promise((resolve) => context.signal.addEventListener('abort', resolve, { once: true }))
      }
    },
  } satisfies TestSource
}

/** A gate a test opens when it wants a sink to go on. */
export class Gate {
  #open = false
  #waiters: (() => void)[] = []
  wait(): Promise<void> {
    if (this.#open) return Promise.resolve()
    return new Promise((resolve) => this.#waiters.push(resolve))
  }
  open(): void {
    this.#open = true
    for (const w of this.#waiters.splice(0)) w()
  }
  get waiting(): number {
    return this.#waiters.length
  }
}

/** A sink that records fields and reports `outcome(event)` per event (default delivered). */
export interface TestSink extends Sink {
  readonly received: JsonObject[]
  writes: number
}

export function testSink(
  options: {
    outcome?: (event: LogEvent) => DeliveryStatus
    gate?: Gate
    write?: (events: EventArray) => Promise<SinkResult>
    issues?: ConfigIssue[]
  } = {},
): TestSink {
  const received: JsonObject[] = []
  return {
    kind: 'test_sink',
    received,
    writes: 0,
    validate: () => options.issues ?? [],
    async write(events) {
      this.writes++
      if (options.gate !== undefined) await options.gate.wait()
      if (options.write !== undefined) return options.write(events)
      const statuses: DeliveryStatus[] = []
      for (const event of events) {
        received.push(event.fields as JsonObject)
        statuses.push(options.outcome?.(event) ?? 'delivered')
      }
      return statuses
    },
  } satisfies TestSink
}

/** A transform that passes everything on. */
export const passThrough = (): Transform => ({
  kind: 'pass',
  process(events, context) {
    for (const event of events) context.emit(event)
  },
})

/** A transform that keeps what `keep` accepts and drops the rest. */
export const keepIf = (
  keep: (event: LogEvent) => boolean,
  dropStatus?: 'delivered' | 'rejected',
): Transform => ({
  kind: 'keep_if',
  ...(dropStatus === undefined ? {} : { dropStatus }),
  process(events, context) {
    for (const event of events) {
      if (keep(event)) context.emit(event)
      else context.drop(event)
    }
  },
})

/** A transform that sends each event to every port whose predicate accepts it, or to `_unmatched`. */
export const routeBy = <P extends string>(
  routes: Record<P, (event: LogEvent) => boolean>,
): Transform<P | '_unmatched'> => {
  const ports = Object.keys(routes) as P[]
  return {
    kind: 'route_by',
    outputs: [...ports, '_unmatched'],
    process(events, context: TransformContext) {
      for (const event of events) {
        let matched = false
        for (const port of ports) {
          if (routes[port](event)) {
            context.emit(event, port)
            matched = true
          }
        }
        if (!matched) context.emit(event, '_unmatched')
      }
    },
  }
}

/** A transform that merges every input array into its first event. */
export const mergeAll = (): Transform => ({
  kind: 'merge_all',
  process(events, context) {
    const [first, ...rest] = events.events
    if (first === undefined) return
    for (const other of rest) first.merge(other)
    first.set('merged', events.length)
    context.emit(first)
  },
})

/** A buffer of a kind the topology does not know: an unbounded queue, as a third party might write one. */
export function queueBuffer(): EdgeBuffer & { disposed: boolean } {
  const queue: EventArray[] = []
  let waiting: ((array: EventArray | undefined) => void) | undefined
  let closed = false
  return {
    disposed: false,
    async push(events) {
      if (waiting !== undefined) {
        const wake = waiting
        waiting = undefined
        wake(events)
      } else {
        queue.push(events)
      }
    },
    pull() {
      const next = queue.shift()
      if (next !== undefined || closed) return Promise.resolve(next)
      return new Promise((resolve) => {
        waiting = resolve
      })
    },
    async close() {
      closed = true
      if (queue.length === 0) waiting?.(undefined)
    },
    async dispose() {
      this.disposed = true
      for (const array of queue.splice(0)) array.end('errored')
      closed = true
      waiting?.(undefined)
    },
  }
}
