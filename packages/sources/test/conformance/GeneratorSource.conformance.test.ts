// The built-in generator against the testkit's source conformance suite. It has no upstream to
// acknowledge, so only `source.run-waits-for-accepted` applies.
import { generator } from '@ackline/sources'
import { sourceConformance } from '@ackline/testkit'
import { describe, it } from 'vitest'

sourceConformance('generator source conformance', () => ({ source: generator({ count: 6, batchSize: 2 }) }), {
  runner: { describe, it },
})
