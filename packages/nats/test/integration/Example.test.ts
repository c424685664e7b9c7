// The README's example (examples/nats-jetstream.ts), run against the server: what it claims.
import { describe, expect, it } from 'vitest'
import { main } from '../../../../examples/nats-jetstream.js'
import { skipWithoutNats } from './support/natsFixture.js'

const skip = await skipWithoutNats('Example.test.ts')

describe.skipIf(skip)('the NATS JetStream example', () => {
  it('acks the nine orders republished, terminates the one rejected', async () => {
    expect(await main()).toEqual({ acked: 9, terminated: 1, republished: 9 })
  })
})
