import { AmqpError, type AmqpSource, amqpSource } from '@ackline/amqp'
import { type JsonObject, type LogEvent, RecordOutcomes } from '@ackline/core'
import { memory } from '@ackline/sinks'
import {
  type BatchReceipt,
  type LifecycleEvent,
  RejectError,
  type Sink,
  type SourceContext,
  TopologyBuilder,
} from '@ackline/topology'
import { type ConfirmChannel, connect } from 'amqplib'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import {
  Admin,
  BROKER_URL,
  brokerAvailable,
  brokerUser,
  enqueueInsideBroker,
  hasMethod,
  holdingBrokerProxy,
  Method,
  uniqueName,
} from './broker.js'

/** Runs `source` into a memory sink until `settled` passes (waited for), then stops; the sink's events. */
async function consume(source: ReturnType<typeof amqpSource>, settled: () => void) {
  const sink = memory()
  const topology = new TopologyBuilder({ acknowledgements: true })
    .source('in', source)
    .sink('out', ['in'], sink)
    .build()
  await topology.start()
  await vi.waitFor(settled, { timeout: 10_000, interval: 20 })
  await topology.stop()
  return sink.events
}

const available = await brokerAvailable()

type Fate = 'ok' | 'flaky' | 'reject' | 'poison'
const fateOf = (n: number): Fate => (['ok', 'flaky', 'reject', 'poison', 'ok'] as const)[n % 5]!

