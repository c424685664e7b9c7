/**
 * One AMQP connection with one channel, reconnected with back-off, counted in generations.
 *
 * Invariant: a generation is one connection and its one channel. It is live from the moment its
 * channel opened (a consumer's first deliveries may come while `setup` runs) until the connection
 * or the channel closes, then dead for good; a loss during `setup` fails that attempt, and is
 * reported once, as the attempt's failure, not also as a loss. A delivery tag
 * or a pending confirm belongs to the generation it came from and means nothing on any other, so
 * callers check `generation.live` before acking and settle what a dead generation held without
 * talking to the broker; a confirm that fails with its channel finds the generation dead already. After a loss the connection reconnects (exponential back-off, capped)
 * until `close()` (a caller may make a loss count as a later attempt, see `onLost`); only the first
 * connection fails loudly, so a wrong URL or refused credentials fail `start`/`run` at once
 * instead of retrying forever.
 */

import { unescape as unescapeQuery } from 'node:querystring'
import { MAX_TIMER_MS } from '@ackline/topology'
import { type Channel, type ChannelModel, type ConfirmChannel, connect, type SocketOptions } from 'amqplib'
import { z } from 'zod'
import { AmqpError } from '../AmqpError.js'

/** The options of the connection the source and the sink share: spread into both schemas. */
export const connectionOptions = {
  reconnectInitialDelayMs: z
    .number()
    .min(1)
    .default(100)
    .describe(
      'The first reconnect delay; doubles per attempt. At least 1 ms: from 0 it would never grow, and the reconnects would loop while the broker is away.',
    ),
  reconnectMaxDelayMs: z
    .number()
    .min(1)
    .default(10_000)
    .describe(
      'The longest reconnect delay. At least 1 ms: every delay is capped by it, and a cap of 0 would make the reconnects loop while the broker is away. At least reconnectInitialDelayMs, which it would cut silently.',
    ),
  heartbeatSeconds: z
    .int()
    .min(0)
    .max(65_535)
    .default(15)
    .describe(
      'AMQP heartbeat; 0 turns it off. At most 65535, what AMQP carries: the broker takes the smaller of its own and this one.',
    ),
  connectTimeoutMs: z
    .number()
    .min(1)
    .max(MAX_TIMER_MS)
    .default(10_000)
    .describe(
      "How long a connect attempt (TCP, TLS, AMQP handshake) may wait for the server before it fails, and, once connected with heartbeats off (heartbeatSeconds 0, or the url's own heartbeat=0, which wins), how long the channel's setup (opening it, the queue or exchange check and declarations, qos, consume) may take (the first attempt fails the source's run or the sink's start, a later one is retried with back-off): nothing else notices a broker that stops answering then. With heartbeats on the setup has no such bound: a broker silent for two to three heartbeat intervals fails it, and one slow but alive is waited for.",
    ),
  closeTimeoutMs: z
    .number()
    .min(1)
    .max(MAX_TIMER_MS)
    .default(5_000)
    .describe(
      "How long a stop waits for the broker to answer the consumer's cancel (the source), the next confirm of a dead-letter copy while copies await theirs (the source; what is unconfirmed is then not acked, so the broker redelivers it) and the connection's close before it cuts the connection: with heartbeatSeconds 0, a broker that stops answering would otherwise hold the stop for ever.",
    ),
} as const

/** One connection + channel, as it lived. */
export interface Generation<C extends Channel> {
  /** 1 for the first connection, +1 for each reconnect. */
  readonly id: number
  readonly channel: C
  /** Whether the connection and channel are still open: acks and publishes are only valid then. */
  readonly live: boolean
}

/** The reconnect back-off. */
export interface Backoff {
  readonly initialDelayMs: number
  readonly maxDelayMs: number
}

