/**
 * A built topology: start it, watch it, stop it.
 *
 * Invariant: the topology moves `built → starting → running → stopping → stopped`, in that order
 * only, through one private transition; it runs at most once. Stopping never acknowledges what
 * was not delivered: whatever has not settled by the drain deadline is settled `errored`.
 *
 * @module
 */
import { type Observable, Subject } from 'rxjs'
import { ComponentError } from './ComponentError.js'
import type { ComponentMetrics } from './ComponentMetrics.js'
import { Counters } from './internal/Counters.js'
import { MAX_TIMER_MS } from './internal/maxTimerMs.js'
import { type DisposeBound, Runtime } from './internal/Runtime.js'
import type { TopologyPlan } from './internal/TopologyPlan.js'
import type { LifecycleEvent } from './LifecycleEvent.js'
import type { TopologyWarning } from './TopologyWarning.js'
import { textOf } from './textOf.js'

/**
 * Options of {@link Topology.stop}.
 *
 * @example
 * ```ts
 * await topology.stop({ drainTimeoutMs: 5000 })
 * ```
 */
export interface StopOptions {
  /**
   * How long in-flight events may take to drain through transforms and sinks, in milliseconds
   * (default 30 000). After it, what is still unsettled is settled `errored`. `Infinity` (or any
   * value of 2^31 - 1 ms or more, longer than a timer can wait) means no deadline: the stop waits
   * for the drain. Anything but a number of 0 or more makes `stop()` reject (`INVALID_OPTION`).
   */
  readonly drainTimeoutMs?: number
  /**
   * How long a forced stop waits for the buffers it gave up on (a disk buffer's `dispose()`) to let
   * go of what they hold, in milliseconds (default 5 000), counted once every component has
   * stopped. A buffer still disposing then is reported (`component_error`, `STOP_FAILED`, naming
   * its sink), and the stop resolves without it: it may still hold its files (a disk buffer's
   * lock). `Infinity` (or 2^31 - 1 ms or more) means wait for as long as it takes. Called while
   * `start()` is still running, it also bounds how long a start that fails waits for each sink it
   * had started to stop and for each buffer it had opened to let go (the smallest asked for, when
   * several stop() calls came; 5000 ms without any). Anything but a number of 0 or more makes
   * `stop()` reject (`INVALID_OPTION`).
   */
  readonly disposeTimeoutMs?: number
}

type Phase =
  | { readonly name: 'built' }
  | {
      readonly name: 'starting'
      readonly started: Promise<void>
      /** Makes the start give up waiting (see `Runtime.open`). */
      readonly abandon: () => void
      /** Whether a stop() came while starting (a second one gives up at once). */
      stopAsked: boolean
      /**
       * How long a failed start waits for the sinks it started to stop and the buffers it opened
       * to let go: the smallest `disposeTimeoutMs` a stop() asked for while starting (none yet:
       * undefined, and the start waits 5000 ms).
       */
      disposeTimeoutMs: number | undefined
      /**
       * Called when a stop() changes `disposeTimeoutMs`: the wait of a start that failed already
       * ends sooner, or later.
       */
      readonly changed: Set<() => void>
    }
  | { readonly name: 'running'; readonly runtime: Runtime }
  | { readonly name: 'stopping'; readonly runtime: Runtime; readonly stopped: Promise<void> }
  | { readonly name: 'stopped' }

const DEFAULT_DRAIN_TIMEOUT_MS = 30_000
const DEFAULT_DISPOSE_TIMEOUT_MS = 5000

/**
 * A runnable topology, as `TopologyBuilder.build()` returns it.
 *
 * @example
 * ```ts
 * const topology = builder.build()
 * topology.lifecycle.subscribe((fact) => console.log(fact))
 * await topology.start()
 * process.once('SIGTERM', () => void topology.stop({ drainTimeoutMs: 5000 }))
 * process.once('SIGINT', () => void topology.stop()) // a second stop stops at once
 * await topology.done
 * ```
 */
export class Topology {
  /**
   * Facts about the run: components started and stopped, batches resolved, component errors. Told
   * synchronously, in the order they happen, to every subscriber (so a slow subscriber slows the
   * run). An error thrown by a subscriber's `next` (or a `filter` or `map` before it) is not the
   * topology's to catch: rxjs reports it, by default by throwing it again asynchronously, which
   * ends the process as an uncaught exception. Catch in the observer, or set rxjs's
   * `config.onUnhandledError`.
   */
  readonly lifecycle: Observable<LifecycleEvent>
  /**
   * Resolves once every component has stopped (finite sources ran out and all drained, or a
   * stop), or once a `start()` failed (nothing runs then).
   */
  readonly done: Promise<void>
  readonly #subject = new Subject<LifecycleEvent>()
  readonly #plan: TopologyPlan
  readonly #counters: ReadonlyMap<string, Counters>
  #phase: Phase = { name: 'built' }
  #resolveDone!: () => void

