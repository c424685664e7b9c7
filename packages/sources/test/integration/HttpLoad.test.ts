/**
 * A bounded load test on 127.0.0.1: slow clients (slowloris: headers a line at a time; slow body:
 * a body a byte at a time) keep reconnecting while normal clients post batches through a real
 * topology (limits of 1 s and 1.5 s, so a loaded machine does not cut the normal clients). Normal
 * clients must keep being served (every request 200) while the server cuts the slow ones off with
 * 408. It stops by itself: once the normal requests are done and the server has reported enough
 * timeouts, or at the time bound (which fails the test).
 *
 * No assertion on throughput; it prints what it counted. `ACKLINE_HTTP_LOAD_REQUESTS` and
 * `ACKLINE_HTTP_LOAD_SLOW` scale it up (defaults 300 and 20).
 */
import { memory } from '@ackline/sinks'
import { httpServer } from '@ackline/sources'
import { TopologyBuilder } from '@ackline/topology'
import { describe, expect, it } from 'vitest'
import { request } from '../support/HttpRequest.js'
import { parseRawResponse, RawConnection } from '../support/RawConnection.js'

const REQUESTS = Number(process.env.ACKLINE_HTTP_LOAD_REQUESTS ?? 300)
const SLOW = Number(process.env.ACKLINE_HTTP_LOAD_SLOW ?? 20)
const NORMAL_WORKERS = 4
const TIME_BOUND_MS = 60_000

describe('the HTTP source under load with slow clients', () => {
  it('keeps serving normal clients while slow ones are cut off with 408', async () => {
    const source = httpServer({ address: '127.0.0.1:0', headersTimeoutMs: 1000, requestTimeoutMs: 1500 })
    const sink = memory()
    const topology = new TopologyBuilder({ acknowledgements: true })
      .source('in', source)
      .sink('out', ['in'], sink)
      .build()
    await topology.start()
    const { port } = await source.listening()
    const bound = AbortSignal.timeout(TIME_BOUND_MS)
    let done = false
    const finished = () => done || bound.aborted
    const slowAnswers: number[] = []
    const open = new Set<RawConnection>()

    // Each slow client reconnects as soon as it is cut off, until the run ends.
    const slowClient = async (i: number): Promise<void> => {
      while (!finished()) {
        const c = new RawConnection(port)
        open.add(c)
        try {
          await c.connected
        } catch {
          open.delete(c)
          continue
        }
        if (i % 2 === 0) {
          c.write('POST / HTTP/1.1\r\nHost: x\r\n')
          c.trickle('X-Slow: 1\r\n', 50)
        } else {
          c.write(
            'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n[',
          )
          c.trickle(' ', 50)
        }
        const text = await c.closed
        open.delete(c)
        if (text !== '') slowAnswers.push(parseRawResponse(text).status)
      }
    }

    let served = 0
    const otherCodes: number[] = []
    let next = 0
    const normalClient = async (): Promise<void> => {
      while (!bound.aborted) {
        const n = next++
        if (n >= REQUESTS) return
        const answer = await request(port, {
          headers: { 'content-type': 'application/x-ndjson' },
          body: `{"n":${n},"i":0}\n{"n":${n},"i":1}\n`,
        }).catch(() => ({ status: 0 }))
        if (answer.status === 200) served++
        else otherCodes.push(answer.status)
      }
    }

    const slow = Array.from({ length: SLOW }, (_, i) => slowClient(i))
    const started = Date.now()
    await Promise.all(Array.from({ length: NORMAL_WORKERS }, normalClient))
    // Run on until the server reported a timeout for every slow client at least once, so the
    // normal requests above really were served while slow clients held connections.
    while (!bound.aborted && (source.counters.refused.REQUEST_TIMEOUT ?? 0) < SLOW)
      await new Promise((r) => setTimeout(r, 20))
    done = true
    for (const c of open) c.destroy()
    await Promise.all(slow)
    await topology.stop({ drainTimeoutMs: 2000 })

    const timeouts = source.counters.refused.REQUEST_TIMEOUT ?? 0
    console.log(
      `http load: ${served}/${REQUESTS} normal requests served in ${Date.now() - started} ms ` +
        `beside ${SLOW} slow clients; ${timeouts} cut off with 408 (${slowAnswers.length} seen by them)`,
    )
    expect(bound.aborted).toBe(false)
    expect(otherCodes).toEqual([])
    expect(served).toBe(REQUESTS)
    expect(sink.events.length).toBe(2 * REQUESTS)
    expect(timeouts).toBeGreaterThanOrEqual(SLOW)
    expect(slowAnswers.every((code) => code === 408)).toBe(true)
  }, 90_000)
})
