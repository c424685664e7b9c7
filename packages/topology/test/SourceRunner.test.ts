// The source's send path on its own: a send with room does its work within the call; a send
// into a full channel waits for room, exactly (issue 10). Counts and orders, never times.

import { nextTick } from 'node:process'
import { setImmediate as realSetImmediate } from 'node:timers'
import { BatchNotifier, type BatchStatusReceiver, EventArray, type JsonObject, LogEvent } from '@ackline/core'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { ComponentError } from '../src/ComponentError.js'
import { BatchTracker, SlotReceipt } from '../src/internal/BatchTracker.js'
import { Counters } from '../src/internal/Counters.js'
import { SLICE_MS } from '../src/internal/loopTurns.js'
import { EMPTY } from '../src/internal/MemoryChannel.js'
import { Output } from '../src/internal/Output.js'
import { SourceRunner } from '../src/internal/SourceRunner.js'
import { EVENTS_PER_READING, SENDS_PER_READING } from '../src/internal/sendClock.js'
import { NO_RECEIPT, type Source } from '../src/Source.js'
import { blockingChannel } from './support/blockingChannel.js'

function setup(maxEvents: number, acknowledgements = true, ackTimeoutMs?: number) {
  const channel = blockingChannel(maxEvents)
  const counters = new Counters('source', 'test')
  const tracker = new BatchTracker('in', counters, ackTimeoutMs, { emit: () => {}, watching: () => false })
  const source: Source = { kind: 'test', canAcknowledge: true, run: async () => {} }
  const output = new Output([channel], counters)
  const runner = new SourceRunner(
    'in',
    source,
    acknowledgements,
    output,
    counters,
    tracker,
    new AbortController().signal,
  )
  return { channel, tracker, runner }
}

afterEach(() => {
  vi.useRealTimers()
})

/** Spies on `BatchNotifier.open`: the receivers it made and the times it was opened with. */
function spyOnOpen(onEach?: (notifier: BatchNotifier) => void) {
  const receivers: BatchStatusReceiver[] = []
  const opened: (number | undefined)[] = []
  const open = BatchNotifier.open
  const spy = vi.spyOn(BatchNotifier, 'open').mockImplementation((...args) => {
    const notifier = open(...args)
    receivers.push(notifier.receiver)
    opened.push(args[2])
    onEach?.(notifier)
    return notifier
  })
  return { spy, receivers, opened }
}

/** Lets every queued microtask and the callbacks they queue run (an order, not a time). */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve))

