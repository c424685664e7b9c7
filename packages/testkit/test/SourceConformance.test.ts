// The source suite against a queue source that keeps every rule, and each rule against a source
// broken on purpose in exactly that way.
import { BatchNotifier, EventArray, type JsonObject } from '@ackline/core'
import { checkSource, type SourceUnderTest, sourceConformance } from '@ackline/testkit'
import type { Source } from '@ackline/topology'
import { describe, expect, it } from 'vitest'

/** A fake queue: records in, acks and nacks out. */
class Queue {
  readonly waiting: JsonObject[] = []
  readonly acked: JsonObject[] = []
  readonly failed: JsonObject[] = []
  closed = false
  #wake: (() => void) | undefined
  publish(records: readonly JsonObject[]) {
    this.waiting.push(...records)
    this.#wake?.()
  }
  close() {
    this.closed = true
    this.#wake?.()
  }
  next(signal: AbortSignal): Promise<void> {
    if (this.waiting.length > 0 || this.closed || signal.aborted) return Promise.resolve()
    return new Promise((resolve) => {
      this.#wake = resolve
      signal.addEventListener('abort', () => resolve(), { once: true })
    })
  }
}

type Flavour =
  | 'good'
  | 'resends'
  | 'fire-and-forget'
  | 'acks-on-accept'
  | 'peeks-failure'
  | 'commits-at-stop'
  | 'commits-after-return'
  | 'dedupes-acks-all'
  | 'dedupes'

function queueSource(queue: Queue, flavour: Flavour): Source {
  return {
    kind: `queue_${flavour}`,
    canAcknowledge: true,
    async run(context) {
      const pending: Promise<unknown>[] = []
      while (!context.signal.aborted && !(queue.closed && queue.waiting.length === 0)) {
        await queue.next(context.signal)
        const read = queue.waiting.splice(0, flavour.startsWith('commits-a') ? 2 : queue.waiting.length)
        if (read.length === 0) continue
        // Broken ('dedupes…'): keeps what it read by content, so of two equal records it sends one;
        // then acknowledges all it read ('dedupes-acks-all') or what it sent ('dedupes').
        const batch = flavour.startsWith('dedupes')
          ? [...new Map(read.map((r) => [JSON.stringify(r), r])).values()]
          : read
        const settled = flavour === 'dedupes-acks-all' ? read : batch
        if (flavour === 'resends') {
          // Sends an errored batch again until it is delivered; fails it back at the stop.
          for (;;) {
            const status = await (await context.send(batch)).status
            if (status === 'delivered' || context.signal.aborted) {
              ;(status === 'delivered' ? queue.acked : queue.failed).push(...batch)
              break
            }
          }
          continue
        }
        const sending = context.send(batch).then(async (receipt) => {
          if (flavour === 'acks-on-accept') {
            queue.acked.push(...batch)
            return
          }
          if (flavour === 'peeks-failure') {
            // Broken: reads failure before status resolved (undefined then), so acknowledges every batch.
            ;(receipt.failure === undefined ? queue.acked : queue.failed).push(...batch)
            return
          }
          const status = await receipt.status
          ;(status === 'delivered' ? queue.acked : queue.failed).push(...settled)
        })
        // Broken: keeps the send in a list instead of awaiting it, so run() may return first.
        if (flavour === 'fire-and-forget') pending.push(sending)
        else await sending
      }
      void pending
      // Broken: at the stop, commits the whole position read, records never sent included.
      if (flavour === 'commits-at-stop') queue.acked.push(...queue.waiting.splice(0))
      // Broken the same way, but the commit is not awaited: the upstream hears it after run()
      // returned (a client's commit still on its way to the broker).
      if (flavour === 'commits-after-return')
        setTimeout(() => queue.acked.push(...queue.waiting.splice(0)), 0)
    },
  }
}

const make = (flavour: Flavour) => (): SourceUnderTest => {
  const queue = new Queue()
  return {
    source: queueSource(queue, flavour),
    feed: (records) => queue.publish(records),
    end: () => queue.close(),
    upstream: () => ({ acked: queue.acked, failed: queue.failed }),
  }
}

sourceConformance('a queue source that keeps every rule', make('good'), { runner: { describe, it } })

