/**
 * The options a sink is declared with (`builder.sink(id, inputs, sink, options)`).
 *
 * Invariant: declared once as a schema, checked by `build()` with everything else; a buffer given
 * as a factory (another kind of buffer) is checked by that factory, not by this schema.
 *
 * @module
 */
import { z } from 'zod'
import type { EdgeBufferFactory } from './EdgeBuffer.js'
import { MemoryBufferOptions } from './MemoryBufferOptions.js'
import { defineOptions, type OptionsOf } from './OptionsSchema.js'
import { RetryPolicy } from './RetryPolicy.js'

/**
 * Options of a sink. The disk buffer's options are checked by the disk buffer's own rules, not by
 * this schema, which describes the in-memory channel under `buffer`.
 *
 * @example
 * ```ts
 * builder.sink('alerts', ['split.errors'], pager, { authoritative: true, retry: { attempts: 5 } })
 * builder.sink('debug', ['in'], console(), { acknowledgements: false })
 * builder.sink('bus', ['parse'], amqpSink({ url, exchange: 'events' }), { concurrency: 8 })
 * ```
 */
export const SinkOptions = defineOptions({
  acknowledgements: z
    .boolean()
    .optional()
    .describe("Whether this sink acknowledges; wins over the topology's `acknowledgements`, both ways."),
  authoritative: z
    .boolean()
    .optional()
    .describe(
      'When this sink settles an event, its batches learn that status at once and what every other copy reports later is ignored. Needs acknowledgements on for the sink: with them off it records nothing, and `build()` warns (`AUTHORITATIVE_IGNORED`).',
    ),
  buffer: MemoryBufferOptions.schema
    .optional()
    .describe(
      "The buffer in front of the sink: the in-memory channel's options (the default), or, in code, a factory of another kind of buffer such as `diskBuffer({ maxBytes })` from `@ackline/buffers`.",
    ),
  retry: RetryPolicy.schema
    .optional()
    .describe(
      "How failed writes are retried; also the back-off between failed reads of the sink's buffer (at least 100 ms, with no limit of attempts: a stop with no deadline waits for a buffer that cannot be read).",
    ),
  concurrency: z
    .int()
    .min(1)
    .optional()
    .describe(
      "The most writes pending at once; each is retried and settled on its own, so with more than one they may complete out of order. Default: the sink's own `concurrency`, else 1.",
    ),
})
/** Options of a sink: see the {@link SinkOptions} schema for each option. */
export type SinkOptions = Omit<OptionsOf<typeof SinkOptions>, 'buffer'> & {
  /**
   * The buffer in front of the sink: the in-memory channel's options (the default), or a factory
   * of another kind of buffer, such as `diskBuffer({ maxBytes })` from `@ackline/buffers`.
   */
  readonly buffer?: MemoryBufferOptions | EdgeBufferFactory
}
