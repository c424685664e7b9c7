import { amqpSource } from '@ackline/amqp'
import { memory } from '@ackline/sinks'
import type { TcpProxy } from '@ackline/testkit'
import { TopologyBuilder } from '@ackline/topology'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { Admin, BROKER_URL, brokerAvailable, brokerProxy } from './broker.js'

const available = await brokerAvailable()

describe.skipIf(!available)('amqp competing consumers', () => {
  let admin: Admin
  let proxy: TcpProxy
  let throughProxy: string
  beforeAll(async () => {
    admin = await Admin.open()
    ;({ proxy, url: throughProxy } = await brokerProxy())
  })
  afterAll(async () => {
    await proxy?.close()
    await admin?.close()
  })

  it('two topologies share a queue; one dies mid-batch and the other finishes its work with zero loss', async () => {
    const { queue } = await admin.queueWithDeadLetters()
    const N = 400
    await admin.publish(
      queue,
      Array.from({ length: N }, (_, n) => ({ n })),
      (n) => `m-${n}`,
    )
    // A reaches the broker through the proxy, so the test can kill its connection for good.
    const a = amqpSource({
      url: throughProxy,
      queue,
      prefetch: 30,
      batchSize: 10,
      onWarning: () => {},
    })
    const b = amqpSource({ url: BROKER_URL, queue, prefetch: 30, batchSize: 10 })
    let release: () => void = () => {}
    const hang = new Promise<void>((resolve) => {
      release = resolve
    })
    let hung = false
    const sinkA = memory({
      // A hangs in the middle of a write once it has acked 50: its unacked messages (the array in
      // the write and the rest of its prefetch) are what must reach B.
      beforeWrite: async () => {
        if (a.counters.acked >= 50) {
          hung = true
          await hang
        }
      },
    })
    const sinkB = memory()
    const topologyA = new TopologyBuilder({ acknowledgements: true })
      .source('a', a)
      .sink('out', ['a'], sinkA)
      .build()
    const topologyB = new TopologyBuilder({ acknowledgements: true })
      .source('b', b)
      .sink('out', ['b'], sinkB)
      .build()
    // A first, until it hangs (decided by what it reported); B then joins while A holds its
    // prefetch, so both consume the queue at once and A dies with messages in hand.
    await topologyA.start()
    await vi.waitFor(() => expect(hung).toBe(true), { timeout: 15_000, interval: 5 })
    await topologyB.start()
    await vi.waitFor(() => expect(b.counters.acked).toBeGreaterThan(0), { timeout: 15_000, interval: 5 })
    const ackedByA = a.counters.acked
    // Kill A: its connection dies and never comes back; its topology is then stopped at once.
    await proxy.close()
    const stopped = topologyA.stop({ drainTimeoutMs: 0 })
    release()
    await stopped
    await vi.waitFor(
      async () => {
        expect(await admin.messageCount(queue)).toBe(0)
        expect(b.counters.inFlight).toBe(0)
        const all = new Set([...sinkA.events, ...sinkB.events].map((f) => f.n as number))
        expect(all.size).toBe(N)
      },
      { timeout: 20_000, interval: 50 },
    )
    await topologyB.stop()
    const deliveredByA = sinkA.events.length
    const duplicates = deliveredByA + sinkB.events.length - N
    console.log(
      `competing consumers: A acked ${ackedByA} (sink saw ${deliveredByA}), B acked ${b.counters.acked}; duplicates ${duplicates}; A ${JSON.stringify(a.counters)}`,
    )
    expect(ackedByA).toBeGreaterThanOrEqual(50)
    expect(b.counters.acked).toBeGreaterThan(0)
    expect(b.counters.acked).toBeLessThanOrEqual(N)
    // A message both saw reached B as a redelivery: A's ack of it never reached the broker (it was
    // in the connection when it died, or never sent). An AMQP ack is not confirmed, so these are
    // duplicates, never losses.
    const seenByA = new Set(sinkA.events.map((f) => f.n as number))
    const both = sinkB.events.filter((f) => seenByA.has(f.n as number))
    expect(both.every((f) => (f._amqp as { redelivered: boolean }).redelivered)).toBe(true)
    expect(both.length).toBeLessThanOrEqual(b.counters.redelivered)
    expect(both.length).toBe(duplicates)
  })
})
