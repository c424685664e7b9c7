/**
 * Runs one transform: pulls arrays from its channel (what is queued as one array, up to 128
 * events or the channel's `maxEvents`, for a transform that declares `coalesce`), calls `process`
 * with a context that tracks what became of each input event, and sends what was emitted, port by
 * port.
 *
 * Invariant: a transform cannot leak a handle. After every call of a transform without `flush`,
 * each input event was emitted, dropped or merged; any other one is settled `errored` here and
 * reported. A transform with `flush` may keep events across calls (a reduce window): they are
 * tracked as held until a later call emits, drops or merges them, and whatever is still held
 * after the last flush at stop (or at a forced stop) is settled `errored` and reported. A call
 * still running at a forced stop is given up: the batches of its inputs, of what it made and of
 * the handles of its own it emitted are settled `errored` (`STOPPED`) there, and those of what its
 * transform held (`LEAKED_EVENTS`) (the handles stay live with no finalizers, so the call may
 * still read them), and what it does afterwards (emit,
 * drop, create, return, throw) settles nothing more and passes nothing on; no call starts after it (an array
 * that waited for a timed flush is settled `errored` there too, `STOPPED`). An event
 * the call made with `create` is checked as an input is, so the clones of its parents it holds
 * never outlive the call unnoticed. An emitted handle is owned by the output from then on; one
 * that the transform ended after emitting it is not passed on (and reported), and neither is one
 * an earlier call passed on, emitted again (reported; the runtime marks what it passes on, so
 * it tells that from a handle the call made). An input array that untyped code changed (its
 * length, or a handle written in twice or made by the transform) is reported and counted as what
 * it still holds of the inputs, each once (`#processed`, `#distinctInputs`); what was written over
 * is out of sight. `process` and `flush` never run at the same time.
 */
import {
  type DeliveryStatus,
  type EndOptions,
  EventArray,
  EventFinalizerGroups,
  type JsonObject,
  LogEvent,
} from '@ackline/core'
import type { BatchFailure } from '../BatchFailure.js'
import { ComponentError } from '../ComponentError.js'
import type { ComponentErrorCode, LifecycleEvent } from '../LifecycleEvent.js'
import type { Transform, TransformContext } from '../Transform.js'
import { textOf } from '../textOf.js'
import type { Counters } from './Counters.js'
import { HeldEvents } from './HeldEvents.js'
import { EMPTY, type MemoryChannel, RESOLVED } from './MemoryChannel.js'
import type { Output } from './Output.js'

const nothing = (): void => {}
/**
 * How many events a transform's coalesced input holds at most (fewer when its buffer is smaller).
 * Enough to spread the cost of a call over many small arrays; more would only grow the events in
 * flight: coalescing arrays of 100 into arrays of about 400 made `holding.bench.ts`'s reduce
 * (groups of 10, the transform the slowest stage) about 20 % slower in CPU time.
 */
const COALESCE_UP_TO = 128
const NO_PORTS: ReadonlyMap<string, LogEvent[]> = new Map()
const NO_EVENTS: readonly LogEvent[] = []
/** The number the last runner took to mark what it keeps (`LogEvent.markKept`). */
let lastHolder = 0
/** A number for a new runner, from 1 to 2^27 - 1 (what `markKept` takes), then round again. */
function nextHolder(): number {
  lastHolder = (lastHolder % 0x07ffffff) + 1
  return lastHolder
}
/** The number of the last pass over a call's input array (`LogEvent.meetAsInput`), of any runner. */
let lastPass = 0
/**
 * A number for a pass over a call's input array, from 1 to 2^27 - 1 (what `meetAsInput` takes),
 * then round again. One counter for every runner: a handle passed on keeps the number of the last
 * pass that met it, and the next runner's pass must not take the same one.
 */
function nextPass(): number {
  lastPass = lastPass === 0x07ffffff ? 1 : lastPass + 1
  return lastPass
}

/**
 * The context of a `process` or `flush` call: it only records; the runner checks afterwards.
 * A runner makes one per call, unless its transform declares itself `synchronous` (it never
 * returns a promise and never keeps its context): then one serves every `process` call, opened at
 * the start of each and closed when it returns, so an `emit` through it between calls is still
 * caught. Only a context per call can tell a late `emit` from an earlier call apart from one of
 * the call that is open, which a transform that waits (or keeps its context for a timer) leaves
 * room for. If a transform that declared itself synchronous returns a promise after all, that
 * call keeps the shared context and every later call gets one of its own (as `flush` calls always
 * do). What it records is made only when used: the named ports' map on the first emit to a named
 * port, the default port's list on the first `emit` (a call that passes its array on whole with
 * `emitAll` makes neither).
 */
class CallContext implements TransformContext {
  readonly id: string
  readonly acknowledgements: boolean
  #ports: Map<string, LogEvent[]> | undefined = undefined
  #defaultPort: LogEvent[] | undefined = undefined
  /**
   * An array passed on whole with `emitAll` while nothing else was emitted on the default port:
   * kept as it is rather than copied (the common map-like call). Anything emitted on the default
   * port after it is appended behind its events.
   */
  passed: EventArray | undefined = undefined
  /** The events `create` made during the call, checked afterwards as its inputs are; made on the first. */
  created: LogEvent[] | undefined = undefined
  #open = false
  /** Set once a forced stop gave the call up while it ran (see {@link CallContext.abandon}). */
  abandoned = false
  readonly #runner: TransformRunner
  /** The call's inputs (none for `flush`), what `drop` may end besides what it made or holds. */
  #inputs: readonly LogEvent[] = NO_EVENTS
  /** Where the next in-order search of `#inputs` starts. */
  #cursor = 0
  /** `#inputs` as a set, made at the first drop out of order. */
  #inputSet: Set<LogEvent> | undefined = undefined
  /** Events `create` made after the call returned: no check sees them, a late `drop` may end them. */
  #lateMade: Set<LogEvent> | undefined = undefined
  /**
   * The handles a forced stop settled for the call it gave up (`abandon`): live, with no
   * finalizers, so the call may still read them; passed nowhere. Not what `create` made of them
   * since, which is the transform's own (`#lateMade`).
   */
  #given: Set<LogEvent> | undefined = undefined