/** What {@link Connection} needs. */
export interface ConnectionOptions<C extends Channel> {
  readonly url: string
  /** The component named in errors (its id, or its kind before it has one). */
  readonly component: string
  /** Opens the channel of a new connection (a plain or a confirm channel). */
  readonly openChannel: (model: ChannelModel) => Promise<C>
  /** Prepares a fresh channel (QoS, declarations, consumers); a throw fails that attempt. */
  readonly setup: (generation: Generation<C>) => Promise<void>
  /**
   * Told once per generation that it died, before any reconnect attempt. It may return the attempt
   * the reconnect counts as (default 1: after `initialDelayMs`): a caller that knows the loss will
   * recur as soon as it reconnects (the broker refused what it published) returns a higher one, so
   * the reconnects back off instead of looping. `duringSetup`: the loss came while `setup` ran;
   * that attempt then fails and is reported (and retried) as such, so the caller should settle
   * what the generation held but not warn of the loss as well.
   */
  readonly onLost: (generation: Generation<C>, error: Error, duringSetup: boolean) => number | undefined
  /** Told when a reconnect attempt failed (it will try again). */
  readonly onWarning: (message: string) => void
  /**
   * What those warnings begin with, as the component's own warnings do (`amqp sink`); default
   * `component`.
   */
  readonly warnAs?: string
  readonly backoff: Backoff
  readonly heartbeatSeconds: number
  /**
   * How long a connect attempt (TCP, TLS and the AMQP handshake) may go without the server
   * answering before it fails, and then, when the negotiated heartbeat is 0, how long opening the
   * channel and `setup` may take: a server that accepts the connection and never speaks (a proxy
   * with no backend), or a broker that stops answering after the handshake with heartbeats off,
   * must fail the attempt (the socket is cut), not hang it for ever. With heartbeats on, amqplib's
   * heartbeat timeout fails a silent broker's setup, and a slow one is waited for.
   */
  readonly connectTimeoutMs: number
  /**
   * How long a close (and a caller's last request at a stop, see {@link Connection.answered}) may
   * wait for the broker's answer before the connection is cut: with heartbeats off nothing else
   * notices a broker that stopped answering, and a stop waited for it for ever.
   */
  readonly closeTimeoutMs: number
}

/**
 * The server part of a URL, for messages: never the password. When the URL's last `@` is not
 * where its parse ends the user info (a password holding an unescaped `/`, `?` or `#`, whose
 * digits before it parse as a port: `amqp://user:1234/abc@broker/` is host `user`, port 1234),
 * everything before that `@` is hidden (`amqp://***@broker/`): a password may be anywhere in it.
 * So is it when nothing, or only a port and a path, follows that `@` (`amqp://u:p@h/v?x=@`): an
 * AMQP URI may leave its host empty for the default one, as one built from an unset variable
 * does, and `amqp://guest:12/ab@:5672/v` is user `guest`, password `12/ab`. A user that holds a
 * `:` once unescaped is hidden too (`amqp://***@broker:5672`): it is most likely a user and a
 * password percent-encoded as one (`guest%3As3cret`, which amqplib reads as user `guest:s3cret`).
 */
export function describeServer(url: string): string {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return '(unparseable url)'
  }
  if (credentialsMisparsed(url)) {
    return `${parsed.protocol}//***@${url.slice(url.lastIndexOf('@') + 1).replace(/[?#].*$/s, '')}`
  }
  // Leniently, as amqplib does: a '%' that begins no escape ('ops%team') is a '%', not a throw.
  const username = unescapeQuery(parsed.username)
  // A user holding a ':' is a user and password encoded as one ('guest%3As3cret'), most likely.
  const user = username === '' ? '' : username.includes(':') ? '***@' : `${username}@`
  return `${parsed.protocol}//${user}${parsed.hostname}:${parsed.port || (parsed.protocol === 'amqps:' ? '5671' : '5672')}${parsed.pathname === '/' ? '' : parsed.pathname}`
}

/**
 * Why a connect to `url` failed, for a message, and the cause to give the error that says so:
 * `error` as it is, unless the URL's credentials did not parse as such (see {@link describeServer}).
 * amqplib then connected to a host, port and virtual host read from the part `describeServer`
 * hides, a password maybe, and the failure's words would show it: the OS's (`connect ECONNREFUSED
 * 127.0.0.1:1234`, the password's digits as the port) as much as ours (the virtual host a broker
 * there refused, the rest of the password). Then only the system call and code of an OS error are
 * said (`connect ECONNREFUSED`), with what to do about such a URL, and the error is no cause (its
 * message and properties hold the address).
 */
