// CrashReporter.sink: a wrapper that reports what a write delivered, and changes nothing else.
import { EventArray, LogEvent } from '@ackline/core'
import { CrashReporter } from '@ackline/testkit'
import { RejectError, type Sink } from '@ackline/topology'
import { describe, expect, it } from 'vitest'

const events = () => EventArray.from([new LogEvent({ id: 'a' }), new LogEvent({ other: 1 })])

describe('CrashReporter.sink', () => {
  it("fails a write whose 'key' returns no string or number for a delivered event, naming the option, never as a rejection", async () => {
    // The key was checked by report(), whose TypeError the runtime reads as `rejected`
    // (UNENCODABLE): a stored batch was told rejected and the error named no option. The inner
    // sink has stored the write by then (a key is only needed for what it delivered): the runtime
    // retries it and then settles it `errored`.
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
      expect((error as Error).message).toMatch(
        /'key' returned .* for event 1 of 2, which the write reported delivered/,
      )
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

describe('CrashReporter.sink and the records a sink rejects', () => {
  it('uses no key of a record the sink rejected: the good records of the write are delivered and reported as without the wrapper', async () => {
    // Every key was checked before the write: a sink that rejects records lacking the key's field
    // (the malformed ones) had the whole write failed, its good records retried and then errored.
    const stored: unknown[] = []
    const inner: Sink = {
      kind: 'inner',
      async write(batch) {
        return batch.events.map((e) => {
          if (e.get('id') === undefined) return 'rejected'
          stored.push(e.get('id'))
          return 'delivered'
        })
      },
    }
    const sink = CrashReporter.sink(inner, { key: (e) => e.get('id') as string })
    expect(await sink.write(events())).toEqual(['delivered', 'rejected'])
    expect(stored).toEqual(['a'])
  })
})