  constructor(runner: TransformRunner) {
    this.#runner = runner
    this.id = runner.id
    this.acknowledgements = runner.acknowledgements
  }

  /** Lists per named port, in the order first emitted to. */
  get ports(): ReadonlyMap<string, LogEvent[]> {
    return this.#ports ?? NO_PORTS
  }

  /** The default port's list (made on first use). */
  get defaultPort(): LogEvent[] {
    if (this.#defaultPort === undefined) this.#defaultPort = []
    return this.#defaultPort
  }

  /** How many events the default port's list holds (without making it). */
  get defaultCount(): number {
    return this.#defaultPort === undefined ? 0 : this.#defaultPort.length
  }

  /** Replaces the list of a named port (the general check rewrites them). */
  setPort(port: string, list: LogEvent[]): void {
    this.#ports?.set(port, list)
  }

  emit(event: LogEvent, port?: string): void {
    // Untyped code may hand anything here; taken in, it would break the check after the call.
    if (!(event instanceof LogEvent)) throw notAnEvent(this.id, 'emit', event)
    let list: LogEvent[] | undefined
    if (port !== undefined && port !== '') {
      let named = this.#ports?.get(port)
      if (named === undefined) {
        if (!this.#runner.outputs.has(port)) {
          // Settled before the throw: whoever catches it (or nobody, after the call returned),
          // the handle is never left for the leak detector.
          this.#stray(event, 'UNDECLARED_PORT', undeclaredPort(port))
          throw undeclaredPortError(this.id, port)
        }
        if (this.#open) {
          named = []
          if (this.#ports === undefined) this.#ports = new Map()
          this.#ports.set(port, named)
        }
      }
      list = named
    }
    if (!this.#open) {
      // A call that already returned cannot pass anything on any more: settle rather than leak.
      this.#stray(
        event,
        'EMIT_AFTER_RETURN',
        this.abandoned
          ? `transform '${this.id}' emitted an event after the forced stop gave its call up`
          : `transform '${this.id}' emitted an event after its call returned`,
      )
      return
    }
    this.unpass()
    ;(list ?? this.defaultPort).push(event)
  }

  emitAll(events: EventArray, port?: string): void {
    if (!(events instanceof EventArray)) throw notAnEvent(this.id, 'emitAll', events)
    const list = events.events
    if ((port === undefined || port === '') && this.#open) {
      if (this.passed === undefined && this.defaultCount === 0) {
        this.passed = events
        return
      }
      this.unpass()
      this.#append(list)
      return
    }
    if (port !== undefined && port !== '' && !this.#runner.outputs.has(port)) {
      // Every event of the array is settled before the throw, not only the first.
      const message = undeclaredPort(port)
      for (let i = 0; i < list.length; i++) this.#stray(list[i]!, 'UNDECLARED_PORT', message)
      throw undeclaredPortError(this.id, port)
    }
    for (let i = 0; i < list.length; i++) this.emit(list[i]!, port)
  }

  /**
   * Settles a handle a misused `emit` could not pass on (`TransformRunner.settleStray`); one the
   * forced stop settled carries no batch any more: it is only reported, with no event. So is one
   * emitted after the call returned that is not the transform's any more (passed on, as `drop`
   * tells it): a sink may be writing it, and ended here its write would fail on it and its batch
   * be `errored` whatever the sink said; so is one emitted, in the call, on a port it does not
   * declare, that is not its own in it (`#owns`).
   */
  #stray(event: LogEvent, code: ComponentErrorCode, message: string): void {
    if (this.#given?.has(event) === true || this.#runner.givenUp?.has(event) === true) {
      this.#runner.emit({ type: 'component_error', component: this.id, code, message, events: 0 })
      return
    }
    // After the forced stop a late callback can only make events that carry no batch (a new one,
    // one made from a handle the stop settled): ended, it settles nothing, so nothing is counted.
    if (this.#runner.forced && !event.isEnded && holdsNoBatch(event)) {
      event.end()
      this.#runner.emit({ type: 'component_error', component: this.id, code, message, events: 0 })
      return
    }
    // In the call, the same holds of a handle not its own in it (an earlier call passed it on).
    if (!event.isEnded && (this.#open ? !this.#owns(event) : !event.isLocalTo(this.#runner.holder))) {
      this.#runner.emit({
        type: 'component_error',
        component: this.id,
        code,
        message: `${message}: it was not ended (passed on, it is not the transform's to end any more)`,
        events: 0,
      })
      return
    }
    this.#runner.settleStray(event, code, message)
  }

  /** What was emitted on the default port, in order. */
  get emitted(): readonly LogEvent[] {
    return this.passed !== undefined ? this.passed.events : (this.#defaultPort ?? NO_EVENTS)
  }

  /** Turns a passed array into the default port's list, so more can follow it. */
  unpass(): void {
    const passed = this.passed
    if (passed === undefined) return
    this.passed = undefined
    this.#append(passed.events)
  }

  #append(list: readonly LogEvent[]): void {
    const out = this.defaultPort
    for (let i = 0; i < list.length; i++) out.push(list[i]!)
  }

  drop(event: LogEvent): void {
    const runner = this.#runner
    // Only an event that is still the transform's is ended: one passed on is a sink's, and ended
    // here its batch would count it dropped (as delivered) while the sink still writes it, and be
    // acknowledged before the sink says how the write went. Reported, and nothing is ended.
    if (!this.#open) {
      // Made by a `create` after its call returned, and never passed on (a later call may have:
      // then it is a sink's): still the transform's.
      if (event.isEnded && this.#lateMade?.delete(event) === true) {
        // Made late and ended since (a late emit settles it): ended again it would throw into a
        // callback nobody catches. Reported as any misused late drop.
        runner.emit({
          type: 'component_error',
          component: this.id,
          code: 'EMIT_AFTER_RETURN',
          message: `transform '${this.id}' dropped an event after its call returned that had ended already (emitted or dropped late before)`,
          events: 0,
        })
        return
      }
      if (this.#lateMade?.delete(event) !== true || !event.isLocalTo(runner.holder)) {
        runner.emit({
          type: 'component_error',
          component: this.id,
          code: 'EMIT_AFTER_RETURN',
          message: this.abandoned
            ? `transform '${this.id}' dropped an event after the forced stop gave its call up: it was not ended (the stop settled it)`
            : `transform '${this.id}' dropped an event after its call returned: it was not ended (passed on or kept, it is not the transform's to end any more)`,
          events: 0,
        })
        return
      }
      // After the forced stop it carries no batch (made of nothing, or of a handle the stop
      // settled): ended, it settles nothing, so nothing is counted (as a late `emit` of it).
      if (runner.forced && !event.isEnded && holdsNoBatch(event)) {
        event.end()
        return
      }
    } else if (!this.#owns(event)) {
      runner.emit({
        type: 'component_error',
        component: this.id,
        code: 'ENDED_AFTER_EMIT',
        message: `transform '${this.id}' dropped an event that is not its own in this call (passed on by an earlier call, or another component's): it was not ended`,
        events: 0,
      })
      return
    }
    if (runner.dropStatus === undefined) {
      event.end()
      runner.counters.discarded++
      return
    }
    event.end(runner.dropStatus, runner.dropped)
    runner.counters.discarded++
    runner.counters.rejected++
    runner.counters.failed('DROPPED', 1)
  }

  create(fields: JsonObject, inheritFrom: readonly LogEvent[] = []): LogEvent {
    // Untyped code may hand anything here: as an event's fields it would fail far from its cause,
    // or reach a sink that writes it as it is (`null`) and be delivered.
    if (!isFieldsLike(fields)) throw notFields(this.id, fields)
    // Every clone is made before the event: a parent that cannot be cloned (ended, or not an
    // event) throws with no clone left inside an event nobody will end, which would hold its
    // batch up for good.
    const clones: LogEvent[] = []
    try {
      for (const parent of inheritFrom) clones.push(parent.clone())
    } catch (error) {
      for (const clone of clones) clone.end()
      throw error
    }
    const event = new LogEvent(fields, { sourceId: clones[0]?.metadata.sourceId })
    for (const clone of clones) event.merge(clone)
    if (!this.#open) {
      // After the call returned (or the forced stop gave it up) no check sees it: it may still be
      // dropped (or emitted, late). Made after the stop of what it settled, it carries no batch
      // and is the transform's own, as one made of nothing: a late emit or drop ends it.
      if (this.#lateMade === undefined) this.#lateMade = new Set()
      this.#lateMade.add(event)
      return event
    }
    if (this.created === undefined) this.created = [event]
    else this.created.push(event)
    return event
  }

  /**
   * Whether `event` is this call's to end: one of its inputs, one the transform made (`create`,
   * `clone()`, `new LogEvent`) and has not passed on, or one the runtime holds for it (`flush`):
   * the last two are local to this runner (`isLocalTo`). Inputs are found with a cursor (a filter drops
   * them in the order it meets them), then, out of order, through a set made once per call.
   */
  #owns(event: LogEvent): boolean {
    const inputs = this.#inputs
    for (let i = this.#cursor; i < inputs.length; i++) {
      if (inputs[i] === event) {
        this.#cursor = i + 1
        return true
      }
    }
    if (this.#cursor > 0) {
      if (this.#inputSet === undefined) this.#inputSet = new Set(inputs)
      if (this.#inputSet.has(event)) return true
    }
    // Made in a call (with `create`, `clone` or `new LogEvent`) or held for the transform, and
    // not passed on since; not one the runtime has settled (a forced stop settles what is held).
    return event.isLocalTo(this.#runner.holder) && !event.isEnded
  }

  /** Starts a call on `inputs`: nothing recorded yet, and emits count. */
  open(inputs: readonly LogEvent[]): void {
    this.release()
    this.#inputs = inputs
    this.#open = true
  }

  /** Ends a call: an `emit` from now on is settled `errored` and reported. */
  close(): void {
    this.#open = false
  }

  /**
   * A forced stop gives the call up while it runs: it is closed (an `emit` from now on is only
   * reported, a `drop` ends nothing), forgets what it recorded, and returns what the runtime
   * must settle for it: its inputs, the events it made with `create`, and the handles of its own
   * it emitted (a clone), each once and still live. Not a handle an earlier call passed on,
   * which is a sink's. The runtime settles their batches and leaves the handles live with no
   * finalizers: the call, which has not returned, may still read them (from a callback nobody
   * catches a throw of).
   */
  abandon(): LogEvent[] {
    this.#open = false
    this.abandoned = true
    const holder = this.#runner.holder
    const given = this.#given ?? new Set<LogEvent>()
    const live: LogEvent[] = []
    const add = (event: LogEvent): void => {
      if (event.isEnded || given.has(event)) return
      given.add(event)
      live.push(event)
    }
    for (const event of this.#inputs) add(event)
    for (const event of this.created ?? NO_EVENTS) add(event)
    const emitted = [this.emitted, ...this.ports.values()]
    for (const list of emitted) for (const event of list) if (event.isLocalTo(holder)) add(event)
    this.release()
    this.#given = given
    return live
  }

  /**
   * Notes handles the forced stop settled before giving the call up (what its transform held),
   * left live with no finalizers: the call may read them, and `abandon` does not settle them again.
   */
  give(events: readonly LogEvent[]): void {
    const given = this.#given ?? new Set<LogEvent>()
    for (const event of events) given.add(event)
    this.#given = given
  }

  /**
   * Forgets what the call recorded, once it was sent (the lists now belong to their arrays), so a
   * context kept between calls holds no events.
   */
  release(): void {
    this.passed = undefined
    this.#defaultPort = undefined
    this.#ports?.clear()
    this.created = undefined
    this.#inputs = NO_EVENTS
    this.#cursor = 0
    this.#inputSet = undefined
  }
}

export class TransformRunner {
  readonly dropStatus: DeliveryStatus | undefined
  /** How a drop with `dropStatus: 'rejected'` explains itself to the batches. */
  readonly dropped: EndOptions
  /**
   * What the runner marks the events it keeps with (`LogEvent.markKept`): a downstream transform
   * keeping a handle this one passed on must not make it this one's own again.
   */
  readonly holder = nextHolder()
  /**
   * Input events a transform with `flush` kept for a later call. A call only looks at the events
   * it touched, so holding n events costs amortised O(1) per event rather than O(n) per call.
   */
  readonly #held = new HeldEvents(this.holder)
  /** Whether the transform takes what is queued as one array (the `coalesce` option, else `Transform.coalesce`). */
  readonly #coalesce: boolean
  /** The context of synchronous `process` calls; `undefined` once a call returned a promise. */
  #shared: CallContext | undefined
  /** The context of the `process` or `flush` call running now, which a forced stop gives up. */
  #calling: CallContext | undefined = undefined
  /** Whether `#calling` is a `flush` call. */
  #callingFlush = false
  /** An array pulled while a timed flush ran, waiting for it (`#afterFlush`), which a forced stop settles. */
  #waiting: EventArray | undefined = undefined
  #tail: Promise<void> = RESOLVED
  #timer: ReturnType<typeof setInterval> | undefined = undefined
  /** Whether a timed flush is queued and has not started yet. */
  #flushWaiting = false
  /** Whether each call's input array is frozen first: set once a call changed its length. */
  #frozenInputs = false
  forced = false
  /**
   * The handles a forced stop settled and left live with no finalizers (what the transform held,
   * what the call it gave up had): a late `emit` of one through any context, not only the call
   * given up (a timer of an earlier call), is only reported; settled again, it would count twice.
   */
  givenUp: WeakSet<LogEvent> | undefined = undefined

  constructor(
    readonly id: string,
    readonly transform: Transform,
    dropStatus: 'delivered' | 'rejected' | undefined,
    /** The declaration's `coalesce` option, which wins over the transform's own. */
    coalesce: boolean | undefined,
    readonly input: MemoryChannel,
    /** Port (`''` for the default one) → output. */
    readonly outputs: ReadonlyMap<string, Output>,
    readonly counters: Counters,
    readonly emit: (fact: LifecycleEvent) => void,
    /** Whether a sink's status for what the transform emits can matter (`TransformContext.acknowledgements`). */
    readonly acknowledgements: boolean,
  ) {
    this.dropStatus = (dropStatus ?? transform.dropStatus) === 'rejected' ? 'rejected' : undefined
    this.#coalesce = (coalesce ?? transform.coalesce) === true
    this.#shared = transform.synchronous === true ? new CallContext(this) : undefined
    this.dropped = {
      reason: this.failure(
        'DROPPED',
        `transform '${id}' (${transform.kind}) dropped the event with dropStatus 'rejected'`,
      ),
    }
  }

  /** A failure this transform decided. */
  failure(code: string, message: string): BatchFailure {
    return { componentId: this.id, code, message }
  }

  /** Settles `errored` an event a misused `emit` could not pass on, and reports it. */
  settleStray(event: LogEvent, code: ComponentErrorCode, message: string): void {
    let events = 0
    if (!event.isEnded) {
      const full = `${message}; the event was settled errored`
      event.end('errored', { reason: this.failure(code, full) })
      this.counters.errored++
      this.counters.failed(code, 1)
      events = 1
    }
    this.emit({ type: 'component_error', component: this.id, code, message, events })
  }

  async run(): Promise<void> {
    const interval = this.transform.flushIntervalMs
    if (this.transform.flush !== undefined && interval !== undefined) {
      this.#timer = setInterval(() => {
        // A flush slower than the interval: ticks while one waits to run are one flush, not a
        // queue that grows without bound and keeps `process` waiting behind it.
        if (this.#flushWaiting) return
        this.#flushWaiting = true
        this.#exclusive(() => {
          this.#flushWaiting = false
          // Queued behind a call the forced stop gave up, which has returned since: too late.
          return this.forced ? RESOLVED : this.#flush()
        }).catch(nothing)
      }, interval)
    }
    // Calls wait for a timed flush in progress, even once a forced stop cleared the timer.
    const timed = this.#timer !== undefined
    try {
      for (;;) {
        // Queued input is taken without a promise. A transform that coalesces takes less than a
        // wake's worth only once the burst that queued it is over (`MemoryChannel.pullNow`), so
        // that it comes coalesced; one that does not would gain nothing by waiting.
        let array = this.#coalesce ? this.input.pullNow() : this.input.tryPull()
        if (array === EMPTY) array = await this.input.pull()
        if (array === undefined) break
        // Only a transform that says so: another may act on array boundaries (pairing events
        // within one array), and merging what queued for it would change what it emits.
        if (this.#coalesce) array = this.input.coalesce(array, COALESCE_UP_TO)
        this.counters.received += array.length
        const input = array
        const done = timed ? this.#afterFlush(input) : this.#process(input)
        // A synchronous call whose outputs all had room returns `RESOLVED`: no frame to wait on.
        if (done !== RESOLVED) await done
      }
    } finally {
      if (this.#timer !== undefined) clearInterval(this.#timer)
      this.#timer = undefined
    }
    if (this.forced) return
    // Queued behind a timed flush the forced stop gave up, which has returned since: too late.
    await this.#exclusive(() => (this.forced ? RESOLVED : this.#flush()))
    this.#settleHeld('its last flush')
  }

  /**
   * A stop's deadline passed: no timed flush runs any more, and every event still held is settled
   * `errored`. The flush timer is cleared here, not only when the run loop ends: a call that never
   * returns keeps the loop from ending, and the timer from letting the process exit.
   */
  force(): void {
    this.forced = true
    if (this.#timer !== undefined) clearInterval(this.#timer)
    this.#timer = undefined
    this.#settleHeld('the forced stop', this.#calling)
    this.#abandonCall()
    this.#settleWaiting()
  }

  /**
   * A `process` call of a transform with a timed flush: it waits for the flush in progress. An
   * array still waiting at a forced stop is out of the channel and in no call, so the stop settles
   * it (`#settleWaiting`), and the call never starts: a flush that never returns would keep its
   * handles live for good, and one that returns late would have `process` called after the stop.
   */
  #afterFlush(array: EventArray): Promise<void> {
    this.#waiting = array
    return this.#exclusive(() => {
      if (this.#waiting !== array) return RESOLVED
      this.#waiting = undefined
      return this.#process(array)
    })
  }

  /** Settles `errored` (`STOPPED`) the array waiting at a forced stop for a flush (`#afterFlush`). */
  #settleWaiting(): void {
    const array = this.#waiting
    if (array === undefined) return
    this.#waiting = undefined
    const reason = this.failure(
      'STOPPED',
      `the stop deadline passed while transform '${this.id}' had event(s) waiting for flush() to return: process() was not called with them`,
    )
    // One by one: `EventArray.end` with a reason throws at a handle ended already (untyped code
    // upstream may end one it passed on), which would leave the forced stop half done.
    let settled = 0
    for (const event of array.events) {
      if (event.isEnded) continue
      event.end('errored', { reason })
      settled++
    }
    if (settled === 0) return
    this.counters.errored += settled
    this.counters.failed('STOPPED', settled)
  }

  /**
   * Gives up the call still running at a forced stop (one that never returns would otherwise keep
   * its inputs live for good, their batches told `errored` while the handles wait for the leak
   * detector): what it holds of the runtime's is settled `errored` now (`STOPPED`), and when it
   * returns or throws nothing is checked or passed on. Every handle it could still touch has then
   * ended or carries no batch: an `emit` of one settles nothing and a `drop` ends nothing, so no
   * status changes. Not ended: a callback of the call that reads one would throw where nobody
   * catches it (a timer's), ending the process.
   */
  #abandonCall(): void {
    const context = this.#calling
    if (context === undefined) return
    this.#calling = undefined
    if (this.#shared === context) this.#shared = undefined
    const step = this.#callingFlush ? 'flush' : 'process'
    const live = context.abandon()
    if (live.length === 0) return
    const reason = this.failure(
      'STOPPED',
      `the stop deadline passed while transform '${this.id}' was in ${step}(): the call was given up`,
    )
    // Their batches are settled; the handles stay live with no finalizers, for the call to read.
    EventFinalizerGroups.detach(live).endAll('errored', { reason })
    this.givenUp ??= new WeakSet()
    for (const event of live) this.givenUp.add(event)
    this.counters.errored += live.length
    this.counters.failed('STOPPED', live.length)
  }

  /**
   * Settles `errored` what the transform still holds. `calling`: the call a forced stop is giving
   * up, which may still read those handles (from a callback nobody catches a throw of): their
   * batches are settled and the handles left live with no finalizers, as its own inputs are.
   */
  #settleHeld(when: string, calling?: CallContext): void {
    let leaked = 0
    const message = `transform '${this.id}' still held event(s) after ${when}; they were settled errored`
    const held = this.#held.live()
    if (held.length > 0) {
      const options = { reason: this.failure('LEAKED_EVENTS', message) }
      if (calling === undefined) {
        for (const event of held) event.end('errored', options)
      } else {
        EventFinalizerGroups.detach(held).endAll('errored', options)
        calling.give(held)
        this.givenUp ??= new WeakSet()
        for (const event of held) this.givenUp.add(event)
      }
      leaked = held.length
    }
    this.#held.clear()
    if (leaked === 0) return
    this.counters.errored += leaked
    this.counters.failed('LEAKED_EVENTS', leaked)
    this.emit({
      type: 'component_error',
      component: this.id,
      code: 'LEAKED_EVENTS',
      message: `transform '${this.id}' still held ${leaked} event(s) after ${when}; they were settled errored`,
      events: leaked,
    })
  }

  #exclusive(step: () => Promise<void>): Promise<void> {
    const run = this.#tail.then(step)
    this.#tail = run.catch(nothing)
    return run
  }

  /**
   * One `process` call and its check. Not an async function: a synchronous transform (the common
   * case) is called, checked and its outputs sent within this call, and the promise returned is
   * that of the send (`RESOLVED` when every consumer had room).
   */
  #process(array: EventArray): Promise<void> {
    const context = this.#shared ?? new CallContext(this)
    const count = array.length
    if (this.#frozenInputs) Object.freeze(array.events)
    context.open(array.events)
    this.#calling = context
    this.#callingFlush = false
    let pending: void | Promise<void>
    try {
      pending = this.transform.process(array, context)
    } catch (error) {
      return this.#processed(context, array, count, thrown(error))
    }
    if (pending === undefined) return this.#processed(context, array, count, undefined)
    // While this call waits, a late `emit` through the context could land in it unnoticed if the
    // next call had the same one: this call keeps it, and no later call gets it.
    this.#shared = undefined
    return Promise.resolve(pending).then(
      () => this.#processed(context, array, count, undefined),
      (error: unknown) => this.#processed(context, array, count, thrown(error)),
    )
  }

  /**
   * Checks a `process` call on its inputs. The check reads the input array, which untyped code
   * can change (`splice(0)`, `shift()`, `length = 0`, `list[0] = list[1]`): an event taken out of
   * it is out of the runtime's sight, so neither settled if forgotten nor passed on if emitted,
   * and its batch waits for the stop. Only a copy would keep those in sight, at a cost on every
   * call; one comparison finds a change of length instead, and the checks' passes over the array
   * find a handle put in twice or a local one put in (`#distinctInputs`). Either is reported, and
   * from then on the transform's input arrays are frozen (its changes throw, and the call fails
   * with every input settled).
   */
  #processed(context: CallContext, array: EventArray, count: number, failure: unknown): Promise<void> {
    // Given up by a forced stop, which settled what it held: nothing to check or pass on.
    if (context.abandoned) return RESOLVED
    if (array.length !== count) {
      this.#frozenInputs = true
      this.emit({
        type: 'component_error',
        component: this.id,
        code: 'INPUT_MUTATED',
        message: `transform '${this.id}' changed its input array in process() (${count} event(s) given, ${array.length} left): events taken out of it were neither passed on nor settled by the runtime, and their batches wait for the stop; its input arrays are read-only from now on`,
        events: Math.max(0, count - array.length),
      })
    }
    return this.#finish(context, array.events, count, failure, 'process')
  }

  /**
   * The inputs of a call as the general check counts them: `array` itself, unless untyped code
   * wrote into it and kept its length (a change of length is `#processed`'s to report), putting
   * in a handle twice (`list[0] = list[1]`) or a local one (a clone, an event it made, one held
   * for a transform): then each handle once and no local one, and the change is reported. The
   * handles put in are not inputs: one emitted twice is passed on once and copied the second time,
   * and a local one emitted is checked as any other emitted handle (passed on if the transform's
   * own, else refused). The handles they replaced are gone: the runtime keeps no reference to them
   * (that would be a copy of every array), so their batches wait for the stop or the leak
   * detector. A permutation (`sort`, `reverse`) loses nothing and finds nothing to say. A handle
   * that is neither local nor put in twice (one an earlier call passed on) cannot be told from an
   * input without a copy.
   */
  #distinctInputs(array: readonly LogEvent[], given: number, step: 'process' | 'flush'): readonly LogEvent[] {
    const pass = nextPass()
    let i = 0
    while (i < array.length && array[i]!.meetAsInput(pass)) i++
    if (i === array.length) return array
    // Sorted out exactly: a pass number the counter came round to may sit on a handle from long before.
    const seen = new Set<LogEvent>()
    const inputs: LogEvent[] = []
    let twice = 0
    let local = 0
    for (const event of array) {
      if (event.isLocal) local++
      else if (seen.has(event)) twice++
      else {
        seen.add(event)
        inputs.push(event)
      }
    }
    if (twice + local === 0) return array
    if (step === 'process' && array.length === given) {
      this.#frozenInputs = true
      const what = [
        ...(twice > 0 ? [`${twice} handle(s) put in again`] : []),
        ...(local > 0 ? [`${local} handle(s) it made or held put in`] : []),
      ].join(', ')
      this.emit({
        type: 'component_error',
        component: this.id,
        code: 'INPUT_MUTATED',
        message: `transform '${this.id}' changed its input array in process() and kept its length (${given} event(s) given; ${what}): the events replaced were neither passed on nor settled by the runtime, and their batches wait for the stop (or the leak detector); its input arrays are read-only from now on`,
        events: given - inputs.length,
      })
    }
    return inputs
  }

  async #flush(): Promise<void> {
    if (this.transform.flush === undefined) return
    const context = new CallContext(this)
    context.open(NO_EVENTS)
    this.#calling = context
    this.#callingFlush = true
    let failure: unknown
    try {
      const pending = this.transform.flush(context)
      if (pending !== undefined) await pending
    } catch (error) {
      failure = thrown(error)
    }
    // Given up by a forced stop, which settled what it held: nothing to check or pass on.
    if (context.abandoned) return
    await this.#finish(context, [], 0, failure, 'flush')
  }

  /**
   * Checks a call and sends what it emitted; returns the sends' promise (`RESOLVED` when none
   * waits). `given` is how many inputs the call was given (the array's length before the call).
   */
  #finish(
    context: CallContext,
    inputs: readonly LogEvent[],
    given: number,
    failure: unknown,
    step: 'process' | 'flush',
  ): Promise<void> {
    if (this.#calling === context) this.#calling = undefined
    try {
      return this.#check(context, inputs, given, failure, step)
    } catch (error) {
      return Promise.reject(error)
    } finally {
      context.release()
    }
  }

  #check(
    context: CallContext,
    inputs: readonly LogEvent[],
    given: number,
    failure: unknown,
    step: 'process' | 'flush',
  ): Promise<void> {
    context.close()
    if (
      failure !== undefined ||
      context.ports.size > 0 ||
      context.created !== undefined ||
      !((this.#held.isEmpty && inOrder(inputs, context.emitted)) || this.#holdsInOrder(context, inputs))
    ) {
      context.unpass() // the general check rewrites the default port's list
      this.#reconcile(context, inputs, given, failure, step)
    }
    let first: Promise<void> = RESOLVED
    let more: Promise<void>[] | undefined
    const passed = context.passed
    if (passed !== undefined) {
      // An input frozen for a transform that changed its inputs (`#processed`) goes on as a copy:
      // a correct transform after it may sort its own input in place.
      if (passed.length > 0)
        first = this.outputs
          .get('')!
          .send(
            this.#frozenInputs && Object.isFrozen(passed.events)
              ? new EventArray([...passed.events])
              : passed,
          )
    } else if (context.defaultCount > 0) {
      first = this.outputs.get('')!.send(new EventArray(context.defaultPort))
    }
    for (const [port, list] of context.ports) {
      if (list.length === 0) continue
      const sent = this.outputs.get(port)!.send(new EventArray(list))
      if (sent === RESOLVED) continue
      if (first === RESOLVED) first = sent
      else if (more === undefined) more = [first, sent]
      else more.push(sent)
    }
    return more === undefined ? first : Promise.all(more).then(nothing)
  }

  /**
   * The quick check of a call that holds (a window, a reduce group; no failure, nothing on a named
   * port, nothing made): what was emitted on the default port is held events from the front of
   * the queue, in the order held, then a subsequence of the inputs, every one live; then it does
   * what the general check would (the held ones leave, the inputs left out and live are held) with
   * no set and nothing made. Returns false for any other call (a transform without `flush` never
   * holds), having changed nothing held (ended events at the queue's front may have been let go).
   */
  #holdsInOrder(context: CallContext, inputs: readonly LogEvent[]): boolean {
    if (this.transform.flush === undefined) return false
    const emitted = context.emitted
    const held = this.#held
    const front = held.frontRun(emitted)
    const pass = nextPass()
    let j = front
    for (let i = 0; i < inputs.length; i++) {
      const event = inputs[i]!
      // In the array twice, or local (not an input): for the general check (`#distinctInputs`).
      if (!event.meetAsInput(pass)) return false
      if (event === emitted[j]) {
        if (event.isEnded) return false
        j++
      }
    }
    if (j !== emitted.length) return false
    held.takeFront(front)
    j = front
    for (let i = 0; i < inputs.length; i++) {
      const event = inputs[i]!
      if (event === emitted[j]) j++
      else if (!event.isEnded) held.add(event)
    }
    // Settled as the general check settles: after anything left or was held (a queue emptied
    // is compacted, and its array cut if a burst had grown it).
    if (front > 0 || !held.isEmpty) held.settle()
    // As in the general check: a call that returns after a forced stop settles what it kept.
    if (!held.isEmpty && this.forced) this.#settleHeld('the forced stop')
    return true
  }

  /**
   * Takes out of the call's outputs the handles it emitted that were not its own (passed on by an
   * earlier call, or another component's), and the copies of them a second emission made, which
   * are ended without a status (they were never passed on); the handles themselves are left as
   * they are, for whoever holds them. Reported as `ENDED_AFTER_EMIT`, naming how many.
   */
  #refuse(
    context: CallContext,
    foreign: ReadonlySet<LogEvent>,
    copies: readonly LogEvent[] | undefined,
  ): void {
    let copiesRefused: Set<LogEvent> | undefined
    for (let k = 0; copies !== undefined && k < copies.length; k += 2) {
      if (!foreign.has(copies[k + 1]!)) continue
      copiesRefused ??= new Set()
      copiesRefused.add(copies[k]!)
    }
    const refused = (event: LogEvent): boolean => {
      if (foreign.has(event)) return true
      if (copiesRefused?.has(event) !== true) return false
      event.end()
      return true
    }
    const defaultPort = context.defaultPort
    let kept = 0
    for (let i = 0; i < defaultPort.length; i++)
      if (!refused(defaultPort[i]!)) defaultPort[kept++] = defaultPort[i]!
    defaultPort.length = kept
    for (const [port, list] of context.ports)
      context.setPort(
        port,
        list.filter((event) => !refused(event)),
      )
    this.emit({
      type: 'component_error',
      component: this.id,
      code: 'ENDED_AFTER_EMIT',
      message: `transform '${this.id}' emitted ${foreign.size} event(s) that were not its own in this call (passed on by an earlier call, or another component's): they were not passed on, and were left to whoever holds them`,
      events: foreign.size,
    })
  }

  /**
   * The general check, when the quick one could not vouch for the call: a second emission of a
   * handle becomes a clone, ended handles and handles not the transform's (`#refuse`) are taken
   * out of the outputs, held events that left are forgotten, and inputs that did not leave are
   * held (transforms with `flush`) or settled `errored`. What is passed on is marked so
   * (`markPassedOn`): emitted again in a later call, it is not the transform's.
   */
  #reconcile(
    context: CallContext,
    array: readonly LogEvent[],
    given: number,
    failure: unknown,
    step: 'process' | 'flush',
  ): void {
    const inputs = this.#distinctInputs(array, given, step)
    const emitted = new Set<LogEvent>()
    let endedAfterEmit = 0
    // The copies made of events the call did not make or keep (inputs, or handles not its own),
    // each followed by what it copies: a copy of a handle not its own is not passed on either.
    // Pairs in an array, read only when a handle is refused: a map keyed by each copy cost a
    // second emission of an input (a tee) about 50 ns more, pairs about 15.
    let copies: LogEvent[] | undefined
    const check = (list: LogEvent[]): LogEvent[] => {
      const out: LogEvent[] = []
      for (const event of list) {
        if (event.isEnded) {
          endedAfterEmit++
        } else if (emitted.has(event)) {
          const copy = event.clone()
          copy.markPassedOn()
          if (!event.isLocalTo(this.holder)) {
            copies ??= []
            copies.push(copy, event)
          }
          out.push(copy)
        } else {
          emitted.add(event)
          out.push(event)
        }
      }
      return out
    }
    const kept = check(context.defaultPort)
    // A loop, not `push(...kept)`: a spread of more than about 100 000 events overflows the stack.
    const defaultPort = context.defaultPort
    defaultPort.length = kept.length
    for (let i = 0; i < kept.length; i++) defaultPort[i] = kept[i]!
    for (const [port, list] of context.ports) context.setPort(port, check(list))

    const held = this.#held
    const mayHold = this.transform.flush !== undefined && failure === undefined
    let leaked = 0
    let options: EndOptions | undefined
    for (const event of inputs) {
      if (event.isEnded) continue
      // An input passed on in its own call was never held: only the other emitted events may be.
      if (emitted.delete(event)) continue
      if (mayHold) {
        held.add(event)
      } else {
        options ??= {
          reason:
            failure !== undefined
              ? this.failure(
                  'PROCESS_FAILED',
                  `transform '${this.id}' threw in ${step}(): ${textOf(failure)}`,
                )
              : this.failure(
                  'LEAKED_EVENTS',
                  `transform '${this.id}' returned from ${step}() without emitting, dropping or merging the event`,
                ),
        }
        event.end('errored', options)
        leaked++
      }
    }
    // What is left emitted is what the call did not take in: held events leaving and events it
    // made (with `create`, `clone` or `new LogEvent`), all local, or a handle an earlier call
    // passed on, which a sink may be writing: passed on again, one handle would be in two places,
    // and the first to end it would resolve its batches for both. Such a one is taken out of the
    // outputs, untouched, and reported.
    let foreign: Set<LogEvent> | undefined
    for (const event of emitted) {
      if (event.isLocalTo(this.holder)) {
        event.markPassedOn()
      } else {
        foreign ??= new Set()
        foreign.add(event)
        emitted.delete(event) // not a held event leaving: nothing below is to forget it
      }
    }
    if (foreign !== undefined) this.#refuse(context, foreign, copies)
    // An event the call made and neither passed on nor ended holds clones of its parents: kept
    // like an input (a transform with `flush` may emit it later), or settled, never left live.
    let strays = 0
    for (const event of context.created ?? NO_EVENTS) {
      if (event.isEnded || emitted.has(event)) continue
      if (mayHold) {
        held.add(event)
      } else {
        event.end('errored', {
          reason: this.failure(
            'LEAKED_EVENTS',
            `transform '${this.id}' made an event with create() in ${step}() and neither emitted nor ended it`,
          ),
        })
        strays++
      }
    }
    if (!held.isEmpty) {
      // What else was emitted: held events leaving (or events the call made), then a compaction if due.
      for (const event of emitted) held.leave(event)
      held.settle()
      // A call that returns after a forced stop: nothing will call the transform again to emit
      // what it kept, and the stop has settled what was held before.
      if (this.forced) this.#settleHeld('the forced stop')
    }
    if (leaked > 0) {
      this.counters.errored += leaked
      this.counters.failed(failure !== undefined ? 'PROCESS_FAILED' : 'LEAKED_EVENTS', leaked)
    }
    if (failure !== undefined) {
      this.emit({
        type: 'component_error',
        component: this.id,
        code: 'PROCESS_FAILED',
        message: `transform '${this.id}' threw in ${step}(): ${textOf(failure)}; ${leaked} unhandled input event(s) settled errored`,
        events: leaked,
        cause: failure,
      })
    } else if (leaked > 0) {
      this.emit({
        type: 'component_error',
        component: this.id,
        code: 'LEAKED_EVENTS',
        message: `transform '${this.id}' returned from ${step}() without emitting, dropping or merging ${leaked} input event(s); they were settled errored`,
        events: leaked,
      })
    }
    if (strays > 0) {
      this.counters.errored += strays
      this.counters.failed('LEAKED_EVENTS', strays)
      this.emit({
        type: 'component_error',
        component: this.id,
        code: 'LEAKED_EVENTS',
        message: `transform '${this.id}' made ${strays} event(s) with create() in ${step}() and neither emitted nor ended them; they were settled errored`,
        events: strays,
      })
    }
    if (endedAfterEmit > 0) {
      this.emit({
        type: 'component_error',
        component: this.id,
        code: 'ENDED_AFTER_EMIT',
        message: `transform '${this.id}' ended ${endedAfterEmit} event(s) after emitting them; they were not passed on`,
        events: endedAfterEmit,
      })
    }
  }
}