const codes = async (flavour: Flavour) =>
  (await checkSource(make(flavour), { timeoutMs: 500 })).map((f) => f.code)

describe('each source rule fails against a source broken that way', () => {
  it('passes the good one', async () => {
    expect(await codes('good')).toEqual([])
  })

  it('source.run-waits-for-accepted: a source that does not await its sends', async () => {
    expect(await codes('fire-and-forget')).toContain('source.run-waits-for-accepted')
  })

  it('source.acknowledges-only-delivered: a source that acknowledges once its batch is accepted', async () => {
    const found = await checkSource(make('acks-on-accept'), { timeoutMs: 500 })
    expect(found.map((f) => f.code)).toEqual(['source.acknowledges-only-delivered'])
    expect(found[0]!.message).toMatch(/accepted but not yet resolved.*\n {2}fix: read receipt\.status/)
  })

  it('source.acknowledges-only-delivered: a source that reads receipt.failure before its status resolved', async () => {
    // The suite accepted a batch and resolved its status in one go, so failure was already set
    // when the source read it; the runtime accepts a batch long before its sinks settle it.
    const found = await checkSource(make('peeks-failure'), { timeoutMs: 500 })
    expect(found.map((f) => f.code)).toEqual(['source.acknowledges-only-delivered'])
    expect(found[0]!.message).toContain(
      'the upstream heard "done" for 3 record(s) of a batch accepted but not yet resolved, e.g. {"n":0,',
    )
  })

  it('source.acknowledges-only-delivered: a source that acknowledges, at the stop, records it read but never sent', async () => {
    // The stop was only checked for run() returning; what the upstream heard then was not read.
    const found = await checkSource(make('commits-at-stop'), { timeoutMs: 500 })
    expect(found.map((f) => f.code)).toEqual(['source.acknowledges-only-delivered'])
    expect(found[0]!.message).toContain(
      'at the stop, the upstream heard "done" for 4 record(s) never sent in a batch resolved delivered, e.g. {"n":2,',
    )
  })

  it('source.acknowledges-only-delivered: a source whose commit of the records it read but never sent reaches the upstream after run() returned', async () => {
    // The upstream was read as soon as run() returned: an acknowledgement still on its way then
    // (a commit not awaited, resolved on the next turn) was never seen, and the source passed.
    const found = await checkSource(make('commits-after-return'), { timeoutMs: 500 })
    expect(found.map((f) => f.code)).toEqual(['source.acknowledges-only-delivered'])
    expect(found[0]!.message).toContain(
      'at the stop, the upstream heard "done" for 4 record(s) never sent in a batch resolved delivered',
    )
  })

  it('source.run-throws: a run() that rejects is reported with its cause, never left an unhandled rejection', async () => {
    const boom = new Error('cannot connect')
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      const found = await checkSource(
        () => ({
          source: {
            kind: 'broken',
            canAcknowledge: true,
            run: async () => {
              throw boom
            },
          },
          feed: () => {},
          upstream: () => ({ acked: [], failed: [] }),
        }),
        { timeoutMs: 5000 },
      )
      expect(found.map((f) => [f.code, f.message.split('\n')[0], f.cause])).toEqual([
        ['source.run-throws', 'source.run-throws (broken): run() threw: cannot connect', boom],
        ['source.run-throws', 'source.run-throws (broken): run() threw: cannot connect', boom],
      ])
      // A rejection is reported as unhandled once a turn passes without a handler: give it those turns.
      await new Promise((resolve) => setImmediate(resolve))
      expect(unhandled).toEqual([])
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
  })

  it('source.settles: a make() or feed() that never settles fails the rules, not waits forever', async () => {
    const never = () => new Promise<never>(() => {})
    const made = await checkSource(never, { timeoutMs: 100 })
    expect(made.map((f) => f.message.split('\n')[0])).toEqual([
      'source.settles (source): make() did not settle within 100 ms',
      'source.settles (source): make() did not settle within 100 ms',
    ])
    const fed = await checkSource(() => ({ ...make('good')(), feed: never }), { timeoutMs: 100 })
    expect(fed.map((f) => f.message.split('\n')[0])).toEqual([
      'source.settles (queue_good): feed() did not settle within 100 ms',
      'source.settles (queue_good): feed() did not settle within 100 ms',
    ])
  })

  it('stops the source of a failed rule: its signal aborts and its pending send is accepted, so run() returns', async () => {
    const runs: Promise<void>[] = []
    const signals: AbortSignal[] = []
    let feeds = 0
    const found = await checkSource(
      () => ({
        source: {
          kind: 'stuck',
          canAcknowledge: true,
          run(context) {
            signals.push(context.signal)
            const run = (async () => {
              await context.send([{ n: 0 }])
              if (!context.signal.aborted)
                await new Promise((resolve) => context.signal.addEventListener('abort', resolve))
            })()
            runs.push(run)
            return run
          },
        },
        // The second rule's feed never settles: the rule fails while the source waits on its send.
        feed: () => (++feeds === 1 ? undefined : new Promise<never>(() => {})),
        upstream: () => ({ acked: [], failed: [] }),
      }),
      { timeoutMs: 100 },
    )
    expect(found.map((f) => f.code)).toEqual(['source.settles'])
    expect(signals.map((s) => s.aborted)).toEqual([true, true])
    await Promise.all(runs)
  })

  it('source.acknowledges-only-delivered: a source whose later commit acknowledges an errored batch', async () => {
    // Broken like a consumer that commits offsets: it fails an errored batch back, but committing
    // the next delivered batch's offset acknowledges everything before it, the errored batch too.
    const found = await checkSource(
      () => {
        const queue = new Queue()
        const log: JsonObject[] = []
        let committed = 0
        const source: Source = {
          kind: 'offsets',
          canAcknowledge: true,
          async run(context) {
            while (!context.signal.aborted && !(queue.closed && queue.waiting.length === 0)) {
              await queue.next(context.signal)
              const batch = queue.waiting.splice(0)
              if (batch.length === 0) continue
              log.push(...batch)
              const end = log.length
              const receipt = await context.send(batch)
              void receipt.status.then((status) => {
                if (status === 'delivered') committed = Math.max(committed, end)
                else queue.failed.push(...batch)
              })
            }
          },
        }
        return {
          source,
          feed: (records) => queue.publish(records),
          end: () => queue.close(),
          upstream: () => ({ acked: log.slice(0, committed), failed: queue.failed }),
        }
      },
      { timeoutMs: 500 },
    )
    expect(found.map((f) => f.code)).toEqual(['source.acknowledges-only-delivered'])
    expect(found[0]!.message).toContain('the upstream heard "done" for 3 record(s) of an errored batch')
  })

  it('scripts a source that sends events with notifiers of its own as it scripts send', async () => {
    // An offset-tracking source: its own notifier per batch; the upstream hears what it reports.
    const make = (broken: boolean) => (): SourceUnderTest => {
      const queue = new Queue()
      const source: Source = {
        kind: broken ? 'own_notifiers_acks_on_accept' : 'own_notifiers',
        canAcknowledge: true,
        async run(context) {
          while (!context.signal.aborted && !(queue.closed && queue.waiting.length === 0)) {
            await queue.next(context.signal)
            const batch = queue.waiting.splice(0)
            if (batch.length === 0) continue
            const { notifier, receiver } = BatchNotifier.create({ sourceId: 'own' })
            await context.sendEvents(EventArray.fromRecords(batch, { sourceId: 'own', batch: notifier }))
            // Broken: acknowledges once the events are accepted, whatever becomes of them.
            if (broken) queue.acked.push(...batch)
            else
              void receiver.promise.then((s) =>
                (s === 'delivered' ? queue.acked : queue.failed).push(...batch),
              )
          }
        },
      }
      return {
        source,
        feed: (records) => queue.publish(records),
        end: () => queue.close(),
        upstream: () => ({ acked: queue.acked, failed: queue.failed }),
      }
    }
    expect((await checkSource(make(false), { timeoutMs: 500 })).map((f) => f.code)).toEqual([])
    expect((await checkSource(make(true), { timeoutMs: 500 })).map((f) => f.code)).toEqual([
      'source.acknowledges-only-delivered',
    ])
  })

  it('refuses a send of something else than records, as the runtime does, so such a source fails', async () => {
    const make = (): SourceUnderTest => {
      const queue = new Queue()
      const good = queueSource(queue, 'good')
      return {
        source: {
          ...good,
          kind: 'nulls',
          // Broken: sends null in place of each record.
          run: (context) =>
            good.run({ ...context, send: (records) => context.send([...records].map(() => null as never)) }),
        },
        feed: (records) => queue.publish(records),
        end: () => queue.close(),
        upstream: () => ({ acked: queue.acked, failed: queue.failed }),
      }
    }
    const found = await checkSource(make, { timeoutMs: 500 })
    expect(found.map((f) => f.message.split('\n')[0])).toEqual([
      "source.run-throws (nulls): run() threw: source 'conformance': record 0 of a send is null; a record must be a JSON object",
      "source.run-throws (nulls): run() threw: source 'conformance': record 0 of a send is null; a record must be a JSON object",
    ])
  })

  it('honours { outcomes: true }: a source that settles each record by its own outcome passes, and one that misreads them fails', async () => {
    // As the amqp and nats sources do: each record is acknowledged or failed back by its outcome.
    // The scripted context ignored the option, so receipt.outcomes was undefined and a source
    // that read it as SendOptions documents failed source.run-throws, blamed for the suite.
    const make = (misreads: boolean) => (): SourceUnderTest => {
      const queue = new Queue()
      const source: Source = {
        kind: misreads ? 'outcomes_misread' : 'outcomes',
        canAcknowledge: true,
        async run(context) {
          while (!context.signal.aborted && !(queue.closed && queue.waiting.length === 0)) {
            await queue.next(context.signal)
            const batch = queue.waiting.splice(0)
            if (batch.length === 0) continue
            const receipt = await context.send(batch, { outcomes: true })
            const outcomes = await receipt.outcomes!
            batch.forEach((record, i) => {
              const outcome = outcomes.get(i)
              // Broken: takes 'errored' (worth a re-send) for done.
              const done =
                outcome === 'delivered' || outcome === 'dropped' || (misreads && outcome === 'errored')
              ;(done ? queue.acked : queue.failed).push(record)
            })
          }
        },
      }
      return {
        source,
        feed: (records) => queue.publish(records),
        end: () => queue.close(),
        upstream: () => ({ acked: queue.acked, failed: queue.failed }),
      }
    }
    expect((await checkSource(make(false), { timeoutMs: 500 })).map((f) => f.message)).toEqual([])
    expect((await checkSource(make(true), { timeoutMs: 500 })).map((f) => f.code)).toEqual([
      'source.acknowledges-only-delivered',
    ])
  })

  it('refuses a send with outcomes: true and receipt: false, as the runtime does', async () => {
    const make = (): SourceUnderTest => {
      const queue = new Queue()
      const good = queueSource(queue, 'good')
      return {
        source: {
          ...good,
          kind: 'no_receipt',
          run: (context) =>
            good.run({
              ...context,
              send: (records) => context.send(records, { outcomes: true, receipt: false }),
            }),
        },
        feed: (records) => queue.publish(records),
        end: () => queue.close(),
        upstream: () => ({ acked: queue.acked, failed: queue.failed }),
      }
    }
    const found = await checkSource(make, { timeoutMs: 500 })
    expect(found.map((f) => f.message.split('\n')[0])).toContain(
      "source.run-throws (no_receipt): run() threw: source 'conformance': a send with outcomes: true needs its receipt (it was sent with receipt: false)",
    )
  })

  describe('records that repeat: each copy is a record of its own', () => {
    // Two equal records in one feed, and equal records across the errored batch and the later ones.
    const a = { n: 1, message: 'same' }
    const b = { n: 2, message: 'same' }
    const repeated = [a, a, b, { n: 3 }, { n: 3 }, { n: 4 }]
    const twice = [a, b, { n: 3 }, a, b, { n: 3 }]

    it('passes sources that send, acknowledge and re-send every copy', async () => {
      for (const records of [repeated, twice]) {
        for (const flavour of ['good', 'resends'] as const) {
          const found = await checkSource(make(flavour), { records, timeoutMs: 500 })
          expect(
            found.map((f) => f.message),
            `${flavour} over ${JSON.stringify(records)}`,
          ).toEqual([])
        }
      }
    })

    it('source.acknowledges-only-delivered: a source that sends one of two equal records and acknowledges both', async () => {
      // An acknowledged record was matched by any equal record sent: the copy never sent passed.
      const found = await checkSource(make('dedupes-acks-all'), { records: repeated, timeoutMs: 500 })
      expect(found.map((f) => f.message.split('\n')[0])).toEqual([
        'source.acknowledges-only-delivered (queue_dedupes-acks-all): at the stop, the upstream heard "done" for 2 record(s) never sent in a batch resolved delivered, e.g. {"n":1,"message":"same"}',
        'source.acknowledges-only-delivered (queue_dedupes-acks-all): the upstream heard "done" for 1 record(s) never sent in a batch resolved delivered, e.g. {"n":3}',
      ])
    })

    it('source.acknowledges-only-delivered: a source that sends one of two equal records and drops the other', async () => {
      // The later records were found acknowledged by any equal one: the copy never sent passed.
      const found = await checkSource(make('dedupes'), { records: repeated, timeoutMs: 500 })
      expect(found.map((f) => f.message.split('\n')[0])).toEqual([
        'source.acknowledges-only-delivered (queue_dedupes): the source never sent 2 of the 6 record(s) fed (nor failed them back), e.g. {"n":1,"message":"same"}',
      ])
    })

    it('source.acknowledges-only-delivered: a source that neither re-sends nor fails back one of two equal records of an errored batch', async () => {
      // The errored batch's records were found failed back by any equal one.
      const found = await checkSource(
        () => {
          const under = make('good')()
          const failed: JsonObject[] = []
          return {
            ...under,
            upstream: () => {
              const { acked, failed: all } = under.upstream!()
              // Broken: fails back each record of a batch once, however many copies it held.
              failed.splice(0, failed.length, ...new Map(all.map((r) => [JSON.stringify(r), r])).values())
              return { acked, failed }
            },
          }
        },
        { records: repeated, timeoutMs: 500 },
      )
      expect(found.map((f) => f.message.split('\n')[0])).toEqual([
        'source.acknowledges-only-delivered (queue_good): 1 record(s) of an errored batch were neither re-sent nor failed back to the upstream, e.g. {"n":1,"message":"same"}',
      ])
    })

    it('matches records deeply equal, whatever the order of their keys (an upstream that stores them as jsonb)', async () => {
      // Compared as JSON text, a record read back with its keys in another order was never found
      // acknowledged: a correct source failed.
      const sorted = (r: JsonObject): JsonObject =>
        Object.fromEntries(Object.entries(r).sort(([x], [y]) => (x < y ? -1 : 1))) as JsonObject
      const found = await checkSource(
        () => {
          const under = make('good')()
          return {
            ...under,
            upstream: () => {
              const { acked, failed } = under.upstream!()
              return { acked: acked.map(sorted), failed: failed.map(sorted) }
            },
          }
        },
        { timeoutMs: 500 },
      )
      expect(found.map((f) => f.message)).toEqual([])
    })
  })
})