describe('SourceRunner', () => {
  it('queues a batch within the send call when the channel has room', () => {
    for (const acks of [true, false]) {
      const { channel, runner } = setup(10, acks)
      void runner.context.send([{ n: 1 }, { n: 2 }])
      // Nothing was awaited: the events are already in the channel when send returns.
      expect(channel.queuedEvents).toBe(2)
      expect(channel.tryPull()).toMatchObject({ length: 2 })
      expect(channel.tryPull()).toBe(EMPTY)
    }
  })

  it('keeps back pressure exact: a send into a full channel resolves only once room is made', async () => {
    const { channel, runner } = setup(2)
    let accepted = 0
    const sends = [1, 2, 3].map((n) => runner.context.send([{ n }]).then(() => accepted++))
    await settle()
    expect(channel.queuedEvents).toBe(2)
    expect(accepted).toBe(2) // the third waits
    const first = channel.tryPull() as EventArray
    expect(first.events[0]!.get('n')).toBe(1)
    await settle()
    expect(accepted).toBe(3)
    expect(channel.queuedEvents).toBe(2)
    await Promise.all(sends)
    for (let array = channel.tryPull(); array !== EMPTY && array !== undefined; array = channel.tryPull())
      array.end('delivered')
    first.end('delivered')
  })

  it('registers one listener per batch with a notifier, and it is the tracker itself (no object or closure per batch)', async () => {
    // An ack timeout keeps the notifier (its queue keeps receivers); without one, see the next test.
    const { channel, runner, tracker } = setup(10, true, 60_000)
    const { spy, receivers } = spyOnOpen((notifier) => vi.spyOn(notifier.receiver, 'onResolved'))
    try {
      const receipt = await runner.context.send([{ n: 1 }, { n: 2 }, { n: 3 }])
      expect(spy).toHaveBeenCalledTimes(1) // one notifier per batch, whatever its size
      expect(receivers[0]!.onResolved).toHaveBeenCalledTimes(1)
      expect(receivers[0]!.onResolved).toHaveBeenCalledWith(tracker)
      expect(receivers[0]!.tracking).toBeUndefined() // nothing kept beside the receiver
      expect(tracker.pending).toBe(1)
      const status = receipt.status // the source waits: the resolver is kept with the receiver
      expect(receivers[0]!.tracking).toBeDefined()
      ;(channel.tryPull() as EventArray).end('delivered')
      expect(await status).toBe('delivered')
      expect(tracker.pending).toBe(0)
    } finally {
      spy.mockRestore()
      tracker.forceAll()
    }
  })

  it('keeps a batch whose receipt is read as a slot (RFC 0009): the receipt is its one object, decided as any', async () => {
    const { channel, runner, tracker } = setup(10)
    const { spy } = spyOnOpen()
    try {
      const delivered = await runner.context.send([{ n: 1 }, { n: 2 }])
      const rejected = await runner.context.send([{ n: 3 }])
      expect(spy).not.toHaveBeenCalled() // no notifier, no state
      expect(delivered).toBeInstanceOf(SlotReceipt)
      expect(tracker.pending).toBe(2)
      expect(delivered.batchId).toMatch(
        /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
      )
      expect(delivered.batchId! < rejected.batchId!).toBe(true) // ids sort by creation
      const status = delivered.status // the source waits before the batch resolves
      ;(channel.tryPull() as EventArray).end('delivered')
      const [event] = (channel.tryPull() as EventArray).events
      const reason = { componentId: 'out', code: 'BAD', message: 'no' }
      event!.end('rejected', { reason }) // a reason: the batch gets a state, the receipt is its tracking
      expect(await status).toBe('delivered')
      expect(await rejected.status).toBe('rejected') // read after it resolved
      expect(rejected.failure).toEqual(reason)
      expect(delivered.failure).toBeUndefined()
      expect(tracker.pending).toBe(0)
      expect(runner.counters.snapshot().ackLatencyMs.count).toBe(2)
    } finally {
      spy.mockRestore()
    }
  })

  describe('a send with { receipt: false }', () => {
    it('makes no receipt and no notifier (a slot, RFC 0009), yet the batch is tracked, timed and decided as any other', async () => {
      const { channel, runner, tracker } = setup(10)
      const { spy } = spyOnOpen()
      try {
        const receipt = await runner.context.send([{ n: 1 }, { n: 2 }], { receipt: false })
        expect(receipt).toBe(NO_RECEIPT)
        expect(() => receipt.status).toThrow(/receipt: false/)
        expect(() => receipt.batchId).toThrow(TypeError)
        expect(spy).not.toHaveBeenCalled() // no notifier, no state
        expect(tracker.pending).toBe(1) // tracked all the same
        const array = channel.tryPull() as EventArray
        expect(array.events[0]!.metadata.hasFinalizers).toBe(true)
        array.end('rejected')
        expect(tracker.pending).toBe(0)
        const snapshot = runner.counters.snapshot()
        expect(snapshot.ackLatencyMs.count).toBe(1)
        expect(snapshot.acksInFlight).toBe(0)
      } finally {
        spy.mockRestore()
      }
    })

    it('opens a notifier when the source has an ack timeout (its queue keeps receivers)', async () => {
      const { channel, runner, tracker } = setup(10, true, 60_000)
      const { spy, receivers } = spyOnOpen()
      try {
        await runner.context.send([{ n: 1 }], { receipt: false })
        expect(spy).toHaveBeenCalledTimes(1)
        expect(receivers[0]!.hasListener(tracker)).toBe(true)
        expect(tracker.timeoutQueueLength).toBe(1)
        ;(channel.tryPull() as EventArray).end('delivered')
        expect(tracker.pending).toBe(0)
        expect(receivers[0]!.status).toBe('delivered')
      } finally {
        spy.mockRestore()
        tracker.forceAll()
      }
    })

    it('keeps back pressure: resolves only once the batch is accepted, acks on or off', async () => {
      for (const acks of [true, false]) {
        const { channel, runner } = setup(1, acks)
        let accepted = 0
        const first = runner.context.send([{ n: 1 }], { receipt: false }).then(() => accepted++)
        const second = runner.context.send([{ n: 2 }], { receipt: false }).then((r) => {
          accepted++
          return r
        })
        await settle()
        expect(accepted).toBe(1) // the second waits for room
        ;(channel.tryPull() as EventArray).end('delivered')
        await settle()
        expect(await second).toBe(NO_RECEIPT)
        await first
        ;(channel.tryPull() as EventArray).end('delivered')
      }
    })

    it('is held for a turn of the event loop as any other send, acks on or off', async () => {
      for (const acks of [true, false]) {
        await new Promise<void>((resolve) => realSetImmediate(resolve)) // a probe armed earlier has run
        vi.useFakeTimers({ toFake: ['Date'] }) // a clock the test moves; timers stay real
        // Far from the probe's last arming (the other round's): the first send arms it anew.
        const start = Date.now() + (acks ? 120_000 : 240_000)
        vi.setSystemTime(start)
        const { channel, runner } = setup(10, acks)
        let accepted = 0
        await runner.context.send([{ n: 1 }], { receipt: false }) // arms the probe
        vi.setSystemTime(start + SLICE_MS)
        await new Promise<void>((resolve) => nextTick(resolve)) // a new burst reads the moved clock
        const held = runner.context.send([{ n: 2 }], { receipt: false }).then(() => accepted++)
        await Promise.resolve()
        await Promise.resolve()
        expect(channel.queuedEvents).toBe(2) // queued at once
        expect(accepted).toBe(0) // but the source waits for the turn
        await settle()
        expect(accepted).toBe(1)
        await held
        for (let a = channel.tryPull(); a !== EMPTY && a !== undefined; a = channel.tryPull())
          a.end('delivered')
        vi.useRealTimers()
      }
    })

    it('refuses outcomes without a receipt, naming the source, and sends nothing', async () => {
      const { channel, runner } = setup(10)
      await expect(runner.context.send([{ n: 1 }], { receipt: false, outcomes: true })).rejects.toThrow(
        /source 'in'.*outcomes: true needs its receipt/,
      )
      expect(channel.queuedEvents).toBe(0)
    })
  })

  it.each([
    ['null', null],
    ['a number', 5],
    ['an array', [1]],
    ['a string', 'text'],
  ])(
    'refuses a send with a record that is %s, naming the source and the index, and sends nothing, acks on or off',
    async (what, bad) => {
      for (const acknowledgements of [true, false]) {
        const { channel, runner } = setup(10, acknowledgements)
        const records = [{ n: 1 }, bad] as unknown as JsonObject[]
        await expect(runner.context.send(records)).rejects.toThrow(
          new TypeError(`source 'in': record 1 of a send is ${what}; a record must be a JSON object`),
        )
        await expect(runner.context.send(records, { receipt: false })).rejects.toThrow(TypeError)
        expect(channel.queuedEvents).toBe(0)
      }
    },
  )

  it.each([
    ['an array', () => [new LogEvent({ n: 1 }, { sourceId: 'in' })]],
    ['undefined', () => undefined],
    ['a string', () => 'text'],
  ])(
    'refuses sendEvents given %s instead of an EventArray, naming the source, and sends nothing',
    async (what, make) => {
      const { channel, runner } = setup(10)
      // Taken in, it reached the sink as an array without events, and the sink runner failed on it.
      await expect(runner.context.sendEvents(make() as unknown as EventArray)).rejects.toThrow(
        new TypeError(`source 'in': sendEvents takes an EventArray, got ${what}`),
      )
      expect(channel.queuedEvents).toBe(0)
    },
  )

  it.each([
    ['twice in one array', (h: LogEvent) => [new EventArray([h, h])], 'ALREADY_SENT', 1],
    ['again after an earlier send', (h: LogEvent) => [EventArray.of(h), EventArray.of(h)], 'ALREADY_SENT', 0],
    [
      'after it ended',
      (h: LogEvent) => {
        h.end()
        return [EventArray.of(new LogEvent({ n: 2 }), h)]
      },
      'USE_AFTER_END',
      1,
    ],
  ] as const)(
    'refuses sendEvents given a handle %s, naming the source and the event, and sends nothing of that array',
    async (_, arrays, code, index) => {
      const { channel, runner } = setup(10)
      const counters = runner.counters
      const handle = new LogEvent({ n: 1 }, { sourceId: 'in' })
      const sends = arrays(handle)
      const last = sends.pop()!
      for (const array of sends) await runner.context.sendEvents(array)
      const queued = channel.queuedEvents
      const received = counters.received
      const error = await runner.context.sendEvents(last).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(ComponentError)
      expect(error).toMatchObject({ code, component: 'in', field: 'sendEvents' })
      expect((error as Error).message).toContain(`event ${index} of the array`)
      expect([channel.queuedEvents, counters.received]).toEqual([queued, received])
    },
  )

  it.each([
    ['null', null],
    ['another object', { n: 2 }],
    ['a string', 'text'],
  ])(
    'refuses sendEvents given an array holding %s, naming the source and the index, and leaves the events before it unsent',
    async (what, bad) => {
      const { channel, runner } = setup(10)
      const handle = new LogEvent({ n: 1 }, { sourceId: 'in' })
      // From untyped code: markSent threw a bare TypeError out of sendEvents (no promise), and the
      // handle before it stayed marked sent, so sending it again was refused ALREADY_SENT.
      const sent = runner.context.sendEvents(new EventArray([handle, bad] as unknown as LogEvent[]))
      await expect(sent).rejects.toThrow(
        new TypeError(
          `source 'in': sendEvents: event 1 of the array is ${what}, not a LogEvent; nothing of the array was sent`,
        ),
      )
      expect(channel.queuedEvents).toBe(0)
      expect(handle.isSent).toBe(false)
      await runner.context.sendEvents(EventArray.of(handle))
      expect(channel.queuedEvents).toBe(1)
    },
  )

  it('sendEvents takes a clone of a handle it sent: a handle of its own', async () => {
    const { channel, runner } = setup(10)
    const handle = new LogEvent({ n: 1 }, { sourceId: 'in' })
    await runner.context.sendEvents(EventArray.of(handle))
    await runner.context.sendEvents(EventArray.of(handle.clone()))
    expect(channel.queuedEvents).toBe(2)
  })

  describe('the send clock', () => {
    /** Lets the burst end, so no reading is held (what ran before may have held one). */
    const newBurst = () => new Promise<void>((resolve) => nextTick(resolve))
    /** Lets the loop turn first, so no probe armed before holds a send (and splits a burst). */
    const quietLoop = () => new Promise<void>((resolve) => realSetImmediate(resolve))
    /** A clock that moves 1 ms at every reading, and counts them. */
    const movingClock = () => {
      let now = Date.now() + 1_000_000
      return vi.spyOn(Date, 'now').mockImplementation(() => ++now)
    }
    const stampsOf = (channel: ReturnType<typeof setup>['channel']): number[] => {
      const stamps: number[] = []
      for (let array = channel.tryPull(); array !== EMPTY && array !== undefined; array = channel.tryPull()) {
        for (const event of array.events) stamps.push(event.metadata.ingestTimestamp)
        array.end('delivered')
      }
      return stamps
    }

    it('shares one reading among at most SENDS_PER_READING sends of one burst, for batches and their ids', async () => {
      const { channel, runner } = setup(1000)
      const { spy, opened } = spyOnOpen()
      await quietLoop()
      await newBurst()
      const clock = movingClock()
      try {
        const count = SENDS_PER_READING * 2 + 1
        const ids: string[] = []
        for (let i = 0; i < count; i++) {
          // Every other send keeps its notifier (outcomes): both kinds of batch are stamped so.
          const receipt = await runner.context.send([{ n: i }], i % 2 === 0 ? { outcomes: true } : {})
          ids.push(receipt.batchId!)
        }
        expect(clock).toHaveBeenCalledTimes(3)
        const stamps = stampsOf(channel)
        expect(stamps).toHaveLength(count)
        // Readings taken in order, each serving the sends that follow it; never a later time first.
        const first = stamps[0]!
        expect(stamps).toEqual(
          Array.from({ length: count }, (_, i) => first + Math.floor(i / SENDS_PER_READING)),
        )
        // Each batch opened at its ingest time: its notifier's, and its id's millisecond.
        expect(opened).toEqual(stamps.filter((_, i) => i % 2 === 0))
        expect(ids.map((id) => Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16))).toEqual(stamps)
      } finally {
        clock.mockRestore()
        spy.mockRestore()
      }
    })

    it('reads the clock again in the next burst, and after EVENTS_PER_READING events', async () => {
      const { channel, runner } = setup(10_000, false)
      await quietLoop()
      await newBurst()
      const clock = movingClock()
      try {
        await runner.context.send([{ n: 0 }])
        await runner.context.send([{ n: 1 }]) // same burst: shares the reading
        await newBurst() // the burst is over
        await runner.context.send([{ n: 2 }]) // reads again
        // With the send before it, one event short of the bound: shares the reading.
        const big = Array.from({ length: EVENTS_PER_READING - 2 }, (_, i) => ({ n: 3 + i }))
        await runner.context.send(big)
        await runner.context.send([{ n: 0 }]) // would make EVENTS_PER_READING: reads again
        expect(clock).toHaveBeenCalledTimes(3)
        const stamps = stampsOf(channel)
        const t = stamps[0]!
        expect(stamps.slice(0, 3)).toEqual([t, t, t + 1])
        expect(new Set(stamps.slice(3, -1))).toEqual(new Set([t + 1]))
        expect(stamps).toHaveLength(3 + EVENTS_PER_READING - 2 + 1)
        expect(stamps.at(-1)).toBe(t + 2)
      } finally {
        clock.mockRestore()
      }
    })
  })

  it('a send held for a turn of the event loop queues its batch at once, keeps back pressure and order, and resolves its receipt after the turn', async () => {
    await new Promise<void>((resolve) => realSetImmediate(resolve)) // a probe armed earlier has run
    vi.useFakeTimers({ toFake: ['Date'] }) // a clock the test moves; timers stay real
    const start = Date.now() + 120_000
    vi.setSystemTime(start)
    const { channel, runner } = setup(2)
    let accepted = 0
    const first = runner.context.send([{ n: 1 }]).then((receipt) => {
      accepted++
      return receipt
    }) // arms the probe
    vi.setSystemTime(start + SLICE_MS)
    // The sends of one burst share a clock reading (sendClock.ts): the next send must come in a
    // burst of its own to read the moved clock (a tick, not a turn of the loop).
    await new Promise<void>((resolve) => nextTick(resolve))
    const second = runner.context.send([{ n: 2 }]).then((receipt) => {
      accepted++
      return receipt
    }) // due: held for the turn
    const third = runner.context.send([{ n: 3 }]).then(() => accepted++) // held, and the channel is full
    await Promise.resolve()
    await Promise.resolve()
    expect(channel.queuedEvents).toBe(2) // both batches queued at once, in order
    expect(accepted).toBe(1) // the held send waits for the turn
    await settle()
    expect(accepted).toBe(2) // the turn came; the third still waits for room
    const one = channel.tryPull() as EventArray
    const two = channel.tryPull() as EventArray
    expect([one.events[0]!.get('n'), two.events[0]!.get('n')]).toEqual([1, 2])
    await settle()
    expect(accepted).toBe(3)
    const three = channel.tryPull() as EventArray
    expect(three.events[0]!.get('n')).toBe(3)
    for (const array of [one, two, three]) array.end('delivered')
    expect(await (await first).status).toBe('delivered')
    expect(await (await second).status).toBe('delivered')
    await third
  })
})
