// Reads the AMQP 0-9-1 frames passing through a test's TCP proxy and records, per message body,
// what the client told the broker: `basic.ack`, or `basic.nack` / `basic.reject` (with or without
// requeue). The test then knows what the broker heard, not what the source says it did.
import type { TcpDirection } from '@ackline/testkit'

const FRAME_METHOD = 1
const FRAME_HEADER = 2
const FRAME_BODY = 3
const FRAME_END = 0xce
const BASIC = 60
const DELIVER = 60
const ACK = 80
const REJECT = 90
const NACK = 120

/** What the client answered for one delivery. */
export type Settlement = 'ack' | 'requeue' | 'dead-letter'

/** One delivery seen on the wire and the client's answer to it, if any yet. */
export interface TappedDelivery {
  readonly body: string
  settlement: Settlement | undefined
}

interface Stream {
  buffer: Buffer
  /** The client's first eight bytes are the protocol header, not a frame. */
  headerLeft: number
}

/** Per connection and channel: the delivery whose content frames are still arriving. */
interface Incoming {
  readonly delivery: TappedDelivery
  size: number
  chunks: Buffer[]
  received: number
}

export class AckTap {
  /** Every delivery, in the order the broker sent them. */
  readonly deliveries: TappedDelivery[] = []
  readonly #byTag = new Map<string, TappedDelivery>()
  readonly #streams = new Map<string, Stream>()
  readonly #incoming = new Map<string, Incoming>()

  /** Pass to `tcpProxy({ onData })`. */
  readonly onData = (direction: TcpDirection, chunk: Buffer, connection: number): void => {
    const key = `${connection}:${direction}`
    let stream = this.#streams.get(key)
    if (stream === undefined) {
      stream = { buffer: Buffer.alloc(0), headerLeft: direction === 'up' ? 8 : 0 }
      this.#streams.set(key, stream)
    }
    stream.buffer = Buffer.concat([stream.buffer, chunk])
    if (stream.headerLeft > 0) {
      const skip = Math.min(stream.headerLeft, stream.buffer.length)
      stream.buffer = stream.buffer.subarray(skip)
      stream.headerLeft -= skip
    }
    while (stream.buffer.length >= 7) {
      const size = stream.buffer.readUInt32BE(3)
      if (stream.buffer.length < size + 8) break
      const type = stream.buffer[0]!
      const channel = stream.buffer.readUInt16BE(1)
      if (stream.buffer[7 + size] !== FRAME_END) throw new Error('AckTap: lost the frame boundary')
      this.#frame(direction, connection, channel, type, stream.buffer.subarray(7, 7 + size))
      stream.buffer = stream.buffer.subarray(size + 8)
    }
  }

  /** The records (parsed bodies) whose last answer is `settlement`. */
  records(...settlements: Settlement[]): object[] {
    return this.deliveries
      .filter((d) => d.settlement !== undefined && settlements.includes(d.settlement))
      .map((d) => JSON.parse(d.body) as object)
  }

  #frame(direction: TcpDirection, connection: number, channel: number, type: number, payload: Buffer): void {
    const key = `${connection}:${channel}`
    if (direction === 'down') {
      if (type === FRAME_METHOD && payload.readUInt16BE(0) === BASIC && payload.readUInt16BE(2) === DELIVER) {
        const consumerTagLength = payload[4]!
        const tag = payload.readBigUInt64BE(5 + consumerTagLength)
        const delivery: TappedDelivery = { body: '', settlement: undefined }
        this.#byTag.set(`${key}:${tag}`, delivery)
        this.#incoming.set(key, { delivery, size: -1, chunks: [], received: 0 })
      } else if (type === FRAME_HEADER) {
        const incoming = this.#incoming.get(key)
        if (incoming !== undefined) {
          incoming.size = Number(payload.readBigUInt64BE(4))
          if (incoming.size === 0) this.#complete(key, incoming)
        }
      } else if (type === FRAME_BODY) {
        const incoming = this.#incoming.get(key)
        if (incoming !== undefined) {
          incoming.chunks.push(Buffer.from(payload))
          incoming.received += payload.length
          if (incoming.received >= incoming.size) this.#complete(key, incoming)
        }
      }
      return
    }
    if (type !== FRAME_METHOD || payload.readUInt16BE(0) !== BASIC) return
    const method = payload.readUInt16BE(2)
    if (method !== ACK && method !== NACK && method !== REJECT) return
    const tag = payload.readBigUInt64BE(4)
    const bits = payload[12]!
    const multiple = method !== REJECT && (bits & 1) === 1
    const requeue = method === NACK ? (bits & 2) === 2 : method === REJECT ? (bits & 1) === 1 : false
    const settlement: Settlement = method === ACK ? 'ack' : requeue ? 'requeue' : 'dead-letter'
    if (!multiple) {
      const delivery = this.#byTag.get(`${key}:${tag}`)
      if (delivery !== undefined) delivery.settlement = settlement
      return
    }
    for (const [k, delivery] of this.#byTag) {
      const [c, ch, t] = k.split(':')
      if (`${c}:${ch}` === key && BigInt(t!) <= tag && delivery.settlement === undefined)
        delivery.settlement = settlement
    }
  }

  #complete(key: string, incoming: Incoming): void {
    // `body` is set once: deliveries are recorded in arrival order before their content is in.
    ;(incoming.delivery as { body: string }).body = Buffer.concat(incoming.chunks).toString('utf8')
    this.deliveries.push(incoming.delivery)
    this.#incoming.delete(key)
  }
}
