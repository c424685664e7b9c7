/**
 * Random requests (valid, malformed, deep, huge, invalid bytes, random content types, wrong paths
 * and methods) against the HTTP source over real sockets, with the sinks played by a model: every
 * request must get a response, with the status code a small model predicts, and no event may be
 * delivered twice or answered 200 without having been delivered.
 *
 * The source runs with small limits so that "deep" and "huge" stay cheap. Runs: 40 by default,
 * `ACKLINE_HTTP_PROPERTY_RUNS` for more; `ACKLINE_HTTP_PROPERTY_SEED` replays a printed seed.
 */
import type { DeliveryStatus } from '@ackline/core'
import { type HttpServerOptions, type HttpServerSource, httpServer } from '@ackline/sources'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { FakeSourceContext } from '../support/FakeSourceContext.js'
import { type HttpAnswer, request } from '../support/HttpRequest.js'

const LIMITS = { maxDepth: 6, maxBodyBytes: 2048, maxEventsPerRequest: 6 } as const
const RUNS = Number(process.env.ACKLINE_HTTP_PROPERTY_RUNS ?? 40)
const SEED = process.env.ACKLINE_HTTP_PROPERTY_SEED

type Policy = 'sniff' | 'reject'
type Format = 'json' | 'ndjson' | 'other'
type Layout = 'array' | 'ndjson' | 'object'

/** A request the generator builds, with what the model needs to know about it. */
type Case =
  | { readonly kind: 'valid'; readonly layout: Layout; readonly outcomes: readonly DeliveryStatus[] }
  | { readonly kind: 'malformed'; readonly cut: number }
  | { readonly kind: 'deep'; readonly depth: number; readonly closed: boolean }
  | { readonly kind: 'huge'; readonly bytes: number }
  | { readonly kind: 'invalidBytes'; readonly byte: number }
  | { readonly kind: 'randomBytes'; readonly bytes: Uint8Array }
  | { readonly kind: 'wrongPath' }
  | { readonly kind: 'wrongMethod' }

interface Request {
  readonly policy: Policy
  readonly contentType: string | undefined
  readonly case: Case
}

const CONTENT_TYPES: readonly (readonly [string | undefined, Format])[] = [
  ['application/json', 'json'],
  ['application/json; charset=utf-8', 'json'],
  ['application/vnd.acme+json', 'json'],
  ['application/x-ndjson', 'ndjson'],
  ['application/jsonl', 'ndjson'],
  [undefined, 'other'],
  ['text/plain', 'other'],
  ['application/x-www-form-urlencoded', 'other'],
  ['application/xml', 'other'],
]
const formatOf = (type: string | undefined): Format => CONTENT_TYPES.find(([t]) => t === type)![1]

const outcome = fc.constantFrom<DeliveryStatus>('delivered', 'delivered', 'delivered', 'errored', 'rejected')
const caseArb: fc.Arbitrary<Case> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('valid' as const),
      layout: fc.constantFrom<Layout>('array', 'ndjson', 'object'),
      outcomes: fc.array(outcome, { maxLength: 8 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('malformed' as const), cut: fc.nat() }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('deep' as const),
      depth: fc.integer({ min: LIMITS.maxDepth + 1, max: 600 }),
      closed: fc.boolean(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('huge' as const),
      bytes: fc.integer({ min: LIMITS.maxBodyBytes + 1, max: 4 * LIMITS.maxBodyBytes }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('invalidBytes' as const),
      byte: fc.constantFrom(0x80, 0xbf, 0xc0, 0xc1, 0xf5, 0xff),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('randomBytes' as const),
      bytes: fc.uint8Array({ minLength: 1, maxLength: 64 }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'wrongPath' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'wrongMethod' as const }) },
)
const requestArb: fc.Arbitrary<Request> = fc.record({
  policy: fc.constantFrom<Policy>('sniff', 'reject'),
  contentType: fc.constantFrom(...CONTENT_TYPES.map(([t]) => t)),
  case: caseArb,
})

