// The built-in console sink against the testkit's sink conformance suite, writing to a stream the
// test reads back.
import { PassThrough } from 'node:stream'
import type { JsonObject } from '@ackline/core'
import { console } from '@ackline/sinks'
import { sinkConformance } from '@ackline/testkit'
import { describe, it } from 'vitest'

const streams = new WeakMap<object, string[]>()

sinkConformance(
  'console sink conformance',
  () => {
    const stream = new PassThrough()
    const chunks: string[] = []
    stream.on('data', (chunk: Buffer) => chunks.push(chunk.toString('utf8')))
    const sink = console({ stream })
    streams.set(sink, chunks)
    return sink
  },
  {
    read: (sink) =>
      (streams.get(sink) ?? [])
        .join('')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as JsonObject),
    runner: { describe, it },
  },
)
