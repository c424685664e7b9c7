/**
 * HTTP requests through a real topology (runtime, channels, transforms, sinks that fail chosen
 * events): each response must be exactly what a model computes from the paths of the request's
 * events. fast-check prints the seed and the shrunk requests on failure.
 */
import type { BatchStatus, DeliveryStatus, LogEvent, RecordOutcome } from '@ackline/core'
import { memory } from '@ackline/sinks'
import { type HttpServerSource, httpServer } from '@ackline/sources'
import { type Topology, TopologyBuilder } from '@ackline/topology'
import { filter, remap, route } from '@ackline/transforms'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { request } from '../support/HttpRequest.js'

/** What one record asks of the pipeline: whether the filter drops it, what each sink says. */
interface Plan {
  readonly drop: boolean
  readonly primary: DeliveryStatus
  /** Only events with an `audit` outcome are routed to the audit sink. */
  readonly audit: DeliveryStatus | null
}

const rank: Record<BatchStatus, number> = { delivered: 0, errored: 1, rejected: 2 }
const worst = (statuses: readonly BatchStatus[]): BatchStatus =>
  statuses.reduce<BatchStatus>((a, b) => (rank[b] > rank[a] ? b : a), 'delivered')

/** The model of one record: `dropped` when the filter drops it, else the worst of the sinks that got it. */
function expectedOutcome(p: Plan): RecordOutcome {
  return p.drop ? 'dropped' : worst(p.audit === null ? [p.primary] : [p.primary, p.audit])
}
/** The model of a batch: the worst of its records, a dropped one counting as delivered. */
function expectedStatus(plans: readonly Plan[]): BatchStatus {
  return worst(plans.map((p) => (p.drop ? 'delivered' : (expectedOutcome(p) as BatchStatus))))
}
const CODE: Record<BatchStatus, number> = { delivered: 200, errored: 503, rejected: 400 }

const outcome =
  (field: string) =>
  (event: LogEvent): DeliveryStatus =>
    (event.get(field) as DeliveryStatus | undefined) ?? 'delivered'

describe('HTTP through a topology, end to end', () => {
  let source: HttpServerSource
  let topology: Topology
  let port: number
  const primary = memory({ outcome: outcome('primary') })
  const audit = memory({ outcome: outcome('audit') })

  beforeAll(async () => {
    source = httpServer({ address: '127.0.0.1:0' })
    topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .transform(
        'parse',
        ['in'],
        remap((e) => {
          e.set('parsed', true)
        }),
      )
      .transform(
        'keep',
        ['parse'],
        filter((e) => e.get('drop') !== true),
      )
      .transform('split', ['keep'], route({ audit: (e) => typeof e.get('audit') === 'string' }))
      .sink('primary', ['keep'], primary)
      .sink('audit', ['split.audit'], audit)
      .build()
    await topology.start()
    ;({ port } = await source.listening())
  })

  afterAll(async () => {
    await topology.stop({ drainTimeoutMs: 2000 })
  })

  const status = fc.constantFrom<DeliveryStatus>('delivered', 'delivered', 'errored', 'rejected')
  const plan: fc.Arbitrary<Plan> = fc.record({
    drop: fc.boolean(),
    primary: status,
    audit: fc.option(status, { nil: null, freq: 2 }),
  })

  it('answers every request with the code of the status the model computes, and each record its outcome when asked', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(plan, { minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 4 }),
        fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }),
        async (requests, asks) => {
          const answers = await Promise.all(
            requests.map((plans, r) =>
              request(port, {
                path: asks[r] ? '/?outcomes=1' : '/',
                headers: { 'content-type': 'application/x-ndjson' },
                body: plans
                  .map((p, i) =>
                    JSON.stringify({
                      request: r,
                      i,
                      drop: p.drop,
                      primary: p.primary,
                      ...(p.audit === null ? {} : { audit: p.audit }),
                    }),
                  )
                  .join('\n'),
              }),
            ),
          )
          requests.forEach((plans, r) => {
            const expected = expectedStatus(plans)
            expect(answers[r]).toMatchObject({
              status: CODE[expected],
              body: { status: expected, events: plans.length },
            })
            if (expected === 'errored') expect(answers[r]!.headers['retry-after']).toBeDefined()
            if (asks[r]) {
              expect(answers[r]!.body.records).toEqual(
                plans.map((p, index) => ({ index, status: expectedOutcome(p) })),
              )
            } else expect(answers[r]!.body).not.toHaveProperty('records')
            // The failure names a sink that gave some kept event exactly the batch's status.
            const deciders = plans.flatMap((p) =>
              p.drop
                ? []
                : [
                    ...(p.primary === expected ? ['primary'] : []),
                    ...(p.audit === expected ? ['audit'] : []),
                  ],
            )
            if (expected === 'delivered') expect(answers[r]!.body.failure).toBeUndefined()
            else {
              expect(deciders).toContain(answers[r]!.body.failure?.componentId)
              expect(answers[r]!.body.failure.code).toBe(expected === 'errored' ? 'WRITE_FAILED' : 'REJECTED')
            }
          })
        },
      ),
      { numRuns: 40 },
    )
  })

  it('answers a malformed body 400 and lets nothing reach the sinks', async () => {
    const before = primary.events.length
    const answer = await request(port, {
      headers: { 'content-type': 'application/json' },
      body: '[{"ok":1},',
    })
    expect(answer.status).toBe(400)
    expect(answer.body.code).toBe('MALFORMED_BODY')
    expect(primary.events.length).toBe(before)
  })

  it('reports each request as one resolved batch on the lifecycle stream', async () => {
    const facts: { status: BatchStatus }[] = []
    const subscription = topology.lifecycle.subscribe((fact) => {
      if (fact.type === 'batch_resolved' && fact.source === 'in') facts.push({ status: fact.status })
    })
    const answer = await request(port, { body: '[{"primary":"rejected"},{"primary":"delivered"}]' })
    subscription.unsubscribe()
    expect(answer.status).toBe(400)
    expect(facts).toEqual([{ status: 'rejected' }])
  })
})

describe('HTTP through a topology without acknowledgements', () => {
  it('answers 200 once accepted, whatever the sink says later', async () => {
    const source = httpServer({ address: '127.0.0.1:0' })
    const sink = memory({ outcome: () => 'errored' })
    const topology = new TopologyBuilder({ acknowledgements: false })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    await topology.start()
    try {
      const { port } = await source.listening()
      const answer = await request(port, { body: '[{"n":1}]' })
      expect(answer).toMatchObject({ status: 200, body: { status: 'delivered', events: 1 } })
      expect(answer.body.batchId).toBeUndefined()
    } finally {
      await topology.stop({ drainTimeoutMs: 2000 })
    }
  })
})
