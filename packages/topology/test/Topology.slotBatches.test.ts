// Batches a source sends with `{ receipt: false }` are kept as slots (RFC 0009): no notifier and no
// state unless something needs one. Through a whole topology they must be reported as any batch:
// facts with their ids, failures with their reasons, a forced stop deciding the pending ones once
// and ignoring what their sinks report later.
import type { EventArray, LogEvent } from '@ackline/core'
import {
  type LifecycleEvent,
  RejectError,
  type SendOptions,
  type Sink,
  type Source,
  type SourceContext,
  TopologyBuilder,
} from '@ackline/topology'
import { describe, expect, it } from 'vitest'
import { on } from './support/Harness.js'

/** Sends `count` batches of `size` records (by default without asking for receipts), then waits for the stop. */
function quietSource(
  count: number,
  size: number,
  options: SendOptions = { receipt: false },
): Source & { sent: number } {
  const source = {
    kind: 'quiet',
    canAcknowledge: true,
    sent: 0,
    async run(context: SourceContext) {
      for (let b = 0; b < count; b++) {
        await context.send(
          Array.from({ length: size }, (_, i) => ({ b, i })),
          options,
        )
        source.sent++
      }
      await new Promise<void>((resolve) => {
        if (context.signal.aborted) resolve()
        else context.signal.addEventListener('abort', () => resolve(), { once: true })
      })
    },
  }
  return source
}

/** A sink that keeps every array it is given, and answers only when told. */
function holdingSink(): Sink & { held: EventArray[]; answers: ((value?: unknown) => void)[] } {
  const sink = {
    kind: 'holding',
    held: [] as EventArray[],
    answers: [] as ((value?: unknown) => void)[],
    write(events: EventArray) {
      sink.held.push(events)
      return new Promise<undefined>((resolve) => sink.answers.push(() => resolve(undefined)))
    },
  }
  return sink
}

const collect = (facts: LifecycleEvent[]) =>
  facts.filter((f): f is Extract<LifecycleEvent, { type: 'batch_resolved' }> => f.type === 'batch_resolved')

describe('batches sent without a receipt (slots)', () => {
  it('are reported with their own ids and the reasons their sinks gave', async () => {
    const rejecting: Sink = {
      kind: 'picky',
      write: async (events: EventArray) =>
        events.events.map((event: LogEvent) =>
          (event.get('b') as number) % 2 === 1
            ? new RejectError('picky', `odd batch ${event.get('b')}`)
            : 'delivered',
        ),
    }
    const source = quietSource(6, 2)
    const topology = new TopologyBuilder(on).source('in', source).sink('out', ['in'], rejecting).build()
    const facts: LifecycleEvent[] = []
    topology.lifecycle.subscribe((fact) => facts.push(fact))
    await topology.start()
    while (collect(facts).length < 6) await new Promise((resolve) => setImmediate(resolve))
    await topology.stop()
    const resolved = collect(facts)
    expect(resolved.map((f) => f.status)).toEqual([
      'delivered',
      'rejected',
      'delivered',
      'rejected',
      'delivered',
      'rejected',
    ])
    expect(new Set(resolved.map((f) => f.batchId)).size).toBe(6)
    for (const f of resolved)
      expect(f.batchId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    expect([...resolved.map((f) => f.batchId)].sort()).toEqual(resolved.map((f) => f.batchId)) // in order sent
    // The reason is the sink's, as for a batch with a notifier.
    expect(resolved.filter((f) => f.status === 'rejected').map((f) => f.failure?.message)).toEqual([
      expect.stringContaining('odd batch 1'),
      expect.stringContaining('odd batch 3'),
      expect.stringContaining('odd batch 5'),
    ])
    expect(topology.metrics().in).toMatchObject({ acksInFlight: 0 })
  })

  it('are decided at a forced stop as batches with notifiers are, once, and what their sinks report later is ignored', async () => {
    const outcomes: unknown[] = []
    // A slot without a receipt, a slot with one, a notifier (outcomes keep it).
    for (const options of [{ receipt: false }, {}, { outcomes: true }]) {
      const source = quietSource(3, 2, options)
      const sink = holdingSink()
      const topology = new TopologyBuilder(on).source('in', source).sink('out', ['in'], sink).build()
      const facts: LifecycleEvent[] = []
      topology.lifecycle.subscribe((fact) => facts.push(fact))
      await topology.start()
      while (sink.held.length < 1 || source.sent < 3) await new Promise((resolve) => setImmediate(resolve))
      expect(topology.metrics().in!.acksInFlight).toBe(3)
      await topology.stop({ drainTimeoutMs: 0 })
      const stopped = collect(facts).map((f) => [f.status, f.failure?.code, f.timedOut])
      expect(stopped).toHaveLength(3)
      expect(stopped.every(([status, code]) => status === 'errored' && code === 'STOPPED')).toBe(true)
      const metrics = topology.metrics().in!
      expect(metrics.acksInFlight).toBe(0)
      // The sink answers after the stop: nothing is reported again.
      for (const answer of sink.answers) answer()
      await new Promise((resolve) => setImmediate(resolve))
      expect(collect(facts)).toHaveLength(3)
      expect(topology.metrics().in).toEqual(metrics)
      outcomes.push([stopped, metrics.failures, topology.metrics().out!.failures])
    }
    expect(outcomes[0]).toEqual(outcomes[2])
    expect(outcomes[1]).toEqual(outcomes[2])
  })
})
