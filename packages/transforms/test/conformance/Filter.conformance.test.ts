// The built-in filter against the testkit's transform conformance suite, with both drop statuses.
import { transformConformance } from '@ackline/testkit'
import { filter } from '@ackline/transforms'
import { describe, it } from 'vitest'

const runner = { describe, it }
transformConformance('filter conformance', () => filter((e) => e.get('level') === 'info'), {
  keepsOrder: true,
  runner,
})
transformConformance(
  'filter conformance (dropStatus rejected)',
  () => filter((e) => e.get('level') === 'info', { dropStatus: 'rejected' }),
  { keepsOrder: true, runner },
)
