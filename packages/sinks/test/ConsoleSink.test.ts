import { PassThrough } from 'node:stream'
import { console } from '@ackline/sinks'
import { TopologyBuilder } from '@ackline/topology'
import { describe, expect, it } from 'vitest'

const print = async (format: 'json' | 'text' | undefined) => {
  const stream = new PassThrough()
  let out = ''
  stream.on('data', (chunk: Buffer) => {
    out += chunk.toString()
  })
  const topology = new TopologyBuilder({ acknowledgements: true })
    .source('in', {
      kind: 'batches',
      canAcknowledge: true,
      async run(context) {
        await (await context.send([{ message: 'hello' }, { n: 2 }])).status
      },
    })
    .sink('out', ['in'], console({ stream, ...(format === undefined ? {} : { format }) }))
    .build()
  await topology.start()
  await topology.done
  return out
}

describe('console', () => {
  it('prints one JSON line per event by default', async () => {
    expect(await print(undefined)).toBe('{"message":"hello"}\n{"n":2}\n')
  })

  it("prints the message field with format 'text'", async () => {
    expect(await print('text')).toBe('hello\n{"n":2}\n')
  })

  it('reports a bad format through the builder', () => {
    expect(() =>
      new TopologyBuilder()
        .source('in', { kind: 'x', canAcknowledge: true, run: async () => {} })
        .sink('out', ['in'], console({ format: 'yaml' as 'json' }))
        .build(),
    ).toThrow(/out \(format\): console: must be "json" or "text", got "yaml"/)
  })

  it('reports a stream that cannot be written to', () => {
    expect(console({ stream: 'stdout' as never }).validate()).toMatchObject([
      { field: 'stream', message: 'must be a writable stream, got "stdout"' },
    ])
    expect(console({ stream: process.stderr }).validate()).toEqual([])
  })
})