/**
 * The quick check of the common call (a map, a filter, a merge): what was emitted on the default
 * port is a subsequence of the inputs, still live, and every input left out has ended; and no
 * handle is in the input array twice, or local (which untyped code writing into the array can
 * make so: the general check sees to it, `#distinctInputs`).
 */
function inOrder(inputs: readonly LogEvent[], emitted: readonly LogEvent[]): boolean {
  const pass = nextPass()
  if (emitted === inputs) {
    // The call passed its input on whole: only an input it ended as well is wrong.
    for (let i = 0; i < inputs.length; i++) {
      const event = inputs[i]!
      if (event.isEnded || !event.meetAsInput(pass)) return false
    }
    return true
  }
  let j = 0
  for (let i = 0; i < inputs.length; i++) {
    const event = inputs[i]!
    if (!event.meetAsInput(pass)) return false
    if (event === emitted[j]) {
      if (event.isEnded) return false
      j++
    } else if (!event.isEnded) {
      return false
    }
  }
  return j === emitted.length
}

function undeclaredPort(port: string): string {
  return `emitted on port '${port}', which it does not declare`
}

/**
 * What `emit` or `emitAll` throws for something that is not a `LogEvent` (an `EventArray`), as
 * untyped code may pass: the call then fails as any throwing call does, and its inputs are settled.
 */
