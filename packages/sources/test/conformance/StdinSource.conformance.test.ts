// The built-in stdin source against the testkit's source conformance suite, reading an injected
// stream. It cannot acknowledge (a pipe has no way back), so only
// `source.run-waits-for-accepted` applies.
import { PassThrough } from 'node:stream'
import { stdin } from '@ackline/sources'
import { sourceConformance } from '@ackline/testkit'
import { describe, it } from 'vitest'

sourceConformance(
  'stdin source conformance',
  () => {
    const input = new PassThrough()
    return {
      source: stdin({ input }),
      feed: (records) => {
        input.write(records.map((r) => `${JSON.stringify(r)}\n`).join(''))
      },
      end: () => input.end(),
    }
  },
  { runner: { describe, it } },
)
