// The authoritative end keeps the status it records in the runner's fields while `onRecorded`
// runs; a forced stop reached from there re-enters the same runner, whose own ends must not
// change what the outer end records for the batches it has not visited yet.
import { BatchNotifier, type BatchStatusReceiver, EventArray, type EventStatus } from '@ackline/core'
import { describe, expect, it, vi } from 'vitest'
import type { BatchFailure } from '../src/BatchFailure.js'
import type { EdgeBuffer } from '../src/EdgeBuffer.js'
import { Counters } from '../src/internal/Counters.js'
import { SinkRunner } from '../src/internal/SinkRunner.js'
import type { Sink } from '../src/Sink.js'

describe('SinkRunner, authoritative', () => {
  it('a forced stop reached from onRecorded does not change what the end being made records for its other batches', async () => {
    // Event x belongs to batches a and b (merged); event y to batch c.
    const open = (id: string) => {
      const { notifier, receiver } = BatchNotifier.create({ sourceId: id })
      const array = EventArray.fromRecords([{ id }], { sourceId: id, batch: notifier })
      return { event: array.events[0]!, receiver }
    }
    const a = open('a')
    const b = open('b')
    const c = open('c')
    const x = a.event.merge(b.event)
    const queue = [new EventArray([x]), new EventArray([c.event])]
    const buffer: EdgeBuffer = {
      push: async () => {},
      pull: () => (queue.length > 0 ? Promise.resolve(queue.shift()) : new Promise(() => {})),
      close: async () => {},
    }
    let releaseX: (() => void) | undefined
    const sink: Sink = {
      kind: 'test',
      write: (array) =>
        array.events[0]!.fields.id === 'a'
          ? new Promise<undefined>((resolve) => {
              releaseX = () => resolve(undefined)
            })
          : new Promise<undefined>(() => {}), // y's write never returns: only a forced stop settles it
    }
    const told: [string | undefined, EventStatus, string | undefined][] = []
    const runner: SinkRunner = new SinkRunner(
      'out',
      sink,
      buffer,
      true,
      undefined,
      2,
      new Counters('sink', 'test'),
      () => {},
      (
        sourceId: string | undefined,
        _receiver: BatchStatusReceiver,
        status: EventStatus,
        failure: BatchFailure | undefined,
      ) => {
        told.push([sourceId, status, failure?.code])
        // What a lifecycle watcher's second stop() does inside the batch_resolved fact a record emits.
        if (sourceId === 'a') runner.force()
      },
    )
    void runner.run()
    await vi.waitUntil(() => releaseX !== undefined)
    releaseX!()
    await vi.waitUntil(() => told.length === 3)
    // x was delivered: both of its batches are told 'delivered', with no failure; y errored (STOPPED).
    expect(told).toEqual([
      ['a', 'delivered', undefined],
      ['c', 'errored', 'STOPPED'],
      ['b', 'delivered', undefined],
    ])
  })
})