function notAnEvent(id: string, member: 'emit' | 'emitAll', value: unknown): ComponentError<'NOT_AN_EVENT'> {
  const expected = member === 'emit' ? 'a LogEvent' : 'an EventArray'
  const got =
    value === null
      ? 'null'
      : Array.isArray(value)
        ? 'an array'
        : typeof value === 'object'
          ? 'another object'
          : typeof value
  return new ComponentError('NOT_AN_EVENT', `context.${member} takes ${expected}, got ${got}`, {
    component: id,
    field: member,
  })
}

/**
 * What a call threw, as its failure: `undefined` (`throw undefined`, `Promise.reject()`) stands
 * for no failure in the checks, so it becomes an error that says so.
 */
function thrown(error: unknown): unknown {
  return error === undefined ? new Error('undefined (thrown or rejected with no value)') : error
}

/**
 * Whether `value` can be an event's fields: an object that JSON writes as an object with its
 * members (a plain one, or a class instance), not an array, a `Map` or `Set` (written `{}`), a
 * promise, a `Date` or a `RegExp` (written as a string, or `{}`), or binary data.
 */
function isFieldsLike(value: unknown): value is JsonObject {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false
  if (
    value instanceof Map ||
    value instanceof Set ||
    value instanceof WeakMap ||
    value instanceof WeakSet ||
    value instanceof Date ||
    value instanceof RegExp ||
    value instanceof ArrayBuffer ||
    ArrayBuffer.isView(value)
  )
    return false
  return typeof (value as { then?: unknown }).then !== 'function'
}

/** What `create` throws for fields that are not a JSON object, as untyped code may pass (nothing is made). */
function notFields(id: string, value: unknown): ComponentError<'NOT_FIELDS'> {
  const maker: unknown =
    typeof value === 'object' && value !== null ? (value as { constructor?: unknown }).constructor : undefined
  const got =
    value === null || value === undefined
      ? String(value)
      : Array.isArray(value)
        ? 'an array'
        : typeof maker === 'function' && typeof maker.name === 'string' && maker.name !== ''
          ? `a ${maker.name}`
          : `a ${typeof value}`
  return new ComponentError('NOT_FIELDS', `context.create takes a JSON object as fields, got ${got}`, {
    component: id,
    field: 'create',
  })
}

/** What `emit` throws for a port the transform does not declare (after settling the events). */
function undeclaredPortError(id: string, port: string): ComponentError<'UNDECLARED_PORT'> {
  return new ComponentError('UNDECLARED_PORT', undeclaredPort(port), { component: id, field: 'outputs' })
}

/** Whether `event` (live) carries no batch: ending it tells no source anything. */
function holdsNoBatch(event: LogEvent): boolean {
  let batches = 0
  event.forEachBatch(() => batches++)
  return batches === 0
}