  /** @internal Use `TopologyBuilder.build()`. */
  constructor(
    plan: TopologyPlan,
    /** The warnings of `build()`. */
    readonly warnings: readonly TopologyWarning[],
  ) {
    this.#plan = plan
    this.#counters = new Map(plan.components.map((d) => [d.id, new Counters(d.role, d.component.kind)]))
    this.lifecycle = this.#subject.asObservable()
    this.done = new Promise<void>((resolve) => {
      this.#resolveDone = resolve
    })
  }

  /** Whether each source creates batch notifiers (some acknowledging sink reaches it). */
  get sourceAcknowledgements(): Readonly<Record<string, boolean>> {
    return Object.fromEntries(this.#plan.sourceAcks)
  }

  /** Whether each sink acknowledges (its own setting, else the topology's). */
  get sinkAcknowledgements(): Readonly<Record<string, boolean>> {
    return Object.fromEntries(this.#plan.sinkAcks)
  }

  /** A snapshot of every component's counters, by component id. */
  metrics(): Readonly<Record<string, ComponentMetrics>> {
    // Defined, not assigned: a component named `__proto__` is a key like any other.
    return Object.fromEntries([...this.#counters].map(([id, counters]) => [id, counters.snapshot()]))
  }

  /**
   * Opens buffers, starts sinks, then runs every component. Resolves once all run. Rejects with one
   * `TopologyError` naming every buffer that could not open (`BUFFER_OPEN_FAILED`) or every sink
   * whose `start()` threw (`SINK_START_FAILED`, with the sink's kind and the cause), once the sinks
   * it had started have stopped and the buffers it had opened have let go of their files, each
   * waited for 5000 ms at most, or for the smallest `disposeTimeoutMs` of the stop() calls made
   * meanwhile (one that had not, or failed, is a `STOP_FAILED` fact, as at a stop); throws a
   * `ComponentError` with code `RUNS_ONCE` when started twice.
   */
  async start(): Promise<void> {
    if (this.#phase.name !== 'built') {
      throw new ComponentError(
        'RUNS_ONCE',
        `a topology runs once: start() was called while it is ${this.#phase.name}`,
      )
    }
    let abandon!: () => void
    const changed = new Set<() => void>()
    const abandoned = new Promise<void>((resolve) => {
      abandon = resolve
    })
    const started = (async () => {
      const emit = (fact: LifecycleEvent): void => this.#subject.next(fact)
      // Read when the start fails, and again when a stop() that comes during its waits asks for
      // another bound (the first one replaces the 5000 ms, a later one may only lower it).
      const bound: DisposeBound = {
        ms: () =>
          (this.#phase.name === 'starting' ? this.#phase.disposeTimeoutMs : undefined) ??
          DEFAULT_DISPOSE_TIMEOUT_MS,
        onChanged: (listener) => {
          changed.add(listener)
          return () => changed.delete(listener)
        },
      }
      let runtime: Runtime
      try {
        runtime = await Runtime.open(
          this.#plan,
          this.#counters,
          emit,
          () => this.#subject.observed,
          abandoned,
          bound,
        )
      } catch (error) {
        // Nothing runs: `done` resolves, or whoever awaits it after a failed start waits for ever.
        this.#finish(false)
        throw error
      }
      this.#transition({ name: 'running', runtime })
      runtime.done.then(() => this.#ranOut(runtime))
      runtime.launch()
    })()
    this.#transition({
      name: 'starting',
      started,
      abandon,
      stopAsked: false,
      disposeTimeoutMs: undefined,
      changed,
    })
    return started
  }

  /**
   * Stops the sources, lets in-flight events drain up to `drainTimeoutMs`, then settles what is
   * left `errored`. A second call while stopping stops at once. Called while `start()` is still
   * opening buffers or starting sinks, it waits for the start up to `drainTimeoutMs` (a second
   * call: not at all), then gives it up: `start()` rejects with a `TopologyError` whose problems
   * are `STOPPED_WHILE_STARTING`, what did start is stopped and closed (waiting `disposeTimeoutMs`
   * at most for each sink's stop() and buffer's dispose(), `STOP_FAILED` past it), and what starts
   * later is stopped and closed then (a buffer that opens late holds its files until then). Called
   * while a start that failed by itself waits for those stop() and dispose() calls, it ends each
   * wait once `disposeTimeoutMs` has passed since the wait began. A start that finishes in time
   * drains with what is left of `drainTimeoutMs`. Resolves once stopped: after a forced stop, once
   * the buffers it gave up on have let go of their files, or `disposeTimeoutMs` later, reporting
   * each that had not (`STOP_FAILED`). Rejects with a `ComponentError` (`INVALID_OPTION`, field
   * `drainTimeoutMs` or `disposeTimeoutMs`), changing nothing, when either is not a number of 0 or
   * more (`NaN`, negative, a string from a config).
   */
  async stop(options: StopOptions = {}): Promise<void> {
    // `null` from untyped code is no options, as `undefined` is (read, it threw a bare TypeError).
    const drainTimeoutMs = milliseconds(options?.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS, 'drainTimeoutMs')
    const disposeTimeoutMs = milliseconds(
      options?.disposeTimeoutMs ?? DEFAULT_DISPOSE_TIMEOUT_MS,
      'disposeTimeoutMs',
    )
    const phase = this.#phase
    switch (phase.name) {
      case 'built':
        this.#finish(false)
        return
      case 'starting': {
        // The start may wait on a host that does not answer (a sink's start()): it is given up
        // after `drainTimeoutMs`, or at once by a second stop(), and start() then rejects with
        // `STOPPED_WHILE_STARTING`. A start that finishes in time is stopped as a running one,
        // with what is left of `drainTimeoutMs` for its drain.
        const began = performance.now()
        const before = phase.disposeTimeoutMs ?? DEFAULT_DISPOSE_TIMEOUT_MS
        phase.disposeTimeoutMs = Math.min(phase.disposeTimeoutMs ?? disposeTimeoutMs, disposeTimeoutMs)
        // A start that failed by itself may be waiting already for what it started to stop: the
        // first stop() lengthens that wait as well as shortening it (it waited 5000 ms for the
        // sinks, then this bound for the buffers).
        if (phase.disposeTimeoutMs !== before) for (const listener of [...phase.changed]) listener()
        if (phase.stopAsked) phase.abandon()
        else {
          phase.stopAsked = true
          const deadline =
            drainTimeoutMs >= MAX_TIMER_MS ? undefined : setTimeout(phase.abandon, drainTimeoutMs)
          if (deadline !== undefined) void phase.started.catch(() => {}).then(() => clearTimeout(deadline))
        }
        await phase.started.catch(() => {})
        return this.stop({
          drainTimeoutMs: Math.max(0, drainTimeoutMs - (performance.now() - began)),
          disposeTimeoutMs,
        })
      }
      case 'running': {
        const { runtime } = phase
        const stopped = this.#drain(runtime, drainTimeoutMs, disposeTimeoutMs)
        this.#transition({ name: 'stopping', runtime, stopped })
        return stopped
      }
      case 'stopping':
        phase.runtime.force()
        return phase.stopped
      case 'stopped':
        return
    }
  }

  async #drain(runtime: Runtime, drainTimeoutMs: number, disposeTimeoutMs: number): Promise<void> {
    // A timer would fire a longer delay after 1 ms (see `MAX_TIMER_MS`): such a stop has no deadline.
    const deadline =
      drainTimeoutMs >= MAX_TIMER_MS ? undefined : setTimeout(() => runtime.force(), drainTimeoutMs)
    runtime.drain()
    await runtime.done
    // Read from the runtime: the deadline forces it, and so does a second stop().
    const forced = runtime.forced
    if (deadline !== undefined) clearTimeout(deadline)
    // A forced stop gave some buffers up without waiting: they must have closed before stop()
    // resolves, or a restart in the same process would find a disk buffer still locked; one whose
    // dispose() never settles is reported after `disposeTimeoutMs` instead of hanging the stop.
    await runtime.released(disposeTimeoutMs)
    runtime.settlePending()
    this.#finish(forced)
  }

  /** Every component stopped without a stop() call (finite sources ran out). */
  #ranOut(runtime: Runtime): void {
    if (this.#phase.name === 'running' && this.#phase.runtime === runtime) {
      runtime.settlePending()
      this.#finish(false)
    }
  }

  #finish(forced: boolean): void {
    if (this.#phase.name === 'stopped') return
    this.#transition({ name: 'stopped' })
    this.#subject.next({ type: 'topology_stopped', forced })
    this.#resolveDone()
  }

  #transition(next: Phase): void {
    this.#phase = next
  }
}

/**
 * A stop's `field` as a number of milliseconds, 0 or more, or a `ComponentError`
 * (`INVALID_OPTION`) naming it: unchecked, `NaN` or a string would arm a 1 ms timer (a forced
 * stop that errors what was in flight).
 */
function milliseconds(value: unknown, field: 'drainTimeoutMs' | 'disposeTimeoutMs'): number {
  if (typeof value === 'number' && value >= 0) return value
  throw new ComponentError(
    'INVALID_OPTION',
    `must be a number of milliseconds, 0 or more (Infinity: no deadline), got ${typeof value === 'string' ? `'${value}'` : textOf(value)}`,
    { field },
  )
}
