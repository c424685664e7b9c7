// The built-in blackhole sink against the testkit's sink conformance suite (it stores nothing, so
// the rules that read back what was stored do not apply).
import { blackhole } from '@ackline/sinks'
import { sinkConformance } from '@ackline/testkit'
import { describe, it } from 'vitest'

sinkConformance('blackhole sink conformance', () => blackhole(), { runner: { describe, it } })
