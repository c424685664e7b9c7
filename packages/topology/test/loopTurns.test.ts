// Fairness with the event loop: a source whose sends are accepted at once and that does no I/O of
// its own must still let timers, I/O callbacks and `stop()` run. Before this, an endless such
// source kept the process in one task for ever: a `stop()` from a timer never ran.
import { setImmediate as realSetImmediate } from 'node:timers'
import { EventArray, LogEvent } from '@ackline/core'
import { type Sink, type Source, TopologyBuilder } from '@ackline/topology'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { awaitLoopTurn, SENDS_PER_PROBE, SLICE_MS } from '../src/internal/loopTurns.js'
import { quiet } from './support/Harness.js'

afterEach(() => {
  vi.useRealTimers()
})

/**
 * Sends without I/O, one record per batch and awaiting each send, until stopped; gives up after
 * {@link CAP} sends (a couple of seconds), so a pipeline that never lets the loop turn fails the
 * test (`stopped` stays false) instead of hanging the test run.
 */
const CAP = 2_000_000
const endless = (sendEvents = false): Source & { sent: number; stopped: boolean } => ({
  kind: 'endless',
  canAcknowledge: true,
  sent: 0,
  stopped: false,
  async run(context) {
    while (this.sent < CAP) {
      if (context.signal.aborted) {
        this.stopped = true
        return
      }
      if (sendEvents) await context.sendEvents(new EventArray([new LogEvent({ n: this.sent })]))
      else await context.send([{ n: this.sent }])
      this.sent++
    }
  },
})

/** A sink that delivers every write at once, keeping each event's `n` in the order written. */
const counting = (): Sink & { count: number; ns: number[] } => ({
  kind: 'counting',
  count: 0,
  ns: [],
  write(events: EventArray) {
    this.count += events.length
    for (const event of events) this.ns.push(event.get('n') as number)
    return Promise.resolve(undefined)
  },
})

/** The next turn of the event loop (after I/O callbacks and timers due), fake timers or not. */
const nextTurn = () => new Promise<void>((resolve) => realSetImmediate(resolve))

describe('awaitLoopTurn', () => {
  it('asks for a turn only once a slice passed since it armed its probe and the probe has not run', async () => {
    await nextTurn() // whatever an earlier caller armed has run
    const start = 1_000_000
    expect(awaitLoopTurn(start)).toBeUndefined() // arms the probe
    expect(awaitLoopTurn(start + SLICE_MS - 1)).toBeUndefined() // within the slice: no check
    const held = awaitLoopTurn(start + SLICE_MS)
    expect(held).toBeInstanceOf(Promise)
    expect(awaitLoopTurn(start + SLICE_MS + 5)).toBe(held) // one promise for every waiting send
    let turned = false
    void held!.then(() => {
      turned = true
    })
    await Promise.resolve()
    expect(turned).toBe(false) // microtasks alone do not settle it
    await nextTurn()
    expect(turned).toBe(true)
    // The loop turned: the next check arms a new probe and lets the send go on.
    expect(awaitLoopTurn(start + 2 * SLICE_MS)).toBeUndefined()
    expect(awaitLoopTurn(start + 3 * SLICE_MS)).toBeInstanceOf(Promise)
    await nextTurn()
  })

  it('with a clock that does not move, asks for a turn after SENDS_PER_PROBE sends', async () => {
    await nextTurn()
    const frozen = 3_000_000
    expect(awaitLoopTurn(frozen)).toBeUndefined() // arms the probe
    for (let i = 1; i < SENDS_PER_PROBE; i++) expect(awaitLoopTurn(frozen)).toBeUndefined()
    const held = awaitLoopTurn(frozen)
    expect(held).toBeInstanceOf(Promise)
    await nextTurn()
    await held
    // The next probe is armed after as many sends again: a frozen clock never starves the loop.
    let sends = 0
    while (awaitLoopTurn(frozen) === undefined) sends++
    expect(sends).toBeLessThanOrEqual(2 * SENDS_PER_PROBE)
    await nextTurn()
  })

  it("runs its probe under fake timers: it takes node:timers' setImmediate, not the faked global", async () => {
    await nextTurn()
    vi.useFakeTimers() // fakes Date and the global setImmediate
    const now = Date.now() + 60_000
    expect(awaitLoopTurn(now)).toBeUndefined()
    const held = awaitLoopTurn(now + SLICE_MS)!
    let turned = false
    void held.then(() => {
      turned = true
    })
    await nextTurn() // a real turn; no fake timer was advanced
    expect(turned).toBe(true)
  })

  it('takes a clock that stepped back as a slice passed, so a step cannot starve the loop', async () => {
    await nextTurn()
    const start = 2_000_000
    expect(awaitLoopTurn(start)).toBeUndefined()
    expect(awaitLoopTurn(start - 60_000)).toBeInstanceOf(Promise)
    await nextTurn()
    expect(awaitLoopTurn(start - 60_000)).toBeUndefined() // re-armed at the earlier time
    expect(awaitLoopTurn(start - 60_000 + SLICE_MS)).toBeInstanceOf(Promise)
    await nextTurn()
  })
})

describe('a busy source and the event loop', () => {
  for (const acknowledgements of [true, false]) {
    for (const sendEvents of [false, true]) {
      const how = `${sendEvents ? 'sendEvents' : 'send'}, acknowledgements ${acknowledgements ? 'on' : 'off'}`
      it(`lets a timer stop an endless source that does no I/O (${how})`, async () => {
        const source = endless(sendEvents)
        const sink = counting()
        const topology = new TopologyBuilder({ ...quiet, acknowledgements })
          .source('in', source)
          .sink('out', ['in'], sink)
          .build()
        let ticks = 0
        const ticker = setInterval(() => ticks++, 1)
        await topology.start()
        // The timer runs only if the pipeline lets the loop turn; before, this test hung.
        await new Promise<void>((resolve) => {
          setTimeout(() => {
            void topology.stop().then(resolve)
          }, 3 * SLICE_MS)
        })
        await topology.done
        clearInterval(ticker)
        expect(source.stopped).toBe(true)
        expect(source.sent).toBeGreaterThan(0)
        expect(sink.count).toBe(source.sent)
        // Every batch arrived, once and in order, through the sends that were held for a turn.
        expect(sink.ns.every((n, i) => n === i)).toBe(true)
        expect(ticks).toBeGreaterThan(0)
        if (acknowledgements && !sendEvents)
          expect(topology.metrics().in!.ackLatencyMs.count).toBe(source.sent)
      })
    }
  }
})
