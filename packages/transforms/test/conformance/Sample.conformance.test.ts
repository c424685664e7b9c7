// The built-in sample against the testkit's transform conformance suite.
import { transformConformance } from '@ackline/testkit'
import { sample } from '@ackline/transforms'
import { describe, it } from 'vitest'

transformConformance('sample conformance', () => sample({ rate: 2 }), {
  keepsOrder: true,
  runner: { describe, it },
})
