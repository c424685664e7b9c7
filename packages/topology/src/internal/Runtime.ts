/**
 * One run of a topology: the buffers, the runners, and the order in which things close.
 *
 * Invariant: a component's input closes when the last component feeding it has finished, so a
 * drain flows from sources to sinks; `force()` settles `errored` whatever is still held by the
 * runtime (queued, blocked, being written) and tells every source `errored` for each batch still
 * pending, so nothing unsettled is ever acknowledged. The runtime knows buffers only by the
 * `EdgeBuffer` contract: the in-memory channel is its own; any other kind comes from a factory.
 */
import { BatchNotifier, type BatchStatusReceiver, type EventArray, EventFinalizerGroups } from '@ackline/core'
import type { BatchFailure } from '../BatchFailure.js'
import type { EdgeBuffer } from '../EdgeBuffer.js'
import type { LifecycleEvent } from '../LifecycleEvent.js'
import type { MemoryBufferOptions } from '../MemoryBufferOptions.js'
import type { Sink } from '../Sink.js'
import type { ComponentDeclaration } from '../TopologyBuilder.js'
import { TopologyError, type TopologyProblem } from '../TopologyError.js'
import { textOf } from '../textOf.js'
import { BatchTracker } from './BatchTracker.js'
import type { Counters } from './Counters.js'
import { isEdgeBufferFactory } from './isEdgeBufferFactory.js'
import { MemoryChannel, RESOLVED } from './MemoryChannel.js'
import { MAX_TIMER_MS } from './maxTimerMs.js'
import { type Inlet, Output } from './Output.js'
import { SinkRunner } from './SinkRunner.js'
import { SourceRunner } from './SourceRunner.js'
import type { TopologyPlan } from './TopologyPlan.js'
import { TransformRunner } from './TransformRunner.js'

const DEFAULT_MAX_EVENTS = 500

export class Runtime {
  readonly done: Promise<void>
  #resolveDone!: () => void
  readonly #plan: TopologyPlan
  readonly #counters: ReadonlyMap<string, Counters>
  readonly #emit: (fact: LifecycleEvent) => void
  readonly #watching: () => boolean
  readonly #buffers: Map<string, EdgeBuffer>
  readonly #running = new Set<string>()
  readonly #remainingProducers = new Map<string, number>()
  readonly #trackers: BatchTracker[] = []
  readonly #trackersBySource = new Map<string, BatchTracker>()
  readonly #sinkRunners: SinkRunner[] = []
  readonly #transformRunners: TransformRunner[] = []
  readonly #controller = new AbortController()
  #forced = false
  /** The buffers `force()` gave up on, until they have let go of what they hold (a disk lock). */
  readonly #discarding: Discarding[] = []

  private constructor(
    plan: TopologyPlan,
    counters: ReadonlyMap<string, Counters>,
    emit: (fact: LifecycleEvent) => void,
    watching: () => boolean,
    buffers: Map<string, EdgeBuffer>,
  ) {
    this.#plan = plan
    this.#counters = counters
    this.#emit = emit
    this.#watching = watching
    this.#buffers = buffers
    this.done = new Promise<void>((resolve) => {
      this.#resolveDone = resolve
    })
  }

