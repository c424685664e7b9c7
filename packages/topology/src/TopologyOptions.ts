/**
 * The options of the whole topology, as `new TopologyBuilder(options)` takes them.
 *
 * Invariant: declared once as a schema, so `build()` checks them with everything else and a config
 * file is described by the same rules (`TopologyOptions.jsonSchema()`).
 *
 * @module
 */
import { z } from 'zod'
import { MAX_TIMER_MS } from './internal/maxTimerMs.js'
import { codeOption, defineOptions, type OptionsOf } from './OptionsSchema.js'
import type { TopologyWarning } from './TopologyWarning.js'

/**
 * Options of the whole topology, declared once (see {@link defineOptions}): `build()` checks them
 * with everything else, and `TopologyOptions.jsonSchema()` describes them for config files.
 *
 * @example
 * ```ts
 * new TopologyBuilder({ acknowledgements: true, ackTimeoutMs: 30_000, dataDir: '/var/lib/ackline' })
 * ```
 */
export const TopologyOptions = defineOptions({
  acknowledgements: z
    .boolean()
    .optional()
    .describe(
      "Whether sinks acknowledge by default (default false). A sink's own `acknowledgements` setting always wins over this, whichever way.",
    ),
  dataDir: z
    .string()
    .min(1)
    .optional()
    .describe(
      'Directory under which durable buffers keep their files by default (a disk buffer of sink `archive` lives in `<dataDir>/archive`); given to every buffer factory.',
    ),
  ackTimeoutMs: z
    .number()
    .positive()
    // Longer than a timer can wait (`MAX_TIMER_MS`): it would fire after 1 ms, again and again.
    .max(MAX_TIMER_MS)
    .optional()
    .describe(
      'Settle a batch `errored` for its source when it has not resolved this long after it was sent, in milliseconds, at most 2147483647 (about 24.8 days, the longest a timer waits); no timeout when unset.',
    ),
  onWarning: codeOption<(warning: TopologyWarning) => void>('a function')
    .optional()
    .describe(
      'Called with each warning of `build()`. Defaults to `process.emitWarning` with code `ACKLINE_` followed by the warning code (`ACKLINE_ACK_UNSUPPORTED`, `ACKLINE_NO_CONSUMERS`, `ACKLINE_AUTHORITATIVE_IGNORED`).',
    ),
})
/** Options of the whole topology: see the {@link TopologyOptions} schema for each option. */
export type TopologyOptions = OptionsOf<typeof TopologyOptions>
