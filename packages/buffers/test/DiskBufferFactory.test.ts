// The disk buffer as a buffer kind of a topology: `diskBuffer({ … })` in a sink's `buffer`
// option, checked at build, opened at start, and settling its sources' batches.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type DiskBufferFactoryOptions, diskBuffer } from '@ackline/buffers'
import type { DeliveryStatus, EventArray, LogEvent } from '@ackline/core'
import { type BatchReceipt, type Sink, type Source, TopologyBuilder, TopologyError } from '@ackline/topology'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

let dir: string
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ackline-disk-factory-'))
})
afterEach(() => rmSync(dir, { recursive: true, force: true }))

const source = (batches: readonly (readonly { n: number }[])[]) => {
  const receipts: BatchReceipt[] = []
  const component: Source = {
    kind: 'test',
    canAcknowledge: true,
    async run(context) {
      for (const batch of batches) receipts.push(await context.send(batch))
    },
  }
  return { component, receipts }
}

const sink = (outcome: (event: LogEvent) => DeliveryStatus) => {
  const received: number[] = []
  const component: Sink = {
    kind: 'test',
    async write(events: EventArray) {
      return events.events.map((event) => {
        received.push(event.get('n') as number)
        return outcome(event)
      })
    },
  }
  return { component, received }
}

describe('diskBuffer', () => {
  it("settles the source's batch with what the sink reports on the events read back from disk", async () => {
    const { component, receipts } = source([[{ n: 1 }, { n: 2 }], [{ n: 3 }]])
    const out = sink((e) => (e.get('n') === 3 ? 'rejected' : 'delivered'))
    const topology = new TopologyBuilder({ acknowledgements: true, dataDir: dir })
      .source('in', component)
      .sink('out', ['in'], out.component, { buffer: diskBuffer({ acknowledgements: 'on-delivery' }) })
      .build()
    await topology.start()
    await topology.done
    expect(await Promise.all(receipts.map((r) => r.status))).toEqual(['delivered', 'rejected'])
    expect(out.received).toEqual([1, 2, 3])
    // Why the sink rejected the record read back from disk reaches the original batch.
    expect(receipts[1]!.failure).toMatchObject({ componentId: 'out', code: 'REJECTED' })
  })

  it('reports bad options at build, under buffer., all at once', () => {
    const build = () =>
      new TopologyBuilder({ acknowledgements: true })
        .source('in', source([]).component)
        .sink('out', ['in'], sink(() => 'delivered').component, {
          buffer: diskBuffer({
            maxBytes: 0,
            whenFull: 'wait' as 'block',
            sync: { everyMs: -1, everyWrites: 1 },
          }),
        })
        .build()
    expect(build).toThrow(TopologyError)
    try {
      build()
    } catch (error) {
      expect((error as TopologyError).problems.map((p) => p.field)).toEqual([
        'buffer.path',
        'buffer.maxBytes',
        'buffer.whenFull',
        'buffer.sync.everyMs',
      ])
    }
  })

  it("reports the disk buffer's enumerated options with a bad memory buffer elsewhere, in one TopologyError", () => {
    let thrown: unknown
    try {
      new TopologyBuilder({ acknowledgements: true, dataDir: dir })
        .source('in', source([]).component)
        .sink('archive', ['in'], sink(() => 'delivered').component, {
          // What a JavaScript caller or a config file can hand over, whatever the types say.
          buffer: diskBuffer({
            whenFull: 'spill',
            sync: 'sometimes',
            acknowledgements: 'on-ack',
          } as unknown as DiskBufferFactoryOptions),
        })
        .sink('metrics', ['in'], sink(() => 'delivered').component, {
          buffer: { maxEvents: 100, whenFull: 'drop_oldest' as 'drop_newest' },
        })
        .build()
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(TopologyError)
    const problems = (thrown as TopologyError).problems.map(({ component, field, message }) => ({
      component,
      field,
      message,
    }))
    expect(problems).toEqual([
      {
        component: 'archive',
        field: 'buffer.whenFull',
        message: 'must be "block" or "drop_newest", got "spill"',
      },
      {
        component: 'archive',
        field: 'buffer.sync',
        message: 'must be "always" or an object, got "sometimes"',
      },
      {
        component: 'archive',
        field: 'buffer.acknowledgements',
        message: 'must be "on-write" or "on-delivery", got "on-ack"',
      },
      {
        component: 'metrics',
        field: 'buffer.whenFull',
        message: 'must be "block" or "drop_newest", got "drop_oldest"',
      },
    ])
  })

  it("refuses at build a sink whose buffer would be another sink's dead-letter queue (sinks a and a/dead-letter under one dataDir)", () => {
    const build = (second: string) => () =>
      new TopologyBuilder({ acknowledgements: true, dataDir: dir })
        .source('in', source([]).component)
        .sink('a', ['in'], sink(() => 'delivered').component, { buffer: diskBuffer() })
        .sink(second, ['in'], sink(() => 'delivered').component, { buffer: diskBuffer() })
        .build()
    expect(build('a/dead-letter')).toThrow(TopologyError)
    try {
      build('a/dead-letter')()
    } catch (error) {
      expect((error as TopologyError).problems).toEqual([
        {
          code: 'INVALID_OPTION',
          component: 'a/dead-letter',
          field: 'buffer.path',
          message: `its disk buffer would keep its records in ${join(dir, 'a', 'dead-letter')}, where the buffer of sink 'a' keeps its dead-letter queue: two buffers writing in one directory take each other's files for their own; give this buffer a path of its own`,
        },
      ])
    }
    // The same refusal for a path given in full, and none for a buffer beside the dead-letter queue.
    expect(() =>
      new TopologyBuilder({ acknowledgements: true, dataDir: dir })
        .source('in', source([]).component)
        .sink('a', ['in'], sink(() => 'delivered').component, { buffer: diskBuffer() })
        .sink('b', ['in'], sink(() => 'delivered').component, {
          buffer: diskBuffer({ path: `${join(dir, 'a')}/./dead-letter/` }),
        })
        .build(),
    ).toThrow("where the buffer of sink 'a' keeps its dead-letter queue")
    expect(build('a/archive')).not.toThrow()
  })

  it('rejects start() with a TopologyError naming the sink when the buffer cannot open', async () => {
    writeFileSync(join(dir, 'out'), 'a file where the buffer directory should be')
    const topology = new TopologyBuilder({ acknowledgements: true, dataDir: dir })
      .source('in', source([]).component)
      .sink('out', ['in'], sink(() => 'delivered').component, { buffer: diskBuffer() })
      .build()
    await expect(topology.start()).rejects.toMatchObject({
      name: 'TopologyError',
      problems: [{ code: 'BUFFER_OPEN_FAILED', component: 'out', field: 'buffer' }],
    })
  })
})