export function connectFailure(
  url: string,
  error: unknown,
): { readonly reason: string; readonly cause: unknown } {
  if (!credentialsMisparsed(url)) {
    return { reason: error instanceof Error ? error.message : String(error), cause: error }
  }
  const { syscall, code } = (typeof error === 'object' && error !== null ? error : {}) as {
    syscall?: unknown
    code?: unknown
  }
  const what =
    typeof code === 'string' && /^E[A-Z0-9_]+$/.test(code)
      ? typeof syscall === 'string' && /^[a-z]+$/.test(syscall)
        ? `${syscall} ${code}`
        : code
      : 'the connect failed'
  return { reason: `${what}${MISPARSED}`, cause: undefined }
}

const MISPARSED =
  " (the server, port and virtual host it tried are not shown: the url's part before its last '@' was read as a server and a path, and may hold a password; if it is a user and password, percent-encode them, as encodeURIComponent does: '/' is %2F, '?' %3F, '#' %23)"

/**
 * Whether `url` parses, and its last `@` lies outside the user info its parse found: the part
 * before that `@` was then read as a server, a port and a path (a password holding a `/`, `?` or
 * `#` written as is), and none of those may be shown, whatever follows that `@` (an empty host
 * is one: see {@link describeServer}).
 */
function credentialsMisparsed(url: string): boolean {
  if (!URL.canParse(url)) return false
  const at = url.lastIndexOf('@')
  return at !== -1 && !inAuthority(url, at)
}

/**
 * Whether `index` of `url` lies in its authority: after the scheme's `//`, before the first `/`,
 * `?` or `#` that follows it (where `new URL` ends it for a non-special scheme such as amqp:).
 */
function inAuthority(url: string, index: number): boolean {
  // The scheme's '//' only: a '://' further on is in a path (amqp:://pw@h, user '', password '//pw').
  const start = /^[a-z][a-z0-9+.-]*:\/\//i.exec(url)?.[0].length
  if (start === undefined || index < start) return false
  const end = url.slice(start).search(/[/?#]/)
  return end === -1 || index < start + end
}

/** The delay before reconnect attempt `attempt` (1-based): doubling from `initialDelayMs`, capped by `maxDelayMs` and by the longest a timer waits. */
export function backoffDelay(backoff: Backoff, attempt: number): number {
  // Never longer than a timer waits: a longer delay would fire after 1 ms, a reconnect loop.
  return Math.min(MAX_TIMER_MS, backoff.maxDelayMs, backoff.initialDelayMs * 2 ** Math.min(30, attempt - 1))
}

/** The virtual host `url` opens, as amqplib reads it: its path without the leading '/', unescaped, else '/'. */
function vhostOf(url: string): string {
  try {
    return unescapeQuery(new URL(url).pathname.slice(1)) || '/'
  } catch {
    return '(unparseable url)'
  }
}

/** `url` with its `heartbeat` query parameter set, unless the URL sets one itself. */
function withHeartbeat(url: string, seconds: number): string {
  try {
    const parsed = new URL(url)
    if (!parsed.searchParams.has('heartbeat')) parsed.searchParams.set('heartbeat', String(seconds))
    return parsed.toString()
  } catch {
    return url
  }
}

/**
 * Closes a connection (its channel first, when given) and resolves once it is closed, by the
 * broker's answer or otherwise: amqplib settles the promise of `close()` only on the broker's
 * Close-Ok, so a link that dies after the Close was sent (a cut, a heartbeat timeout) left it
 * pending for ever, and a stop with it. A broker that does not answer within `timeoutMs`
 * (heartbeats off, nothing else would notice) has the socket cut under it.
 *
 * The channel is closed before the connection because amqplib writes each channel's frames
 * through a buffer of its own and interleaves those buffers on the socket: a Connection.Close
 * written right after acks went out before them, and RabbitMQ discards whatever follows a Close,
 * so the acks a stop had just sent (counted) were lost and their messages redelivered. The
 * channel's Close travels behind its acks, and the broker answers it once it has read them.
 */
function closeModel(model: ChannelModel, timeoutMs: number, channel?: Channel): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(timer)
      resolve()
    }
    const timer = setTimeout(() => {
      cutSocket(model, new Error('the broker did not answer in time (closeTimeoutMs)'))
      done()
    }, timeoutMs)
    model.once('close', done)
    const closeConnection = (): void => {
      model.close().then(done, done)
    }
    // A channel already closed rejects at once: the connection is closed all the same.
    if (channel === undefined) closeConnection()
    else channel.close().then(closeConnection, closeConnection)
  })
}

