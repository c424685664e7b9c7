/**
 * `console`: a sink that prints each event as one line.
 *
 * Invariant: a write resolves only once its lines were handed to the stream (waiting for `drain`
 * when the stream is full), so events are settled `delivered` only once written.
 *
 * @module
 */
import type { EventArray } from '@ackline/core'
import type { ConfigIssue, Sink, SinkResult } from '@ackline/topology'

/**
 * Options of {@link console}.
 *
 * @example
 * ```ts
 * console({ stream: process.stderr, format: 'text' })
 * ```
 */
export interface ConsoleSinkOptions {
  /** Where lines go (default `process.stdout`). */
  readonly stream?: NodeJS.WritableStream
  /** `'json'` (the default): each event's fields as JSON; `'text'`: its `message` field (or JSON when it has none). */
  readonly format?: 'json' | 'text'
}

/**
 * The sink {@link console} returns; it checks `format` in `validate()`.
 *
 * @example
 * ```ts
 * const sink: ConsoleSink = console()
 * ```
 */
export interface ConsoleSink extends Sink {
  readonly kind: 'console'
}

class Console implements ConsoleSink {
  readonly kind = 'console'
  readonly #options: ConsoleSinkOptions

  constructor(options: ConsoleSinkOptions) {
    this.#options = options
  }

  validate(): readonly ConfigIssue[] {
    const { format } = this.#options
    if (format !== undefined && format !== 'json' && format !== 'text') {
      return [{ field: 'format', message: `format must be 'json' or 'text', not '${String(format)}'` }]
    }
    return []
  }

  async write(events: EventArray): Promise<SinkResult> {
    const stream = this.#options.stream ?? process.stdout
    const text = this.#options.format === 'text'
    let out = ''
    for (const event of events) {
      const message = text ? event.get('message') : undefined
      out += `${typeof message === 'string' ? message : JSON.stringify(event.fields)}\n`
    }
    if (!stream.write(out)) await new Promise<void>((resolve) => stream.once('drain', resolve))
    return undefined
  }
}

/**
 * A sink that prints events, one line each, to stdout or the given stream.
 *
 * @example
 * ```ts
 * builder.sink('print', ['parse'], console({ format: 'text' }), { acknowledgements: false })
 * ```
 */
export function console(options: ConsoleSinkOptions = {}): ConsoleSink {
  return new Console(options)
}
