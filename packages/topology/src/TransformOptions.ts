/**
 * The options a transform is declared with (`builder.transform(id, inputs, transform, options)`).
 *
 * Invariant: declared once as a schema, checked by `build()` with everything else.
 *
 * @module
 */
import { z } from 'zod'
import { MemoryBufferOptions } from './MemoryBufferOptions.js'
import { defineOptions, type OptionsOf } from './OptionsSchema.js'

/**
 * Options of a transform.
 *
 * @example
 * ```ts
 * builder.transform('valid', ['in'], filter(isValid), { dropStatus: 'rejected', buffer: { maxEvents: 1000 } })
 * builder.transform('tag', ['valid'], remap(tag), { coalesce: false }) // arrays as `valid` emitted them
 * ```
 */
export const TransformOptions = defineOptions({
  buffer: MemoryBufferOptions.schema.optional().describe('The channel in front of the transform.'),
  dropStatus: z
    .enum(['delivered', 'rejected'])
    .optional()
    .describe("What `context.drop` means here; wins over the transform's own `dropStatus`."),
  coalesce: z
    .boolean()
    .optional()
    .describe(
      "Whether the transform takes what is queued for it as one array (up to 128 events); wins over the transform's own `coalesce`. `false` keeps a built-in's input as its producers sent it.",
    ),
})
/** Options of a transform: see the {@link TransformOptions} schema for each option. */
export type TransformOptions = OptionsOf<typeof TransformOptions>