/**
 * Destroys the connection's socket, as a network failure would: amqplib then closes the connection
 * and fails what waited on it. Its typings do not show the socket (`connection.stream`).
 */
function cutSocket(model: ChannelModel, reason: Error): void {
  const { stream } = model.connection as unknown as { stream?: { destroy(error?: Error): void } }
  stream?.destroy(reason)
}

/**
 * The heartbeat interval the connection's handshake settled on, in seconds (0: off), which
 * amqplib's typings do not show (`connection.heartbeat`); taken as off when it cannot be read,
 * so that the setup is bounded then.
 */
function negotiatedHeartbeat(model: ChannelModel): number {
  const { heartbeat } = model.connection as unknown as { heartbeat?: unknown }
  return typeof heartbeat === 'number' ? heartbeat : 0
}

class LiveGeneration<C extends Channel> implements Generation<C> {
  live = false
  /** Whether its end was dealt with (reported as a loss, closed, or its attempt failed): once only. */
  ended = false
  /** Whether its `setup` still runs: a loss meanwhile is the attempt's failure, not a loss to report. */
  settingUp = true
  constructor(
    readonly id: number,
    readonly model: ChannelModel,
    readonly channel: C,
  ) {}
}

type State =
  | { readonly tag: 'idle' }
  | { readonly tag: 'open'; readonly generation: LiveGeneration<Channel> }
  | { readonly tag: 'waiting'; readonly timer: NodeJS.Timeout }
  | { readonly tag: 'closed' }

/** A reconnecting connection; see the module header. */
export class Connection<C extends Channel = Channel> {
  readonly #options: ConnectionOptions<C>
  #state: State = { tag: 'idle' }
  #nextId = 1
  /** Reconnects that succeeded. */
  reconnects = 0
  /** Aborts the socket of the connect under way, until it connected: a close cuts it. */
  #connecting: AbortController | undefined
  /** The connect attempt under way, if any: a close waits for it (see `#close`). */
  #attempting: Promise<unknown> | undefined
  /** Cuts the attempt under way once past its handshake and fails it at once (see `#close`). */
  #abandon: ((reason: Error) => void) | undefined

  constructor(options: ConnectionOptions<C>) {
    this.#options = options
  }

  /** The live generation, if any. */
  get current(): Generation<C> | undefined {
    const state = this.#state
    return state.tag === 'open' && state.generation.live
      ? (state.generation as unknown as Generation<C>)
      : undefined
  }

