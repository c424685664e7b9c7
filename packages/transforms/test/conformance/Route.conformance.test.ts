// The built-in route against the testkit's transform conformance suite: overlapping routes (an
// event on two ports) and unmatched events.
import { transformConformance } from '@ackline/testkit'
import { route } from '@ackline/transforms'
import { describe, it } from 'vitest'

transformConformance(
  'route conformance',
  () => route({ errors: (e) => e.get('level') === 'error', even: (e) => (e.get('n') as number) % 2 === 0 }),
  { keepsOrder: true, runner: { describe, it } },
)