/** The records of a valid case: each names its request and index, and the outcome the sinks give it. */
const recordsOf = (id: number, outcomes: readonly DeliveryStatus[]) =>
  outcomes.map((o, i) => ({ id: `${id}.${i}`, outcome: o, text: 'é ✓' }))

function bodyOf(id: number, r: Request): Buffer {
  const c = r.case
  switch (c.kind) {
    case 'valid': {
      const records = recordsOf(id, c.outcomes)
      if (c.layout === 'array') return Buffer.from(JSON.stringify(records))
      if (c.layout === 'ndjson') return Buffer.from(records.map((x) => JSON.stringify(x)).join('\n'))
      return Buffer.from(JSON.stringify(records[0] ?? {}))
    }
    case 'malformed': {
      // A proper, non-empty prefix of an array is never valid JSON, nor an NDJSON object.
      const text = JSON.stringify(recordsOf(id, ['delivered', 'delivered']))
      return Buffer.from(text.slice(0, 1 + (c.cut % (text.length - 1))))
    }
    case 'deep':
      return Buffer.from(c.closed ? '{"a":'.repeat(c.depth) + '1' + '}'.repeat(c.depth) : '['.repeat(c.depth))
    case 'huge':
      return Buffer.from(JSON.stringify([{ id: `${id}.0`, pad: 'x'.repeat(c.bytes) }]))
    case 'invalidBytes':
      return Buffer.concat([Buffer.from(`[{"id":"${id}.0","s":"`), Buffer.from([c.byte]), Buffer.from('"}]')])
    case 'randomBytes':
      return Buffer.from(c.bytes)
    case 'wrongPath':
    case 'wrongMethod':
      return Buffer.from(JSON.stringify(recordsOf(id, ['delivered'])))
  }
}

const CODE: Record<DeliveryStatus, number> = { delivered: 200, errored: 503, rejected: 400 }
const rank: Record<DeliveryStatus, number> = { delivered: 0, errored: 1, rejected: 2 }

/**
 * The model: the codes a request may get (one, except for random bytes), and how many events it
 * sends downstream. The source's order of checks: path, method, content type, size, encoding,
 * event count, syntax and depth, then the sinks. (The count comes before the syntax: a malformed
 * body of more records than the limit gets 413. The malformed and deep bodies here hold too few.)
 */
function predict(r: Request, size: number): { codes: readonly number[]; events: number } {
  const c = r.case
  if (c.kind === 'wrongPath') return { codes: [404], events: 0 }
  if (c.kind === 'wrongMethod') return { codes: [405], events: 0 }
  const format = formatOf(r.contentType)
  if (r.policy === 'reject' && format === 'other') return { codes: [415], events: 0 }
  if (size > LIMITS.maxBodyBytes) return { codes: [413], events: 0 }
  switch (c.kind) {
    case 'huge':
      throw new Error('a huge body is always larger than maxBodyBytes')
    case 'malformed':
    case 'deep':
    case 'invalidBytes':
      return { codes: [400], events: 0 }
    case 'randomBytes':
      // Random bytes may happen to be an object or two: then the sinks deliver them.
      return { codes: [200, 400, 413], events: -1 }
    case 'valid': {
      const n = c.outcomes.length
      if (n === 0) {
        // An empty body is empty whatever its type; `[]` is not an NDJSON object.
        const refused = c.layout === 'array' && format === 'ndjson'
        return { codes: [refused ? 400 : 200], events: 0 }
      }
      const decodes =
        c.layout === 'object' ||
        (c.layout === 'array' && format !== 'ndjson') ||
        (c.layout === 'ndjson' && (format !== 'json' || n === 1))
      if (!decodes) return { codes: [400], events: 0 }
      const events = c.layout === 'object' ? 1 : n
      if (events > LIMITS.maxEventsPerRequest) return { codes: [413], events: 0 }
      const worst = c.outcomes
        .slice(0, events)
        .reduce<DeliveryStatus>((a, b) => (rank[b] > rank[a] ? b : a), 'delivered')
      return { codes: [CODE[worst]], events }
    }
  }
}