describe.skipIf(!available)('amqp source against RabbitMQ', () => {
  let admin: Admin
  beforeAll(async () => {
    admin = await Admin.open()
  })
  afterAll(async () => {
    await admin?.close()
  })

  for (const kind of ['classic', 'quorum'] as const) {
    it(`acks delivered, requeues errored after a back-off, dead-letters rejected and exhausted ones (${kind} queue)`, async () => {
      const { queue, dead } = await admin.queueWithDeadLetters(kind)
      const N = 50
      await admin.publish(
        queue,
        Array.from({ length: N }, (_, n) => ({ n, fate: fateOf(n) })),
        (n) => `m-${n}`,
      )
      const seen = new Map<number, number>()
      const outcome = (event: LogEvent) => {
        const n = event.get('n') as number
        const times = (seen.get(n) ?? 0) + 1
        seen.set(n, times)
        switch (fateOf(n)) {
          case 'ok':
            return 'delivered' as const
          case 'flaky':
            return times === 1 ? ('errored' as const) : ('delivered' as const)
          case 'reject':
            return 'rejected' as const
          case 'poison':
            return 'errored' as const
        }
      }
      const sink = memory({ outcome })
      const source = amqpSource({
        url: BROKER_URL,
        queue,
        prefetch: 20,
        batchSize: 10,
        maxAttempts: 3,
        retryInitialDelayMs: 5,
      })
      const topology = new TopologyBuilder({ acknowledgements: true })
        .source('rabbit', source)
        .sink('out', ['rabbit'], sink)
        .build()
      await topology.start()
      const count = (f: Fate) => Array.from({ length: N }, (_, n) => n).filter((n) => fateOf(n) === f)
      const ok = count('ok')
      const flaky = count('flaky')
      const rejected = count('reject')
      const poison = count('poison')
      // Decided by what the source reported: every message settled with the broker.
      await vi.waitFor(
        () => {
          const c = source.counters
          expect(c.acked + c.rejected).toBe(N)
          expect(c.inFlight).toBe(0)
        },
        { timeout: 15_000, interval: 20 },
      )
      // Messages that arrived together travel as one batch (each still settled by its own outcome).
      const batches = topology.metrics().rabbit!.ackLatencyMs.count
      await topology.stop()
      const c = source.counters
      console.log(`${kind}: ${batches} batches; counters ${JSON.stringify(c)}`)
      expect(batches).toBeGreaterThan(0)
      expect(batches).toBeLessThan(c.received)
      expect(c.acked).toBe(ok.length + flaky.length)
      expect(c.rejected).toBe(rejected.length + poison.length)
      // flaky: one requeue each; poison: maxAttempts - 1 requeues each.
      expect(c.nacked).toBe(flaky.length + poison.length * 2)
      expect(c.redelivered).toBe(flaky.length + poison.length * 2)
      expect(c.received).toBe(N + flaky.length + poison.length * 2)
      expect(c.abandoned).toBe(0)
      // Which were delivered, and which of those only on their second delivery.
      const delivered = sink.events
        .filter((_, i) => sink.statuses[i] === 'delivered')
        .map((f) => f.n as number)
        .sort((a, b) => a - b)
      expect(delivered).toEqual([...ok, ...flaky].sort((a, b) => a - b))
      const redeliveredThenAcked = sink.events
        .filter(
          (f, i) => sink.statuses[i] === 'delivered' && (f._amqp as { redelivered: boolean }).redelivered,
        )
        .map((f) => f.n as number)
        .sort((a, b) => a - b)
      expect(redeliveredThenAcked).toEqual(flaky)
      for (const n of poison) expect(seen.get(n)).toBe(3)
      const first = sink.events.find((f) => f.n === 0)!
      expect(first._amqp).toMatchObject({
        exchange: '',
        routingKey: queue,
        redelivered: false,
        queue,
        messageId: 'm-0',
      })
      if (kind === 'quorum') {
        const again = sink.events.find(
          (f) => f.n === flaky[0] && (f._amqp as { redelivered: boolean }).redelivered,
        )!
        expect((again._amqp as { deliveryCount: number }).deliveryCount).toBe(1)
      }
      // What reached the dead-letter exchange: exactly the rejected and the exhausted, each once.
      const deadLettered = (await admin.drain(dead)).map((m) => {
        const deaths = m.properties.headers?.['x-death'] as { reason: string }[] | undefined
        expect(deaths?.[0]?.reason).toBe('rejected')
        return (JSON.parse(m.content.toString()) as { n: number }).n
      })
      expect(deadLettered.sort((a, b) => a - b)).toEqual([...rejected, ...poison].sort((a, b) => a - b))
      expect(await admin.messageCount(queue)).toBe(0)
    })
  }

  it('bounds the attempts of a message on a classic queue that carries a stale x-delivery-count (dead-lettered from a quorum queue)', async () => {
    // A message dead-lettered or shovelled from a quorum queue keeps its x-delivery-count, which a
    // classic queue never updates: taken as the count, it kept an always-errored message requeued
    // for ever (hundreds of requeues a second with a short back-off), never dead-lettered.
    const { queue, dead } = await admin.queueWithDeadLetters('classic')
    const channel = admin.channel as ConfirmChannel
    channel.publish('', queue, Buffer.from('{"n":1}'), {
      messageId: 'm-1',
      headers: { 'x-delivery-count': 1 },
    })
    await channel.waitForConfirms()
    const source = amqpSource({ url: BROKER_URL, queue, maxAttempts: 3, retryInitialDelayMs: 0 })
    const sink = memory({ outcome: () => 'errored' })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    await topology.start()
    try {
      await vi.waitFor(() => expect(source.counters.rejected).toBe(1), { timeout: 10_000, interval: 5 })
    } finally {
      await topology.stop()
    }
    // The header counts one earlier delivery; this process counts its own: 2 + 1 = maxAttempts.
    expect(source.counters).toMatchObject({ received: 2, nacked: 1, rejected: 1, acked: 0, inFlight: 0 })
    expect(sink.events.map((e) => (e._amqp as { deliveryCount?: number }).deliveryCount)).toEqual([1, 1])
    expect((await admin.drain(dead)).map((m) => m.content.toString())).toEqual(['{"n":1}'])
    expect(await admin.messageCount(queue)).toBe(0)
  })

  it("a header named __proto__ neither counts as the message's deliveries nor is lost from the metadata", async () => {
    // amqplib decodes a header table by assignment, so a header named '__proto__' holding a table
    // became the prototype of the headers: its keys were read as headers of the message (an
    // x-delivery-count of 50 made the first error the last attempt: dead-lettered at once, never
    // retried), and the metadata left it out (Object.entries sees own keys only).
    const { queue, dead } = await admin.queueWithDeadLetters('classic')
    const channel = admin.channel as ConfirmChannel
    channel.publish('', queue, Buffer.from('{"n":1}'), {
      messageId: 'm-1',
      headers: JSON.parse('{"__proto__":{"x-delivery-count":50},"kept":"yes"}') as Record<string, unknown>,
    })
    await channel.waitForConfirms()
    let calls = 0
    const source = amqpSource({ url: BROKER_URL, queue, maxAttempts: 3, retryInitialDelayMs: 0 })
    const sink = memory({ outcome: () => (++calls === 1 ? 'errored' : 'delivered') })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    await topology.start()
    try {
      await vi.waitFor(() => expect(source.counters.acked + source.counters.rejected).toBe(1), {
        timeout: 10_000,
        interval: 5,
      })
    } finally {
      await topology.stop()
    }
    console.log(`a __proto__ header: counters ${JSON.stringify(source.counters)}`)
    expect(source.counters).toMatchObject({ received: 2, nacked: 1, acked: 1, rejected: 0, inFlight: 0 })
    const metadata = sink.events.map((e) => e._amqp as { deliveryCount?: number; headers: object })
    expect(metadata.map((m) => m.deliveryCount)).toEqual([undefined, undefined])
    for (const { headers } of metadata) {
      expect(Object.getPrototypeOf(headers)).toBe(Object.prototype)
      expect(Object.entries(headers)).toEqual([
        ['__proto__', { 'x-delivery-count': 50 }],
        ['kept', 'yes'],
      ])
    }
    expect(await admin.drain(dead)).toEqual([])
    expect(await admin.messageCount(queue)).toBe(0)
  })

  it("keeps a header named __proto__ in the metadata when it is the message's only header", async () => {
    // amqplib made it the prototype of the headers, which then had no own key: the metadata's
    // headers were made only when Object.keys found one, so _amqp.headers was left out.
    const { queue } = await admin.queueWithDeadLetters('classic')
    const channel = admin.channel as ConfirmChannel
    channel.sendToQueue(queue, Buffer.from('{"n":1}'), {
      messageId: 'proto-only',
      headers: JSON.parse('{"__proto__":{"trace":"t-1"}}') as Record<string, unknown>,
    })
    await channel.waitForConfirms()
    const source = amqpSource({ url: BROKER_URL, queue })
    const events = await consume(source, () => expect(source.counters.acked).toBe(1))
    expect(events).toHaveLength(1)
    const { headers } = events[0]!._amqp as { headers?: object }
    expect(headers === undefined ? undefined : Object.entries(headers)).toEqual([
      ['__proto__', { trace: 't-1' }],
    ])
  })

  it('reads a message whose header table holds a header named __proto__ holding bytes, at any depth', async () => {
    // amqplib made those bytes (a Buffer) the prototype of the table that held them: the table was
    // taken for a Buffer when the metadata was made, which threw and failed the source's run.
    const { queue } = await admin.queueWithDeadLetters('classic')
    const table: Record<string, unknown> = { b: 2 }
    Object.defineProperty(table, '__proto__', {
      value: Buffer.from('raw'),
      writable: true,
      enumerable: true,
      configurable: true,
    })
    const channel = admin.channel as ConfirmChannel
    channel.sendToQueue(queue, Buffer.from('{"n":1}'), { messageId: 'bytes', headers: { table } })
    await channel.waitForConfirms()
    const source = amqpSource({ url: BROKER_URL, queue })
    const events = await consume(source, () => expect(source.counters.acked).toBe(1))
    const { headers } = events[0]!._amqp as { headers: { table: object } }
    expect(Object.entries(headers.table)).toEqual([
      ['__proto__', 'raw'],
      ['b', 2],
    ])
    expect(await admin.messageCount(queue)).toBe(0)
  })

  it('gives each of two messages that share a message-id its own maxAttempts on a quorum queue', async () => {
    // Ids may repeat (a messageIdField, an upstream id): a count kept by id alone let one message's
    // errors count against the other, which was dead-lettered an attempt early.
    const { queue, dead } = await admin.queueWithDeadLetters('quorum')
    await admin.publish(queue, [{ n: 0 }, { n: 1 }], () => 'same-id')
    const seen = new Map<number, number>()
    const sink = memory({
      outcome: (event) => {
        const n = event.get('n') as number
        seen.set(n, (seen.get(n) ?? 0) + 1)
        return 'errored'
      },
    })
    const source = amqpSource({
      url: BROKER_URL,
      queue,
      prefetch: 10,
      maxAttempts: 3,
      retryInitialDelayMs: 0,
    })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    await topology.start()
    try {
      await vi.waitFor(() => expect(source.counters.rejected).toBe(2), { timeout: 15_000, interval: 10 })
    } finally {
      await topology.stop()
    }
    expect([seen.get(0), seen.get(1)]).toEqual([3, 3])
    expect(await admin.drain(dead)).toHaveLength(2)
  })

  it("with deadLetterExchange, republishes a rejected message there with the reason in headers and acks it; a copy no queue takes falls back to the queue's own dead-lettering", async () => {
    // The queue's own dead-letter exchange (x-death, no reason) and a reason exchange of our own.
    const { queue, dead } = await admin.queueWithDeadLetters()
    const { exchange: reasons, queue: withReasons } = await admin.reasonsExchange()
    await admin.publish(
      queue,
      Array.from({ length: 10 }, (_, n) => (n === 9 ? 'not json' : { n })),
      (n) => `m-${n}`,
    )
    const outcome = (event: LogEvent) => ((event.get('n') as number) % 3 === 0 ? 'rejected' : 'delivered')
    const source = amqpSource({ url: BROKER_URL, queue, deadLetterExchange: reasons, invalidJson: 'reject' })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('rabbit', source)
      .sink('picky', ['rabbit'], memory({ outcome }))
      .build()
    await topology.start()
    await vi.waitFor(() => expect(source.counters.acked + source.counters.rejected).toBe(10), {
      timeout: 10_000,
      interval: 20,
    })
    await topology.stop()
    expect(source.counters).toMatchObject({ acked: 6, rejected: 4, deadLettered: 4, abandoned: 0 })
    const copies = await admin.drain(withReasons)
    const byId = new Map(copies.map((m) => [m.properties.messageId as string, m]))
    expect([...byId.keys()].sort()).toEqual(['m-0', 'm-3', 'm-6', 'm-9'])
    for (const id of ['m-0', 'm-3', 'm-6']) {
      const headers = byId.get(id)!.properties.headers!
      expect(headers['x-ackline-rejected-by']).toBe('picky')
      expect(headers['x-ackline-code']).toBe('REJECTED')
      expect(typeof headers['x-ackline-reason']).toBe('string')
      // The copy is the message as it was: its body and routing key.
      expect(byId.get(id)!.fields.routingKey).toBe(queue)
    }
    expect(JSON.parse(byId.get('m-3')!.content.toString())).toEqual({ n: 3 })
    expect(byId.get('m-9')!.properties.headers!).toMatchObject({
      'x-ackline-rejected-by': 'rabbit',
      'x-ackline-code': 'INVALID_JSON',
    })
    expect(await admin.messageCount(dead)).toBe(0)
    expect(await admin.messageCount(queue)).toBe(0)

    // An exchange that routes nowhere: the copy comes back, so the original is nacked instead and
    // the queue's own dead-letter exchange keeps it (never lost, never acked).
    const nowhere = uniqueName('nowhere')
    await admin.channel.assertExchange(nowhere, 'direct', { durable: false })
    admin.exchanges.push(nowhere)
    await admin.publish(queue, [{ n: 0 }], () => 'lonely')
    const warnings: string[] = []
    const second = amqpSource({
      url: BROKER_URL,
      queue,
      deadLetterExchange: nowhere,
      onWarning: (w) => warnings.push(w),
    })
    const topology2 = new TopologyBuilder({ acknowledgements: true })
      .source('rabbit', second)
      .sink('picky', ['rabbit'], memory({ outcome }))
      .build()
    await topology2.start()
    await vi.waitFor(() => expect(second.counters.rejected).toBe(1), { timeout: 10_000, interval: 20 })
    await topology2.stop()
    expect(second.counters).toMatchObject({ acked: 0, rejected: 1, deadLettered: 0 })
    expect(warnings.some((w) => w.includes('no queue bound'))).toBe(true)
    const kept = await admin.drain(dead)
    expect(kept.map((m) => m.properties.messageId)).toEqual(['lonely'])
    expect(await admin.messageCount(queue)).toBe(0)
  })

  it('keeps consuming when the pipeline does not accept a batch: only the message it refuses is requeued after the back-off, then dead-lettered', async () => {
    const { queue, dead } = await admin.queueWithDeadLetters()
    await admin.publish(queue, [{ n: 1 }, { n: 2, poison: true }, { n: 3 }], (n) => `m-${n}`)
    // A pipeline whose buffer cannot store the poison (a disk buffer and an event nested too
    // deep): its send rejects, while the topology is not stopping.
    const accepted: JsonObject[] = []
    const refusals: string[] = []
    const delivered = (length: number): BatchReceipt => ({
      batchId: undefined,
      status: Promise.resolve('delivered'),
      failure: undefined,
      outcomes: Promise.resolve(RecordOutcomes.all('delivered', length)),
    })
    const controller = new AbortController()
    const context: SourceContext = {
      id: 'rabbit',
      acknowledgements: true,
      signal: controller.signal,
      send: async (records) => {
        const list = [...records]
        if (list.some((r) => r.poison === true)) {
          refusals.push(list.map((r) => r.n).join(','))
          throw new RangeError('cannot encode an event nested too deep')
        }
        accepted.push(...list)
        return delivered(list.length)
      },
      sendEvents: () => Promise.resolve(),
    }
    const warnings: string[] = []
    const source = amqpSource({
      url: BROKER_URL,
      queue,
      maxAttempts: 2,
      retryInitialDelayMs: 20,
      onWarning: (w) => warnings.push(w),
    })
    let ended: unknown = 'running'
    const run = source.run(context).then(
      () => (ended = 'returned'),
      (error: unknown) => (ended = error),
    )
    await vi.waitFor(() => expect(source.counters).toMatchObject({ acked: 2, rejected: 1, inFlight: 0 }), {
      timeout: 10_000,
      interval: 20,
    })
    // Something published after the refused message still flows.
    await admin.publish(queue, [{ n: 4 }], () => 'm-4')
    await vi.waitFor(() => expect(source.counters.acked).toBe(3), { timeout: 10_000, interval: 20 })
    expect(ended).toBe('running')
    controller.abort()
    await run
    console.log(`refused sends: ${JSON.stringify(refusals)}; counters ${JSON.stringify(source.counters)}`)
    expect(ended).toBe('returned')
    expect(accepted.map((r) => r.n).sort()).toEqual([1, 3, 4])
    // The first batch that held the poison (all three, or fewer when the messages came apart:
    // the broker's timing) was sent again one message at a time, and the poison was refused on
    // each of its maxAttempts deliveries.
    expect(refusals[0]!.split(',')).toContain('2')
    expect(refusals[0] === '2' ? refusals : refusals.slice(1)).toEqual(['2', '2'])
    expect(source.counters).toMatchObject({ acked: 3, nacked: 1, rejected: 1, abandoned: 0 })
    expect(warnings.filter((w) => w.includes('did not accept')).length).toBe(2)
    expect(warnings[0]).toMatch(
      /^rabbit: the pipeline did not accept message \d+ \(cannot encode an event nested too deep\)/,
    )
    const deadLettered = await admin.drain(dead)
    expect(deadLettered.map((m) => m.properties.messageId)).toEqual(['m-1'])
    expect(await admin.messageCount(queue)).toBe(0)
  })

  it('with deadLetterExchange, cuts a long rejection reason to 1024 bytes and dead-letters each message once (prefetch 1 never stalls)', async () => {
    const { queue, dead } = await admin.queueWithDeadLetters()
    const { exchange: reasons, queue: withReasons } = await admin.reasonsExchange()
    await admin.publish(queue, [{ n: 0 }, { n: 1 }], (n) => `m-${n}`)
    // 200 KB of a two-byte character: the cut must not split one.
    const picky: Sink = {
      kind: 'picky',
      async write(events) {
        return events.events.map(() => new RejectError('picky', `invalid: ${'é'.repeat(100_000)}`))
      },
    }
    const source = amqpSource({ url: BROKER_URL, queue, deadLetterExchange: reasons, prefetch: 1 })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('rabbit', source)
      .sink('picky', ['rabbit'], picky)
      .build()
    await topology.start()
    await vi.waitFor(() => expect(source.counters.rejected).toBe(2), { timeout: 10_000, interval: 20 })
    await topology.stop()
    expect(source.counters).toMatchObject({ rejected: 2, deadLettered: 2, abandoned: 0, redelivered: 0 })
    const copies = await admin.drain(withReasons)
    expect(copies.map((m) => m.properties.messageId).sort()).toEqual(['m-0', 'm-1'])
    for (const copy of copies) {
      const reason = String(copy.properties.headers!['x-ackline-reason'])
      expect(Buffer.byteLength(reason)).toBeLessThanOrEqual(1024)
      expect(reason).toMatch(/^sink 'picky' .*invalid: (é)+…$/)
    }
    expect(await admin.messageCount(dead)).toBe(0)
    expect(await admin.messageCount(queue)).toBe(0)
  })

  it('with deadLetterExchange, a copy amqplib cannot encode (headers too large) leaves the message to a nack without requeue, never unacked', async () => {
    const { queue, dead } = await admin.queueWithDeadLetters()
    const { exchange: reasons } = await admin.reasonsExchange(false)
    // Headers that just fit amqplib's 64 KiB encoding buffer, until the copy adds its own.
    const channel = admin.channel as import('amqplib').ConfirmChannel
    for (const n of [0, 1]) {
      channel.publish('', queue, Buffer.from(JSON.stringify({ n })), {
        messageId: `m-${n}`,
        headers: { big: 'z'.repeat(65_450) },
      })
    }
    await channel.waitForConfirms()
    const warnings: string[] = []
    const source = amqpSource({
      url: BROKER_URL,
      queue,
      deadLetterExchange: reasons,
      prefetch: 1,
      onWarning: (w) => warnings.push(w),
    })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('rabbit', source)
      .sink('picky', ['rabbit'], memory({ outcome: () => 'rejected' }))
      .build()
    await topology.start()
    await vi.waitFor(() => expect(source.counters.rejected).toBe(2), { timeout: 10_000, interval: 20 })
    await topology.stop()
    expect(source.counters).toMatchObject({ rejected: 2, deadLettered: 0, abandoned: 0, redelivered: 0 })
    expect(warnings).toHaveLength(2)
    expect(warnings[0]).toMatch(
      /^rabbit: cannot publish a copy to the dead-letter exchange '.*' \(.*\); nacking it without requeue$/,
    )
    const kept = await admin.drain(dead)
    expect(kept.map((m) => m.properties.messageId).sort()).toEqual(['m-0', 'm-1'])
    expect(await admin.messageCount(queue)).toBe(0)
  })

  it('fails its run with an AmqpError naming the source and deadLetterExchange when that exchange does not exist, before consuming anything', async () => {
    const { queue } = await admin.queueWithDeadLetters()
    await admin.publish(queue, [{ n: 0 }])
    const missing = uniqueName('missing-exchange')
    const source = amqpSource({ url: BROKER_URL, queue, deadLetterExchange: missing })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('rabbit', source)
      .sink('out', ['rabbit'], memory({ outcome: () => 'rejected' }))
      .build()
    const errors: LifecycleEvent[] = []
    topology.lifecycle.subscribe((fact) => {
      if (fact.type === 'component_error') errors.push(fact)
    })
    await topology.start()
    await topology.done
    expect(errors).toHaveLength(1)
    const cause = (errors[0] as { cause: unknown }).cause as AmqpError
    expect(cause).toBeInstanceOf(AmqpError)
    expect(cause.code).toBe('AMQP_DECLARATION_FAILED')
    expect(cause.field).toBe('deadLetterExchange')
    expect(cause.message).toMatch(
      new RegExp(
        `^rabbit \\(deadLetterExchange\\): the dead-letter exchange '${missing}' cannot be used: .*NOT_FOUND`,
      ),
    )
    expect(source.counters.received).toBe(0)
    expect(await admin.messageCount(queue)).toBe(1)
  })

  it('a copy the broker refuses (its exchange deleted meanwhile) closes the channel: the warning says why, and no ack sent after the copy is counted', async () => {
    const { queue } = await admin.queueWithDeadLetters()
    const { exchange: reasons } = await admin.reasonsExchange(false)
    const warnings: string[] = []
    const source = amqpSource({
      url: BROKER_URL,
      queue,
      deadLetterExchange: reasons,
      reconnectInitialDelayMs: 50,
      onWarning: (w) => warnings.push(w),
    })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('rabbit', source)
      .sink(
        'out',
        ['rabbit'],
        memory({ outcome: (e: LogEvent) => (e.get('bad') === true ? 'rejected' : 'delivered') }),
      )
      .build()
    await topology.start()
    // Consuming (the exchange was there at start) before the exchange goes.
    await admin.publish(queue, [{ n: -1 }])
    await vi.waitFor(() => expect(source.counters.acked).toBe(1), { timeout: 10_000, interval: 20 })
    await admin.channel.deleteExchange(reasons)
    // One batch: the copy of the first goes out before the ack of the second.
    await admin.publish(queue, [{ n: 0, bad: true }, { n: 1 }])
    await vi.waitFor(() => expect(warnings.some((w) => w.includes('reconnect attempt 2'))).toBe(true), {
      timeout: 10_000,
      interval: 20,
    })
    await topology.stop()
    console.log(
      `refused copy: counters ${JSON.stringify(source.counters)}; warnings ${JSON.stringify(warnings)}`,
    )
    expect(
      warnings.some((w) =>
        /^rabbit \(deadLetterExchange\): the broker refused a copy to the dead-letter exchange '.*' and closed the channel \(.*404.*NOT_FOUND/.test(
          w,
        ),
      ),
    ).toBe(true)
    expect(warnings.some((w) => /reconnect attempt 1 .* failed: rabbit \(deadLetterExchange\)/.test(w))).toBe(
      true,
    )
    // The broker dropped what followed the refused copy: nothing was acked, and both are back.
    // (The second message may or may not have reached this consumer before the channel closed.)
    expect(source.counters).toMatchObject({ acked: 1, rejected: 0, inFlight: 0 })
    expect(source.counters.received).toBeGreaterThanOrEqual(2)
    expect(await admin.messageCount(queue)).toBe(2)
  })

  it("with deadLetterExchange refusing copies (403), backs off reconnects and sends each refused message to the queue's own dead-letter exchange when it comes back, never looping", async () => {
    const { queue, dead } = await admin.queueWithDeadLetters()
    // An internal exchange exists (the start-time check passes) but refuses every publish: 403.
    const internal = await admin.refusingExchange()
    // Prefetch 1: each bad message is refused on its own, so the refusals come in a row. m-2 has
    // no message-id: it is told apart by its body.
    const bodies = [0, 1, 2, 3, 4, 5].map((n) => ({ n, bad: n % 2 === 0 }))
    await admin.publish(queue, bodies, (n) => (n === 2 ? undefined : `m-${n}`))
    const warnings: { at: number; text: string }[] = []
    const source = amqpSource({
      url: BROKER_URL,
      queue,
      prefetch: 1,
      deadLetterExchange: internal,
      reconnectInitialDelayMs: 100,
      reconnectMaxDelayMs: 250,
      onWarning: (text) => warnings.push({ at: performance.now(), text }),
    })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('rabbit', source)
      .sink(
        'out',
        ['rabbit'],
        memory({ outcome: (e: LogEvent) => (e.get('bad') === true ? 'rejected' : 'delivered') }),
      )
      .build()
    await topology.start()
    await vi.waitFor(() => expect(source.counters.acked + source.counters.rejected).toBe(6), {
      timeout: 10_000,
      interval: 20,
    })
    await topology.stop()
    console.log(
      `refused copies: counters ${JSON.stringify(source.counters)}; warnings ${JSON.stringify(warnings)}`,
    )
    // Each bad message was refused once, came back once and left: 3 reconnects, 9 deliveries.
    expect(source.counters).toMatchObject({
      received: 9,
      redelivered: 3,
      reconnects: 3,
      acked: 3,
      rejected: 3,
      deadLettered: 0,
      inFlight: 0,
    })
    const refusals = warnings.filter((w) => w.text.includes('refused a copy'))
    expect(refusals).toHaveLength(3)
    for (const refusal of refusals) {
      expect(refusal.text).toMatch(
        new RegExp(
          `^rabbit \\(deadLetterExchange\\): the broker refused a copy to the dead-letter exchange '${internal}' and closed the channel \\(.*403.*ACCESS.REFUSED.*\\)`,
        ),
      )
    }
    // Refusals in a row back off like failed reconnects: 100, 200, then capped at 250 ms.
    expect(refusals.map((w) => /reconnecting in (\d+) ms/.exec(w.text)?.[1])).toEqual(['100', '200', '250'])
    expect(refusals[1]!.at - refusals[0]!.at).toBeGreaterThanOrEqual(100 - 5)
    expect(refusals[2]!.at - refusals[1]!.at).toBeGreaterThanOrEqual(200 - 5)
    // Nothing acked that the broker dropped: the good ones are gone from the queue, acked once
    // each; the bad ones are in the queue's own dead-letter queue.
    expect(await admin.messageCount(queue)).toBe(0)
    const kept = await admin.drain(dead)
    expect(kept.map((m) => JSON.parse(m.content.toString()).n).sort()).toEqual([0, 2, 4])

    // A larger prefetch: acks held behind the refused copy die with the channel, uncounted, and
    // those messages are acked once they come back.
    await admin.publish(queue, [{ n: 6, bad: true }, { n: 7 }, { n: 8 }], (n) => `m-${n + 6}`)
    const warnings2: string[] = []
    const second = amqpSource({
      url: BROKER_URL,
      queue,
      deadLetterExchange: internal,
      reconnectInitialDelayMs: 100,
      onWarning: (text) => warnings2.push(text),
    })
    const topology2 = new TopologyBuilder({ acknowledgements: true })
      .source('rabbit', second)
      .sink(
        'out',
        ['rabbit'],
        memory({ outcome: (e: LogEvent) => (e.get('bad') === true ? 'rejected' : 'delivered') }),
      )
      .build()
    await topology2.start()
    await vi.waitFor(() => expect(second.counters.acked + second.counters.rejected).toBe(3), {
      timeout: 10_000,
      interval: 20,
    })
    await topology2.stop()
    console.log(`refused copies, prefetch 100: counters ${JSON.stringify(second.counters)}`)
    expect(second.counters).toMatchObject({ acked: 2, rejected: 1, deadLettered: 0, reconnects: 1 })
    expect(warnings2.filter((w) => w.includes('refused a copy'))).toHaveLength(1)
    expect(await admin.messageCount(queue)).toBe(0)
    expect((await admin.drain(dead)).map((m) => m.properties.messageId)).toEqual(['m-6'])
  })

  it('takes a payload that is not UTF-8 for invalid JSON: passed raw with U+FFFD, or dead-lettered with the reason, never parsed into altered fields', async () => {
    const { queue, dead } = await admin.queueWithDeadLetters()
    // {"a":"<0xff>"}: JSON once its bad byte is replaced, which would hide the damage in a field.
    const broken = Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xff]), Buffer.from('"}')])
    admin.channel.sendToQueue(queue, broken)
    admin.channel.sendToQueue(queue, Buffer.from('{"ok":true}'))
    const source = amqpSource({ url: BROKER_URL, queue })
    const events = await consume(source, () => expect(source.counters.acked).toBe(2))
    expect(events.map((f) => f.message ?? f.ok)).toEqual(['{"a":"\uFFFD"}', true])
    expect(source.counters.invalidJson).toBe(1)

    admin.channel.sendToQueue(queue, broken)
    const { exchange: reasons, queue: withReasons } = await admin.reasonsExchange()
    const strict = amqpSource({ url: BROKER_URL, queue, invalidJson: 'reject', deadLetterExchange: reasons })
    const events2 = await consume(strict, () => expect(strict.counters.rejected).toBe(1))
    expect(events2).toEqual([])
    const [copy, ...more] = await admin.drain(withReasons)
    expect(more).toEqual([])
    expect(copy!.content.equals(broken)).toBe(true)
    expect(copy!.properties.headers).toMatchObject({
      'x-ackline-code': 'INVALID_JSON',
      'x-ackline-reason': 'the payload is not valid UTF-8',
    })
    expect(await admin.messageCount(queue)).toBe(0)
    expect(await admin.messageCount(dead)).toBe(0)
  })

  it('takes a payload holding a number too large for a double for invalid JSON: raw, or dead-lettered with the number, never Infinity', async () => {
    const { queue, dead } = await admin.queueWithDeadLetters()
    // JSON.parse reads 1e400 as Infinity, which every sink would write as null.
    const huge = '{"a":"1e400","b":1e400}'
    admin.channel.sendToQueue(queue, Buffer.from(huge))
    admin.channel.sendToQueue(queue, Buffer.from('{"b":1e308}'))
    const source = amqpSource({ url: BROKER_URL, queue, metadataField: false })
    const events = await consume(source, () => expect(source.counters.acked).toBe(2))
    expect(events).toEqual([{ message: huge }, { b: 1e308 }])
    expect(source.counters.invalidJson).toBe(1)

    admin.channel.sendToQueue(queue, Buffer.from(huge))
    const { exchange: reasons, queue: withReasons } = await admin.reasonsExchange()
    const strict = amqpSource({ url: BROKER_URL, queue, invalidJson: 'reject', deadLetterExchange: reasons })
    const events2 = await consume(strict, () => expect(strict.counters.rejected).toBe(1))
    expect(events2).toEqual([])
    const [copy, ...more] = await admin.drain(withReasons)
    expect(more).toEqual([])
    expect(copy!.content.toString()).toBe(huge)
    expect(copy!.properties.headers).toMatchObject({
      'x-ackline-code': 'INVALID_JSON',
      'x-ackline-reason': 'the payload holds a number too large for a double (1e400)',
    })
    expect(await admin.messageCount(queue)).toBe(0)
    expect(await admin.messageCount(dead)).toBe(0)
  })

  it("a metadataField named '__proto__' holds the metadata as an own field: not set as the event's prototype, lost", async () => {
    // The metadata was assigned (fields[metadataField] = …), which for '__proto__' replaced the
    // parsed payload's prototype: the event carried no metadata (the JetStream source had the same).
    const { queue } = await admin.queueWithDeadLetters()
    admin.channel.sendToQueue(queue, Buffer.from('{"n":0}'), { messageId: 'm0' })
    const source = amqpSource({ url: BROKER_URL, queue, metadataField: '__proto__' })
    const [event, ...more] = (await consume(source, () => expect(source.counters.acked).toBe(1))) as Record<
      string,
      unknown
    >[]
    expect(more).toEqual([])
    expect(Object.getPrototypeOf(event)).toBe(Object.prototype)
    expect(Object.hasOwn(event!, '__proto__')).toBe(true)
    expect(Object.getOwnPropertyDescriptor(event, '__proto__')?.value).toMatchObject({
      queue,
      messageId: 'm0',
    })
    expect(event!.n).toBe(0)
  })

  it('skips a leading UTF-8 byte order mark, as the HTTP and NATS sources do', async () => {
    const { queue } = await admin.queueWithDeadLetters()
    admin.channel.sendToQueue(queue, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"a":1}')]))
    admin.channel.sendToQueue(queue, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('plain')]))
    const source = amqpSource({ url: BROKER_URL, queue, metadataField: false })
    const events = await consume(source, () => expect(source.counters.acked).toBe(2))
    expect(events).toEqual([{ a: 1 }, { message: 'plain' }])
    expect(source.counters.invalidJson).toBe(1)
  })

  it('passes a payload that is not JSON as a string field, or dead-letters it, as invalidJson says', async () => {
    const { queue, dead } = await admin.queueWithDeadLetters()
    await admin.publish(queue, ['not json {', { ok: true }, 'plain'])
    const sink = memory()
    const source = amqpSource({ url: BROKER_URL, queue })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    await topology.start()
    await vi.waitFor(() => expect(source.counters.acked).toBe(3), { timeout: 10_000, interval: 20 })
    await topology.stop()
    expect(sink.events.map((f) => f.message ?? f.ok)).toEqual(['not json {', true, 'plain'])
    expect(source.counters.invalidJson).toBe(2)

    await admin.publish(queue, ['not json {', { ok: true }])
    const strict = amqpSource({ url: BROKER_URL, queue, invalidJson: 'reject' })
    const sink2 = memory()
    const topology2 = new TopologyBuilder({ acknowledgements: true })
      .source('in', strict)
      .sink('out', ['in'], sink2)
      .build()
    await topology2.start()
    await vi.waitFor(() => expect(strict.counters.acked + strict.counters.rejected).toBe(2), {
      timeout: 10_000,
      interval: 20,
    })
    await topology2.stop()
    expect(sink2.events.map((f) => f.ok)).toEqual([true])
    expect(strict.counters).toMatchObject({ rejected: 1, invalidJson: 1 })
    expect((await admin.drain(dead)).map((m) => m.content.toString())).toEqual(['not json {'])
    expect(await admin.messageCount(queue)).toBe(0)
  })

  /**
   * Runs a source with `deadLetterExchange` on one message through `url`, its record rejected once
   * the stop began; the counters, the copies' message-ids and what is left in the queue.
   */
  async function rejectWhileStopping(url: string, queue: string, reasons: string, withReasons: string) {
    await admin.publish(queue, [{ n: 1 }], () => 'm-stop')
    const source = amqpSource({
      url,
      queue,
      deadLetterExchange: reasons,
      heartbeatSeconds: 0,
      onWarning: () => {},
    })
    const stop = new AbortController()
    let tell!: () => void
    const told = new Promise<void>((resolve) => (tell = resolve))
    const run = source.run({
      id: 'in',
      acknowledgements: true,
      signal: stop.signal,
      send: (records) =>
        Promise.resolve({
          batchId: undefined,
          status: told.then(() => 'rejected' as const),
          failure: { componentId: 'out', code: 'BAD', message: 'refused by the sink' },
          outcomes: told.then(() => RecordOutcomes.all('rejected', [...records].length)),
        }),
      sendEvents: () => Promise.resolve(),
    })
    await vi.waitFor(() => expect(source.counters.inFlight).toBe(1), { timeout: 5000, interval: 5 })
    stop.abort()
    tell()
    await run
    return {
      counters: source.counters,
      copies: (await admin.drain(withReasons)).map((m) => m.properties.messageId as string),
      left: await admin.messageCount(queue),
    }
  }

  it('with deadLetterExchange, a stop waits for the confirm of a copy made while stopping, then acks the original', async () => {
    // The broker's answer to the consumer's cancel is held until the copy is on its way, so the
    // source hears it while the copy awaits its confirm and nothing else is in flight. The run
    // used to close the connection at once: the confirm then found the generation dead, the
    // original was left unacked and the broker redelivered it, copied already (a second copy on
    // the next run, for each such stop).
    const { queue } = await admin.queueWithDeadLetters()
    const { exchange: reasons, queue: withReasons } = await admin.reasonsExchange()
    const held = await holdingBrokerProxy(
      (chunk) => hasMethod(chunk, Method.basicCancelOk),
      (direction, chunk) => direction === 'up' && hasMethod(chunk, Method.basicPublish),
    )
    try {
      const { counters, copies, left } = await rejectWhileStopping(held.url, queue, reasons, withReasons)
      console.log(`copy made while stopping: ${JSON.stringify(counters)}`)
      expect(held.state).toBe('released')
      expect(counters).toMatchObject({ rejected: 1, deadLettered: 1, abandoned: 0, inFlight: 0 })
      expect(copies).toEqual(['m-stop'])
      expect(left).toBe(0)
    } finally {
      await held.close()
    }
  })

  it('with deadLetterExchange, the ack of a copy confirmed at the very end of a stop reaches the broker', async () => {
    // The copy's confirm and the answer to the consumer's cancel reach the source together, so it
    // acks the original and closes in one go. amqplib writes a channel's frames and the
    // connection's Close through separate buffers it interleaves, so the Close went out before the
    // ack, and RabbitMQ discards what follows a Close: the ack was counted (deadLettered) and the
    // broker redelivered the original, copied already.
    const { queue } = await admin.queueWithDeadLetters()
    const { exchange: reasons, queue: withReasons } = await admin.reasonsExchange()
    const held = await holdingBrokerProxy(
      (chunk) => hasMethod(chunk, Method.basicCancelOk),
      (direction, chunk) => direction === 'down' && hasMethod(chunk, Method.basicAck),
    )
    try {
      const { counters, copies, left } = await rejectWhileStopping(held.url, queue, reasons, withReasons)
      console.log(`copy confirmed with the cancel's answer: ${JSON.stringify(counters)}`)
      expect(held.state).toBe('released')
      expect(counters).toMatchObject({ rejected: 1, deadLettered: 1, abandoned: 0, inFlight: 0 })
      expect(copies).toEqual(['m-stop'])
      expect(left).toBe(0)
    } finally {
      await held.close()
    }
  })

  it("with deadLetterExchange, the copy does not keep the original's per-message TTL (expiration): it cannot expire in the dead-letter queue", async () => {
    // The copy was published with the original's properties, expiration too: a producer's TTL
    // ('expire if not processed within a minute') then ran again in the dead-letter queue, which
    // nobody may read for days, and the copy vanished there while its original was acked. RabbitMQ's
    // own dead-lettering removes the expiration for that reason. With expiration '0' (expire at
    // once unless a consumer takes it) the copy disappeared on arrival, deterministically.
    const { queue } = await admin.queueWithDeadLetters()
    const { exchange: reasons, queue: withReasons } = await admin.reasonsExchange()
    const source = amqpSource({ url: BROKER_URL, queue, deadLetterExchange: reasons, onWarning: () => {} })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('rabbit', source)
      .sink('out', ['rabbit'], memory({ outcome: () => 'rejected' }))
      .build()
    await topology.start()
    try {
      // Published only once the source consumes, so the original itself is taken before it expires.
      await vi.waitFor(async () => expect((await admin.channel.checkQueue(queue)).consumerCount).toBe(1), {
        timeout: 5000,
        interval: 10,
      })
      const channel = admin.channel as ConfirmChannel
      channel.publish('', queue, Buffer.from('{"n":0}'), { messageId: 'ttl-0', expiration: '0' })
      channel.publish('', queue, Buffer.from('{"n":1}'), { messageId: 'ttl-60s', expiration: '60000' })
      await channel.waitForConfirms()
      await vi.waitFor(() => expect(source.counters.deadLettered).toBe(2), { timeout: 10_000, interval: 10 })
    } finally {
      await topology.stop()
    }
    const copies = await admin.drain(withReasons)
    expect(copies.map((m) => m.properties.messageId).sort()).toEqual(['ttl-0', 'ttl-60s'])
    for (const copy of copies) expect(copy.properties.expiration).toBeUndefined()
    const byId = new Map(copies.map((m) => [m.properties.messageId as string, m.properties.headers ?? {}]))
    expect(byId.get('ttl-60s')!['x-ackline-original-expiration']).toBe('60000')
    expect(await admin.messageCount(queue)).toBe(0)
  })

  it("with deadLetterExchange, the copy does not carry the original's CC header, which the broker would route it by as well", async () => {
    // RabbitMQ routes a published message by its CC (and BCC) header's routing keys too, and keeps
    // CC on the delivered message. The copy kept every header, so a message its producer sent with
    // CC went to the dead-letter exchange under those keys as well: an extra copy in every queue
    // bound there with one of them (tried: the queue bound with the CC key got one).
    const queue = uniqueName('q')
    const dlx = uniqueName('dlx-direct')
    const ccKey = uniqueName('cc-key')
    const dead = uniqueName('dead')
    const byCc = uniqueName('by-cc')
    const channel = admin.channel as ConfirmChannel
    await channel.assertExchange(dlx, 'direct', { durable: false })
    admin.exchanges.push(dlx)
    for (const q of [queue, dead, byCc]) {
      await channel.assertQueue(q, { durable: false })
      admin.queues.push(q)
    }
    await channel.bindQueue(dead, dlx, queue)
    await channel.bindQueue(byCc, dlx, ccKey)
    channel.sendToQueue(queue, Buffer.from('{"n":0}'), { messageId: 'with-cc', headers: { CC: [ccKey] } })
    await channel.waitForConfirms()
    const source = amqpSource({ url: BROKER_URL, queue, deadLetterExchange: dlx })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('rabbit', source)
      .sink('out', ['rabbit'], memory({ outcome: () => 'rejected' }))
      .build()
    await topology.start()
    try {
      await vi.waitFor(() => expect(source.counters.deadLettered).toBe(1), { timeout: 10_000, interval: 10 })
    } finally {
      await topology.stop()
    }
    // The broker confirmed the copy once it routed it: a copy sent by CC would be in this queue now.
    expect(await admin.messageCount(byCc)).toBe(0)
    const copies = await admin.drain(dead)
    expect(copies.map((m) => m.properties.messageId)).toEqual(['with-cc'])
    expect(copies[0]!.properties.headers?.CC).toBeUndefined()
    expect(copies[0]!.properties.headers?.['x-ackline-original-cc']).toEqual([ccKey])
    expect(await admin.messageCount(queue)).toBe(0)
  })

  /**
   * Publishes one message with `headers` (JSON text: a `__proto__` key in it stays a key) to a
   * queue, has the source dead-letter it (every event rejected), and gives back the one copy the
   * dead-letter exchange routed, once the original left the queue.
   */
  const deadLetteredCopy = async (messageId: string, headers: string) => {
    const { queue } = await admin.queueWithDeadLetters()
    const { exchange, queue: withReasons } = await admin.reasonsExchange()
    const channel = admin.channel as ConfirmChannel
    channel.sendToQueue(queue, Buffer.from('{"n":0}'), {
      messageId,
      headers: JSON.parse(headers) as Record<string, unknown>,
    })
    await channel.waitForConfirms()
    const source = amqpSource({ url: BROKER_URL, queue, deadLetterExchange: exchange })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('rabbit', source)
      .sink('out', ['rabbit'], memory({ outcome: () => 'rejected' }))
      .build()
    await topology.start()
    try {
      await vi.waitFor(() => expect(source.counters.acked + source.counters.rejected).toBe(1), {
        timeout: 10_000,
        interval: 10,
      })
    } finally {
      await topology.stop()
    }
    expect(source.counters.deadLettered).toBe(1)
    const [copy, ...more] = await admin.drain(withReasons)
    expect(more).toEqual([])
    expect(await admin.messageCount(queue)).toBe(0)
    return copy!
  }

  it("with deadLetterExchange, the copy keeps the original's header named __proto__", async () => {
    // amqplib made it the prototype of the original's headers, and the copy's headers were spread
    // from their own keys: the copy went to the dead-letter exchange without it.
    const copy = await deadLetteredCopy('with-proto', '{"__proto__":{"trace":"t-1"},"kept":"yes"}')
    // Decoded by amqplib again: the header is the prototype of the copy's headers.
    const headers = copy.properties.headers as object
    expect(Object.getPrototypeOf(headers)).toEqual({ trace: 't-1' })
    expect(headers).toMatchObject({ kept: 'yes', 'x-ackline-code': 'REJECTED' })
  })

  it("with deadLetterExchange, a CC inside the original's header named __proto__ is not taken for its CC", async () => {
    // amqplib made that header the prototype of the original's headers, and the copy read CC from
    // them through it: the copy claimed an x-ackline-original-cc the original never had.
    const copy = await deadLetteredCopy('cc-in-proto', '{"__proto__":{"CC":["k"]},"kept":"yes"}')
    const headers = copy.properties.headers as object
    expect(Object.hasOwn(headers, 'x-ackline-original-cc')).toBe(false)
    expect(Object.getPrototypeOf(headers)).toEqual({ CC: ['k'] })
    expect(headers).toMatchObject({ kept: 'yes', 'x-ackline-code': 'REJECTED' })
  })

  it("with deadLetterExchange, the copy keeps a header named __proto__ below the top of the original's headers", async () => {
    // amqplib made it the prototype of the table that held it, and encodes a table by for...in:
    // the copy's table had the prototype's keys as its own instead ({ b, deep }), and a prototype
    // of bytes made the copy fail to encode (nacked without requeue, no reason).
    const copy = await deadLetteredCopy(
      'nested-proto',
      '{"nested":{"__proto__":{"deep":1},"b":2},"list":[{"__proto__":{"x":1}}]}',
    )
    // Decoded by amqplib again: each such header is the prototype of its table, as in the original.
    const { nested, list } = copy.properties.headers as { nested: object; list: object[] }
    expect(Object.entries(nested)).toEqual([['b', 2]])
    expect(Object.getPrototypeOf(nested)).toEqual({ deep: 1 })
    expect(Object.entries(list[0]!)).toEqual([])
    expect(Object.getPrototypeOf(list[0])).toEqual({ x: 1 })
  })

  it("with deadLetterExchange, the copy does not claim the original's user-id (published by another user): the broker would refuse it", async () => {
    // RabbitMQ checks a published message's user-id against the user who publishes it (406
    // PRECONDITION_FAILED, which closes the channel). The copy kept the original's user-id, set
    // by the producer, another user: the broker closed the source's channel on every copy, the
    // source reconnected, the original came back and was copied again, for ever, every other
    // message in flight abandoned each time; nothing was ever dead-lettered or acked.
    const user = await brokerUser()
    if (user === undefined) return // said by brokerUser: this broker cannot be given a second user
    try {
      const { queue } = await admin.queueWithDeadLetters()
      const { exchange: reasons, queue: withReasons } = await admin.reasonsExchange()
      const producer = await connect(user.url)
      try {
        const channel = await producer.createConfirmChannel()
        channel.publish('', queue, Buffer.from('{"n":0}'), { messageId: 'by-other', userId: user.name })
        channel.publish('', queue, Buffer.from('{"n":1}'), { messageId: 'plain' })
        await channel.waitForConfirms()
      } finally {
        await producer.close()
      }
      const warnings: string[] = []
      const source = amqpSource({
        url: BROKER_URL,
        queue,
        deadLetterExchange: reasons,
        onWarning: (warning) => warnings.push(warning),
      })
      const topology = new TopologyBuilder({ acknowledgements: true })
        .source('rabbit', source)
        .sink('out', ['rabbit'], memory({ outcome: () => 'rejected' }))
        .build()
      await topology.start()
      try {
        await vi.waitFor(() => expect(source.counters.deadLettered).toBe(2), {
          timeout: 10_000,
          interval: 10,
        })
      } finally {
        await topology.stop()
      }
      expect(warnings).toEqual([])
      expect(source.counters).toMatchObject({ received: 2, abandoned: 0, reconnects: 0 })
      const copies = await admin.drain(withReasons)
      expect(copies.map((m) => m.properties.messageId).sort()).toEqual(['by-other', 'plain'])
      for (const copy of copies) expect(copy.properties.userId).toBeUndefined()
      const byId = new Map(copies.map((m) => [m.properties.messageId as string, m.properties.headers ?? {}]))
      expect(byId.get('by-other')!['x-ackline-original-user-id']).toBe(user.name)
      expect(byId.get('plain')!['x-ackline-original-user-id']).toBeUndefined()
      expect(await admin.messageCount(queue)).toBe(0)
    } finally {
      await user.remove()
    }
  }, 60_000) // rabbitmqctl takes seconds to make and delete the user

  it('with deadLetterExchange, a copy the broker refuses with a 406 is warned and its message nacked without requeue when it comes back, never copied in a loop', async () => {
    // Only a 403 or a 404 on the copy's publish counted as a refusal. Any other channel error on
    // it (a 406 PRECONDITION_FAILED: a body over the broker's max_message_size, say) was taken for
    // a lost connection: no warning of the copy, a reconnect after 100 ms without back-off, the
    // original back and copied again, refused again, for as long as the broker refused it.
    // The 406 here: the copy keeps the original's reply-to, and the broker refuses a publish with
    // reply-to 'amq.rabbitmq.reply-to' from a channel that takes no direct replies. No client can
    // publish such an original (refused, or its reply-to rewritten), so it is put into the queue
    // from inside the broker. Lowering the broker's max_message_size instead changed it for the
    // other test files running meanwhile (a sink test reads the broker's default in a warning).
    const { queue, dead } = await admin.queueWithDeadLetters()
    const { exchange: reasons, queue: withReasons } = await admin.reasonsExchange()
    const original = { messageId: 'refused', replyTo: 'amq.rabbitmq.reply-to' }
    if (!(await enqueueInsideBroker(queue, { n: 0 }, original))) return // said by the helper
    const warnings: string[] = []
    const source = amqpSource({
      url: BROKER_URL,
      queue,
      deadLetterExchange: reasons,
      onWarning: (warning) => warnings.push(warning),
    })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('rabbit', source)
      .sink('out', ['rabbit'], memory({ outcome: () => 'rejected' }))
      .build()
    await topology.start()
    try {
      await vi.waitFor(() => expect(source.counters.rejected).toBe(1), { timeout: 15_000, interval: 20 })
    } finally {
      await topology.stop()
    }
    // Refused once, then nacked without requeue when it came back: delivered twice, never copied.
    expect(source.counters).toMatchObject({ received: 2, rejected: 1, deadLettered: 0, inFlight: 0 })
    const refusals = warnings.filter((w) => w.includes('refused a copy'))
    expect(refusals).toHaveLength(1)
    expect(refusals[0]).toMatch(
      new RegExp(
        `^rabbit \\(deadLetterExchange\\): the broker refused a copy to the dead-letter exchange '${reasons}' and closed the channel \\(.*406.*PRECONDITION.FAILED - fast reply consumer does not exist.*\\); the broker refuses the copy as it is`,
      ),
    )
    expect(warnings.filter((w) => w.includes('lost the connection'))).toEqual([])
    expect(await admin.messageCount(withReasons)).toBe(0)
    expect(await admin.messageCount(queue)).toBe(0)
    expect((await admin.drain(dead)).map((m) => m.properties.messageId)).toEqual(['refused'])
  }, 60_000) // rabbitmqctl takes seconds to start

  it('holds the nack of a message whose copy was refused behind the copies still awaiting their confirm', async () => {
    // A message comes back after its copy was refused, and in the same batch, before it, a new
    // rejected message is copied again (and refused again): the first one's nack must wait for
    // that copy's confirm, or the broker drops it with the channel while it is counted.
    const { queue, dead } = await admin.queueWithDeadLetters('classic', { 'x-max-priority': 10 })
    const internal = await admin.refusingExchange()
    const channel = admin.channel as ConfirmChannel
    const publish = async (n: string, priority: number) => {
      channel.publish('', queue, Buffer.from(JSON.stringify({ n, bad: true })), {
        messageId: `m-${n}`,
        priority,
      })
      await channel.waitForConfirms()
    }
    await publish('A', 0)
    const warnings: string[] = []
    const source = amqpSource({
      url: BROKER_URL,
      queue,
      prefetch: 2,
      batchSize: 2,
      deadLetterExchange: internal,
      reconnectInitialDelayMs: 800,
      reconnectMaxDelayMs: 800,
      onWarning: (w) => warnings.push(w),
    })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('rabbit', source)
      .sink('out', ['rabbit'], memory({ outcome: () => 'rejected' }))
      .build()
    await topology.start()
    await vi.waitFor(() => expect(warnings.some((w) => w.includes('refused a copy'))).toBe(true), {
      timeout: 10_000,
      interval: 20,
    })
    await publish('C', 9) // delivered before A when the source reconnects (higher priority)
    await vi.waitFor(
      async () => {
        expect(await admin.messageCount(dead)).toBe(2)
        expect(await admin.messageCount(queue)).toBe(0)
        expect(source.counters.inFlight).toBe(0)
      },
      { timeout: 15_000, interval: 50 },
    )
    await topology.stop()
    // Each message was refused once, then left by a nack the broker kept: two of each.
    expect(warnings.filter((w) => w.includes('refused a copy'))).toHaveLength(2)
    expect(source.counters.rejected).toBe(2)
  }, 30_000)

  it('fails its run with an AmqpError naming the component and the server when the credentials are refused', async () => {
    const source: AmqpSource = amqpSource({ url: 'amqp://guest:wrong@127.0.0.1:5672', queue: 'whatever' })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('orders', source)
      .sink('out', ['orders'], memory())
      .build()
    const errors: LifecycleEvent[] = []
    topology.lifecycle.subscribe((fact) => {
      if (fact.type === 'component_error') errors.push(fact)
    })
    await topology.start()
    await topology.done
    expect(errors).toHaveLength(1)
    const cause = (errors[0] as { cause: unknown }).cause
    expect(cause).toBeInstanceOf(AmqpError)
    expect((cause as AmqpError).code).toBe('AMQP_CONNECT_FAILED')
    expect((cause as AmqpError).message).toMatch(
      /^orders \(url\): cannot connect to amqp:\/\/guest@127\.0\.0\.1:5672: .*ACCESS.REFUSED/,
    )
    expect((cause as AmqpError).message).not.toContain('wrong')
  })

  it('a queue deleted under a running source (the server cancels its consumer): what the pipeline held is never acked, reconnects retry until the queue is back, and a stop while they fail ends the run', async () => {
    const { queue } = await admin.queueWithDeadLetters()
    const warnings: string[] = []
    let release: (() => void) | undefined
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    let writes = 0
    const sink = memory({
      beforeWrite: async () => {
        if (++writes === 1) await held
      },
    })
    const source = amqpSource({
      url: BROKER_URL,
      queue,
      batchSize: 1,
      reconnectInitialDelayMs: 20,
      reconnectMaxDelayMs: 50,
      onWarning: (message) => warnings.push(message),
    })
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    const errors: LifecycleEvent[] = []
    topology.lifecycle.subscribe((fact) => {
      if (fact.type === 'component_error') errors.push(fact)
    })
    await topology.start()
    const failedReconnects = (): string[] =>
      warnings.filter((w) => /reconnect attempt \d+ .* failed: .*cannot be consumed: .*NOT_FOUND/.test(w))
    try {
      await admin.publish(queue, [{ n: 1 }])
      await vi.waitFor(() => expect(writes).toBe(1), { timeout: 5000, interval: 10 })
      await admin.channel.deleteQueue(queue)
      await vi.waitFor(() => expect(failedReconnects().length).toBeGreaterThanOrEqual(2), {
        timeout: 10_000,
        interval: 10,
      })
      expect(warnings[0]).toBe(
        `in: lost the connection to the broker (the server cancelled the consumer of queue ${queue}); reconnecting`,
      )
      // Delivered downstream after its channel died: nothing to ack it on, never counted acked.
      release?.()
      await vi.waitFor(() => expect(source.counters.abandoned).toBe(1), { timeout: 5000, interval: 10 })
      expect(source.counters.acked).toBe(0)
      await admin.channel.assertQueue(queue, { durable: false })
      await admin.publish(queue, [{ n: 2 }])
      await vi.waitFor(() => expect(source.counters.acked).toBe(1), { timeout: 10_000, interval: 10 })
      expect(source.counters.reconnects).toBe(1)
      // Gone again: a stop while its reconnects fail ends the run, with no error of the source.
      await admin.channel.deleteQueue(queue)
      const before = failedReconnects().length
      await vi.waitFor(() => expect(failedReconnects().length).toBeGreaterThan(before), {
        timeout: 10_000,
        interval: 10,
      })
    } finally {
      release?.()
      await topology.stop()
    }
    expect(errors).toEqual([])
    expect(sink.events.map(({ _amqp, ...rest }) => rest)).toEqual([{ n: 1 }, { n: 2 }])
  })

  it('fails its run with AMQP_DECLARATION_FAILED naming the queue when it does not exist (not the url: the broker was reached)', async () => {
    const source = amqpSource({ url: BROKER_URL, queue: 'ackline-test-no-such-queue' })
    const run = source.run({
      id: 'in',
      acknowledgements: true,
      signal: new AbortController().signal,
      send: () => Promise.reject(new Error('unused')),
      sendEvents: () => Promise.resolve(),
    })
    const error: unknown = await run.catch((e: unknown) => e)
    expect(error).toBeInstanceOf(AmqpError)
    expect((error as AmqpError).code).toBe('AMQP_DECLARATION_FAILED')
    expect((error as AmqpError).field).toBe('queue')
    expect((error as AmqpError).message).toMatch(
      /^in \(queue\): the queue 'ackline-test-no-such-queue' cannot be consumed: .*NOT_FOUND/,
    )
  })
})
