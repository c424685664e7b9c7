/** The connection every NATS component holds, against a real server. Internal module: imported by path. */
import { afterEach, describe, expect, it, vi } from 'vitest'
import { Connection } from '../../src/internal/Connection.js'
import { NATS_URL, skipWithoutNats } from './support/natsFixture.js'

const skip = await skipWithoutNats('Connection.test.ts')

describe.skipIf(skip)('nats Connection', () => {
  afterEach(() => {
    vi.restoreAllMocks()
  })

  it('close(): once the server answered the flush, the closeTimeoutMs bound is cleared, not left pending', async () => {
    // The bound of the flush was left to fire closeTimeoutMs after every close (unref'd, so the
    // process could exit, but holding its closure, and the client with it, that long).
    const closeTimeoutMs = 987_654
    const connection = await Connection.open('test', {
      servers: NATS_URL,
      connectTimeoutMs: 5000,
      reconnectTimeWaitMs: 100,
      closeTimeoutMs,
    })
    const set = vi.spyOn(globalThis, 'setTimeout')
    const cleared = vi.spyOn(globalThis, 'clearTimeout')
    expect(await connection.close()).toBe(true)
    const bounds = set.mock.calls.flatMap((call, i) =>
      call[1] === closeTimeoutMs ? [set.mock.results[i]?.value as unknown] : [],
    )
    expect(bounds).toHaveLength(1)
    expect(cleared).toHaveBeenCalledWith(bounds[0])
  })
})
