import type { BatchStatus } from '@ackline/core'
import { blackhole } from '@ackline/sinks'
import { TopologyBuilder } from '@ackline/topology'
import { describe, expect, it } from 'vitest'

describe('blackhole', () => {
  it('settles every event delivered', async () => {
    const statuses: Promise<BatchStatus>[] = []
    const sink = blackhole()
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', {
        kind: 'batches',
        canAcknowledge: true,
        async run(context) {
          for (let i = 0; i < 3; i++) statuses.push((await context.send([{ i }, { i }])).status)
        },
      })
      .sink('out', ['in'], sink)
      .build()
    await topology.start()
    await topology.done
    expect(await Promise.all(statuses)).toEqual(['delivered', 'delivered', 'delivered'])
    expect(sink.count).toBe(6)
    expect(topology.metrics().out).toMatchObject({ receivedEvents: 6, erroredEvents: 0, rejectedEvents: 0 })
  })
})
