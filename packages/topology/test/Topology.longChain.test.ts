// A generated topology may be much longer than any written by hand: build() walks its graph
// without recursion, so a chain of thousands of components neither overflows the stack nor takes
// the square of its length to plan.
import { TopologyBuilder, TopologyError } from '@ackline/topology'
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

  it('reports a cycle of 20,000 transforms, each member once, without a message the square of its length', () => {
    // Each member's problem listed every member: 20,000 problems of 20,000 names each.
    let builder = new TopologyBuilder<string>(on).source('in', testSource([]))
    const size = 20_000
    for (let i = 0; i < size; i++)
      builder = builder.transform(`t${i}`, i === 0 ? ['in', `t${size - 1}`] : [`t${i - 1}`], passThrough())
    let error: unknown
    try {
      builder.sink('out', ['t0'], testSink()).build()
    } catch (thrown) {
      error = thrown
    }
    expect(error).toBeInstanceOf(TopologyError)
    const cycles = (error as TopologyError).problems.filter((p) => p.code === 'CYCLE')
    expect(cycles).toHaveLength(size)
    expect(cycles[0]!.message).toMatch(
      /^'t\d+' is part of a cycle of 20000 components through 't\d+', .* and 19990 more$/,
    )
    expect((error as TopologyError).message.length).toBeLessThan(size * 300)
  }, 60_000)
})
