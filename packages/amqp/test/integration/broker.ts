// Shared by the integration, crash and bench runs: the broker's URL, whether it is reachable
// (under CI=true an unreachable broker is an error, never a skip), unique names, and a plain
// amqplib connection for arranging and inspecting queues.
import { execFile } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { createConnection, createServer, type Socket } from 'node:net'
import { type TcpProxy, type TcpProxyOptions, tcpProxy } from '@ackline/testkit'
import { type Channel, type ChannelModel, connect } from 'amqplib'

export const BROKER_URL = process.env.ACKLINE_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672'

/**
 * A TCP proxy in front of the broker at `BROKER_URL`, for tests that cut a client's connection or
 * watch its frames, and the URL (same credentials and vhost) that reaches the broker through it.
 */
export async function brokerProxy(
  onData?: TcpProxyOptions['onData'],
): Promise<{ readonly proxy: TcpProxy; readonly url: string }> {
  const broker = new URL(BROKER_URL)
  const proxy = await tcpProxy({
    target: { host: broker.hostname, port: Number(broker.port || 5672) },
    ...(onData === undefined ? {} : { onData }),
  })
  const credentials = broker.username === '' ? '' : `${broker.username}:${broker.password}@`
  return { proxy, url: `${broker.protocol}//${credentials}${proxy.address}${broker.pathname}` }
}

/** A TCP proxy in front of the broker that can stop forwarding its clients' bytes (a stalled network). */
export interface StallingProxy {
  /** The URL (same credentials and vhost) that reaches the broker through the proxy. */
  readonly url: string
  /** Whether the proxy stalled (by `stall()` or by its `stallAfter`). */
  readonly stalled: boolean
  /** How many client connections are open (the proxy saw neither side close). */
  readonly open: number
  /** Stops reading from every client: their sockets fill up and stop draining. */
  stall(): void
  /** Destroys every connection open now (both sides). */
  cut(): void
  close(): Promise<void>
}

/**
 * A {@link StallingProxy} in front of the broker at `BROKER_URL`. With `stallAfter`, it stalls by
 * itself right after passing on the first chunk from the broker for which `stallAfter` is true:
 * whatever a client sends once it has read that chunk never reaches the broker. `watch` sees each
 * chunk a client sends (`'up'`) before it is passed on, with the number of its connection (1 for
 * the first accepted), so a test can act at a point of the protocol.
 */