describe('the time a rule is given', () => {
  it("gives the runner's test the time of every step a rule waits for, each up to timeoutMs", async () => {
    // Each step of a correct source may take up to timeoutMs (a broker's round trip to send, a
    // slow feed); a rule that waits for more steps than its runner timeout holds was ended by the
    // runner, named by no rule.
    let steps = 0
    const counted = (): SourceUnderTest => {
      steps++
      const under = make('good')()
      return {
        ...under,
        feed: (records) => {
          steps++
          return under.feed!(records)
        },
        source: {
          ...under.source,
          async run(context) {
            await under.source.run({
              ...context,
              send: (records, options) => {
                steps++
                return context.send(records, options)
              },
            })
            steps++
          },
        },
      }
    }
    const timeoutMs = 50
    const tests: { name: string; body: () => Promise<void>; timeout: number | undefined }[] = []
    sourceConformance('counted', counted, {
      timeoutMs,
      runner: {
        describe: (_, body) => body(),
        it: (name, body, timeout) => tests.push({ name, body, timeout }),
      },
    })
    expect(tests).toHaveLength(2)
    for (const test of tests) {
      steps = 0
      await test.body()
      expect(steps * timeoutMs, test.name).toBeLessThanOrEqual(test.timeout ?? 0)
    }
  })
})
