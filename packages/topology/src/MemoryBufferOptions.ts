/**
 * The options of the in-memory channel in front of a transform or a sink: the default buffer.
 *
 * Invariant: declared once as a schema; the builder checks them at build (every enumeration
 * included) and the runtime reads their resolved values.
 *
 * @module
 */
import type { DeliveryStatus } from '@ackline/core'
import { z } from 'zod'
import { defineOptions, type OptionsOf } from './OptionsSchema.js'

/**
 * The in-memory channel in front of a component: the default buffer, built into the runtime, so
 * it is given by its options rather than by a factory. Other kinds of buffer come from their own
 * package as an {@link EdgeBufferFactory} (`diskBuffer({ … })` of `@ackline/buffers`).
 *
 * @example
 * ```ts
 * builder.sink('metrics', ['in'], sink, { buffer: { maxEvents: 10_000, whenFull: 'drop_newest' } })
 * ```
 */
export const MemoryBufferOptions = defineOptions({
  type: z.literal('memory').optional().describe('The kind of buffer: `memory` (the default).'),
  maxEvents: z.int().min(1).default(500).describe('How many events may wait in the channel.'),
  whenFull: z
    .enum(['block', 'drop_newest'])
    .default('block')
    .describe(
      'What a full channel does: make the upstream wait (`block`) or drop what arrives (`drop_newest`).',
    ),
  droppedStatus: z
    .enum(['delivered', 'errored', 'rejected'] satisfies DeliveryStatus[])
    .default('rejected')
    .describe('The status of events a `drop_newest` channel drops.'),
})
/** Options of the in-memory channel: see the {@link MemoryBufferOptions} schema for each option. */
export type MemoryBufferOptions = OptionsOf<typeof MemoryBufferOptions>
