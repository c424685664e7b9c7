// Integration: a sink with a disk buffer survives a restart of the whole topology with no loss.
// Run 1: an HTTP source feeds sink `out`, whose destination is down (every write fails, to be
// retried); its disk buffer acknowledges on write, so each request gets 200 once its events are
// fsynced. The topology is stopped with everything still in the buffer. Run 2: the same topology
// (same data directory) with a working file sink for `out`: every event of every request that got
// 200 ends up in the file.
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { BufferCheck, diskBuffer } from '@ackline/buffers'
import { file } from '@ackline/sinks'
import { httpServer } from '@ackline/sources'
import { RetryableError, type Sink, TopologyBuilder } from '@ackline/topology'
import { afterAll, describe, expect, it, vi } from 'vitest'

const root = mkdtempSync(join(tmpdir(), 'ackline-integration-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

/** A sink whose destination is down: every write fails and is retried later. */
const down = (): Sink => ({
  kind: 'down',
  async write() {
    throw new RetryableError('out', 'destination unreachable')
  },
})

const onWrite = diskBuffer({ acknowledgements: 'on-write', sync: 'always' })

async function post(port: number, n: number): Promise<number> {
  const body = [0, 1, 2].map((k) => JSON.stringify({ request: n, k })).join('\n')
  const response = await fetch(`http://127.0.0.1:${port}/`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-ndjson' },
    body,
  })
  await response.arrayBuffer()
  return response.status
}

describe('a sink with a disk buffer', () => {
  it('survives a restart of the whole topology with no loss: every request that got 200 is in the file sink', async () => {
    const dataDir = join(root, 'data')
    mkdirSync(join(root, 'out'))
    const output = join(root, 'out', 'events.ndjson')

    // Run 1: the destination is down; requests are acknowledged once on disk.
    const source1 = httpServer({ address: '127.0.0.1:0' })
    const run1 = new TopologyBuilder({ acknowledgements: true, dataDir })
      .source('http', source1)
      .sink('out', ['http'], down(), { buffer: onWrite, retry: { attempts: 1 } })
      .build()
    await run1.start()
    const { port: port1 } = await source1.listening()
    const accepted: number[] = []
    for (let n = 0; n < 40; n++) if ((await post(port1, n)) === 200) accepted.push(n)
    await run1.stop({ drainTimeoutMs: 200 })
    expect(accepted.length).toBe(40)
    const between = await BufferCheck.run(join(dataDir, 'out'))
    expect(between).toMatchObject({ unacked: 120, problems: [] }) // nothing delivered yet: all on disk

    // Run 2: the same sink id and data directory, now with a working destination.
    const source2 = httpServer({ address: '127.0.0.1:0' })
    const run2 = new TopologyBuilder({ acknowledgements: true, dataDir })
      .source('http', source2)
      .sink('out', ['http'], file({ path: output }), { buffer: onWrite })
      .build()
    await run2.start()
    const { port: port2 } = await source2.listening()
    for (let n = 40; n < 50; n++) if ((await post(port2, n)) === 200) accepted.push(n)
    const lines = (): { request: number; k: number }[] => {
      try {
        return readFileSync(output, 'utf8')
          .split('\n')
          .filter((l) => l !== '')
          .map((l) => JSON.parse(l) as { request: number; k: number })
      } catch {
        return []
      }
    }
    const expected = accepted.length * 3
    await vi.waitUntil(() => new Set(lines().map((l) => `${l.request}.${l.k}`)).size >= expected, {
      timeout: 15_000,
      interval: 20,
    })
    await run2.stop({ drainTimeoutMs: 5000 })

    const written = lines()
    const seen = new Set(written.map((l) => `${l.request}.${l.k}`))
    const missing = accepted.flatMap((n) => [0, 1, 2].map((k) => `${n}.${k}`)).filter((key) => !seen.has(key))
    console.log(
      `integration: ${accepted.length} requests got 200 (${expected} events); ${written.length} lines in the file, ${missing.length} missing, ${written.length - seen.size} duplicates`,
    )
    expect(missing).toEqual([])
  }, 30_000)
})
