// The built-in reduce against the testkit's transform conformance suite: it merges events by key
// and holds them until flush.
import { transformConformance } from '@ackline/testkit'
import { reduce } from '@ackline/transforms'
import { describe, it } from 'vitest'

transformConformance(
  'reduce conformance',
  () => reduce({ groupBy: ['level'], maxEvents: 2, merge: { n: 'sum' } }),
  { runner: { describe, it } },
)
