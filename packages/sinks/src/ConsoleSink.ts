/**
 * `console`: a sink that prints each event as one line.
 *
 * Invariant: a write resolves only once its lines were handed to the stream (waiting for `drain`
 * when the stream is full), so events are settled `delivered` only once written.
 *
 * @module
 */
import type { EventArray } from '@ackline/core'
import {
  type ConfigIssue,
  codeOption,
  defineOptions,
  type OptionsOf,
  type Sink,
  type SinkResult,
} from '@ackline/topology'
import { z } from 'zod'

/**
 * Options of {@link console}: its schema (`validate`, `jsonSchema`, …).
 *
 * @example
 * ```ts
 * console({ stream: process.stderr, format: 'text' })
 * ```
 */
export const ConsoleSinkOptions = defineOptions({
  stream: codeOption<NodeJS.WritableStream>(
    'a writable stream',
    (value) => typeof (value as { write?: unknown } | null)?.write === 'function',
  )
    .optional()
    .describe('Where lines go (default `process.stdout`).'),
  format: z
    .enum(['json', 'text'])
    .default('json')
    .describe("`json`: each event's fields as JSON; `text`: its `message` field (or JSON when it has none)."),
})
/** Options of {@link console}. */
export type ConsoleSinkOptions = OptionsOf<typeof ConsoleSinkOptions>

/**
 * The sink {@link console} returns; it checks its options in `validate()`.
 *
 * @example
 * ```ts
 * const sink: ConsoleSink = console()
 * ```
 */
export interface ConsoleSink extends Sink {
  readonly kind: 'console'
  /** Problems in the options, each naming its field; empty when they are fine. */
  validate(): readonly ConfigIssue[]
}

class Console implements ConsoleSink {
  readonly kind = 'console'
  readonly #options: ConsoleSinkOptions

  constructor(options: ConsoleSinkOptions) {
    this.#options = options
  }

  validate(): readonly ConfigIssue[] {
    return ConsoleSinkOptions.validate(this.#options)
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
