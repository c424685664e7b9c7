// A generated topology may be much longer than any written by hand: build() walks its graph
// without recursion, so a chain of thousands of components neither overflows the stack nor takes
// the square of its length to plan.
import { TopologyBuilder } from '@ackline/topology'
import { describe, expect, it } from 'vitest'
import { on, records, run } from './support/Harness.js'
import { passThrough, testSink, testSource } from './support/TestComponents.js'

describe('a long generated chain', () => {
  it('builds and runs a chain of 20,000 transforms', async () => {
    const source = testSource([records(1, 2), records(3)])
    const sink = testSink()
    let builder = new TopologyBuilder<string>(on).source('in', source)
    let last = 'in'
    for (let i = 0; i < 20_000; i++) {
      builder = builder.transform(`t${i}`, [last], passThrough())
      last = `t${i}`
    }
    const topology = builder.sink('out', [last], sink).build()
    await run(topology)
    expect(await source.statuses()).toEqual(['delivered', 'delivered'])
    expect(sink.received).toEqual(records(1, 2, 3))
  }, 60_000)
})
