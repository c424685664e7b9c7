// The built-in remap against the testkit's transform conformance suite: in place, dropping, and
// splitting one event into several.
import { transformConformance } from '@ackline/testkit'
import { remap } from '@ackline/transforms'
import { describe, it } from 'vitest'

const runner = { describe, it }
transformConformance('remap conformance (in place)', () => remap((e) => void e.set('seen', true)), {
  keepsOrder: true,
  runner,
})
transformConformance(
  'remap conformance (drops some)',
  () => remap((e) => ((e.get('n') as number) % 3 === 0 ? null : undefined)),
  { keepsOrder: true, runner },
)
transformConformance(
  'remap conformance (splits)',
  () =>
    remap((e) => [
      { part: 1, n: e.get('n') ?? null },
      { part: 2, n: e.get('n') ?? null },
    ]),
  { runner },
)
