/**
 * The facts a running topology reports about itself, as one tagged union, so users can watch a
 * topology with rxjs (`topology.lifecycle.pipe(filter((e) => e.type === 'batch_resolved'))`).
 *
 * Invariant: each batch a source sent with acknowledgements on yields exactly one
 * `batch_resolved`; each component yields one `component_started` and one `component_stopped`.
 *
 * @module
 */
import type { BatchStatus } from '@ackline/core'
import type { BatchFailure } from './BatchFailure.js'

/**
 * Which kind of component a fact is about.
 *
 * @example
 * ```ts
 * topology.lifecycle.pipe(filter((f) => f.type === 'component_stopped' && f.role === 'sink'))
 * ```
 */
export type ComponentRole = 'source' | 'transform' | 'sink'

/**
 * What went wrong in a `component_error` fact.
 *
 * @example
 * ```ts
 * topology.lifecycle.subscribe((f) => f.type === 'component_error' && f.code === 'LEAKED_EVENTS' && alert(f.message))
 * ```
 */
export type ComponentErrorCode =
  /** A transform returned without emitting, dropping or merging some input events; they were settled `errored`. */
  | 'LEAKED_EVENTS'
  /**
   * A transform used an event that was no longer its own: it ended an event after emitting it
   * (the ended handle was not passed on), or, in a later call, emitted or dropped one an earlier
   * call had passed on (nothing was passed on or ended: the handle is a sink's by then).
   */
  | 'ENDED_AFTER_EMIT'
  /**
   * A transform's `process` changed its input array (untyped code): its length (`splice`,
   * `shift`, `length = 0`), or, keeping the length, wrote a handle in twice (`list[0] = list[1]`)
   * or put in one it made (a clone). Events taken out or written over were out of the runtime's
   * sight (neither passed on nor settled: their batches wait for the stop); `events` counts them.
   * Its later calls get a frozen array. Reordering the array in place is not reported.
   */
  | 'INPUT_MUTATED'
  /** A transform's `process` or `flush` threw; its unhandled input events were settled `errored`. */
  | 'PROCESS_FAILED'
  /**
   * A transform emitted on a port it does not declare: `emit` settled the event `errored`, then
   * threw; an event not the transform's (one an earlier call passed on, a sink's) was left as it
   * was (`events` is 0).
   */
  | 'UNDECLARED_PORT'
  /**
   * A transform emitted after its call returned (from a timer, say): the event was settled
   * `errored`, unless it had been passed on (a sink's, left to it: `events` is 0). Also: a call a forced stop gave up (it had not returned) emitted or dropped an
   * event afterwards; the stop had settled it, and nothing changed (`events` is 0).
   */
  | 'EMIT_AFTER_RETURN'
  /** A sink's `write` failed (one fact per failed attempt). */
  | 'WRITE_FAILED'
  /**
   * Reading the buffer in front of a sink failed (a disk buffer whose segment cannot be read): the
   * sink tries again after its retry policy's back-off, one fact per failed attempt.
   */
  | 'READ_FAILED'
  /** A sink's `write` returned a number of statuses that does not match its events; all were settled `errored`. */
  | 'BAD_RESULT'
  /** A source's `run` threw. */
  | 'RUN_FAILED'
  /**
   * A sink's `stop()` threw or rejected, once its writes had ended (what they wrote was settled
   * already): it may not have released what it holds (a file, a connection). Also: the buffer in
   * front of a sink, given up at a forced stop, had not finished `dispose()` within the stop's
   * `disposeTimeoutMs`, or its `dispose()` rejected (`cause`: its error); it may still hold its
   * files (a disk buffer's lock); the stop went on. The same, before `start()` rejects, for a
   * start that failed: a sink it had started whose `stop()` threw, rejected or had not settled
   * within 5000 ms, and a buffer it had opened whose `dispose()` did (within 5000 ms more); each
   * wait is the smallest `disposeTimeoutMs` instead when a stop() asked for one while starting.
   */
  | 'STOP_FAILED'

/**
 * One fact about a running topology.
 *
 * @example
 * ```ts
 * topology.lifecycle.subscribe((fact) => {
 *   if (fact.type === 'batch_resolved') console.log(fact.source, fact.status, `${fact.latencyMs} ms`)
 * })
 * ```
 */
export type LifecycleEvent =
  | {
      readonly type: 'component_started'
      readonly component: string
      readonly kind: string
      readonly role: ComponentRole
    }
  | {
      readonly type: 'component_stopped'
      readonly component: string
      readonly kind: string
      readonly role: ComponentRole
      /** Whether the deadline of a stop forced it (what it held was settled `errored`). */
      readonly forced: boolean
    }
  | {
      readonly type: 'batch_resolved'
      /** The source that sent the batch. */
      readonly source: string
      readonly batchId: string
      /** What the source was told. */
      readonly status: BatchStatus
      /** From the send to the resolution, in milliseconds. */
      readonly latencyMs: number
      /** Whether the ack timeout (or a forced stop) decided the status rather than the sinks. */
      readonly timedOut: boolean
      /** Why it was not delivered (the receipt's `failure`); absent when delivered. */
      readonly failure?: BatchFailure
    }
  | {
      readonly type: 'component_error'
      readonly component: string
      readonly code: ComponentErrorCode
      readonly message: string
      /** How many events the problem concerns. */
      readonly events: number
      readonly cause?: unknown
    }
  | {
      readonly type: 'topology_stopped'
      /** Whether the drain deadline (or a second `stop`) cut the drain short. */
      readonly forced: boolean
    }
