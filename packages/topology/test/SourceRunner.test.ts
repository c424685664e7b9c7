// The source's send path on its own: a send with room does its work within the call; a send
// into a full channel waits for room, exactly (issue 10). Counts and orders, never times.

import { setImmediate as realSetImmediate } from 'node:timers'
import { BatchNotifier, type BatchStatusReceiver, type EventArray } from '@ackline/core'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { BatchTracker } from '../src/internal/BatchTracker.js'
import { Counters } from '../src/internal/Counters.js'
import { SLICE_MS } from '../src/internal/loopTurns.js'
import { EMPTY } from '../src/internal/MemoryChannel.js'
import { Output } from '../src/internal/Output.js'
import { SourceRunner } from '../src/internal/SourceRunner.js'
import type { Source } from '../src/Source.js'
import { blockingChannel } from './support/blockingChannel.js'

function setup(maxEvents: number, acknowledgements = true) {
  const channel = blockingChannel(maxEvents)
  const counters = new Counters('source', 'test')
  const tracker = new BatchTracker('in', counters, undefined, { emit: () => {}, watching: () => false })
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

  it('registers one listener per batch, and it is the tracker itself (no object or closure per batch)', async () => {
    const { channel, runner, tracker } = setup(10)
    const receivers: BatchStatusReceiver[] = []
    const open = BatchNotifier.open
    const spy = vi.spyOn(BatchNotifier, 'open').mockImplementation((...args) => {
      const notifier = open(...args)
      receivers.push(notifier.receiver)
      vi.spyOn(notifier.receiver, 'onResolved')
      return notifier
    })
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
    }
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
