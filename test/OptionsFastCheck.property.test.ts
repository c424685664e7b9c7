// The compiled check of options (packages/topology/src/internal/fastCheck.ts) may only say "valid"
// where zod does: on "valid" zod is not asked, so a false pass is an option left unchecked. This
// property draws odd values shaped after each schema the packages declare, and requires it never
// to pass a value zod refuses (every kind of schema it handles: packages/topology/test/fastCheck.test.ts).
// It lives at the root because it reads the schemas of every package, which topology cannot import.

import { DiskBufferFactoryOptions, DiskBufferOptions, DiskEdgeBufferOptions } from '@ackline/buffers'
import { ConsoleSinkOptions, FileSinkOptions, MemorySinkOptions } from '@ackline/sinks'
import { GeneratorOptions, StdinOptions } from '@ackline/sources'
import {
  MemoryBufferOptions,
  RetryPolicy,
  SinkOptions,
  TopologyOptions,
  TransformOptions,
} from '@ackline/topology'
import { DedupeOptions, FilterOptions, ReduceOptions, SampleOptions } from '@ackline/transforms'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { AmqpSinkOptions } from '../packages/amqp/src/AmqpSink.js'
import { AmqpSourceOptions } from '../packages/amqp/src/AmqpSource.js'
import { JetStreamSinkOptions } from '../packages/nats/src/JetStreamSink.js'
import { JetStreamSourceOptions } from '../packages/nats/src/JetStreamSource.js'
import { NatsSinkOptions } from '../packages/nats/src/NatsSink.js'
import { HttpServerOptions } from '../packages/sources/src/HttpServerSource.js'
import { ObservableSourceOptions } from '../packages/sources/src/ObservableSource.js'
import { fastCheck } from '../packages/topology/src/internal/fastCheck.js'
import { near, withEachOption } from '../packages/topology/test/support/optionValues.js'
import { RemapOptions } from '../packages/transforms/src/Remap.js'

/** A zod schema, named without importing zod (the workspace root does not depend on it). */
type Schema = Parameters<typeof near>[0]

const schemas: Record<string, Schema> = {
  AmqpSinkOptions: AmqpSinkOptions.schema,
  AmqpSourceOptions: AmqpSourceOptions.schema,
  DiskBufferOptions: DiskBufferOptions.schema,
  DiskEdgeBufferOptions: DiskEdgeBufferOptions.schema,
  DiskBufferFactoryOptions: DiskBufferFactoryOptions.schema,
  NatsSinkOptions: NatsSinkOptions.schema,
  JetStreamSinkOptions: JetStreamSinkOptions.schema,
  JetStreamSourceOptions: JetStreamSourceOptions.schema,
  ConsoleSinkOptions: ConsoleSinkOptions.schema,
  FileSinkOptions: FileSinkOptions.schema,
  MemorySinkOptions: MemorySinkOptions.schema,
  GeneratorOptions: GeneratorOptions.schema,
  StdinOptions: StdinOptions.schema,
  HttpServerOptions: HttpServerOptions.schema,
  ObservableSourceOptions: ObservableSourceOptions.schema,
  MemoryBufferOptions: MemoryBufferOptions.schema,
  RetryPolicy: RetryPolicy.schema,
  SinkOptions: SinkOptions.schema,
  TopologyOptions: TopologyOptions.schema,
  TransformOptions: TransformOptions.schema,
  DedupeOptions: DedupeOptions.schema,
  FilterOptions: FilterOptions.schema,
  ReduceOptions: ReduceOptions.schema,
  SampleOptions: SampleOptions.schema,
  RemapOptions: RemapOptions.schema,
}

describe('the compiled options check', () => {
  it.each(Object.entries(schemas).flatMap(([name, schema]) => withEachOption(name, schema)))(
    'never says valid where zod refuses, for %s',
    (_name, schema) => {
      const fast = fastCheck(schema)
      if (fast === undefined) return
      fc.assert(
        fc.property(near(schema, 4), (value) => {
          if (fast(value)) expect(schema.safeParse(value).success).toBe(true)
        }),
        { numRuns: 500 },
      )
    },
  )

  it('compiles the schemas the packages declare, so zod is not run for valid options', () => {
    const uncompiled = Object.entries(schemas)
      .filter(([, schema]) => fastCheck(schema) === undefined)
      .map(([name]) => name)
    expect(uncompiled.length).toBeLessThan(Object.keys(schemas).length)
  })
})
