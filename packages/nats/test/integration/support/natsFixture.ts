// What the integration tests share: the server's address, whether it answers (under CI=true an
// unreachable server fails the tests; elsewhere they skip with a loud reason), unique names, and
// streams that are deleted afterwards.
import { randomUUID } from 'node:crypto'
import { createConnection } from 'node:net'
import { type JetStreamManager, jetstream, jetstreamManager, RetentionPolicy } from '@nats-io/jetstream'
import { connect, type NatsConnection } from '@nats-io/transport-node'

export const NATS_HOST = process.env.NATS_HOST ?? '127.0.0.1'
export const NATS_PORT = Number(process.env.NATS_PORT ?? 4222)
export const NATS_URL = `${NATS_HOST}:${NATS_PORT}`

/** Whether the server accepts a TCP connection within a second. */
export function reachable(): Promise<boolean> {
  return reachableAt(NATS_HOST, NATS_PORT)
}

/** Whether `host:port` accepts a TCP connection within a second. */
export function reachableAt(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host, port })
    const done = (ok: boolean): void => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(1000, () => done(false))
    socket.once('connect', () => done(true))
    socket.once('error', () => done(false))
  })
}

/**
 * Whether to skip: never under CI (the tests then fail on the unreachable server), else when the
 * server does not answer, said loudly.
 */
export async function skipWithoutNats(file: string): Promise<boolean> {
  if (await reachable()) return false
  if (process.env.CI === 'true') return false
  console.warn(
    `\n*** ${file}: SKIPPED: no NATS server at ${NATS_URL} (see /work/shared/services.md to start one; under CI=true this fails) ***\n`,
  )
  return true
}

/** A name no other test run uses (NATS names: letters, digits, dash, underscore). */
export function uniqueName(prefix: string): string {
  return `${prefix}_${randomUUID().replaceAll('-', '').slice(0, 12)}`
}

/** An admin connection for a test file: makes streams, publishes, and deletes them all at the end. */
export class NatsAdmin {
  readonly streams: string[] = []
  private constructor(
    readonly nc: NatsConnection,
    readonly jsm: JetStreamManager,
  ) {}

  static async open(): Promise<NatsAdmin> {
    const nc = await connect({ servers: NATS_URL })
    return new NatsAdmin(nc, await jetstreamManager(nc))
  }

  /** A new stream capturing `<name>.>`, deleted by `close()`. */
  async stream(
    prefix: string,
    options: { duplicateWindowMs?: number; workQueue?: boolean; maxMsgSize?: number } = {},
  ): Promise<string> {
    const name = uniqueName(prefix)
    await this.jsm.streams.add({
      name,
      subjects: [`${name}.>`],
      ...(options.duplicateWindowMs !== undefined
        ? { duplicate_window: options.duplicateWindowMs * 1e6 }
        : {}),
      ...(options.workQueue === true ? { retention: RetentionPolicy.Workqueue } : {}),
      ...(options.maxMsgSize !== undefined ? { max_msg_size: options.maxMsgSize } : {}),
    })
    this.streams.push(name)
    return name
  }

  /** Publishes `{ n: i }` for i in 0..count-1 (or the given payloads), awaiting each PubAck. */
  async publish(subject: string, payloads: readonly string[]): Promise<void> {
    const js = jetstream(this.nc)
    // One at a time, so stream sequence i+1 holds payload i.
    for (const p of payloads) await js.publish(subject, p)
  }

  /** Every message the stream holds, in order, as text. */
  async contents(
    stream: string,
  ): Promise<{ seq: number; subject: string; data: string; msgId: string | undefined }[]> {
    const info = await this.jsm.streams.info(stream)
    const out = []
    for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
      try {
        const m = await this.jsm.streams.getMessage(stream, { seq })
        if (m === null) continue
        out.push({
          seq,
          subject: m.subject,
          data: m.string(),
          msgId: m.header?.get('Nats-Msg-Id') || undefined,
        })
      } catch {
        // A deleted sequence (work queue retention removes acked messages).
      }
    }
    return out
  }

  async close(): Promise<void> {
    for (const stream of this.streams) await this.jsm.streams.delete(stream).catch(() => undefined)
    await this.nc.close()
  }
}

/** Polls `condition` (a state the program reported) until it holds, or throws after `timeoutMs` saying what it waited for. */
export async function until(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 15_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
