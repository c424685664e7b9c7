import { type DeliveryStatus, OffsetTracker, OffsetTrackerError } from '@ackline/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'

describe('OffsetTracker', () => {
  it('holds the checkpointer cases: track 1..4; resolve 2, 1, 4, 3', () => {
    const tracker = new OffsetTracker<number>()
    const tickets = [1, 2, 3, 4].map((offset) => tracker.track(offset))
    tracker.resolve(tickets[1]!, 'delivered')
    expect(tracker.committable()).toBeUndefined()
    tracker.resolve(tickets[0]!, 'delivered')
    expect(tracker.committable()).toBe(2)
    tracker.resolve(tickets[3]!, 'delivered')
    expect(tracker.committable()).toBe(2)
    tracker.resolve(tickets[2]!, 'delivered')
    expect(tracker.committable()).toBe(4)
    expect(tracker.pending).toBe(0)
  })

  it('starts from the initial key a checkpoint restored', () => {
    const tracker = new OffsetTracker<number>({ initial: 40 })
    expect(tracker.committable()).toBe(40)
    tracker.track(50)
    expect(tracker.committable()).toBe(40)
  })

  it('does not finish an errored record until it is resolved again', () => {
    const tracker = new OffsetTracker<string>()
    const a = tracker.track('a')
    const b = tracker.track('b')
    tracker.resolve(a, 'errored')
    tracker.resolve(b, 'delivered')
    expect(tracker.committable()).toBeUndefined()
    expect(tracker.errored).toBe(1)
    expect(tracker.pending).toBe(1)
    tracker.resolve(a, 'delivered')
    expect(tracker.committable()).toBe('b')
  })

  it('hands out a list of its own to a caller that takes no rejected keys: pushing into it changes nothing', () => {
    const tracker = new OffsetTracker<number>()
    const none = tracker.takeRejected()
    none.push(99)
    tracker.resolve(tracker.track(10), 'delivered')
    expect(tracker.takeRejected()).toEqual([])
  })

  it('names a weight or status String cannot print, with its own error', () => {
    const tracker = new OffsetTracker<number>({ name: 'p1' })
    expect(() => tracker.track(1, Object.create(null) as never)).toThrow(
      expect.objectContaining({
        code: 'INVALID_WEIGHT',
        message: 'p1: weight must be a finite number of at least 0, got [object Object]',
      }),
    )
    expect(() => tracker.track(1, 5n as never)).toThrow('got 5n')
  })

  it('moves past rejected records and hands their keys out once', () => {
    const tracker = new OffsetTracker<number>()
    const a = tracker.track(10)
    const b = tracker.track(20)
    tracker.resolve(b, 'rejected')
    tracker.resolve(a, 'delivered')
    expect(tracker.committable()).toBe(20)
    expect(tracker.takeRejected()).toEqual([20])
    expect(tracker.takeRejected()).toEqual([])
  })

  it('throws on a ticket resolved twice or never handed out, naming the tracker', () => {
    const tracker = new OffsetTracker<number>({ name: 'file /var/log/a.log' })
    const a = tracker.track(1)
    tracker.resolve(a, 'delivered')
    expect(() => tracker.resolve(a, 'delivered')).toThrow(OffsetTrackerError)
    expect(() => tracker.resolve(a, 'delivered')).toThrow(/a\.log.*finished already/)
    expect(() => tracker.resolve(7, 'delivered')).toThrow(/never handed out/)
    expect(() => tracker.resolve(-1, 'delivered')).toThrow(/never handed out/)
  })

  it('refuses a status that is none of the three and leaves the record unfinished', () => {
    const tracker = new OffsetTracker<number>({ name: 'file a.log' })
    const ticket = tracker.track(100)
    for (const status of ['ok', undefined, null, 'dropped', 1]) {
      let error: unknown
      try {
        tracker.resolve(ticket, status as never)
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(OffsetTrackerError)
      expect((error as OffsetTrackerError).code).toBe('INVALID_STATUS')
      expect((error as Error).message).toMatch(/^file a\.log: ticket 0 resolved with status/)
    }
    // The checkpoint must not pass a record nobody delivered.
    expect(tracker.committable()).toBeUndefined()
    expect(tracker.pending).toBe(1)
    expect(tracker.takeRejected()).toEqual([])
    tracker.resolve(ticket, 'delivered')
    expect(tracker.committable()).toBe(100)
  })

  it('refuses a weight that is not a finite number of at least 0, tracking nothing', () => {
    const tracker = new OffsetTracker<number>({ name: 'p1' })
    for (const weight of [Number.NaN, -1, Number.POSITIVE_INFINITY, '2', null]) {
      expect(() => tracker.track(1, weight as never)).toThrow(
        expect.objectContaining({ code: 'INVALID_WEIGHT', message: expect.stringMatching(/^p1: weight/) }),
      )
    }
    expect(tracker.pending).toBe(0)
    expect(tracker.pendingWeight).toBe(0)
    const ticket = tracker.track(1, 0)
    expect(tracker.pendingWeight).toBe(0)
    tracker.resolve(ticket, 'delivered')
    expect(tracker.committable()).toBe(1)
  })

  it('reads a weight of 0 once every record finished, whatever fractional weights summed to', () => {
    const tracker = new OffsetTracker<number>()
    const tickets = [0.1, 0.2].map((weight, i) => tracker.track(i, weight))
    for (const ticket of tickets) tracker.resolve(ticket, 'delivered')
    expect(tracker.pending).toBe(0)
    expect(tracker.pendingWeight).toBe(0)
  })

  it('keeps tickets valid across compactions', () => {
    const tracker = new OffsetTracker<number>()
    const tickets: number[] = []
    for (let i = 0; i < 5000; i++) tickets.push(tracker.track(i))
    for (let i = 0; i < 4000; i++) tracker.resolve(tickets[i]!, 'delivered')
    expect(tracker.committable()).toBe(3999)
    for (let i = 5000; i < 9000; i++) tickets.push(tracker.track(i))
    for (let i = 8999; i >= 4000; i--) tracker.resolve(tickets[i]!, 'delivered')
    expect(tracker.committable()).toBe(8999)
    expect(() => tracker.resolve(tickets[10]!, 'delivered')).toThrow(/finished already/)
  })

  it('agrees with a plain model over random tracks and outcomes (property)', () => {
    type Op = { op: 'track' } | { op: 'resolve'; pick: number; status: 'delivered' | 'errored' | 'rejected' }
    const op = fc.oneof(
      fc.constant<Op>({ op: 'track' }),
      fc.record({
        op: fc.constant('resolve' as const),
        pick: fc.nat(),
        status: fc.constantFrom('delivered' as const, 'errored' as const, 'rejected' as const),
      }),
    )
    const seed = Number(process.env.ACKLINE_SEED ?? Date.now() % 2 ** 31)
    console.log(`OffsetTracker property seed: ${seed}`)
    fc.assert(
      fc.property(fc.array(op, { maxLength: 2500, size: 'max' }), (ops) => {
        const tracker = new OffsetTracker<number>()
        const model: { ticket: number; state: 'pending' | 'errored' | 'finished' }[] = []
        let rejected: number[] = []
        let prefix = 0
        for (const o of ops) {
          if (o.op === 'track') {
            model.push({ ticket: tracker.track(model.length), state: 'pending' })
          } else {
            const open = model.filter((r) => r.state !== 'finished')
            if (open.length === 0) continue
            const record = open[o.pick % open.length]!
            tracker.resolve(record.ticket, o.status)
            if (o.status === 'errored') record.state = 'errored'
            else record.state = 'finished'
            if (o.status === 'rejected') rejected.push(model.indexOf(record))
          }
          // Plain comparisons: an expect per step would dominate the run time.
          while (prefix < model.length && model[prefix]!.state === 'finished') prefix++
          const finished = model.filter((r) => r.state === 'finished').length
          const errored = model.filter((r) => r.state === 'errored').length
          if (
            tracker.committable() !== (prefix === 0 ? undefined : prefix - 1) ||
            tracker.pending !== model.length - finished ||
            tracker.errored !== errored
          ) {
            throw new Error(`tracker and model disagree after ${JSON.stringify(o)} (prefix ${prefix})`)
          }
          if (rejected.length > 0 && o.op === 'resolve' && o.pick % 3 === 0) {
            expect(tracker.takeRejected()).toEqual(rejected)
            rejected = []
          }
        }
      }),
      { seed, numRuns: 25 },
    )
  })
})

describe('OffsetTracker.capped', () => {
  it('waits while the cap is reached and admits in order as records finish', async () => {
    const tracker = OffsetTracker.capped<number>({ maxPending: 2 })
    const a = await tracker.track(1)
    await tracker.track(2)
    let third: number | undefined
    const waiting = tracker.track(3).then((t) => {
      third = t
    })
    await Promise.resolve()
    expect(third).toBeUndefined()
    expect(tracker.waiting).toBe(1)
    tracker.resolve(a, 'delivered')
    await waiting
    expect(third).toBe(2)
    expect(tracker.committable()).toBe(1)
  })

  it('always admits when nothing is pending, even a record heavier than the cap', async () => {
    const tracker = OffsetTracker.capped<number>({ maxPending: 2 })
    const heavy = await tracker.track(1, 5)
    expect(tracker.pending).toBe(1)
    let admitted = false
    const next = tracker.track(2).then(() => {
      admitted = true
    })
    await Promise.resolve()
    expect(admitted).toBe(false)
    tracker.resolve(heavy, 'delivered')
    await next
    expect(admitted).toBe(true)
  })

  it('admits a record heavier than the cap once fractional weights have all finished', async () => {
    // 0.1 + 0.2 - 0.1 - 0.2 is 2.8e-17 in doubles: the weight in flight must still read 0.
    const tracker = OffsetTracker.capped<number>({ maxPending: 1 })
    const a = await tracker.track(1, 0.1)
    const b = await tracker.track(2, 0.2)
    tracker.resolve(a, 'delivered')
    tracker.resolve(b, 'delivered')
    expect(tracker.pending).toBe(0)
    let admitted = false
    const heavy = tracker.track(3, 5).then((ticket) => {
      admitted = true
      return ticket
    })
    await Promise.resolve()
    expect(tracker.waiting).toBe(0)
    expect(admitted).toBe(true)
    tracker.resolve(await heavy, 'delivered')
    expect(tracker.committable()).toBe(3)
  })

  it('admits a record that fills the cap exactly beside fractional weights still in flight', async () => {
    // 0.2 + 0.6 + 0.4 - 0.2 - 0.6 is 0.40000000000000024 in doubles: with 1.6 more, 2.0000000000000004.
    const tracker = OffsetTracker.capped<number>({ maxPending: 2 })
    const a = await tracker.track(1, 0.2)
    const b = await tracker.track(2, 0.6)
    await tracker.track(3, 0.4)
    tracker.resolve(a, 'delivered')
    tracker.resolve(b, 'delivered')
    let admitted = false
    void tracker.track(4, 1.6).then(() => {
      admitted = true
    })
    await Promise.resolve()
    expect(tracker.waiting).toBe(0)
    expect(admitted).toBe(true)
  })

  it('admits a record heavier than the cap while only weightless records are in flight', async () => {
    // Their sum is 0, read as 2.8e-17 after 0.1 and 0.2 came and went: the heavy record waited.
    const tracker = OffsetTracker.capped<number>({ maxPending: 1 })
    const a = await tracker.track(1, 0.1)
    const b = await tracker.track(2, 0.2)
    await tracker.track(3, 0)
    tracker.resolve(a, 'delivered')
    tracker.resolve(b, 'delivered')
    expect(tracker.pending).toBe(1)
    let admitted = false
    void tracker.track(4, 5).then(() => {
      admitted = true
    })
    await Promise.resolve()
    expect(admitted).toBe(true)
    // A whole weight in flight still holds back what would pass the cap.
    let second = false
    void tracker.track(5, 1).then(() => {
      second = true
    })
    await Promise.resolve()
    expect(second).toBe(false)
  })

  it('admits a record heavier than the cap only alone, however large the cap (bytes in flight)', async () => {
    // The tolerance is maxPending·1e-9: 2 at a cap of 2e9. Two 1-byte records in flight read as
    // "nothing in flight", and a 5e9-byte record went in beside them, not alone.
    const tracker = OffsetTracker.capped<number>({ maxPending: 2e9 })
    const a = await tracker.track(1, 1)
    const b = await tracker.track(2, 1)
    let admitted = false
    const heavy = tracker.track(3, 5e9).then((ticket) => {
      admitted = true
      return ticket
    })
    await Promise.resolve()
    expect(admitted).toBe(false)
    expect(tracker.waiting).toBe(1)
    tracker.resolve(a, 'delivered')
    expect(tracker.waiting).toBe(1)
    tracker.resolve(b, 'delivered')
    expect(tracker.waiting).toBe(0)
    tracker.resolve(await heavy, 'delivered')
    expect(tracker.committable()).toBe(3)
  })

  it('admits in call order, never past the cap unless nothing that weighs is in flight, and never holds back a record that fits (property)', async () => {
    type Step = { op: 'track'; kind: number } | { op: 'resolve'; pick: number; status: DeliveryStatus }
    const step = fc.oneof(
      fc.record({ op: fc.constant('track' as const), kind: fc.nat(6) }),
      fc.record({
        op: fc.constant('resolve' as const),
        pick: fc.nat(),
        status: fc.constantFrom<DeliveryStatus>('delivered', 'errored', 'rejected'),
      }),
    )
    // Caps of records and of bytes; weights exact in doubles (quarters). A record fits within the
    // documented tolerance, maxPending·1e-9 (1 at a cap of 1e9).
    const cap = fc.oneof(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1e9, max: 4e9 }))
    const seed = Number(process.env.ACKLINE_SEED ?? Date.now() % 2 ** 31)
    console.log(`CappedOffsetTracker property seed: ${seed}`)
    await fc.assert(
      fc.asyncProperty(cap, fc.array(step, { maxLength: 60 }), async (max, steps: Step[]) => {
        const weights = [0, 0.25, 1, 2, Math.floor(max / 2), max, max * 2 + 1]
        const tracker = OffsetTracker.capped<number>({ maxPending: max })
        const inFlight = new Map<number, number>() // ticket → weight, admitted and not finished
        const queued: { id: number; weight: number }[] = []
        let calls = 0
        const wrong: string[] = []
        const weighing = () => [...inFlight.values()].filter((w) => w > 0).length
        const sum = () => [...inFlight.values()].reduce((a, b) => a + b, 0)
        const room = max + max * 1e-9
        for (const s of steps) {
          if (s.op === 'track') {
            const id = calls++
            const weight = weights[s.kind]!
            queued.push({ id, weight })
            void tracker.track(id, weight).then((ticket) => {
              // Admitted in call order, and within the cap unless nothing that weighs was in flight.
              if (queued[0]?.id !== id) wrong.push(`record ${id} admitted before ${queued[0]?.id}`)
              queued.shift()
              if (weighing() > 0 && sum() + weight > room) {
                wrong.push(`record ${id} (${weight}) admitted beside ${sum()} in flight, cap ${max}`)
              }
              inFlight.set(ticket, weight)
            })
          } else {
            const tickets = [...inFlight.keys()]
            if (tickets.length === 0) continue
            const ticket = tickets[s.pick % tickets.length]!
            if (s.status !== 'errored') inFlight.delete(ticket)
            tracker.resolve(ticket, s.status)
          }
          for (let i = 0; i < 4; i++) await Promise.resolve()
          expect(wrong).toEqual([])
          // Nothing waits that could go in: the first waiting record does not fit beside weight.
          expect(tracker.waiting).toBe(queued.length)
          if (queued.length > 0) expect(weighing() > 0 && sum() + queued[0]!.weight > room).toBe(true)
          expect(tracker.pending).toBe(inFlight.size)
        }
      }),
      { seed, numRuns: 300 },
    )
  })

  it('keeps an errored record in flight', async () => {
    const tracker = OffsetTracker.capped<number>({ maxPending: 1 })
    const a = await tracker.track(1)
    tracker.resolve(a, 'errored')
    let admitted = false
    const next = tracker.track(2).then(() => {
      admitted = true
    })
    await Promise.resolve()
    expect(admitted).toBe(false)
    tracker.resolve(a, 'delivered')
    await next
    expect(admitted).toBe(true)
  })

  it('refuses a bad weight at once, so the cap keeps admitting (a NaN weight once blocked it for good)', async () => {
    const tracker = OffsetTracker.capped<number>({ maxPending: 2, name: 'p2' })
    await expect(tracker.track(1, Number.NaN)).rejects.toMatchObject({ code: 'INVALID_WEIGHT' })
    const a = await tracker.track(1)
    await expect(tracker.track(2, -5)).rejects.toMatchObject({ code: 'INVALID_WEIGHT' })
    // A bad weight behind a full cap is refused too, not queued to throw inside a later resolve.
    const b = await tracker.track(2)
    await expect(tracker.track(3, '1' as never)).rejects.toMatchObject({ code: 'INVALID_WEIGHT' })
    expect(tracker.waiting).toBe(0)
    const c = tracker.track(3)
    tracker.resolve(a, 'delivered')
    tracker.resolve(b, 'delivered')
    tracker.resolve(await c, 'delivered')
    expect(tracker.committable()).toBe(3)
    expect(tracker.pending).toBe(0)
  })

  it('rejects waiting tracks on close, and refuses a bad cap', async () => {
    const tracker = OffsetTracker.capped<number>({ maxPending: 1, name: 'p0' })
    await tracker.track(1)
    const waiting = tracker.track(2)
    tracker.close()
    await expect(waiting).rejects.toThrow(/p0: the tracker is closed/)
    expect(() => OffsetTracker.capped({ maxPending: 0 })).toThrow(/maxPending must be an integer/)
  })
})

describe('OffsetTracker options from untyped code', () => {
  it('takes null options as none, and refuses capped options that are no object with INVALID_OPTION', () => {
    const tracker = new OffsetTracker<number>(null as never)
    tracker.resolve(tracker.track(7), 'delivered')
    expect(tracker.committable()).toBe(7)
    for (const options of [undefined, null, 5]) {
      const error = (() => {
        try {
          OffsetTracker.capped(options as never)
        } catch (thrown) {
          return thrown
        }
        return undefined
      })()
      expect(error).toBeInstanceOf(OffsetTrackerError)
      expect(error).toMatchObject({ code: 'INVALID_OPTION' })
    }
  })
})