  /**
   * Connects for the first time. Rejects with an {@link AmqpError} (`AMQP_CONNECT_FAILED`) naming
   * the component and the server when the broker cannot be reached, refuses the credentials, or
   * the link is lost during the setup; an `AmqpError` the setup throws itself (a missing queue,
   * `AMQP_DECLARATION_FAILED`) is passed on as it is.
   */
  async open(): Promise<Generation<C>> {
    if (this.#state.tag !== 'idle') throw new Error('Connection.open called twice')
    try {
      return await this.#attempt()
    } catch (error) {
      await this.close()
      // A setup that names what is wrong (a missing dead-letter exchange) is passed on as it is.
      if (error instanceof AmqpError) throw error
      const server = describeServer(this.#options.url)
      const { reason, cause } = connectFailure(this.#options.url, error)
      throw new AmqpError('AMQP_CONNECT_FAILED', `cannot connect to ${server}: ${reason}`, {
        component: this.#options.component,
        field: 'url',
        ...(cause === undefined ? {} : { cause }),
      })
    }
  }

  /**
   * Stops reconnecting and closes the live connection, if any, its channel first (so the acks sent
   * before reach the broker), waiting at most `closeTimeoutMs` for the broker's answers before
   * cutting it. A connect attempt under way is cut (its socket, while it connects) or closes its
   * connection (while its channel opens), waited for within `closeTimeoutMs`, then cut: nothing of
   * it (no socket, no timer) is left once the close resolved. Idempotent.
   */
  close(): Promise<void> {
    return this.#close(this.#options.closeTimeoutMs)
  }

  /**
   * Whether `request` (a last request at a stop, such as the consumer's cancel) settled within
   * `closeTimeoutMs`. When it did not, the broker is taken for gone: the connection is closed and
   * cut at once, which also fails whatever else waited for its answers (pending confirms).
   */
  async answered(request: Promise<unknown>): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), this.#options.closeTimeoutMs)
    })
    const settled = request.then(
      () => true,
      () => true,
    )
    const inTime = await Promise.race([settled, late])
    clearTimeout(timer)
    if (!inTime) await this.cut()
    return inTime
  }

  /**
   * Takes the broker for gone (it left a caller's last requests at a stop unanswered for
   * `closeTimeoutMs`): stops reconnecting and closes and cuts the connection at once, which fails
   * whatever still waited for its answers (pending confirms). Idempotent.
   */
  cut(): Promise<void> {
    return this.#close(0)
  }

  async #close(timeoutMs: number): Promise<void> {
    const state = this.#state
    this.#state = { tag: 'closed' }
    switch (state.tag) {
      case 'closed':
        return
      case 'idle': {
        // A connect under way (a reconnect, or a first connect a stop raced): its socket is cut,
        // and an attempt past its connect (opening its channel) closes its connection, which is
        // waited for within `timeoutMs`. Left alone, the attempt went on after the close (until
        // connectTimeoutMs) and a broker that answered late had a connection opened after a stop.
        this.#connecting?.abort()
        const attempting = this.#attempting
        if (attempting === undefined) return
        if (timeoutMs > 0) {
          let timer: NodeJS.Timeout | undefined
          await Promise.race([
            attempting.catch(() => undefined),
            new Promise<void>((resolve) => {
              timer = setTimeout(resolve, timeoutMs)
            }),
          ])
          clearTimeout(timer)
        }
        // Still waiting for the broker (its channel's open, heartbeats off): cut now, not when its
        // own bound (connectTimeoutMs) ends it, which kept its socket and timer after the close.
        if (this.#attempting === attempting) this.#abandon?.(new Error('closed while connecting'))
        return
      }
      case 'waiting':
        clearTimeout(state.timer)
        return
      case 'open':
        state.generation.live = false
        state.generation.ended = true
        await closeModel(state.generation.model, timeoutMs, state.generation.channel)
        // A setup still waiting on a request the cut left pending ends now, not at connectTimeoutMs.
        this.#abandon?.(new Error('closed while connecting'))
        return
    }
  }

  /**
   * Ends the live generation as a loss (for a consumer the server cancelled) and reconnects: its
   * channel is closed first, so the acks sent on it just before reach the broker, then its
   * connection, within `closeTimeoutMs`; an error closing either is ignored (see `#lost`).
   */
  drop(reason: Error): void {
    const state = this.#state
    if (state.tag !== 'open') return
    this.#lost(state.generation as unknown as LiveGeneration<C>, reason)
  }

  /** One connect attempt, known to `#close` while it runs. */
  #attempt(): Promise<Generation<C>> {
    const attempt = this.#connectAndSetUp()
    this.#attempting = attempt
    const done = (): void => {
      if (this.#attempting === attempt) this.#attempting = undefined
    }
    attempt.then(done, done)
    return attempt
  }

  async #connectAndSetUp(): Promise<Generation<C>> {
    const { url, heartbeatSeconds, connectTimeoutMs, openChannel, setup } = this.#options
    const connecting = new AbortController()
    this.#connecting = connecting
    // `signal` reaches the socket (net.connect, tls.connect), which amqplib's typings leave out.
    const socketOptions: SocketOptions & { readonly signal: AbortSignal } = {
      timeout: connectTimeoutMs,
      signal: connecting.signal,
    }
    const model = await connect(withHeartbeat(url, heartbeatSeconds), socketOptions)
      .finally(() => {
        // Connected (or failed): from here on a close closes the connection, never cuts it.
        if (this.#connecting === connecting) this.#connecting = undefined
      })
      .catch((error: unknown) => {
        // amqplib's own words for its socket timeout: say which option set it.
        if (error instanceof Error && error.message === 'connect ETIMEDOUT') {
          throw new Error(
            `the server did not complete the AMQP handshake within ${connectTimeoutMs} ms (connectTimeoutMs)`,
            { cause: error },
          )
        }
        // amqplib's words for a Connection.Close in answer to its Connection.Open, the broker's
        // reason (NOT_ALLOWED: the vhost missing, stopped or closed to the user, or a connection
        // limit of the user or the vhost reached) left out: say which vhost, and every such cause.
        if (
          error instanceof Error &&
          /^Expected ConnectionOpenOk; got <ConnectionClose\b/.test(error.message)
        ) {
          throw new Error(
            `the broker refused to open the virtual host '${vhostOf(url)}' (it does not exist or is stopped, the user has no permission on it, or the user's or the virtual host's connection limit is reached; the broker's log says which)`,
            { cause: error },
          )
        }
        throw error
      })
    // Listened to from the handshake on: the channel opens after it, and a link that dies
    // meanwhile makes amqplib emit 'error' on the connection, which with no listener was an
    // uncaught exception (and the attempt never settled). 'close' follows it.
    let linkError: Error | undefined
    const lostWith = (error?: Error): void => {
      linkError ??= error
    }
    model.on('error', lostWith)
    model.once('close', lostWith)
    let generation: LiveGeneration<C> | undefined
    // The socket's own timeout ends with the handshake (amqplib clears it). With heartbeats on,
    // amqplib closes a connection that heard nothing for two to three intervals, failing what the setup
    // awaits: a broker that is slow but alive is waited for. With heartbeats off (the negotiated
    // value: a URL's own `heartbeat=0` wins over the option) nothing else notices a broker that
    // stops answering: the channel's open and the setup get `connectTimeoutMs` of their own, after
    // which the socket is cut, failing what they await. Raced as well: a request the cut would
    // leave pending must not hang the attempt.
    // A close while the channel opens abandons the attempt the same way (see `#close`).
    let setupTimer: NodeJS.Timeout | undefined
    let timedOut: Error | undefined
    let abandon: (reason: Error) => void = () => undefined
    const setupTimedOut = new Promise<never>((_, reject) => {
      abandon = (reason) => {
        clearTimeout(setupTimer)
        cutSocket(model, reason)
        reject(reason)
      }
      if (negotiatedHeartbeat(model) !== 0) return
      setupTimer = setTimeout(() => {
        timedOut = new Error(
          `the broker did not answer the setup after the handshake (opening the channel, declarations, qos, consume) within ${connectTimeoutMs} ms (connectTimeoutMs)`,
        )
        abandon(timedOut)
      }, connectTimeoutMs)
    })
    setupTimedOut.catch(() => undefined)
    this.#abandon = abandon
    try {
      const opening = openChannel(model).catch((error: unknown) => {
        // amqplib's words for the open it abandoned with the link say nothing of why.
        if (linkError === undefined) throw error
        throw new Error(`the connection was lost while its channel opened: ${linkError.message}`, {
          cause: error,
        })
      })
      const channel = await Promise.race([opening, setupTimedOut])
      generation = new LiveGeneration(this.#nextId++, model, channel)
      const gen = generation
      const onClose = (error?: Error): void => this.#lost(gen, error ?? new Error('connection closed'))
      model.on('close', onClose)
      // A channel the broker closed says why only in its 'error' (a 404 NOT_FOUND on a publish to
      // a missing exchange), which comes just before its 'close': keep it for the warning.
      let channelError: Error | undefined
      channel.on('error', (error: Error) => {
        channelError = error
      })
      // Before amqplib's own listener, which fails the confirms still pending: their callbacks then
      // find the generation dead (a lost copy used to be warned as refused by the exchange). A
      // channel closed with no error of its own goes with its connection, whose 'close' (with why:
      // the broker closed it, the link broke, no heartbeat) amqplib emits right after its channels'
      // and reports the loss; reported here, every such loss read 'channel closed'.
      channel.prependListener('close', () => {
        gen.live = false
        if (channelError !== undefined) onClose(channelError)
        else queueMicrotask(() => onClose(linkError ?? new Error('channel closed')))
      })
      gen.live = true
      if (this.#state.tag === 'closed') throw new Error('closed while connecting')
      this.#state = { tag: 'open', generation: gen as unknown as LiveGeneration<Channel> }
      await Promise.race([setup(gen), setupTimedOut])
      gen.settingUp = false
      if (!gen.live) throw new Error('connection lost during setup')
      clearTimeout(setupTimer)
      if (this.#abandon === abandon) this.#abandon = undefined
      return gen
    } catch (error) {
      clearTimeout(setupTimer)
      if (generation !== undefined) {
        generation.live = false
        generation.ended = true
      }
      if (this.#state.tag === 'open') this.#state = { tag: 'idle' }
      await closeModel(model, this.#options.closeTimeoutMs)
      if (this.#abandon === abandon) this.#abandon = undefined
      // What the cut made of the request it interrupted (a channel closed, which a setup may take
      // for a refusal) says nothing of why: the broker did not answer.
      throw timedOut ?? error
    }
  }

  #lost(generation: LiveGeneration<C>, error: Error): void {
    if (generation.ended) return
    generation.ended = true
    generation.live = false
    // The broker may have closed the channel alone (a 404 on a publish, a 406 on a message over
    // its max_message_size): the connection under it is closed too, or every such close would
    // leave one open, heartbeating, for the life of the process. The channel first: a `drop` (the
    // server cancelled the consumer) finds it open, and a Connection.Close written first would
    // overtake the acks just sent on it (see `closeModel`). A channel or connection closed already
    // rejects its close at once, which `closeModel` takes as closed.
    void closeModel(generation.model, this.#options.closeTimeoutMs, generation.channel)
    const attempt = this.#options.onLost(generation, error, generation.settingUp) ?? 1
    // During setup the attempt fails (its awaits reject, or the check after it throws), and that
    // failure is what gets reported and retried.
    if (generation.settingUp) return
    const state = this.#state
    if (state.tag === 'open' && state.generation === (generation as unknown as LiveGeneration<Channel>)) {
      this.#schedule(Math.max(1, attempt))
    }
  }

  #schedule(attempt: number): void {
    if (this.#state.tag === 'closed') return
    const delay = backoffDelay(this.#options.backoff, attempt)
    const timer = setTimeout(() => {
      if (this.#state.tag !== 'waiting' || this.#state.timer !== timer) return
      this.#state = { tag: 'idle' }
      this.#attempt().then(
        () => {
          this.reconnects++
        },
        (error: unknown) => {
          if (this.#state.tag === 'closed') return
          const { reason } = connectFailure(this.#options.url, error)
          this.#options.onWarning(
            `${this.#options.warnAs ?? this.#options.component}: reconnect attempt ${attempt} to ${describeServer(this.#options.url)} failed: ${reason}`,
          )
          this.#schedule(attempt + 1)
        },
      )
    }, delay)
    this.#state = { tag: 'waiting', timer }
  }
}

export type { ConfirmChannel }
