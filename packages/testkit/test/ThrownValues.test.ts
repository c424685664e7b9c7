// Whatever a user's callback throws — here an object with no prototype, which `String()` cannot
// convert — the kit reports it as a failure naming the rule or the callback, never rejects with a
// conversion error nor crashes the test process.

import { createConnection, createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import {
  type CrashLoopError,
  checkSink,
  checkSource,
  checkTransform,
  crashLoop,
  tcpProxy,
} from '@ackline/testkit'
import { describe, expect, it } from 'vitest'

/** A thrown value with no `toString`: `String(value)` throws a TypeError. */
const unprintable = (): unknown => Object.assign(Object.create(null), { reason: 'odd' })

const counter = fileURLToPath(new URL('./fixtures/counterChild.mjs', import.meta.url))

describe('a callback that throws a value String() cannot convert', () => {
  it('fails the conformance rules with the value shown, instead of rejecting the check', async () => {
    const found = await checkTransform(() => ({
      kind: 'odd',
      process() {
        throw unprintable()
      },
    }))
    expect(found.map((f) => f.code)).toEqual([
      'transform.accounts-for-every-event',
      'transform.drops-through-context',
      'transform.emits-once-per-port',
      'transform.in-topology',
    ])
    expect(found[0]!.message).toContain(
      "transform.accounts-for-every-event (odd): process() threw: [Object: null prototype] { reason: 'odd' }",
    )
    const sink = await checkSink(() => ({
      kind: 'odd',
      write: async () => {
        throw unprintable()
      },
    }))
    expect(sink.map((f) => f.code)).toContain('sink.delivers-good-records')
    expect(sink.find((f) => f.code === 'sink.delivers-good-records')!.message).toContain(
      "write threw on the suite's records: [Object: null prototype] { reason: 'odd' }",
    )
    const source = await checkSource(() => ({
      source: {
        kind: 'odd',
        canAcknowledge: true,
        run: async () => {
          throw unprintable()
        },
      },
      feed: () => {},
    }))
    expect(source[0]!.message).toContain("run() threw: [Object: null prototype] { reason: 'odd' }")
  })

  it('fails a crash loop whose onOutput throws it (CALLBACK_FAILED), instead of crashing the test process', async () => {
    const error = await crashLoop({
      script: counter,
      args: ['forever'],
      rounds: 1,
      killAfter: { min: 5, max: 5 },
      log: () => {},
      onOutput: () => {
        throw unprintable()
      },
    }).catch((e: unknown) => e)
    expect((error as CrashLoopError).code).toBe('CALLBACK_FAILED')
    expect((error as Error).message).toContain("onOutput threw: [Object: null prototype] { reason: 'odd' }")
  })

  it('drops the connection of a tcpProxy whose onData throws it, and reports it from close()', async () => {
    const echo = createServer((socket) => socket.pipe(socket))
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve))
    const port = (echo.address() as { port: number }).port
    const proxy = await tcpProxy({
      target: { host: '127.0.0.1', port },
      onData: () => {
        throw unprintable()
      },
    })
    const socket = createConnection({ host: '127.0.0.1', port: proxy.port })
    socket.on('error', () => {})
    socket.write('hello')
    await new Promise((resolve) => socket.once('close', resolve))
    await expect(proxy.close()).rejects.toThrow(
      "tcpProxy: onData threw on connection 1: [Object: null prototype] { reason: 'odd' }",
    )
    await new Promise<void>((resolve) => echo.close(() => resolve()))
  })

  it('treats a rejection of an async onOutput or onData as a throw, instead of leaving it unhandled', async () => {
    const error = await crashLoop({
      script: counter,
      args: ['forever'],
      rounds: 1,
      killAfter: { min: 5, max: 5 },
      log: () => {},
      onOutput: async () => {
        throw new Error('cannot log')
      },
    }).catch((e: unknown) => e)
    expect((error as CrashLoopError).code).toBe('CALLBACK_FAILED')
    expect((error as Error).message).toContain('onOutput threw: cannot log')
    const echo = createServer((socket) => socket.pipe(socket))
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve))
    const port = (echo.address() as { port: number }).port
    const proxy = await tcpProxy({
      target: { host: '127.0.0.1', port },
      onData: async () => {
        throw new Error('tap broke')
      },
    })
    const socket = createConnection({ host: '127.0.0.1', port: proxy.port })
    socket.on('error', () => {})
    socket.write('hello')
    await new Promise((resolve) => socket.once('close', resolve))
    await expect(proxy.close()).rejects.toThrow('tcpProxy: onData threw on connection 1: tap broke')
    await new Promise<void>((resolve) => echo.close(() => resolve()))
  })
})
