// The transform suite against a transform that keeps every rule, and each rule against a
// transform broken on purpose in exactly that way.
import type { LogEvent } from '@ackline/core'
import { type ConformanceError, checkTransform, transformConformance, transformRules } from '@ackline/testkit'
import type { Transform } from '@ackline/topology'
import { describe, expect, it } from 'vitest'

const n = (e: LogEvent) => e.get('n') as number

const splitErrors = (): Transform<'errors'> => ({
  kind: 'split_errors',
  outputs: ['errors'],
  process(events, context) {
    for (const e of events) {
      if (n(e) === 0) context.drop(e)
      else if (e.get('level') === 'error') context.emit(e, 'errors')
      else context.emit(e)
    }
  },
})

transformConformance('a transform that keeps every rule', splitErrors, {
  keepsOrder: true,
  runner: { describe, it },
})

const codes = async (make: () => Transform, keepsOrder = false) =>
  (await checkTransform(make, { keepsOrder })).map((f) => f.code)

describe('each transform rule fails against a transform broken that way', () => {
  it('passes a good transform, merges included', async () => {
    expect(await codes(splitErrors, true)).toEqual([])
    const pairs: Transform = {
      kind: 'pairs',
      process(events, context) {
        const list = events.events
        for (let i = 0; i < list.length; i += 2) {
          if (list[i + 1] !== undefined) list[i]!.merge(list[i + 1]!)
          context.emit(list[i]!)
        }
      },
    }
    expect(await codes(() => pairs, true)).toEqual([])
  })

  it('transform.accounts-for-every-event: a transform that forgets an event', async () => {
    const forgetful: Transform = {
      kind: 'forgetful',
      process(events, context) {
        for (const e of events) if (n(e) !== 3) context.emit(e)
      },
    }
    const found = await checkTransform(() => forgetful)
    expect(found.map((f) => f.code)).toEqual(['transform.accounts-for-every-event', 'transform.in-topology'])
    expect(found[0]!.message).toContain('{"n":3,')
    expect(found[1]!.message).toMatch(/component_error/)
  })

  it('transform.drops-through-context: a transform that ends what it discards', async () => {
    const ender: Transform = {
      kind: 'ender',
      process(events, context) {
        for (const e of events) n(e) === 1 ? e.end() : context.emit(e)
      },
    }
    expect(await codes(() => ender)).toContain('transform.drops-through-context')
  })

  it('transform.emits-once-per-port: a transform that emits one handle twice on a port', async () => {
    const twice: Transform = {
      kind: 'twice',
      process(events, context) {
        for (const e of events) {
          context.emit(e)
          if (n(e) === 2) context.emit(e)
        }
      },
    }
    expect(await codes(() => twice)).toContain('transform.emits-once-per-port')
  })

  it('transform.in-topology: a transform that drops each event and emits a copy without its finalizers', async () => {
    // Broken: the drop acknowledges the source at once, whatever becomes of the copy downstream.
    const replacer: Transform = {
      kind: 'replacer',
      process(events, context) {
        for (const e of events) {
          const copy = context.create({ ...e.fields, seen: true })
          context.drop(e)
          context.emit(copy)
        }
      },
    }
    const found = await checkTransform(() => replacer)
    expect(found.map((f) => f.code)).toEqual(['transform.in-topology'])
    expect(found[0]!.message).toContain(
      "with sinks that fail every event, DeliveryViolation: MODEL_MISMATCH: batch 0 of source 'in' was told 'delivered', but its copies' reports make it 'errored'",
    )
    expect(found[0]!.fix).toContain('context.create(fields, [input])')
    // The same replacement inheriting the input's finalizers keeps every rule.
    const inheriting: Transform = {
      kind: 'inheriting',
      process(events, context) {
        for (const e of events) {
          const copy = context.create({ ...e.fields, seen: true }, [e])
          context.drop(e)
          context.emit(copy)
        }
      },
    }
    expect(await codes(() => inheriting, true)).toEqual([])
  })

  it('ends the events of a process() that throws or never settles, so none is left live', async () => {
    const given: LogEvent[] = []
    const throwing: Transform = {
      kind: 'throwing',
      process(events, context) {
        given.push(...events.events)
        context.emit(events.events[0]!)
        throw new Error('boom')
      },
    }
    const hanging: Transform = {
      kind: 'hanging',
      process(events) {
        given.push(...events.events)
        return new Promise<void>(() => {})
      },
    }
    const direct = transformRules.filter((rule) => rule.id !== 'transform.in-topology')
    const codes: string[] = []
    for (const make of [() => throwing, () => hanging]) {
      for (const rule of direct) {
        await rule
          .check({ make, timeoutMs: 100 })
          .catch((e: ConformanceError) => codes.push(e.code ?? e.message))
      }
    }
    // A throw fails each rule, naming the transform and process() (it escaped as the bare error).
    expect(codes).toEqual([
      'transform.accounts-for-every-event',
      'transform.drops-through-context',
      'transform.emits-once-per-port',
      ...Array(3).fill('transform.settles'),
    ])
    // Each rule stops at its first call, of one event (the two other rules begin their calls in a
    // row with one event too).
    expect(given).toHaveLength(6)
    expect(given.filter((e) => !e.isEnded)).toEqual([])
  })

  it('transform.accounts-for-every-event: a transform that drops or ends its events after process returned, without an uncaught exception', async () => {
    const late = (how: 'drop' | 'end'): Transform => ({
      kind: `late_${how}`,
      process(events, context) {
        // Broken: lets go of the events only after the call returned.
        setImmediate(() => {
          for (const e of events) how === 'drop' ? context.drop(e) : e.end()
        })
      },
    })
    for (const how of ['drop', 'end'] as const) {
      const found = await checkTransform(() => late(how), { timeoutMs: 500 })
      expect(found.map((f) => f.code)).toContain('transform.accounts-for-every-event')
      // Let the late calls of the last rule run: they must not throw.
      await new Promise((resolve) => setImmediate(resolve))
    }
  })

  it('a transform that emits its events and ends them itself later (a timer) fails, in the rules and in a topology', async () => {
    // Made harmless, the late ends passed unseen; in a real topology each throws ALREADY_ENDED.
    const emitsThenEnds: Transform = {
      kind: 'emits_then_ends',
      process(events, context) {
        for (const e of events) {
          context.emit(e)
          setTimeout(() => e.end('delivered'), 0)
        }
      },
    }
    const found = await checkTransform(() => emitsThenEnds, { timeoutMs: 1000 })
    expect(found.map((f) => f.code)).toEqual(['transform.accounts-for-every-event', 'transform.in-topology'])
    // 21 in the batches of every size on fresh transforms, 84 in the 24 calls in a row.
    expect(found[0]!.message).toContain(
      '105 event(s) were ended or dropped after the call that got them returned',
    )
  })

  it('transform.keeps-order: a transform that reverses, when it says it keeps order', async () => {
    const reverse: Transform = {
      kind: 'reverse',
      process(events, context) {
        for (const e of [...events.events].reverse()) context.emit(e)
      },
    }
    expect(await codes(() => reverse, true)).toEqual(['transform.keeps-order'])
    expect(await codes(() => reverse, false)).toEqual([])
  })

  it('transform.settles: a process() or flush() that never settles fails the rules, not waits forever', async () => {
    const never = () => new Promise<void>(() => {})
    const found = await checkTransform(() => ({ kind: 'stuck', process: never }), { timeoutMs: 100 })
    expect(found.map((f) => f.message)).toContain(
      'transform.settles (stuck): process() did not settle within 100 ms\n  fix: process() must resolve or throw; one that waits forever stalls the components around it',
    )
    const flush = await checkTransform(() => ({ ...splitErrors(), kind: 'stuck_flush', flush: never }), {
      timeoutMs: 100,
    })
    expect(flush.map((f) => f.code)).toContain('transform.settles')
  })

  it('transform.accounts-for-every-event: a transform that forgets the events past the last full chunk of three', async () => {
    // The suite only ever gave it 6 events (and 3 + 3 in a topology): multiples of three.
    const chunks: Transform = {
      kind: 'chunks_of_three',
      process(events, context) {
        const list = events.events
        for (let i = 0; i + 3 <= list.length; i += 3) for (const e of list.slice(i, i + 3)) context.emit(e)
      },
    }
    const found = await checkTransform(() => chunks, { keepsOrder: true })
    expect(found.map((f) => f.code)).toEqual(['transform.accounts-for-every-event'])
    expect(found[0]!.message).toContain('of 1 event(s) processed, 1 neither emitted, dropped nor merged')
  })

  it('transform.accounts-for-every-event: a sampler that forgets every event past its tenth, instead of dropping it', async () => {
    // Each rule gave a fresh transform one call of 6 events at most (and 3 + 3 in a topology).
    const make = (): Transform => {
      let seen = 0
      return {
        kind: 'first_ten',
        process(events, context) {
          for (const e of events) if (++seen <= 10) context.emit(e)
        },
      }
    }
    const found = await checkTransform(make, { keepsOrder: true })
    expect(found.map((f) => f.code)).toEqual(['transform.accounts-for-every-event'])
    expect(found[0]!.message).toContain('the first in its call 5, e.g. {"n":0,')
    // A stateful transform that changes later still passes with too few calls; `calls` raises them.
    expect(await checkTransform(make, { keepsOrder: true, calls: 4 })).toEqual([])
    await expect(checkTransform(make, { calls: 0 })).rejects.toThrow(
      "the transform conformance check: 'calls' must be a whole number from 1, got 0",
    )
    expect(found[0]!.message).toMatch(
      /of \d+ event\(s\) processed in \d+ calls by one transform, \d+ neither emitted/,
    )
  })

  it('transform.emits-once-per-port: a transform that emits each event twice from its third call on', async () => {
    const make = (): Transform => {
      let calls = 0
      return {
        kind: 'repeats_later',
        process(events, context) {
          const again = ++calls >= 3
          for (const e of events) {
            context.emit(e)
            if (again) context.emit(e)
          }
        },
      }
    }
    const found = await checkTransform(make, { keepsOrder: true })
    expect(found.map((f) => f.code)).toEqual(['transform.emits-once-per-port'])
    expect(found[0]!.message).toMatch(/in its call \d+ of \d+/)
  })
})

describe('the time a rule is given', () => {
  it("gives the runner's test the time of every call a rule waits for, each up to timeoutMs", async () => {
    // Each call of a correct transform may take up to timeoutMs (a lookup per batch); a rule that
    // makes more calls than its runner timeout holds was ended by the runner, named by no rule.
    let calls = 0
    const counted = (): Transform => {
      const inner = splitErrors()
      return {
        ...inner,
        process(events, context) {
          calls++
          return inner.process(events, context)
        },
        flush() {
          calls++
        },
      }
    }
    const timeoutMs = 50
    const tests: { name: string; body: () => Promise<void>; timeout: number | undefined }[] = []
    transformConformance('counted', counted, {
      calls: 100,
      timeoutMs,
      runner: {
        describe: (_, body) => body(),
        it: (name, body, timeout) => tests.push({ name, body, timeout }),
      },
    })
    for (const test of tests) {
      calls = 0
      await test.body()
      expect(calls * timeoutMs, test.name).toBeLessThanOrEqual(test.timeout ?? 0)
    }
  })
})
