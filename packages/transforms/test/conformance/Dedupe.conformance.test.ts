// The built-in dedupe against the testkit's transform conformance suite, on records with
// duplicates.
import { transformConformance } from '@ackline/testkit'
import { dedupe } from '@ackline/transforms'
import { describe, it } from 'vitest'

const records = [1, 2, 1, 3, 2, 4].map((id, n) => ({ id, n }))
transformConformance('dedupe conformance', () => dedupe({ fields: ['id'] }), {
  records,
  keepsOrder: true,
  runner: { describe, it },
})