describe('the HTTP source under random requests', () => {
  const sources = new Map<
    Policy,
    { source: HttpServerSource; context: FakeSourceContext; run: Promise<void>; port: number }
  >()
  /** How often the modelled sinks ended each record id `delivered`. */
  const delivered = new Map<string, number>()
  /** Every record id that reached the sinks, with how often. */
  const reached = new Map<string, number>()

  beforeAll(async () => {
    for (const policy of ['sniff', 'reject'] as const) {
      const options: HttpServerOptions = { address: '127.0.0.1:0', ...LIMITS, unknownContentType: policy }
      const source = httpServer(options)
      const context = new FakeSourceContext()
      // The sinks: each event ends with the outcome its record asks for, a turn later.
      context.onBatch = (batch) =>
        setImmediate(() => {
          for (const event of batch.events) {
            const id = String(event.get('id'))
            reached.set(id, (reached.get(id) ?? 0) + 1)
            const status = (event.get('outcome') as DeliveryStatus | undefined) ?? 'delivered'
            if (status === 'delivered') delivered.set(id, (delivered.get(id) ?? 0) + 1)
            event.end(status)
          }
        })
      const run = source.run(context)
      const { port } = await source.listening()
      sources.set(policy, { source, context, run, port })
    }
  })

  afterAll(async () => {
    for (const { context, run } of sources.values()) {
      context.stop()
      await run
    }
  })

  let nextId = 0
  it('answers every request with the code the model predicts, delivering each event at most once', async () => {
    let checked = 0
    await fc.assert(
      fc.asyncProperty(fc.array(requestArb, { minLength: 1, maxLength: 6 }), async (requests) => {
        const sent = requests.map((r) => {
          const id = nextId++
          const body = bodyOf(id, r)
          const { port } = sources.get(r.policy)!
          const headers: Record<string, string> =
            r.contentType === undefined ? {} : { 'content-type': r.contentType }
          const answer = request(port, {
            method: r.case.kind === 'wrongMethod' ? 'PUT' : 'POST',
            path: r.case.kind === 'wrongPath' ? '/nope' : '/',
            headers,
            body,
          })
          return { id, r, size: body.length, answer }
        })
        const answers: HttpAnswer[] = await Promise.all(sent.map((s) => s.answer))
        sent.forEach(({ id, r, size }, k) => {
          const answer = answers[k]!
          const { codes, events } = predict(r, size)
          expect(codes, `request ${id}: ${JSON.stringify(r).slice(0, 200)}`).toContain(answer.status)
          const prefix = `${id}.`
          const ids = [...reached.keys()].filter((x) => x.startsWith(prefix))
          if (events >= 0) expect(ids.length).toBe(events)
          if (answer.status >= 400 && answer.status !== 503 && answer.body?.status === undefined)
            expect(ids).toEqual([])
          // No event reaches the sinks twice; a 200 that carried events means each was delivered once.
          for (const x of ids) expect(reached.get(x)).toBe(1)
          if (answer.status === 200)
            for (const x of ids) expect(delivered.get(x), `record ${x} answered 200`).toBe(1)
          if (answer.status !== 200 && answer.body?.status === undefined) {
            expect(answer.body).toMatchObject({ code: expect.any(String), componentId: 'in' })
          }
          checked++
        })
        // The process is up and each server still answers.
        for (const { port } of sources.values())
          expect((await request(port, { method: 'GET', path: '/health' })).status).toBe(200)
      }),
      { numRuns: RUNS, ...(SEED === undefined ? {} : { seed: Number(SEED) }) },
    )
    expect(checked).toBeGreaterThanOrEqual(RUNS)
    // Every record the sinks got belongs to a request that was answered (random bytes that
    // happen to decode carry no id of ours).
    const ours = [...reached.keys()].filter((x) => /^\d+\.\d+$/.test(x))
    expect(ours.every((x) => Number(x.split('.')[0]) < nextId)).toBe(true)
  }, 120_000)
})