export async function stallingBrokerProxy(
  stallAfter?: (chunk: Buffer) => boolean,
  watch?: (direction: 'up', chunk: Buffer, connection: number) => void,
): Promise<StallingProxy> {
  const broker = new URL(BROKER_URL)
  const pairs = new Set<readonly [Socket, Socket]>()
  let accepted = 0
  const server = createServer((client) => {
    const upstream = createConnection({ host: broker.hostname, port: Number(broker.port || 5672) })
    const pair = [client, upstream] as const
    pairs.add(pair)
    const connection = ++accepted
    // Before pipe's own listener, so the test acts before the broker can answer the chunk.
    if (watch !== undefined) client.on('data', (chunk: Buffer) => watch('up', chunk, connection))
    const drop = (): void => {
      pairs.delete(pair)
      client.destroy()
      upstream.destroy()
    }
    client.on('error', drop).on('close', drop)
    upstream.on('error', drop).on('close', drop)
    client.pipe(upstream)
    upstream.pipe(client)
    // After pipe's own listener, so the chunk has been written to the client before the stall.
    if (stallAfter !== undefined)
      upstream.on('data', (chunk: Buffer) => {
        if (!stalled && stallAfter(chunk)) stall()
      })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  const credentials = broker.username === '' ? '' : `${broker.username}:${broker.password}@`
  let stalled = false
  const stall = (): void => {
    stalled = true
    for (const [client, upstream] of pairs) {
      client.unpipe(upstream)
      client.pause()
    }
  }
  const cut = (): void => {
    for (const [client, upstream] of pairs) {
      client.destroy()
      upstream.destroy()
    }
    pairs.clear()
  }
  return {
    url: `${broker.protocol}//${credentials}127.0.0.1:${port}${broker.pathname}`,
    get stalled() {
      return stalled
    },
    get open() {
      return pairs.size
    },
    stall,
    cut,
    close() {
      cut()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** A TCP proxy in front of the broker that can close its clients' connections the way the broker does. */
export interface ClosingProxy {
  /** The URL (same credentials and vhost) that reaches the broker through the proxy. */
  readonly url: string
  /**
   * Sends every client a Connection.Close from the broker (reply code 320, CONNECTION_FORCED, as
   * a broker shutting down or `rabbitmqctl close_connection` sends), then ends both sides.
   */
  forceClose(text: string): void
  /** Destroys every connection open now (both sides), as a broken link would. */
  cut(): void
  close(): Promise<void>
}

/** A {@link ClosingProxy} in front of the broker at `BROKER_URL`. */
export async function closingBrokerProxy(): Promise<ClosingProxy> {
  const broker = new URL(BROKER_URL)
  const pairs = new Set<readonly [Socket, Socket]>()
  const server = createServer((client) => {
    const upstream = createConnection({ host: broker.hostname, port: Number(broker.port || 5672) })
    const pair = [client, upstream] as const
    pairs.add(pair)
    const drop = (): void => {
      pairs.delete(pair)
      client.destroy()
      upstream.destroy()
    }
    client.on('error', drop).on('close', drop)
    upstream.on('error', drop).on('close', drop)
    client.pipe(upstream)
    upstream.pipe(client)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  const credentials = broker.username === '' ? '' : `${broker.username}:${broker.password}@`
  const cut = (): void => {
    for (const [client, upstream] of [...pairs]) {
      client.destroy()
      upstream.destroy()
    }
    pairs.clear()
  }
  return {
    url: `${broker.protocol}//${credentials}127.0.0.1:${port}${broker.pathname}`,
    forceClose(text) {
      // Connection.Close (class 10, method 50) on channel 0: reply code, reply text, class and method 0.
      const reply = Buffer.from(text, 'utf8')
      const payload = Buffer.alloc(11 + reply.length)
      payload.writeUInt16BE(10, 0)
      payload.writeUInt16BE(50, 2)
      payload.writeUInt16BE(320, 4)
      payload.writeUInt8(reply.length, 6)
      reply.copy(payload, 7)
      const header = Buffer.alloc(7)
      header.writeUInt8(1, 0)
      header.writeUInt32BE(payload.length, 3)
      const frame = Buffer.concat([header, payload, Buffer.from([0xce])])
      for (const [client, upstream] of [...pairs]) {
        pairs.delete([client, upstream])
        upstream.unpipe(client)
        upstream.destroy()
        client.end(frame)
      }
    },
    cut,
    close() {
      cut()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/**
 * A TCP proxy in front of the broker that holds what the broker sends from the first chunk
 * `holdFrom` picks (that chunk included) until a chunk `releaseOn` picks passes, either way: the
 * bytes held, with that chunk when it comes from the broker, then reach the client in one write
 * (so it reads them together), before a chunk from the client is passed on to the broker. One
 * hold per proxy; later chunks pass at once.
 */
export interface HoldingProxy {
  /** The URL (same credentials and vhost) that reaches the broker through the proxy. */
  readonly url: string
  /** Whether the hold began, and whether it ended. */
  readonly state: 'waiting' | 'holding' | 'released'
  close(): Promise<void>
}

/** A {@link HoldingProxy} in front of the broker at `BROKER_URL`. */
export async function holdingBrokerProxy(
  holdFrom: (chunk: Buffer) => boolean,
  releaseOn: (direction: 'up' | 'down', chunk: Buffer) => boolean,
): Promise<HoldingProxy> {
  const broker = new URL(BROKER_URL)
  const sockets = new Set<Socket>()
  let state: HoldingProxy['state'] = 'waiting'
  let held: Buffer[] = []
  const server = createServer((client) => {
    const upstream = createConnection({ host: broker.hostname, port: Number(broker.port || 5672) })
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.on('error', () => undefined).on('close', () => sockets.delete(socket))
    }
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
    const release = (): void => {
      state = 'released'
      client.write(Buffer.concat(held))
      held = []
    }
    client.on('data', (chunk: Buffer) => {
      if (state === 'holding' && releaseOn('up', chunk)) release()
      upstream.write(chunk)
    })
    upstream.on('data', (chunk: Buffer) => {
      if (state === 'waiting' && holdFrom(chunk)) state = 'holding'
      if (state !== 'holding') {
        client.write(chunk)
        return
      }
      held.push(chunk)
      if (releaseOn('down', chunk)) release()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  const credentials = broker.username === '' ? '' : `${broker.username}:${broker.password}@`
  return {
    url: `${broker.protocol}//${credentials}127.0.0.1:${port}${broker.pathname}`,
    get state() {
      return state
    },
    close() {
      for (const socket of sockets) socket.destroy()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** Whether a chunk holds an AMQP method frame of `method` (class << 16 | method id), on any channel. */
export function hasMethod(chunk: Buffer, method: number): boolean {
  for (let i = 0; i + 11 <= chunk.length; i++) {
    if (chunk[i] === 1 && chunk.readUInt32BE(i + 7) === method) return true
  }
  return false
}

/** Whether a chunk holds an AMQP heartbeat frame (type 8, channel 0, no payload). */
export function hasHeartbeat(chunk: Buffer): boolean {
  return chunk.includes(Buffer.from([8, 0, 0, 0, 0, 0, 0, 0xce]))
}

/** AMQP method ids (class << 16 | method) that tests look for on the wire. */
export const Method = {
  connectionOpen: 0x000a0028,
  channelOpen: 0x0014000a,
  channelOpenOk: 0x0014000b,
  basicPublish: 0x003c0028,
  basicAck: 0x003c0050,
  basicQos: 0x003c000a,
  basicConsume: 0x003c0014,
  basicCancelOk: 0x003c001f,
} as const

/** Whether the broker answers; throws under CI, where a missing broker must fail the run. */
export async function brokerAvailable(): Promise<boolean> {
  try {
    const model = await connect(BROKER_URL)
    await model.close()
    return true
  } catch (error) {
    const reason = `RabbitMQ is not reachable at ${BROKER_URL}: ${String(error)}`
    if (process.env.CI === 'true') throw new Error(`${reason} (CI=true: the broker is required)`)
    console.warn(`\n!!! SKIPPING the RabbitMQ integration tests: ${reason}\n`)
    return false
  }
}

/** A queue/exchange name no other run uses. */
export function uniqueName(prefix: string): string {
  return `ackline-test-${prefix}-${randomUUID().slice(0, 8)}`
}

/** A second user of the broker, made for a test (see {@link brokerUser}). */
export interface BrokerUser {
  /** `BROKER_URL` with this user's credentials. */
  readonly url: string
  readonly name: string
  /** Deletes the user. */
  remove(): Promise<void>
}

/**
 * A user of its own on the broker, with every permission on the vhost of `BROKER_URL` (and, with
 * `limits.maxConnections`, that many connections at most), made with `rabbitmqctl` (the broker on
 * this machine): `undefined` when that cannot be done (no `rabbitmqctl`, a broker elsewhere), and
 * the test that needs it says so and skips; under CI=true it throws instead, as an unreachable
 * broker does.
 */
export async function brokerUser(limits?: {
  readonly maxConnections?: number
}): Promise<BrokerUser | undefined> {
  const ctl = (...args: string[]): Promise<void> =>
    new Promise<void>((resolve, reject) =>
      execFile('rabbitmqctl', args, { timeout: 30_000 }, (error) =>
        error === null ? resolve() : reject(error),
      ),
    )
  const broker = new URL(BROKER_URL)
  const vhost = decodeURIComponent(broker.pathname.slice(1)) || '/'
  const name = uniqueName('user')
  const password = randomUUID()
  try {
    await ctl('add_user', name, password)
    await ctl('set_permissions', '-p', vhost, name, '.*', '.*', '.*')
    if (limits?.maxConnections !== undefined)
      await ctl('set_user_limits', name, JSON.stringify({ 'max-connections': limits.maxConnections }))
  } catch (error) {
    await ctl('delete_user', name).catch(() => undefined)
    const reason = `cannot make a second broker user with rabbitmqctl: ${String(error)}`
    // CI runs beside the broker, whose rabbitmqctl works: a failure there is a broken machine, not a skip.
    if (process.env.CI === 'true') throw new Error(`${reason} (CI=true: the test that needs it must run)`)
    console.warn(`\n!!! ${reason}\n`)
    return undefined
  }
  broker.username = name
  broker.password = password
  return { url: broker.toString(), name, remove: () => ctl('delete_user', name).catch(() => undefined) }
}

/** The properties {@link enqueueInsideBroker} can give a message. */
export interface InsideProperties {
  readonly messageId?: string
  readonly replyTo?: string
}

/**
 * Puts one message into `queue` (on the vhost of `BROKER_URL`) from inside the broker, with
 * `rabbitmqctl eval` (the broker on this machine), past the checks the broker makes on a client's
 * `basic.publish`: a test gets a message into a queue that no client could publish (a reply-to of
 * `amq.rabbitmq.reply-to`, which the broker refuses or rewrites), without changing any setting of
 * the broker, which the other test files, run at the same time, share. `false` when that cannot be
 * done (no `rabbitmqctl`, a broker elsewhere), and the test says so and skips; under CI=true it
 * throws instead, as an unreachable broker does.
 */
export async function enqueueInsideBroker(
  queue: string,
  body: object,
  properties: InsideProperties,
): Promise<boolean> {
  // Base64 in Erlang binaries: no quoting of names, bodies or properties to get wrong.
  const binary = (text: string): string => `base64:decode(<<"${Buffer.from(text).toString('base64')}">>)`
  const vhost = decodeURIComponent(new URL(BROKER_URL).pathname.slice(1)) || '/'
  const props = [
    ...(properties.messageId === undefined ? [] : [`{message_id, ${binary(properties.messageId)}}`]),
    ...(properties.replyTo === undefined ? [] : [`{reply_to, ${binary(properties.replyTo)}}`]),
  ]
  const expression = `rabbit_basic:publish(rabbit_misc:r(${binary(vhost)}, exchange, <<>>), ${binary(queue)}, [${props.join(', ')}], ${binary(JSON.stringify(body))}).`
  try {
    const answer = await new Promise<string>((resolve, reject) =>
      execFile('rabbitmqctl', ['eval', expression], { timeout: 30_000 }, (error, stdout) =>
        error === null ? resolve(stdout.trim()) : reject(error),
      ),
    )
    // 3.10 answers `ok`; a later broker may answer `{ok, ...}`. Anything else is a failure.
    if (answer !== 'ok' && !answer.startsWith('{ok,')) throw new Error(`rabbitmqctl eval answered ${answer}`)
    return true
  } catch (error) {
    const reason = `cannot put a message into a queue with rabbitmqctl eval: ${String(error)}`
    if (process.env.CI === 'true') throw new Error(`${reason} (CI=true: the test that needs it must run)`)
    console.warn(`\n!!! ${reason}\n`)
    return false
  }
}

/** A plain connection for the test's own declarations, publishes and checks. */
export class Admin {
  private constructor(
    readonly model: ChannelModel,
    readonly channel: Channel,
  ) {}

  static async open(): Promise<Admin> {
    const model = await connect(BROKER_URL)
    return new Admin(model, await model.createConfirmChannel())
  }

  readonly queues: string[] = []
  readonly exchanges: string[] = []

  /** A queue that dead-letters into a fanout exchange feeding a second queue; both deleted by close(). */
  async queueWithDeadLetters(
    kind: 'classic' | 'quorum' = 'classic',
    /** More queue arguments (`x-max-priority`, say). */
    extra: Record<string, unknown> = {},
  ): Promise<{ queue: string; dead: string }> {
    const queue = uniqueName('q')
    const dlx = uniqueName('dlx')
    const dead = uniqueName('dead')
    await this.channel.assertExchange(dlx, 'fanout', { durable: false, autoDelete: false })
    this.exchanges.push(dlx)
    await this.channel.assertQueue(dead, { durable: kind === 'quorum' })
    this.queues.push(dead)
    await this.channel.bindQueue(dead, dlx, '')
    await this.channel.assertQueue(queue, {
      durable: kind === 'quorum',
      arguments: {
        'x-dead-letter-exchange': dlx,
        ...(kind === 'quorum' ? { 'x-queue-type': 'quorum' } : {}),
        ...extra,
      },
    })
    this.queues.push(queue)
    return { queue, dead }
  }

  /**
   * An exchange that exists (so a source's start-time check passes) but refuses every publish with
   * 403 ACCESS_REFUSED: an `internal` one. Deleted with the others.
   */
  async refusingExchange(): Promise<string> {
    const name = uniqueName('internal')
    await this.channel.assertExchange(name, 'fanout', { durable: false, internal: true })
    this.exchanges.push(name)
    return name
  }

  /**
   * A fanout exchange for a source's `deadLetterExchange` (`exchange`), and, unless `bound` is
   * false, a queue bound to it that receives the copies with their reasons (`queue`). Deleted
   * with the others.
   */
  async reasonsExchange(bound = true): Promise<{ exchange: string; queue: string }> {
    const exchange = uniqueName('reasons')
    await this.channel.assertExchange(exchange, 'fanout', { durable: false })
    this.exchanges.push(exchange)
    const queue = uniqueName('with-reasons')
    if (!bound) return { exchange, queue }
    await this.channel.assertQueue(queue, { durable: false })
    this.queues.push(queue)
    await this.channel.bindQueue(queue, exchange, '')
    return { exchange, queue }
  }

  /**
   * Publishes JSON bodies (or raw strings) to a queue through the default exchange, confirmed;
   * `messageId` names them (`undefined`: that one has none).
   */
  async publish(
    queue: string,
    bodies: readonly (object | string)[],
    messageId?: (i: number) => string | undefined,
  ): Promise<void> {
    const channel = this.channel as import('amqplib').ConfirmChannel
    bodies.forEach((body, i) => {
      const content = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body))
      const id = messageId?.(i)
      channel.publish(
        '',
        queue,
        content,
        id === undefined ? { persistent: true } : { persistent: true, messageId: id },
      )
    })
    await channel.waitForConfirms()
  }

  /** Takes every message now in `queue` (acking them). */
  async drain(queue: string): Promise<import('amqplib').GetMessage[]> {
    const out: import('amqplib').GetMessage[] = []
    for (;;) {
      const message = await this.channel.get(queue, { noAck: true })
      if (message === false) return out
      out.push(message)
    }
  }

  async messageCount(queue: string): Promise<number> {
    return (await this.channel.checkQueue(queue)).messageCount
  }

  async close(): Promise<void> {
    // A channel dies with the first failed operation: each deletion gets a fresh one.
    const remove = async (op: (channel: Channel) => Promise<unknown>): Promise<void> => {
      const channel = await this.model.createChannel().catch(() => undefined)
      if (channel === undefined) return
      await op(channel).catch(() => undefined)
      await channel.close().catch(() => undefined)
    }
    for (const queue of this.queues) await remove((channel) => channel.deleteQueue(queue))
    for (const exchange of this.exchanges) await remove((channel) => channel.deleteExchange(exchange))
    await this.model.close().catch(() => undefined)
  }
}

/**
 * A TCP proxy in front of the broker that, once `hold()` was called, passes the broker's publisher
 * confirms (`basic.ack` / `basic.nack`) to the client only when every message published so far is
 * confirmed, all in one chunk: the client then handles a whole window of confirms at once. It
 * counts, from the frames, the most messages ever unconfirmed: at each `basic.publish` it sees,
 * the publishes so far less the confirms it had passed on, which is never more than the client's
 * own count of unconfirmed messages then. One publishing channel per connection is assumed.
 */
export interface ConfirmHoldingProxy {
  /** The URL (same credentials and vhost) that reaches the broker through the proxy. */
  readonly url: string
  /** The most messages unconfirmed at once, as seen on the wire. */
  readonly peakUnconfirmed: number
  /** Messages published, as seen on the wire. */
  readonly published: number
  /** From now on, hold the broker's bytes until every publish is confirmed. */
  hold(): void
  close(): Promise<void>
}

/** A {@link ConfirmHoldingProxy} in front of the broker at `BROKER_URL`. */
export async function confirmHoldingProxy(): Promise<ConfirmHoldingProxy> {
  const broker = new URL(BROKER_URL)
  const sockets = new Set<Socket>()
  let holding = false
  let published = 0
  let passedOn = 0
  let peak = 0
  const server = createServer((client) => {
    const upstream = createConnection({ host: broker.hostname, port: Number(broker.port || 5672) })
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.on('error', () => undefined).on('close', () => sockets.delete(socket))
    }
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
    const up = frameReader(8, (type, payload) => {
      if (type !== 1 || payload.readUInt32BE(0) !== 0x003c0028) return // basic.publish
      published++
      peak = Math.max(peak, published - passedOn)
    })
    const confirmed = new Set<bigint>()
    let held: Buffer[] = []
    const down = frameReader(0, (type, payload) => {
      const method = type === 1 ? payload.readUInt32BE(0) : 0
      if (method !== 0x003c0050 && method !== 0x003c0078) return // basic.ack, basic.nack
      const tag = payload.readBigUInt64BE(4)
      if ((payload[12]! & 1) === 0) confirmed.add(tag)
      else for (let t = 1n; t <= tag; t++) confirmed.add(t)
    })
    client.on('data', (chunk: Buffer) => {
      up(chunk)
      upstream.write(chunk)
    })
    upstream.on('data', (chunk: Buffer) => {
      down(chunk)
      if (!holding) {
        passedOn = confirmed.size
        client.write(chunk)
        return
      }
      held.push(chunk)
      if (confirmed.size < published) return
      passedOn = confirmed.size
      client.write(Buffer.concat(held))
      held = []
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  const credentials = broker.username === '' ? '' : `${broker.username}:${broker.password}@`
  return {
    url: `${broker.protocol}//${credentials}127.0.0.1:${port}${broker.pathname}`,
    get peakUnconfirmed() {
      return peak
    },
    get published() {
      return published
    },
    hold() {
      holding = true
    },
    close() {
      for (const socket of sockets) socket.destroy()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** Reads AMQP frames from a byte stream (after `skip` bytes of protocol header) and hands each to `frame`. */
function frameReader(skip: number, frame: (type: number, payload: Buffer) => void): (chunk: Buffer) => void {
  let buffer = Buffer.alloc(0)
  let left = skip
  return (chunk) => {
    buffer = Buffer.concat([buffer, chunk])
    if (left > 0) {
      const n = Math.min(left, buffer.length)
      buffer = buffer.subarray(n)
      left -= n
    }
    while (buffer.length >= 7) {
      const size = buffer.readUInt32BE(3)
      if (buffer.length < size + 8) return
      frame(buffer[0]!, buffer.subarray(7, 7 + size))
      buffer = buffer.subarray(size + 8)
    }
  }
}
