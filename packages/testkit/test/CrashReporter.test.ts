// CrashReporter.sink: a wrapper that reports what a write delivered, and changes nothing else.
import { EventArray, LogEvent } from '@ackline/core'
import { CrashReporter } from '@ackline/testkit'
import { RejectError, type Sink } from '@ackline/topology'
import { describe, expect, it } from 'vitest'

const events = () => EventArray.from([new LogEvent({ id: 'a' }), new LogEvent({ other: 1 })])

describe('CrashReporter.sink', () => {
  it("fails a write whose 'key' returns no string or number before the inner sink stores anything, naming the option, never as a rejection", async () => {
    // The key was checked after the inner write had stored the events, by report(), whose
    // TypeError the runtime reads as `rejected` (UNENCODABLE): a stored batch was told rejected
    // and the error named no option.
    for (const bad of [undefined, null, { id: 'a' }, 10n, Symbol('k')]) {
      const stored: unknown[] = []
      const inner: Sink = {
        kind: 'inner',
        async write(batch) {
          for (const e of batch) stored.push(e.fields)
          return undefined
        },
      }
      const sink = CrashReporter.sink(inner, { key: (e) => (e.get('id') === 'a' ? 'a' : bad) as string })
      const error = await sink.write(events()).then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(error).toBeInstanceOf(Error)
      expect(error).not.toBeInstanceOf(TypeError)
      expect(error).not.toBeInstanceOf(RangeError)
      expect(error).not.toBeInstanceOf(RejectError)
      expect((error as Error).message).toMatch(/'key'/)
      expect(stored).toEqual([])
    }
  })

  it("fails a write whose 'key' throws the same way, with the thrown value as its cause", async () => {
    const inner: Sink = { kind: 'inner', write: async () => undefined }
    const boom = new TypeError('no such field')
    const sink = CrashReporter.sink(inner, {
      key: () => {
        throw boom
      },
    })
    const error = (await sink.write(events()).catch((e: unknown) => e)) as Error
    expect(error).not.toBeInstanceOf(TypeError)
    expect(error.message).toMatch(/'key'/)
    expect(error.cause).toBe(boom)
  })

  it("refuses a 'key' that is not a function when it wraps the sink", () => {
    const inner: Sink = { kind: 'inner', write: async () => undefined }
    expect(() => CrashReporter.sink(inner, { key: 'id' as never })).toThrow(/'key' must be a function/)
  })

  it('reads the keys before the write, so a sink that ends its events still has its result passed on as it is', async () => {
    // Read after the write, a handle the (broken) sink had ended threw, and the write failed with
    // the read error instead of the sink's own result.
    const inner: Sink = {
      kind: 'inner',
      async write(batch) {
        for (const e of batch) e.end('delivered')
        return ['delivered', 'errored']
      },
    }
    const sink = CrashReporter.sink(inner, { key: (e) => String(e.get('id') ?? 'none') })
    expect(await sink.write(events())).toEqual(['delivered', 'errored'])
  })
})
