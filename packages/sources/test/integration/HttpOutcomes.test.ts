/**
 * Per-record outcomes over HTTP: real sockets into a real topology whose filter drops some records
 * and whose sink delivers, rejects or errors others, chosen by a field of each record. Three
 * sources share the pipeline, one per `outcomes` option.
 */
import type { DeliveryStatus, LogEvent } from '@ackline/core'
import { memory } from '@ackline/sinks'
import { type HttpServerSource, httpServer } from '@ackline/sources'
import { type Topology, TopologyBuilder } from '@ackline/topology'
import { filter } from '@ackline/transforms'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { request } from '../support/HttpRequest.js'

const outcomeOf = (event: LogEvent): DeliveryStatus =>
  (event.get('outcome') as DeliveryStatus | undefined) ?? 'delivered'

/** One record of each kind, in an order where every outcome has a neighbour of another kind. */
const MIXED = [
  { n: 0 },
  { n: 1, outcome: 'rejected' },
  { n: 2, drop: true },
  { n: 3, outcome: 'errored' },
  { n: 4 },
  { n: 5, drop: true, outcome: 'rejected' },
]
const MIXED_RECORDS = [
  { index: 0, status: 'delivered' },
  { index: 1, status: 'rejected' },
  { index: 2, status: 'dropped' },
  { index: 3, status: 'errored' },
  { index: 4, status: 'delivered' },
  { index: 5, status: 'dropped' },
]
const ndjson = (records: readonly object[]): string => records.map((r) => JSON.stringify(r)).join('\n')

describe('httpServer: per-record outcomes through a topology', () => {
  let topology: Topology
  const ports = { ask: 0, never: 0, always: 0 }
  const sink = memory({ outcome: outcomeOf })

  beforeAll(async () => {
    const sources: Record<keyof typeof ports, HttpServerSource> = {
      ask: httpServer({ address: '127.0.0.1:0' }),
      never: httpServer({ address: '127.0.0.1:0', outcomes: 'never' }),
      always: httpServer({ address: '127.0.0.1:0', outcomes: 'always' }),
    }
    topology = new TopologyBuilder({ acknowledgements: true })
      .source('ask', sources.ask)
      .source('never', sources.never)
      .source('always', sources.always)
      .transform(
        'keep',
        ['ask', 'never', 'always'],
        filter((e) => e.get('drop') !== true),
      )
      .sink('out', ['keep'], sink)
      .build()
    await topology.start()
    for (const name of ['ask', 'never', 'always'] as const)
      ports[name] = (await sources[name].listening()).port
  })

  afterAll(async () => {
    await topology.stop({ drainTimeoutMs: 2000 })
  })

  it('lists each NDJSON record in send order on ?outcomes=1, under the batch status code', async () => {
    const answer = await request(ports.ask, {
      path: '/?outcomes=1',
      headers: { 'content-type': 'application/x-ndjson' },
      body: ndjson(MIXED),
    })
    // rejected is the worst status, so the batch answers 400 although record 3 errored.
    expect(answer.status).toBe(400)
    expect(answer.body).toMatchObject({ status: 'rejected', events: 6, records: MIXED_RECORDS })
    expect(answer.body.failure).toMatchObject({ componentId: 'out', code: 'REJECTED' })
  })

  it('lists each record of a JSON array, with ?outcomes=true', async () => {
    const answer = await request(ports.ask, {
      path: '/?x=y&outcomes=true',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(MIXED),
    })
    expect(answer.status).toBe(400)
    expect(answer.body.records).toEqual(MIXED_RECORDS)
  })

  it('lists the one record of a single-object body', async () => {
    const errored = await request(ports.ask, {
      path: '/?outcomes=1',
      headers: { 'content-type': 'application/json' },
      body: '{"n":1,"outcome":"errored"}',
    })
    expect(errored.status).toBe(503)
    expect(errored.headers['retry-after']).toBeDefined()
    expect(errored.body).toMatchObject({
      status: 'errored',
      events: 1,
      records: [{ index: 0, status: 'errored' }],
    })
    const delivered = await request(ports.ask, { path: '/?outcomes=1', body: '{"n":2}' })
    expect(delivered.status).toBe(200)
    expect(delivered.body).toMatchObject({
      status: 'delivered',
      records: [{ index: 0, status: 'delivered' }],
    })
    expect(delivered.body.failure).toBeUndefined()
  })

  it('answers a batch every record of which was dropped 200, each record dropped', async () => {
    const answer = await request(ports.ask, { path: '/?outcomes=1', body: '[{"drop":true},{"drop":true}]' })
    expect(answer.status).toBe(200)
    expect(answer.body).toMatchObject({
      status: 'delivered',
      records: [
        { index: 0, status: 'dropped' },
        { index: 1, status: 'dropped' },
      ],
    })
  })

  it('lists no records when the client does not ask, or asks with outcomes=0', async () => {
    for (const path of ['/', '/?outcomes=0', '/?outcomes']) {
      const answer = await request(ports.ask, { path, body: JSON.stringify(MIXED) })
      expect(answer.status).toBe(400)
      expect(answer.body.status).toBe('rejected')
      expect(answer.body).not.toHaveProperty('records')
    }
  })

  it("ignores the query under outcomes: 'never'", async () => {
    const answer = await request(ports.never, { path: '/?outcomes=1', body: JSON.stringify(MIXED) })
    expect(answer).toMatchObject({ status: 400, body: { status: 'rejected', events: 6 } })
    expect(answer.body).not.toHaveProperty('records')
  })

  it("lists the records without the query under outcomes: 'always'", async () => {
    const answer = await request(ports.always, {
      headers: { 'content-type': 'application/x-ndjson' },
      body: ndjson(MIXED),
    })
    expect(answer).toMatchObject({ status: 400, body: { status: 'rejected', records: MIXED_RECORDS } })
    const empty = await request(ports.always, { body: '[]' })
    expect(empty).toMatchObject({ status: 200, body: { status: 'delivered', events: 0, records: [] } })
  })

  it('lists no records on a refusal, even when asked', async () => {
    const answer = await request(ports.always, { path: '/?outcomes=1', body: '[{"n":1},' })
    expect(answer.status).toBe(400)
    expect(answer.body.code).toBe('MALFORMED_BODY')
    expect(answer.body).not.toHaveProperty('records')
  })
})

describe('httpServer: per-record outcomes without acknowledgements', () => {
  it('lists every record delivered once accepted, whatever the sink says later', async () => {
    const source = httpServer({ address: '127.0.0.1:0' })
    const topology = new TopologyBuilder({ acknowledgements: false })
      .source('in', source)
      .sink('out', ['in'], memory({ outcome: () => 'rejected' }))
      .build()
    await topology.start()
    try {
      const { port } = await source.listening()
      const answer = await request(port, { path: '/?outcomes=1', body: '[{"n":1},{"n":2}]' })
      expect(answer).toMatchObject({
        status: 200,
        body: {
          status: 'delivered',
          records: [
            { index: 0, status: 'delivered' },
            { index: 1, status: 'delivered' },
          ],
        },
      })
    } finally {
      await topology.stop({ drainTimeoutMs: 2000 })
    }
  })
})