  /**
   * Opens every buffer and starts every sink. Throws one `TopologyError` naming every buffer that
   * could not open (`BUFFER_OPEN_FAILED`) or, once the buffers are open, every sink whose
   * `start()` threw (`SINK_START_FAILED`), with its kind and the cause; what was opened or started
   * is given up again first. Facts go to `emit`; `watching` says whether anyone listens (facts
   * made per batch are built only then). Once `abandoned` resolves (a stop gave up on the start),
   * it stops waiting: it rejects with `STOPPED_WHILE_STARTING` for each buffer still opening or
   * sink still starting, after stopping and closing what did, and stops or closes the others
   * once they have. A failed start waits `bound.ms()` at most for the sinks it had started to stop,
   * then for the buffers it had opened to let go (5000 ms by default), each wait ending sooner or
   * later when the bound changes while it lasts (see {@link DisposeBound}).
   */
  static async open(
    plan: TopologyPlan,
    counters: ReadonlyMap<string, Counters>,
    emit: (fact: LifecycleEvent) => void,
    watching: () => boolean,
    abandoned: Promise<void> = NEVER,
    bound: DisposeBound = fixedBound(DEFAULT_DISPOSE_TIMEOUT_MS),
  ): Promise<Runtime> {
    const buffers = new Map<string, EdgeBuffer>()
    const problems: TopologyProblem[] = []
    /** The components whose buffer is still opening, or whose sink is still starting. */
    const pending = new Map<string, string>()
    /**
     * Whether the start was given up: set only when `abandoned` resolved while something was still
     * pending. What opens or starts after that is closed or stopped again as it does; a start that
     * had nothing left pending when asked goes on (the stop then stops it as a running one).
     */
    let gaveUp = false
    /**
     * Gives the start up while something is pending: its problems are taken now, in the same step,
     * so what finishes during the stops and closes that follow cannot make the start succeed.
     */
    const giveUp = (): void => {
      gaveUp = true
      for (const [component, what] of pending) problems.push(stoppedWhileStarting(component, what))
    }
    let asked = false
    const whenAsked = abandoned.then(() => {
      asked = true
    })
    const opening: Promise<void>[] = []
    for (const decl of plan.components) {
      if (decl.role === 'source') continue
      const options = decl.options.buffer
      if (options !== undefined && isEdgeBufferFactory(options)) {
        const context = { componentId: decl.id, dataDir: plan.options.dataDir }
        pending.set(
          decl.id,
          `the ${options.kind} buffer in front of ${decl.role} '${decl.id}' had not opened`,
        )
        opening.push(
          (async () => {
            let buffer: EdgeBuffer
            try {
              buffer = await options.open(context)
            } catch (error) {
              pending.delete(decl.id)
              // After a give-up the start has already failed, with the problems it had then.
              if (gaveUp) return
              problems.push({
                code: 'BUFFER_OPEN_FAILED',
                component: decl.id,
                field: 'buffer',
                message: `the ${options.kind} buffer in front of ${decl.role} '${decl.id}' (${decl.component.kind}) could not open: ${messageOf(error)}`,
                cause: error,
              })
              return
            }
            pending.delete(decl.id)
            if (gaveUp) {
              await discard(buffer).catch(() => {})
              return
            }
            // Two sinks reading one buffer would each take the other's events, and it would be
            // closed and disposed twice: the one opened first keeps it (and gives it up, as the
            // start fails).
            const owner = [...buffers].find(([, opened]) => opened === buffer)?.[0]
            if (owner === undefined) {
              buffers.set(decl.id, buffer)
              return
            }
            problems.push({
              code: 'BUFFER_OPEN_FAILED',
              component: decl.id,
              field: 'buffer',
              message: `the ${textOf(options.kind)} buffer's factory returned for ${decl.role} '${decl.id}' (${decl.component.kind}) the buffer it had opened for sink '${owner}': each sink needs a buffer of its own (open() must open a new one on each call)`,
            })
          })(),
        )
        continue
      }
      buffers.set(decl.id, memoryChannel(decl.id, options, counters.get(decl.id)!))
    }
    // A stop may give up on the start (a buffer or a sink's start() waiting on a host that does
    // not answer): each wait below ends when it is asked to, and gives up if something is pending.
    const allOpen = Promise.all(opening)
    await Promise.race([allOpen, whenAsked])
    if (asked && pending.size > 0) giveUp()
    else await allOpen
    if (problems.length === 0 && !gaveUp) {
      const sinks = plan.components.filter((d) => d.role === 'sink')
      /** Sinks whose start() finished before a give-up: stopped again by it. */
      const startedInTime: (typeof sinks)[number][] = []
      /** What the starts that failed before a give-up threw, by sink. */
      const failed = new Map<string, unknown>()
      const starting = sinks.map(async (d) => {
        pending.set(d.id, `sink '${d.id}' (${d.component.kind}) had not finished start()`)
        try {
          await d.component.start?.()
        } catch (error) {
          pending.delete(d.id)
          if (!gaveUp) failed.set(d.id, error)
          return
        }
        pending.delete(d.id)
        if (gaveUp) await stopUnrunSink(d.component)
        else startedInTime.push(d)
      })
      const allStarted = Promise.all(starting) // never rejects: each start's failure is kept
      await Promise.race([allStarted, whenAsked])
      const startFailures = (): void => {
        for (const sink of sinks) {
          if (!failed.has(sink.id)) continue
          const cause = failed.get(sink.id)
          problems.push({
            code: 'SINK_START_FAILED',
            component: sink.id,
            field: 'start',
            message: `sink '${sink.id}' (${sink.component.kind}) failed to start: ${messageOf(cause)}`,
            cause,
          })
        }
      }
      if (asked && pending.size > 0) {
        startFailures()
        giveUp()
      } else {
        await allStarted
        startFailures()
      }
      // The sinks that did start are stopped again when the topology will not run: nothing will
      // write to them. (One that finishes its start after a give-up stops itself, above.)
      if (problems.length > 0) await stopStartedSinks(startedInTime, emit, bound)
    }
    if (problems.length > 0) {
      // As a forced stop does: a restart in the same process must not find a disk buffer still
      // locked, and a dispose() that never settles must not hang the start (nor a stop awaiting it).
      const discarding = [...buffers].map(([id, buffer]) =>
        giveUpBuffer(plan, id, buffer, emit, 'after the failed start'),
      )
      await awaitReleased(plan, discarding, bound, emit, 'the failed start', 'start() rejects')
      const order = new Map(plan.components.map((d, i) => [d.id, i]))
      problems.sort((a, b) => order.get(a.component)! - order.get(b.component)!)
      // A copy: what finishes after a give-up must not change the error already thrown.
      throw new TopologyError([...problems], { cause: problems[0]!.cause })
    }
    return new Runtime(plan, counters, emit, watching, buffers)
  }

