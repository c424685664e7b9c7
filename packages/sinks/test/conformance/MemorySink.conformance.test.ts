// The built-in memory sink against the testkit's sink conformance suite.
import { memory } from '@ackline/sinks'
import { sinkConformance } from '@ackline/testkit'
import { describe, it } from 'vitest'

sinkConformance('memory sink conformance', () => memory(), {
  read: (sink) => sink.events,
  runner: { describe, it },
})