  /** Starts every runner: sinks first, sources last. */
  launch(): void {
    const plan = this.#plan
    for (const decl of plan.components) {
      this.#running.add(decl.id)
      this.#remainingProducers.set(decl.id, plan.upstreams.get(decl.id)?.length ?? 0)
    }
    const ordered = [...plan.components].reverse()
    for (const decl of ordered) {
      this.#emit({
        type: 'component_started',
        component: decl.id,
        kind: decl.component.kind,
        role: decl.role,
      })
      this.#launch(decl)
    }
  }

  /** Stops the sources (their signal aborts); the rest drains as inputs close. */
  drain(): void {
    this.#controller.abort()
  }

  /** Whether {@link Runtime.force} was called (a stop's deadline, or a second stop()). */
  get forced(): boolean {
    return this.#forced
  }

  /** Settles `errored` everything the runtime still holds and marks every component stopped. */
  force(): void {
    if (this.#forced) return
    this.#forced = true
    this.#controller.abort()
    for (const runner of this.#transformRunners) runner.force()
    for (const [id, buffer] of this.#buffers) {
      if (buffer instanceof MemoryChannel) {
        const counters = this.#counters.get(id)!
        const settled = buffer.force('errored')
        counters.errored += settled
        if (settled > 0) counters.failed('STOPPED', settled)
      } else {
        this.#discarding.push(giveUpBuffer(this.#plan, id, buffer, this.#emit, 'at the forced stop'))
      }
    }
    for (const runner of this.#sinkRunners) runner.force()
    BatchTracker.forceAll(this.#trackers)
    for (const decl of this.#plan.components) this.#finished(decl, true)
  }

  /**
   * Resolves once every buffer `force()` discarded has closed, so a stop never returns while a
   * buffer still holds its files (a disk buffer's lock), or once `timeoutMs` has passed (none at
   * `MAX_TIMER_MS` or more): each buffer whose `dispose()` has not settled by then is reported
   * `STOP_FAILED`, naming its sink, as it may still hold them. Never rejects.
   */
  released(timeoutMs: number): Promise<void> {
    return awaitReleased(
      this.#plan,
      this.#discarding,
      fixedBound(timeoutMs),
      this.#emit,
      'the forced stop',
      'the stop goes on',
    )
  }

  /** After the drain: batches whose handles are still held somewhere are reported `errored`. */
  settlePending(): void {
    BatchTracker.forceAll(this.#trackers)
  }

  #launch(decl: ComponentDeclaration): void {
    const counters = this.#counters.get(decl.id)!
    let running: Promise<void>
    switch (decl.role) {
      case 'source': {
        const tracker = new BatchTracker(decl.id, counters, this.#plan.options.ackTimeoutMs, {
          emit: this.#emit,
          watching: this.#watching,
        })
        this.#trackers.push(tracker)
        this.#trackersBySource.set(decl.id, tracker)
        const runner = new SourceRunner(
          decl.id,
          decl.component,
          this.#plan.sourceAcks.get(decl.id) === true,
          this.#output(decl.id, '', counters),
          counters,
          tracker,
          this.#controller.signal,
        )
        running = runner.run().catch((error: unknown) => {
          this.#emit({
            type: 'component_error',
            component: decl.id,
            code: 'RUN_FAILED',
            message: `source '${decl.id}' (${decl.component.kind}) failed: ${textOf(error)}`,
            events: 0,
            cause: error,
          })
        })
        break
      }
      case 'transform': {
        const outputs = new Map<string, Output>([['', this.#output(decl.id, '', counters, true)]])
        for (const port of decl.component.outputs ?? [])
          outputs.set(port, this.#output(decl.id, port, counters, true))
        const runner = new TransformRunner(
          decl.id,
          decl.component,
          decl.options.dropStatus,
          decl.options.coalesce,
          this.#buffers.get(decl.id) as MemoryChannel,
          outputs,
          counters,
          this.#emit,
          this.#plan.transformAcks.get(decl.id) === true,
        )
        this.#transformRunners.push(runner)
        running = runner.run()
        break
      }
      case 'sink': {
        const runner = new SinkRunner(
          decl.id,
          decl.component,
          this.#buffers.get(decl.id)!,
          decl.options.authoritative === true,
          decl.options.retry,
          decl.options.concurrency ?? decl.component.concurrency ?? 1,
          counters,
          this.#emit,
          (sourceId, receiver, status, failure) => {
            if (sourceId !== undefined)
              this.#trackersBySource.get(sourceId)?.recorded(receiver, status, failure)
          },
        )
        this.#sinkRunners.push(runner)
        running = runner.run().then(() => this.#stopSink(decl.id, decl.component))
        break
      }
    }
    running.then(
      () => this.#finished(decl, false),
      (error: unknown) => {
        this.#emit({
          type: 'component_error',
          component: decl.id,
          code: decl.role === 'sink' ? 'WRITE_FAILED' : 'PROCESS_FAILED',
          message: `${decl.role} '${decl.id}' (${decl.component.kind}) stopped on an error: ${textOf(error)}`,
          events: 0,
          cause: error,
        })
        this.#finished(decl, false)
      },
    )
  }

  /**
   * Stops a sink whose writes have all ended. A stop() that throws or rejects is `STOP_FAILED`,
   * naming the sink: reported as the run's own failure, it read as a failed write (`WRITE_FAILED`).
   */
  async #stopSink(id: string, sink: Sink): Promise<void> {
    try {
      await sink.stop?.()
    } catch (error) {
      this.#emit({
        type: 'component_error',
        component: id,
        code: 'STOP_FAILED',
        message: `sink '${id}' (${sink.kind}): stop() failed: ${textOf(error)}`,
        events: 0,
        cause: error,
      })
    }
  }

  /**
   * The output of port `port` of `producerId`: an inlet per consumer reading that port. A
   * transform's (`fromTransform`) takes a buffer's refusal itself; a source's `send` rejects with
   * it (see `#refusable`).
   */
  #output(producerId: string, port: string, counters: Counters, fromTransform = false): Output {
    const consumers = this.#plan.edges.get(producerId)?.get(port) ?? []
    return new Output(
      consumers.map((id) => this.#inlet(id, fromTransform)),
      counters,
    )
  }

  #inlet(consumerId: string, fromTransform: boolean): Inlet {
    const buffer = this.#buffers.get(consumerId)!
    const plan = this.#plan
    const settleOnAccept =
      plan.sinkAcks.get(consumerId) === false && plan.sinkCarriesFinalizers.get(consumerId) === true
    // A sink without acknowledgements must not hold its sources up: its copy counts as delivered
    // once its buffer accepted it. The in-memory channel never refuses: at once.
    if (buffer instanceof MemoryChannel) {
      if (!settleOnAccept) return buffer
      return {
        push(array) {
          EventFinalizerGroups.detach(array.events).endAll('delivered')
          return buffer.push(array)
        },
      }
    }
    // A buffer of another kind may refuse: the copy counts as delivered once its push resolved,
    // and as refused (errored, `WRITE_FAILED`) when it rejected or threw; told delivered at once,
    // the source heard it for a copy that was never stored.
    return this.#refusable(
      consumerId,
      settleOnAccept ? settledOnAccept(consumerId, buffer) : buffer,
      fromTransform,
    )
  }

  /**
   * A buffer of another kind, whose push may refuse an array: reject (a disk buffer whose append
   * threw, which settles the events first), or throw instead of rejecting. Fed by a transform
   * (`fromTransform`), what it refused is failed here and the transform goes on with its next
   * array: passed on, the refusal stopped the transform, and every later event waited in front of
   * it. Fed by a source, the source's `send` rejects with the refusal (a source that can give its
   * input back, as a broker's, does); a push that throws is failed here first, so the source's
   * other consumers still get their copies and nothing waits for the refused one.
   */
  #refusable(consumerId: string, buffer: Pick<EdgeBuffer, 'push'>, fromTransform: boolean): Inlet {
    const refused = (array: EventArray, error: unknown): void => {
      const reason = refusal(consumerId, array.length, error)
      const { message } = reason
      // Each refused event ends errored: here, or by the buffer before it refused (a disk buffer
      // settles what it could not store); counted either way.
      for (const event of array.events) if (!event.isEnded) event.end('errored', { reason })
      const counters = this.#counters.get(consumerId)!
      counters.errored += array.length
      if (array.length > 0) counters.failed('WRITE_FAILED', array.length)
      this.#emit({
        type: 'component_error',
        component: consumerId,
        code: 'WRITE_FAILED',
        message,
        events: array.length,
        cause: error,
      })
    }
    return {
      push(array) {
        let pushed: Promise<void>
        try {
          pushed = buffer.push(array)
        } catch (error) {
          refused(array, error)
          return fromTransform ? RESOLVED : Promise.reject(error)
        }
        return fromTransform
          ? Promise.resolve(pushed).then(undefined, (error: unknown) => refused(array, error))
          : pushed
      },
    }
  }

  #finished(decl: ComponentDeclaration, forced: boolean): void {
    if (!this.#running.delete(decl.id)) return
    this.#emit({
      type: 'component_stopped',
      component: decl.id,
      kind: decl.component.kind,
      role: decl.role,
      forced,
    })
    const consumers = new Set([...(this.#plan.edges.get(decl.id)?.values() ?? [])].flat())
    for (const id of consumers) {
      const remaining = this.#remainingProducers.get(id)! - 1
      this.#remainingProducers.set(id, remaining)
      if (remaining === 0) void closeBuffer(this.#buffers.get(id)!)
    }
    if (this.#running.size === 0) this.#resolveDone()
  }
}

/** Why the buffer in front of sink `consumerId` refused `count` events. */
function refusal(consumerId: string, count: number, error: unknown): BatchFailure {
  const message = `the buffer in front of sink '${consumerId}' refused ${count} event(s): ${messageOf(error)}`
  return { componentId: consumerId, code: 'WRITE_FAILED', message }
}

/** Why an event the buffer in front of sink `consumerId` settled `errored` without a reason is. */
function notStored(consumerId: string): BatchFailure {
  const message = `the buffer in front of sink '${consumerId}' settled an event errored: it did not store it`
  return { componentId: consumerId, code: 'WRITE_FAILED', message }
}

/**
 * `buffer`'s push for a sink without acknowledgements: each array's finalizers are taken off its
 * events before the push (what the sink reports later changes nothing), and ended once the push
 * resolved: `errored` for an event the buffer settled `errored` meanwhile (it could not store it:
 * a disk buffer's failed append resolves, having settled the events itself), `delivered` for the
 * others; `errored` with the refusal when the push rejected or threw (thrown on, as the push did,
 * for the caller to report), and so is every handle the refusing buffer left live. Each event
 * carries a batch of its own into the push, so what the buffer settles it with is known; a status
 * it hears after the push resolved changes nothing.
 */
function settledOnAccept(consumerId: string, buffer: EdgeBuffer): Pick<EdgeBuffer, 'push'> {
  const probeSource = `${consumerId}:accepted`
  return {
    push(array) {
      const events = array.events
      const groups = EventFinalizerGroups.detach(events)
      const count = array.length
      const probes = new Array<BatchStatusReceiver>(events.length)
      for (let i = 0; i < events.length; i++) {
        const notifier = BatchNotifier.open(probeSource)
        notifier.attach(events[i]!)
        notifier.release()
        probes[i] = notifier.receiver
      }
      const refused = (error: unknown): never => {
        const reason = refusal(consumerId, count, error)
        groups.endAll('errored', { reason })
        // A buffer may refuse and leave the handles live: they carry only their probe now, which
        // nobody else ends when a source sent them (a leak, reported under `<sink>:accepted`).
        for (const event of events) if (!event.isEnded) event.end('errored', { reason })
        throw error
      }
      const accepted = (): void => {
        for (let i = 0; i < probes.length; i++) {
          const probe = probes[i]!
          if (probe.status !== 'errored') groups.end(i, 'delivered')
          else groups.end(i, 'errored', { reason: probe.reason ?? notStored(consumerId) })
        }
      }
      let pushed: Promise<void>
      try {
        pushed = buffer.push(array)
      } catch (error) {
        return refused(error)
      }
      return Promise.resolve(pushed).then(accepted, refused)
    },
  }
}

/** A buffer `force()` gave up on: whether its `dispose()` (or `close()`) has settled yet. */
interface Discarding {
  /** The component it stands in front of. */
  readonly id: string
  released: boolean
  /** Resolves once it has settled; never rejects. */
  done: Promise<void>
}

/**
 * How long a failed start waits for the buffers it opened to let go of their files (a stop's
 * `disposeTimeoutMs` default: the start has no options of its own).
 */
const DEFAULT_DISPOSE_TIMEOUT_MS = 5000

/**
 * How long a wait for sinks to stop or buffers to let go lasts at most: `ms()`, read as the wait
 * begins and again each time `onChanged` calls back (a stop() that came meanwhile asked for
 * another bound, see `Topology.stop`), counted from the wait's beginning; `MAX_TIMER_MS` or more:
 * no limit. `onChanged` returns what removes its listener.
 */
export interface DisposeBound {
  readonly ms: () => number
  readonly onChanged: (listener: () => void) => () => void
}

/** A {@link DisposeBound} that never changes. */
function fixedBound(timeoutMs: number): DisposeBound {
  return { ms: () => timeoutMs, onChanged: () => nothing }
}

function nothing(): void {}

/**
 * Waits for `work`, or until `bound` has passed since the call (never, at `MAX_TIMER_MS` or
 * more), a changed bound re-arming the timer; resolves with the bound it waited for at most.
 */
async function within(work: Promise<unknown>, bound: DisposeBound): Promise<number> {
  const began = performance.now()
  let timer: ReturnType<typeof setTimeout> | undefined
  let ms = bound.ms()
  let expire!: () => void
  const expired = new Promise<void>((resolve) => {
    expire = resolve
  })
  const arm = (): void => {
    ms = bound.ms()
    clearTimeout(timer)
    // A longer delay would fire after 1 ms (see `MAX_TIMER_MS`): then it waits as long as it takes.
    if (ms < MAX_TIMER_MS) timer = setTimeout(expire, Math.max(0, ms - (performance.now() - began)))
  }
  arm()
  const off = bound.onChanged(arm)
  await Promise.race([work, expired])
  off()
  clearTimeout(timer)
  return ms
}

/**
 * Starts giving `buffer` up (see {@link discard}); a `dispose()` that rejects is `STOP_FAILED`,
 * naming its sink and the cause, since it may still hold its files. `when` ends the message.
 */
function giveUpBuffer(
  plan: TopologyPlan,
  id: string,
  buffer: EdgeBuffer,
  emit: (fact: LifecycleEvent) => void,
  when: string,
): Discarding {
  const discarding: Discarding = { id, released: false, done: RESOLVED }
  discarding.done = discard(buffer)
    .catch((error: unknown) => {
      // It may still hold its files (a disk buffer's lock): said, not swallowed.
      emit({
        type: 'component_error',
        component: id,
        code: 'STOP_FAILED',
        message: `${bufferOf(plan, id)} dispose() failed ${when}: ${messageOf(error)}; it may still hold its files (a disk buffer's lock)`,
        events: 0,
        cause: error,
      })
    })
    .then(() => {
      discarding.released = true
    })
  return discarding
}

/**
 * Resolves once every buffer of `discarding` has let go of its files, or once `bound` has
 * passed (none at `MAX_TIMER_MS` or more): each whose `dispose()` has not settled by then is
 * reported `STOP_FAILED`, naming its sink, as it may still hold them. Never rejects. `after` names
 * what gave them up, and `goesOn` what happens next, in the message.
 */
async function awaitReleased(
  plan: TopologyPlan,
  discarding: readonly Discarding[],
  bound: DisposeBound,
  emit: (fact: LifecycleEvent) => void,
  after: string,
  goesOn: string,
): Promise<void> {
  if (discarding.every((d) => d.released)) return
  const timeoutMs = await within(Promise.all(discarding.map((d) => d.done)), bound)
  for (const d of discarding) {
    if (d.released) continue
    emit({
      type: 'component_error',
      component: d.id,
      code: 'STOP_FAILED',
      message: `${bufferOf(plan, d.id)} had not finished dispose() ${timeoutMs} ms after ${after}: it may still hold its files (a disk buffer's lock); ${goesOn} without it`,
      events: 0,
    })
  }
}

/** "the <kind> buffer in front of sink '<id>' (<sink kind>)", for a report about that buffer. */
function bufferOf(plan: TopologyPlan, id: string): string {
  const decl = plan.components.find((c) => c.id === id)!
  const options = decl.role === 'source' ? undefined : decl.options.buffer
  const buffer =
    options !== undefined && isEdgeBufferFactory(options)
      ? `the ${textOf(options.kind)} buffer`
      : 'the buffer'
  return `${buffer} in front of ${decl.role} '${id}' (${textOf(decl.component.kind)})`
}

/** The problem of a component still opening or starting when the stop gave up on it. */
function stoppedWhileStarting(component: string, what: string): TopologyProblem {
  return {
    code: 'STOPPED_WHILE_STARTING',
    component,
    field: what.startsWith('sink') ? 'start' : 'buffer',
    message: `the topology was stopped while starting: ${what}; it is stopped or closed once it has`,
  }
}

/**
 * Stops the sinks a failed start had started, each `stop()` at once, and resolves once all have
 * settled or `bound` has passed. A `stop()` that throws or rejects, or has not settled by then,
 * is `STOP_FAILED`, naming the sink: it may still hold what it opened (a connection), and one that
 * waits on a host that does not answer must not hang the start. Never rejects.
 */
async function stopStartedSinks(
  sinks: readonly ComponentDeclaration[],
  emit: (fact: LifecycleEvent) => void,
  bound: DisposeBound,
): Promise<void> {
  if (sinks.length === 0) return
  const stopping = new Set(sinks)
  const stops = sinks.map(async (d) => {
    try {
      await (d.component as Sink).stop?.()
    } catch (error) {
      emit({
        type: 'component_error',
        component: d.id,
        code: 'STOP_FAILED',
        message: `sink '${d.id}' (${textOf(d.component.kind)}): stop() failed after the failed start: ${messageOf(error)}; it may still hold what it opened`,
        events: 0,
        cause: error,
      })
    }
    stopping.delete(d)
  })
  const timeoutMs = await within(Promise.all(stops), bound)
  for (const d of stopping) {
    emit({
      type: 'component_error',
      component: d.id,
      code: 'STOP_FAILED',
      message: `sink '${d.id}' (${textOf(d.component.kind)}) had not finished stop() ${timeoutMs} ms after the failed start: it may still hold what it opened; start() rejects without it`,
      events: 0,
    })
  }
}

/** Stops a sink the topology will not run; what its stop() throws is of no use to anyone then. */
async function stopUnrunSink(sink: Sink): Promise<void> {
  try {
    await sink.stop?.()
  } catch {}
}

/** A promise that never settles: the default of nothing to give up on. */
const NEVER = new Promise<void>(() => {})

/**
 * Gives a buffer up without draining it: its `dispose` (it settles what waits `errored`), else
 * `close`. Never throws, and always returns a promise: a buffer of another kind may throw at once
 * or return nothing (untyped code), and a throw here left a forced stop half done.
 */
function discard(buffer: EdgeBuffer): Promise<void> {
  return settled(() => (buffer.dispose !== undefined ? buffer.dispose() : buffer.close()))
}

/** Closes a buffer whose last producer finished; never throws or rejects (see {@link discard}). */
function closeBuffer(buffer: EdgeBuffer): Promise<void> {
  return settled(() => buffer.close()).catch(() => {})
}

/** What `step` returned, as a promise: a throw is a rejection, a value that is no promise resolves it. */
function settled(step: () => Promise<void> | undefined): Promise<void> {
  try {
    return Promise.resolve(step())
  } catch (error) {
    return Promise.reject(error)
  }
}

function messageOf(error: unknown): string {
  try {
    return error instanceof Error ? textOf(error.message) : textOf(error)
  } catch {
    return textOf(error) // a `message` getter that throws
  }
}

/** The in-memory channel in front of `id`, counting what it drops on `consumer`. */
function memoryChannel(
  id: string,
  options: MemoryBufferOptions | undefined,
  consumer: Counters,
): MemoryChannel {
  return new MemoryChannel({
    maxEvents: options?.maxEvents ?? DEFAULT_MAX_EVENTS,
    whenFull: options?.whenFull ?? 'block',
    droppedStatus: options?.droppedStatus ?? 'rejected',
    droppedFailure: {
      componentId: id,
      code: 'BUFFER_FULL',
      message: `the buffer in front of '${id}' was full and dropped the events (whenFull: 'drop_newest')`,
    },
    stoppedFailure: {
      componentId: id,
      code: 'STOPPED',
      message: `the topology stopped while the events waited in front of '${id}'`,
    },
    onDrop: (events, status) => {
      consumer.discarded += events
      consumer.settled(status, events)
      if (status !== 'delivered') consumer.failed('BUFFER_FULL', events)
    },
  })
}
