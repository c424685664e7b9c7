// The file source on real temp files, through real topologies: tailing, restarts from the
// checkpoint, rotation, truncation, inode reuse, rejected and errored lines, overlong lines.
import { constants } from 'node:buffer'
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import {
  appendFileSync,
  chmodSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs'
import { type FileHandle, open } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { DeliveryStatus, EventArray } from '@ackline/core'
import { DEAD_LETTER_FILE, FileSourceError, file } from '@ackline/sources'
import {
  ConfigIssue,
  perEvent,
  type Sink,
  type SourceContext,
  type Topology,
  TopologyBuilder,
  type Transform,
} from '@ackline/topology'
import { afterEach, beforeEach, describe, expect, it, type MockInstance, onTestFinished, vi } from 'vitest'
import { Checkpoints } from '../../src/internal/Checkpoints.js'
import { DeadLetterFile } from '../../src/internal/DeadLetterFile.js'
import { FakeSourceContext } from '../support/FakeSourceContext.js'
import { fsyncFaults } from '../support/FsyncFaults.js'

let dir: string
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ackline-file-'))
})
afterEach(() => {
  rmSync(dir, { recursive: true, force: true })
})

const lines = (...xs: string[]) => xs.map((x) => `${x}\n`).join('')

/** A sink that keeps each message it was given and reports `outcome(message)`. */
const collect = (outcome: (message: string) => DeliveryStatus = () => 'delivered') => {
  const received: string[] = []
  const sink: Sink & { received: string[] } = {
    kind: 'collect',
    received,
    async write(events) {
      return events.events.map((e) => {
        const message = e.get('message') as string
        received.push(message)
        return outcome(message)
      })
    },
  }
  return sink
}

const start = async (options: Parameters<typeof file>[0], sink: Sink) => {
  const notices: string[] = []
  const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
    .source(
      'files',
      file({ pollIntervalMs: 10, checkpointIntervalMs: 20, onNotice: (m) => notices.push(m), ...options }),
    )
    .sink('out', ['files'], sink)
    .build()
  await topology.start()
  return { topology, notices }
}

/** Runs `body`, then fails if a promise rejection went unhandled meanwhile (it would crash a process). */
const withoutUnhandledRejections = async (body: () => Promise<void>) => {
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown) => unhandled.push(reason)
  process.on('unhandledRejection', onUnhandled)
  try {
    await body()
    // A rejection is reported unhandled after the microtasks of its turn.
    await new Promise((resolve) => setTimeout(resolve, 20))
  } finally {
    process.off('unhandledRejection', onUnhandled)
  }
  expect(unhandled.map(String)).toEqual([])
}

const checkpoint = (path: string): number | undefined => {
  if (!existsSync(join(dir, 'cp', 'checkpoints.json'))) return undefined
  const doc = JSON.parse(readFileSync(join(dir, 'cp', 'checkpoints.json'), 'utf8')) as {
    files: { path: string; offset: number }[]
  }
  return doc.files.find((f) => f.path === path)?.offset
}

/** The checkpoint of `path` in a checkpoint file kept in the test directory itself. */
const checkpoint2 = (path: string): number | undefined => {
  if (!existsSync(join(dir, 'checkpoints.json'))) return undefined
  const doc = JSON.parse(readFileSync(join(dir, 'checkpoints.json'), 'utf8')) as {
    files: { path: string; offset: number }[]
  }
  return doc.files.find((f) => f.path === path)?.offset
}

/**
 * Waits until the checkpoint file in `cp` was written twice more: a scan (and a pass that looks
 * for gone files) ran between the two writes, so what it saw is in the second.
 */
const twoCheckpointWrites = async (cp = join(dir, 'cp')): Promise<void> => {
  // Not written yet (a wait that begins before the source's first write) counts as a state too.
  const mtime = () => statSync(join(cp, 'checkpoints.json'), { throwIfNoEntry: false })?.mtimeMs
  const writes = [mtime()]
  await vi.waitUntil(() => {
    if (mtime() !== writes.at(-1)) writes.push(mtime())
    return writes.length === 3
  })
}

/**
 * A sink that holds its answer for the lines `holds` picks (told the messages received so far)
 * until `release(status)`; it delivers every other line at once.
 */
const holdingSink = (holds: (message: string, received: readonly string[]) => boolean) => {
  const received: string[] = []
  const held = { release: (_status: DeliveryStatus): void => {} }
  const sink: Sink = {
    kind: 'held',
    async write(events) {
      const out: DeliveryStatus[] = []
      for (const event of events.events) {
        const message = event.get('message') as string
        received.push(message)
        out.push(
          holds(message, received)
            ? await new Promise<DeliveryStatus>((resolve) => {
                held.release = resolve
              })
            : 'delivered',
        )
      }
      return out
    },
  }
  return { sink, received, release: (status: DeliveryStatus) => held.release(status) }
}

describe('file source', () => {
  it('reads what is there and what is appended, and a restart resumes at the checkpoint', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('a', 'b'))
    const sink = collect()
    const first = await start({ include: [join(dir, '*.log')], checkpoints: join(dir, 'cp') }, sink)
    await vi.waitUntil(() => sink.received.length === 2)
    appendFileSync(log, lines('c'))
    await vi.waitUntil(() => sink.received.length === 3)
    await first.topology.stop()
    expect(checkpoint(log)).toBe(statSync(log).size)

    appendFileSync(log, lines('d'))
    const again = collect()
    const second = await start({ include: [join(dir, '*.log')], checkpoints: join(dir, 'cp') }, again)
    await vi.waitUntil(() => again.received.length === 1)
    await second.topology.stop()
    expect(sink.received).toEqual(['a', 'b', 'c'])
    expect(again.received).toEqual(['d'])
  })

  it('re-sends errored lines, dead-letters rejected ones with the reason, and checkpoints past both', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('ok1', 'bad', 'flaky', 'ok2'))
    let flaky = 0
    const sink = collect((m) =>
      m === 'bad' ? 'rejected' : m === 'flaky' && flaky++ === 0 ? 'errored' : 'delivered',
    )
    const { topology } = await start(
      { include: [log], checkpoints: join(dir, 'cp'), retry: { initialBackoffMs: 5 } },
      sink,
    )
    await vi.waitUntil(() => sink.received.filter((m) => m === 'flaky').length === 2)
    await vi.waitUntil(() => checkpoint(log) === statSync(log).size, { timeout: 5000 })
    await topology.stop()
    // Only the errored line came again.
    expect(sink.received).toEqual(['ok1', 'bad', 'flaky', 'ok2', 'flaky'])
    const dead = readFileSync(join(dir, 'cp', DEAD_LETTER_FILE), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(dead).toEqual([
      {
        file: log,
        offset: 4,
        reason: "rejected by out (REJECTED): sink 'out' (collect): the sink reported the event rejected",
        message: 'bad',
      },
    ])
  })

  it('never checkpoints past a rejected line whose dead letter was appended while the dead-letter file was being synced', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('a', 'b'))
    // Each sync of the dead-letter file does its fsync, then answers only when the test lets it
    // (a slow thread pool): a dead letter appended meanwhile is not covered by that fsync.
    const syncs: (() => void)[] = []
    let holding = true
    const sync = DeadLetterFile.prototype.sync
    const spy = vi.spyOn(DeadLetterFile.prototype, 'sync').mockImplementation(async function (
      this: DeadLetterFile,
    ) {
      await sync.call(this)
      if (holding) await new Promise<void>((resolve) => syncs.push(resolve))
    })
    // 'a' is rejected at once (its dead letter makes the next checkpoint sync the file); 'b' errors,
    // and its re-send waits at the sink until the test says.
    const received: string[] = []
    let releaseB: (status: DeliveryStatus) => void = () => {}
    const sink: Sink = {
      kind: 'held',
      async write(events) {
        const out: DeliveryStatus[] = []
        for (const event of events.events) {
          const message = event.get('message') as string
          received.push(message)
          out.push(
            message === 'a'
              ? 'rejected'
              : received.filter((m) => m === 'b').length === 1
                ? 'errored'
                : await new Promise<DeliveryStatus>((resolve) => (releaseB = resolve)),
          )
        }
        return out
      },
    }
    const deadLetters = () => {
      const path = join(dir, 'cp', DEAD_LETTER_FILE)
      return existsSync(path) ? readFileSync(path, 'utf8') : ''
    }
    let topology: Topology | undefined
    try {
      ;({ topology } = await start(
        { include: [log], checkpoints: join(dir, 'cp'), maxBatchLines: 1, retry: { initialBackoffMs: 5 } },
        sink,
      ))
      // A checkpoint is syncing the dead letter of 'a', while 'b' waits at the sink.
      await vi.waitUntil(() => syncs.length === 1 && received.filter((m) => m === 'b').length === 2)
      releaseB('rejected')
      await vi.waitUntil(() => deadLetters().includes('"message":"b"'))
      syncs[0]!()
      // The next checkpoint syncs again: the one before it was written.
      await vi.waitUntil(() => syncs.length === 2)
      // Only the dead letter of 'a' is known to be on disk: a crash now must read 'b' again.
      expect(checkpoint(log)).toBe(2)
    } finally {
      holding = false
      for (const release of syncs) release()
      await topology?.stop()
      spy.mockRestore()
    }
  })

  it('never checkpoints past a rejected line whose dead letter could not be synced, not even in the last checkpoint at the stop', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('a'))
    // Every sync of the dead-letter file fails, as a disk that returns EIO does.
    const spy = vi
      .spyOn(DeadLetterFile.prototype, 'sync')
      .mockRejectedValue(Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' }))
    try {
      const context = new FakeSourceContext({ id: 'files' })
      context.onBatch = (batch) => batch.end('rejected')
      const run = file({
        include: [log],
        checkpoints: join(dir, 'cp'),
        pollIntervalMs: 10,
        checkpointIntervalMs: 20,
        onNotice: () => {},
      }).run(context)
      // The run fails on the checkpoint that had to sync the dead letter of 'a' first.
      await expect(run).rejects.toThrow(/EIO/)
      expect(readFileSync(join(dir, 'cp', DEAD_LETTER_FILE), 'utf8')).toContain('"message":"a"')
      // Its dead letter is not known to be on disk: a restart must read 'a' again.
      expect(checkpoint(log) ?? 0).toBe(0)
    } finally {
      spy.mockRestore()
    }
  })

  describe('what a crash leaves of the dead-letter file (what an fsync covered, less what a failed one lost)', () => {
    const cp = () => join(dir, 'cp')
    const deadLetterPath = () => join(cp(), DEAD_LETTER_FILE)
    /** The messages in every dead-letter file (rotated ones too), as they are now. */
    const deadLettered = () =>
      readdirSync(cp())
        .filter((name) => name.startsWith(DEAD_LETTER_FILE))
        .flatMap((name) => readFileSync(join(cp(), name), 'utf8').split('\n'))
        .filter((line) => line !== '')
        .map((line) => (JSON.parse(line) as { message: string }).message)
    /** Runs the source over `log` with a context whose sinks reject the lines `rejects` picks. */
    const run = (
      log: string,
      rejects: (message: string) => boolean,
      options: Partial<Parameters<typeof file>[0]> = {},
    ) => {
      const context = new FakeSourceContext({ id: 'files' })
      const received: string[] = []
      context.onBatch = (batch) => {
        const messages = batch.events.map((e) => e.get('message') as string)
        received.push(...messages)
        batch.end(messages.some(rejects) ? 'rejected' : 'delivered')
      }
      const notices: string[] = []
      const running = file({
        include: [log],
        checkpoints: cp(),
        pollIntervalMs: 10,
        checkpointIntervalMs: 20,
        maxBatchLines: 1,
        retry: { initialBackoffMs: 5, maxBackoffMs: 20 },
        onNotice: (m) => notices.push(m),
        ...options,
      }).run(context)
      let outcome: { error: unknown } | undefined
      const settled = running.then(
        () => (outcome = { error: undefined }),
        (error: unknown) => (outcome = { error }),
      )
      return {
        context,
        received,
        notices,
        settled: () => outcome !== undefined,
        /** Stops the run, and resolves to what it rejected with (undefined if it did not). */
        stop: async () => {
          context.stop()
          await settled
          return outcome!.error
        },
      }
    }

    /**
     * The restart after the crash: reads `log` from its checkpoint to its end, rejecting every
     * line, stops cleanly, and crashes again, so the dead-letter files keep only what a successful
     * fsync covered.
     */
    const restartToTheEnd = async (log: string, faults: Awaited<ReturnType<typeof fsyncFaults>>) => {
      const again = run(log, () => true)
      await vi.waitUntil(() => checkpoint(log) === statSync(log).size)
      expect(await again.stop()).toBeUndefined()
      faults.crash()
      return again
    }

    it('never checkpoints past the dead letters of a failed fsync when a later one succeeds; a restart dead-letters their lines again', async () => {
      const log = join(dir, 'app.log')
      mkdirSync(cp())
      writeFileSync(log, lines('ok', 'bad', 'ok2'))
      // The first fsync of the dead-letter file (the one that covers the letter of 'bad') fails
      // and loses it; every later one succeeds.
      const faults = await fsyncFaults(cp(), DEAD_LETTER_FILE, { fail: [1] })
      try {
        const first = run(log, (m) => m === 'bad')
        await vi.waitUntil(() => faults.calls >= 1)
        // Whatever the run did since, by its end (it fails, or it is stopped here).
        const error = await first.stop()
        faults.crash()
        // The letter of 'bad' is not on disk: the checkpoint must be before it (offset 3) so a
        // restart reads it again.
        expect(deadLettered()).not.toContain('bad')
        expect(checkpoint(log) ?? 0).toBeLessThanOrEqual(3)
        expect(error).toBeInstanceOf(FileSourceError)
        expect(error).toMatchObject({
          code: 'DEAD_LETTER_SYNC_FAILED',
          component: 'files',
          field: 'deadLetter',
          path: deadLetterPath(),
        })
        expect((error as Error).message).toContain('EIO: i/o error, fsync')
        // Not retried: the fsync that would have said OK is never made.
        expect(faults.calls).toBe(1)
        const again = await restartToTheEnd(log, faults)
        expect(again.received).toContain('bad')
        expect(deadLettered()).toContain('bad')
      } finally {
        faults.restore()
      }
    })

    it('never checkpoints past the dead letters of a rotated dead-letter file whose last fsync failed, though the next one succeeds', async () => {
      const log = join(dir, 'app.log')
      mkdirSync(cp())
      writeFileSync(log, '')
      const faults = await fsyncFaults(cp(), DEAD_LETTER_FILE, { fail: [1] })
      try {
        // No checkpoint but the first (of the empty file), so no fsync of the dead-letter file
        // but the one that lets the rotated file go.
        const first = run(log, () => true, { checkpointIntervalMs: 60_000 })
        await vi.waitUntil(() => existsSync(join(cp(), 'checkpoints.json')))
        appendFileSync(log, lines('a'))
        await vi.waitUntil(() => deadLettered().includes('a'))
        // Rotated away: the letter of 'b' goes to a new file, once the old one is synced (and
        // that fsync fails, losing the letter of 'a').
        renameSync(deadLetterPath(), `${deadLetterPath()}.1`)
        appendFileSync(log, lines('b'))
        await vi.waitUntil(() => first.settled() || deadLettered().includes('b'))
        const error = await first.stop()
        faults.crash()
        expect(deadLettered()).not.toContain('a')
        expect(checkpoint(log) ?? 0).toBe(0)
        expect(error).toMatchObject({ code: 'DEAD_LETTER_SYNC_FAILED', component: 'files' })
        expect(faults.calls).toBe(1)
        const again = await restartToTheEnd(log, faults)
        expect(again.received).toEqual(['a', 'b'])
        expect(deadLettered()).toEqual(expect.arrayContaining(['a', 'b']))
      } finally {
        faults.restore()
      }
    })

    it('never checkpoints on an fsync that succeeded while another fsync of the dead-letter file failed (the error went to that one)', async () => {
      const log = join(dir, 'app.log')
      mkdirSync(cp())
      writeFileSync(log, lines('a', 'b'))
      // The checkpoint's fsync (covering the letter of 'a') waits; meanwhile the letter of 'b'
      // lets the rotated file go, and that fsync fails (losing the letter of 'a'); then the
      // checkpoint's succeeds, the error already reported to the other.
      const faults = await fsyncFaults(cp(), DEAD_LETTER_FILE, { hold: [1], fail: [2] })
      try {
        const context = new FakeSourceContext({ id: 'files' })
        let b: EventArray | undefined
        context.onBatch = (batch) => {
          if (batch.events[0]!.get('message') === 'a') batch.end('rejected')
          else b = batch
        }
        const running = file({
          include: [log],
          checkpoints: cp(),
          pollIntervalMs: 10,
          checkpointIntervalMs: 20,
          maxBatchLines: 1,
          onNotice: () => {},
        }).run(context)
        const failed = running.then(
          () => undefined,
          (error: unknown) => error,
        )
        await vi.waitUntil(() => faults.calls === 1 && b !== undefined)
        renameSync(deadLetterPath(), `${deadLetterPath()}.1`)
        b!.end('rejected')
        await vi.waitUntil(() => faults.calls === 2)
        faults.release(1)
        const error = await failed
        context.stop()
        faults.crash()
        expect(deadLettered()).not.toContain('a')
        expect(checkpoint(log) ?? 0).toBe(0)
        expect(error).toMatchObject({ code: 'DEAD_LETTER_SYNC_FAILED', component: 'files' })
        const again = await restartToTheEnd(log, faults)
        expect(again.received).toEqual(['a', 'b'])
        expect(deadLettered()).toEqual(expect.arrayContaining(['a', 'b']))
      } finally {
        faults.restore()
      }
    })

    it('keeps a finished file (removeAfterIdleMs) whose dead letters could not be synced, and ends the run; a restart dead-letters its line again', async () => {
      const log = join(dir, 'app.log')
      mkdirSync(cp())
      writeFileSync(log, lines('bad'))
      // The one fsync before the removal fails, losing the letter of 'bad'.
      const faults = await fsyncFaults(cp(), DEAD_LETTER_FILE, { fail: [1] })
      try {
        const first = run(log, () => true, { checkpointIntervalMs: 60_000, removeAfterIdleMs: 0 })
        await vi.waitUntil(() => first.settled())
        const error = await first.stop()
        faults.crash()
        expect(error).toMatchObject({ code: 'DEAD_LETTER_SYNC_FAILED', component: 'files' })
        expect(existsSync(log)).toBe(true)
        expect(deadLettered()).not.toContain('bad')
        expect(checkpoint(log) ?? 0).toBe(0)
        expect(faults.calls).toBe(1)
        const again = await restartToTheEnd(log, faults)
        expect(again.received).toEqual(['bad'])
        expect(deadLettered()).toEqual(['bad'])
      } finally {
        faults.restore()
      }
    })

    it('never removes a finished file (removeAfterIdleMs) before the dead letters of its rejected lines are on disk', async () => {
      const log = join(dir, 'app.log')
      mkdirSync(cp())
      writeFileSync(log, lines('bad'))
      // No fault: only what is on disk is looked at.
      const faults = await fsyncFaults(cp(), DEAD_LETTER_FILE, {})
      try {
        const context = new FakeSourceContext({ id: 'files' })
        const sent = context.nextBatch()
        const running = file({
          include: [log],
          checkpoints: cp(),
          pollIntervalMs: 10,
          checkpointIntervalMs: 60_000,
          removeAfterIdleMs: 0,
          onNotice: () => {},
        }).run(context)
        // Rejected once the first checkpoint was written: no later one syncs the dead-letter file
        // before the file could be removed.
        const batch = await sent
        await vi.waitUntil(() => existsSync(join(cp(), 'checkpoints.json')))
        batch.end('rejected')
        await vi.waitUntil(() => !existsSync(log))
        // Gone: nothing can read 'bad' again, so a crash now must find its letter on disk.
        expect(faults.durableText(DEAD_LETTER_FILE)).toContain('"message":"bad"')
        context.stop()
        await running
      } finally {
        faults.restore()
      }
    })
  })

  it('never puts more than maxBatchLines records in one batch, however many lines a read brings', async () => {
    const log = join(dir, 'app.log')
    // Short lines: one 64 KiB read holds all of them.
    const all = Array.from({ length: 200 }, (_, i) => `L${i}`)
    writeFileSync(log, lines(...all))
    const context = new FakeSourceContext({ id: 'files' })
    context.onBatch = (batch) => batch.end('delivered')
    const run = file({
      include: [log],
      checkpoints: join(dir, 'cp'),
      pollIntervalMs: 10,
      checkpointIntervalMs: 20,
      maxBatchLines: 3,
      onNotice: () => {},
    }).run(context)
    await vi.waitUntil(() => checkpoint(log) === statSync(log).size)
    context.stop()
    await run
    const sizes = context.records().map((batch) => batch.length)
    expect(Math.max(...sizes)).toBe(3)
    expect(
      context
        .records()
        .flat()
        .map((r) => r.message),
    ).toEqual(all)
  })

  it('dead-letters a rejected line whose entry would be longer than the longest string with its first 1024 bytes, not sending it again for ever', async () => {
    const log = join(dir, 'app.log')
    const huge = 'x'.repeat(2000)
    writeFileSync(log, lines('ok', huge, 'after'))
    // The longest string lowered to 1500 for the entries of the dead-letter file: a line of 90 MB
    // of control characters (maxLineBytes 1e8), each escaped to 6, makes an entry past 2^29 - 24.
    const stringify = JSON.stringify
    const spy = vi.spyOn(JSON, 'stringify').mockImplementation((...args: Parameters<typeof stringify>) => {
      const text = stringify(...args)
      if (typeof args[0] === 'object' && args[0] !== null && 'reason' in args[0] && text.length > 1500)
        throw new RangeError('Invalid string length')
      return text
    })
    try {
      const sink = collect((m) => (m === huge ? 'rejected' : 'delivered'))
      const { topology, notices } = await start(
        { include: [log], checkpoints: join(dir, 'cp'), retry: { initialBackoffMs: 5 } },
        sink,
      )
      // Unfixed, the batch was taken for not accepted, and the line sent again after each back-off.
      await vi.waitUntil(
        () => checkpoint(log) === statSync(log).size || sink.received.filter((m) => m === huge).length > 1,
      )
      await topology.stop()
      expect(sink.received).toEqual(['ok', huge, 'after'])
      expect(notices).toEqual([])
      const dead = readFileSync(join(dir, 'cp', DEAD_LETTER_FILE), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
      expect(dead).toEqual([
        {
          file: log,
          offset: 3,
          reason:
            "rejected by out (REJECTED): sink 'out' (collect): the sink reported the event rejected (its first 1024 bytes only: the entry of the whole line would be longer than the longest string)",
          message: 'x'.repeat(1024),
        },
      ])
    } finally {
      spy.mockRestore()
    }
  })

  it('dead-letters a rejected line with its file, offset and text though a transform removed or changed those fields, not sending it again for ever', async () => {
    // The events' fields are the source's records (no copy): a transform that removes `file` (or
    // parses `message`) changed what the dead-letter entry was read from, and reading
    // `record.file.path` threw in it, so the batch counted as not accepted and was sent again for
    // ever, its delivered lines duplicated each time.
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('ok', 'bad', 'after'))
    const received: string[] = []
    const sink: Sink = {
      kind: 'collect',
      async write(events) {
        return events.events.map((e) => {
          const message = (e.get('parsed') as { m: string }).m
          received.push(message)
          return message === 'bad' ? 'rejected' : 'delivered'
        })
      },
    }
    const strip: Transform = {
      kind: 'strip',
      process: perEvent(
        (event) => {
          event.set('parsed', { m: event.remove('message') as string })
          event.remove('file')
          return undefined
        },
        () => {},
      ),
    }
    const notices: string[] = []
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source(
        'files',
        file({
          include: [log],
          checkpoints: join(dir, 'cp'),
          pollIntervalMs: 10,
          checkpointIntervalMs: 20,
          retry: { initialBackoffMs: 5 },
          onNotice: (m) => notices.push(m),
        }),
      )
      .transform('strip', ['files'], strip)
      .sink('out', ['strip'], sink)
      .build()
    await topology.start()
    // Unfixed, the batch was taken for not accepted, and its lines sent again after each back-off.
    await vi.waitUntil(() => checkpoint(log) === statSync(log).size || received.length > 3)
    await topology.stop()
    expect(received).toEqual(['ok', 'bad', 'after'])
    expect(notices).toEqual([])
    const dead = readFileSync(join(dir, 'cp', DEAD_LETTER_FILE), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(dead).toEqual([
      {
        file: log,
        offset: 3,
        reason: "rejected by out (REJECTED): sink 'out' (collect): the sink reported the event rejected",
        message: 'bad',
      },
    ])
  })

  it('rejects a line longer than maxLineBytes into the dead-letter file instead of cutting it', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('short', 'x'.repeat(50), 'after'))
    const sink = collect()
    const { topology } = await start({ include: [log], checkpoints: join(dir, 'cp'), maxLineBytes: 10 }, sink)
    await vi.waitUntil(() => sink.received.length === 2)
    await vi.waitUntil(() => checkpoint(log) === statSync(log).size)
    await topology.stop()
    expect(sink.received).toEqual(['short', 'after'])
    const [dead] = readFileSync(join(dir, 'cp', DEAD_LETTER_FILE), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(dead).toMatchObject({ file: log, offset: 6, reason: 'line longer than maxLineBytes (10)' })
  })

  it('keeps a rejected line unfinished while the dead-letter file cannot be written, and dead-letters it after a restart', async () => {
    const cp = join(dir, 'cp')
    mkdirSync(cp)
    // Every write to /dev/full fails with ENOSPC: a full disk.
    symlinkSync('/dev/full', join(cp, DEAD_LETTER_FILE))
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('bad', 'ok1'))
    await withoutUnhandledRejections(async () => {
      const sink = collect((m) => (m === 'bad' ? 'rejected' : 'delivered'))
      const { topology, notices } = await start(
        { include: [log], checkpoints: cp, retry: { initialBackoffMs: 5, maxBackoffMs: 20 } },
        sink,
      )
      const failed = () => notices.filter((n) => n.includes('cannot write the dead-letter file'))
      // Tried again and again, and the source reads on meanwhile.
      await vi.waitUntil(() => failed().length >= 3)
      appendFileSync(log, lines('ok2'))
      await vi.waitUntil(() => sink.received.includes('ok2'))
      await vi.waitUntil(() => checkpoint(log) !== undefined)
      await topology.stop()
      expect(failed()[0]).toMatch(
        `file source 'files': cannot write the dead-letter file ${join(cp, DEAD_LETTER_FILE)} for the line of ${log} at offset 0: ENOSPC: no space left on device, write; the line stays unfinished, trying again in `,
      )
      expect(failed()[0]).toMatch(/ in \d+ ms$/)
      // The line was neither dead-lettered nor delivered: the checkpoint stays before it.
      expect(checkpoint(log)).toBe(0)
    })
    // Space again: the restart reads the line again and dead-letters it.
    rmSync(join(cp, DEAD_LETTER_FILE))
    const again = collect((m) => (m === 'bad' ? 'rejected' : 'delivered'))
    const second = await start({ include: [log], checkpoints: cp }, again)
    await vi.waitUntil(() => checkpoint(log) === statSync(log).size)
    await second.topology.stop()
    expect(again.received).toEqual(['bad', 'ok1', 'ok2'])
    expect(JSON.parse(readFileSync(join(cp, DEAD_LETTER_FILE), 'utf8'))).toMatchObject({
      file: log,
      offset: 0,
    })
  })

  it('reads on, in this file and the others, while an overlong line waits for the dead-letter file', async () => {
    const cp = join(dir, 'cp')
    mkdirSync(cp)
    symlinkSync('/dev/full', join(cp, DEAD_LETTER_FILE))
    const a = join(dir, 'a.log')
    const b = join(dir, 'b.log')
    writeFileSync(a, lines('x'.repeat(50), 'a1'))
    writeFileSync(b, lines('b1'))
    await withoutUnhandledRejections(async () => {
      const sink = collect()
      const { topology, notices } = await start(
        {
          include: [join(dir, '*.log')],
          checkpoints: cp,
          maxLineBytes: 10,
          retry: { initialBackoffMs: 5, maxBackoffMs: 20 },
        },
        sink,
      )
      const failed = () => notices.filter((n) => n.includes('cannot write the dead-letter file'))
      await vi.waitUntil(() => failed().length >= 3)
      appendFileSync(a, lines('a2'))
      appendFileSync(b, lines('b2'))
      await vi.waitUntil(() => sink.received.length === 4)
      await vi.waitUntil(() => checkpoint(b) === statSync(b).size)
      await topology.stop()
      expect([...sink.received].sort()).toEqual(['a1', 'a2', 'b1', 'b2'])
      expect(failed()[0]).toContain(`for the line of ${a} at offset 0: ENOSPC`)
      // Neither dead-lettered nor delivered: the checkpoint of its file stays before it.
      expect(checkpoint(a)).toBe(0)
    })
  })

  it('undoes a dead-letter write that failed part-way, so the file holds whole entries only', async () => {
    const cp = join(dir, 'cp')
    const log = join(dir, 'app.log')
    const big = 'b'.repeat(4000)
    writeFileSync(log, lines('small', big))
    // A child under a file size limit (`ulimit -f 2`: 1 or 2 KiB, by shell): the write of the big
    // line's entry stops part-way (EFBIG), as one does on a disk that fills up meanwhile.
    const child = spawn(
      'sh',
      [
        '-c',
        'ulimit -f 2 && exec "$0" "$@"',
        process.execPath,
        '--conditions=source',
        '--import',
        'tsx',
        fileURLToPath(new URL('./deadLetterChild.ts', import.meta.url)),
        log,
        cp,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    )
    // Killed however the test ends: a timeout skips the `finally` below, and the child, left running
    // past the test run (its parent gone), never ends.
    onTestFinished(() => {
      child.kill('SIGKILL')
    })
    let output = ''
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      output += text
    })
    const exited = new Promise<unknown>((resolve) =>
      child.on('exit', (code, signal) => resolve({ code, signal })),
    )
    const failures = () => output.split('\n').filter((line) => line.includes('EFBIG: file too large')).length
    try {
      await vi.waitUntil(() => child.exitCode !== null || failures() >= 3, { timeout: 20_000 })
    } finally {
      child.kill('SIGTERM')
    }
    expect(await exited).toEqual({ code: 0, signal: null })
    const entries = () => readFileSync(join(cp, DEAD_LETTER_FILE), 'utf8')
    // Each failed write was undone: the small line's entry, whole, and nothing after it.
    expect(entries()).toMatch(/^\{[^\n]*"message":"small"\}\n$/)
    // Without the limit, a restart reads the big line again and dead-letters it on a line of its own.
    const sink = collect(() => 'rejected')
    const { topology } = await start({ include: [log], checkpoints: cp }, sink)
    await vi.waitUntil(() => checkpoint(log) === statSync(log).size)
    await topology.stop()
    expect(sink.received).toEqual([big])
    expect(
      entries()
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line).message),
    ).toEqual(['small', big])
  }, 30_000)

  it('leaves a rejected line unfinished when a forced stop ends the dead-letter retries', async () => {
    const cp = join(dir, 'cp')
    mkdirSync(cp)
    symlinkSync('/dev/full', join(cp, DEAD_LETTER_FILE))
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('bad'))
    let release!: () => void
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    // A sink still writing at the deadline: the stop is forced.
    let writing = false
    const sink: Sink = {
      kind: 'hold',
      async write(events) {
        const messages = events.events.map((e) => e.get('message'))
        if (messages.includes('hang')) {
          writing = true
          await held
        }
        return messages.map((m) => (m === 'bad' ? 'rejected' : 'delivered'))
      },
    }
    await withoutUnhandledRejections(async () => {
      const { topology, notices } = await start(
        { include: [log], checkpoints: cp, retry: { initialBackoffMs: 5, maxBackoffMs: 20 } },
        sink,
      )
      let forced: boolean | undefined
      topology.lifecycle.subscribe((e) => {
        if (e.type === 'topology_stopped') forced = e.forced
      })
      await vi.waitUntil(() => notices.some((n) => n.includes('cannot write the dead-letter file')))
      appendFileSync(log, lines('hang'))
      await vi.waitUntil(() => writing)
      await topology.stop({ drainTimeoutMs: 50 })
      release()
      expect(forced).toBe(true)
      await vi.waitUntil(() =>
        notices.some(
          (n) =>
            n.includes('stopped before the line of') &&
            n.endsWith('it stays unfinished and is read again after a restart'),
        ),
      )
      await vi.waitUntil(() => checkpoint(log) !== undefined)
      expect(checkpoint(log)).toBe(0)
    })
  })

  it('sends lines again after a back-off when the pipeline does not accept them, and says so', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('a', 'b', 'c'))
    const context = new FakeSourceContext({ id: 'files' })
    context.onBatch = (batch) => batch.end('delivered')
    const accept = context.send.bind(context)
    let refusals = 2
    context.send = (records, options) =>
      refusals-- > 0 ? Promise.reject(new RangeError('cannot encode the event')) : accept(records, options)
    const notices: string[] = []
    await withoutUnhandledRejections(async () => {
      const run = file({
        include: [log],
        checkpoints: join(dir, 'cp'),
        pollIntervalMs: 10,
        checkpointIntervalMs: 20,
        retry: { initialBackoffMs: 5, maxBackoffMs: 20 },
        onNotice: (m) => notices.push(m),
      }).run(context)
      await vi.waitUntil(() => checkpoint(log) === statSync(log).size)
      context.stop()
      await run
    })
    expect(
      context
        .records()
        .flat()
        .map((r) => r.message),
    ).toEqual(['a', 'b', 'c'])
    expect(notices).toHaveLength(2)
    expect(notices[0]).toMatch(
      new RegExp(
        `^file source 'files': the pipeline did not accept 3 line\\(s\\) of ${log} from offset 0: RangeError: cannot encode the event; sending them again in \\d+ ms$`,
      ),
    )
  })

  it('sends lines the pipeline did not accept again as first read, not as a component changed them in place', async () => {
    // The buffer in front of the sink hands the sent events themselves to the sink (a buffer of
    // another kind, as the EdgeBuffer contract allows), and refuses its second push; the sink
    // counts in place (`event.set`) and errors the first line once. The first send's records are
    // its events' fields: the retry's send was refused, and the source sent those records again
    // as the sink had left them, so it counted them twice.
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('a'))
    const seen: string[] = []
    const sink: Sink = {
      kind: 'counts',
      async write(events) {
        return events.events.map((e) => {
          e.set('count', ((e.get('count') as number | undefined) ?? 0) + 1)
          seen.push(`${e.get('message') as string}:${e.get('count') as number}`)
          return seen.length === 1 ? 'errored' : 'delivered'
        })
      },
    }
    const queue: EventArray[] = []
    let waiting: ((array: EventArray | undefined) => void) | undefined
    let closed = false
    let pushes = 0
    const buffer = {
      async push(events: EventArray) {
        if (++pushes === 2) throw new Error('ENOSPC: no space left on device')
        if (waiting === undefined) queue.push(events)
        else {
          const wake = waiting
          waiting = undefined
          wake(events)
        }
      },
      pull() {
        if (queue.length > 0) return Promise.resolve(queue.shift())
        if (closed) return Promise.resolve(undefined)
        return new Promise<EventArray | undefined>((resolve) => {
          waiting = resolve
        })
      },
      async close() {
        closed = true
        waiting?.(undefined)
      },
    }
    const notices: string[] = []
    const topology = new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
      .source(
        'files',
        file({
          include: [log],
          checkpoints: join(dir, 'cp'),
          pollIntervalMs: 10,
          checkpointIntervalMs: 20,
          retry: { initialBackoffMs: 5, maxBackoffMs: 20 },
          onNotice: (m) => notices.push(m),
        }),
      )
      .sink('out', ['files'], sink, { buffer: { kind: 'passing', open: async () => buffer } })
      .build()
    await withoutUnhandledRejections(async () => {
      await topology.start()
      await vi.waitUntil(() => checkpoint(log) === statSync(log).size)
      await topology.stop()
    })
    expect(pushes).toBe(3)
    expect(notices).toEqual([expect.stringContaining('the pipeline did not accept 1 line(s)')])
    expect(seen).toEqual(['a:1', 'a:1'])
  })

  it('goes on when onNotice throws: the lines are sent again and delivered, and nothing goes unhandled', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('a', 'b'))
    const context = new FakeSourceContext({ id: 'files' })
    context.onBatch = (batch) => batch.end('delivered')
    const accept = context.send.bind(context)
    let refusals = 1
    context.send = (records, options) =>
      refusals-- > 0 ? Promise.reject(new RangeError('not now')) : accept(records, options)
    const warnings: string[] = []
    const onWarning = (w: Error) => warnings.push(w.message)
    process.on('warning', onWarning)
    try {
      await withoutUnhandledRejections(async () => {
        const run = file({
          include: [log],
          checkpoints: join(dir, 'cp'),
          pollIntervalMs: 10,
          checkpointIntervalMs: 20,
          retry: { initialBackoffMs: 5, maxBackoffMs: 20 },
          onNotice: () => {
            throw new Error('notice sink down')
          },
        }).run(context)
        await vi.waitUntil(() => checkpoint(log) === statSync(log).size)
        context.stop()
        await run
      })
    } finally {
      process.off('warning', onWarning)
    }
    expect(
      context
        .records()
        .flat()
        .map((r) => r.message),
    ).toEqual(['a', 'b'])
    // The notice is not lost: it goes to process.emitWarning, with what onNotice threw.
    expect(
      warnings.some(
        (w) =>
          w.includes('did not accept') &&
          w.includes('the onNotice of files failed on it: Error: notice sink down'),
      ),
    ).toBe(true)
  })

  it('keeps the checkpoint before lines the pipeline never accepts, and stops when asked', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('a'))
    const context = new FakeSourceContext({ id: 'files' })
    context.onBatch = (batch) => batch.end('delivered')
    const accept = context.send.bind(context)
    context.send = (records, options) => {
      const list = [...records]
      return list.some((r) => r.message === 'never')
        ? Promise.reject(new Error('refused'))
        : accept(list, options)
    }
    const notices: string[] = []
    await withoutUnhandledRejections(async () => {
      const run = file({
        include: [log],
        checkpoints: join(dir, 'cp'),
        pollIntervalMs: 10,
        checkpointIntervalMs: 20,
        retry: { initialBackoffMs: 5, maxBackoffMs: 20 },
        onNotice: (m) => notices.push(m),
      }).run(context)
      await vi.waitUntil(() => context.records().length === 1)
      appendFileSync(log, lines('never'))
      await vi.waitUntil(() => notices.length >= 3)
      appendFileSync(log, lines('c'))
      await vi.waitUntil(() => context.records().length === 2)
      context.stop()
      await run
    })
    expect(
      context
        .records()
        .flat()
        .map((r) => r.message),
    ).toEqual(['a', 'c'])
    // Past 'a', before 'never': a restart reads 'never' (and 'c') again.
    expect(checkpoint(log)).toBe(2)
  })

  it('stops reading a long backlog when the topology stops, and resumes it after a restart', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines(...Array.from({ length: 20_000 }, (_, i) => `line-${i}`)))
    const options = {
      include: [log],
      checkpoints: join(dir, 'cp'),
      pollIntervalMs: 10,
      maxBatchLines: 10,
      maxInFlightBatches: 1,
      onNotice: () => {},
    }
    const context = new FakeSourceContext({ id: 'files' })
    context.onBatch = (batch) => {
      // The stop comes with the first batch; every batch sent is delivered.
      if (context.batches.length === 1) context.stop()
      batch.end('delivered')
    }
    await file(options).run(context)
    const sent = context.records().flat().length
    // The batch in hand and the one read with it, not the 2000 batches of the backlog.
    expect(context.batches.length).toBeLessThanOrEqual(2)
    expect(checkpoint(log)).toBe(
      Buffer.byteLength(lines(...Array.from({ length: sent }, (_, i) => `line-${i}`))),
    )

    const again = new FakeSourceContext({ id: 'files' })
    again.onBatch = (batch) => batch.end('delivered')
    const run = file(options).run(again)
    await vi.waitUntil(() => checkpoint(log) === statSync(log).size, { timeout: 10_000 })
    again.stop()
    await run
    expect(again.records().flat()[0]!.message).toBe(`line-${sent}`)
  })

  it('sends the last line of a deleted file that ended without a newline, once the file is read to its end', async () => {
    const log = join(dir, 'app.log')
    const kept = join(dir, 'kept.log')
    writeFileSync(log, 'one\ntwo\nlast')
    writeFileSync(kept, 'a\nopen')
    const sink = collect()
    const { topology } = await start({ include: [join(dir, '*.log')], checkpoints: join(dir, 'cp') }, sink)
    await vi.waitUntil(() => sink.received.length === 3)
    // A file still there may yet get its newline: its last line waits.
    await twoCheckpointWrites()
    expect([...sink.received].sort()).toEqual(['a', 'one', 'two'])
    rmSync(log)
    await vi.waitUntil(() => sink.received.includes('last'))
    await twoCheckpointWrites()
    await topology.stop()
    expect(sink.received.filter((m) => m !== 'a')).toEqual(['one', 'two', 'last'])
    expect(sink.received).not.toContain('open')
    // Its checkpoint covers the whole file; the other file's stays before its open line.
    expect(checkpoint(log)).toBe('one\ntwo\nlast'.length)
    expect(checkpoint(kept)).toBe(2)
  })

  it('says that lines are not valid UTF-8 (sent with U+FFFD), naming the file and the offset, at the 1st, 10th, 100th... of a file', async () => {
    const log = join(dir, 'app.log')
    const bad = (i: number) =>
      Buffer.concat([Buffer.from(`bad-${i}-`), Buffer.from([0xff, 0xfe]), Buffer.from('\n')])
    // A U+FFFD written in the file is valid, and so is a character the 64 KiB read cuts in two.
    const cut = `${'x'.repeat(64 * 1024 - 1)}é\n`
    const first = `ok \uFFFD é\n${cut}`
    writeFileSync(log, Buffer.concat([Buffer.from(first), ...Array.from({ length: 12 }, (_, i) => bad(i))]))
    const sink = collect()
    const { topology, notices } = await start({ include: [log], checkpoints: join(dir, 'cp') }, sink)
    await vi.waitUntil(() => sink.received.length === 14)
    await topology.stop()
    expect(sink.received[2]).toBe('bad-0-\uFFFD\uFFFD')
    const said = notices.filter((n) => n.includes('not valid UTF-8'))
    expect(said).toHaveLength(2)
    expect(said[0]).toContain(`${log}: the line at offset ${Buffer.byteLength(first)} is not valid UTF-8`)
    expect(said[0]).toContain('1 line(s) of this file so far')
    expect(said[1]).toContain('10 line(s) of this file so far')
  })

  it('follows a rename-and-recreate rotation without losing or repeating a line', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('1', '2'))
    const sink = collect()
    const { topology } = await start({ include: [log], checkpoints: join(dir, 'cp') }, sink)
    await vi.waitUntil(() => sink.received.length === 2)
    appendFileSync(log, lines('3'))
    renameSync(log, join(dir, 'app.log.1'))
    writeFileSync(log, lines('4', '5'))
    await vi.waitUntil(() => sink.received.length >= 5)
    await topology.stop()
    expect(sink.received).toEqual(['1', '2', '3', '4', '5'])
  })

  it('reads on a file renamed to a name no pattern includes, as its writer appends to it, until it stays idle', async () => {
    const log = join(dir, 'app.log')
    const old = join(dir, 'app.old')
    writeFileSync(log, lines('1', '2'))
    const sink = collect()
    const { topology } = await start(
      { include: [log], checkpoints: join(dir, 'cp'), readRenamedForMs: 60_000 },
      sink,
    )
    await vi.waitUntil(() => sink.received.length === 2)
    renameSync(log, old)
    // Scans ran since the rename: it was found renamed away.
    await twoCheckpointWrites()
    // Its writer still holds it open, and writes on (as a logger does until it reopens its file).
    appendFileSync(old, lines('3', '4'))
    await vi.waitUntil(() => sink.received.length === 4)
    await twoCheckpointWrites()
    await topology.stop()
    expect(sink.received).toEqual(['1', '2', '3', '4'])
    expect(checkpoint(log)).toBe(statSync(old).size)
  })

  it('stops reading a file renamed to a name no pattern includes once it stayed idle for readRenamedForMs', async () => {
    const log = join(dir, 'app.log')
    const old = join(dir, 'app.old')
    writeFileSync(log, lines('1'))
    const sink = collect()
    const { topology } = await start(
      { include: [log], checkpoints: join(dir, 'cp'), readRenamedForMs: 0 },
      sink,
    )
    await vi.waitUntil(() => sink.received.length === 1)
    renameSync(log, old)
    await twoCheckpointWrites()
    appendFileSync(old, lines('late'))
    await twoCheckpointWrites()
    await topology.stop()
    expect(sink.received).toEqual(['1'])
  })

  it('reads a copy-truncated file from its start again, and says so', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('one', 'two', 'three'))
    const sink = collect()
    const { topology, notices } = await start({ include: [log], checkpoints: join(dir, 'cp') }, sink)
    await vi.waitUntil(() => sink.received.length === 3)
    truncateSync(log, 0)
    appendFileSync(log, lines('new'))
    await vi.waitUntil(() => sink.received.length === 4)
    await topology.stop()
    expect(sink.received).toEqual(['one', 'two', 'three', 'new'])
    expect(notices.some((n) => n.includes('truncated'))).toBe(true)
    expect(checkpoint(log)).toBe(4)
  })

  it('reads a copy-truncated file once, however long its new content grows, and resumes it after a restart', async () => {
    const log = join(dir, 'app.log')
    const old = Array.from({ length: 40 }, (_, i) => `old-${i}-${'x'.repeat(10)}`)
    writeFileSync(log, lines(...old))
    const sink = collect()
    const first = await start({ include: [log], checkpoints: join(dir, 'cp') }, sink)
    await vi.waitUntil(() => sink.received.length === old.length)
    truncateSync(log, 0)
    appendFileSync(log, lines('new-0'))
    await vi.waitUntil(() => sink.received.length === old.length + 1)
    // The new content passes the length of the old content's fingerprint (256 bytes).
    const more = Array.from({ length: 30 }, (_, i) => `new-${i + 1}-${'y'.repeat(10)}`)
    appendFileSync(log, lines(...more))
    await vi.waitUntil(() => sink.received.length >= old.length + 1 + more.length)
    await first.topology.stop()
    expect(sink.received.slice(old.length)).toEqual(['new-0', ...more])
    expect(checkpoint(log)).toBe(statSync(log).size)

    appendFileSync(log, lines('after-restart'))
    const again = collect()
    const second = await start({ include: [log], checkpoints: join(dir, 'cp') }, again)
    await vi.waitUntil(() => again.received.length >= 1)
    await second.topology.stop()
    expect(again.received).toEqual(['after-restart'])
  })

  it('does not resume at a stale offset when the inode now holds another file', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('fresh-1', 'fresh-2'))
    const s = statSync(log)
    // A checkpoint left by an earlier file with the same inode and other first bytes.
    const cp = join(dir, 'cp')
    rmSync(cp, { recursive: true, force: true })
    mkdirSync(cp, { recursive: true })
    writeFileSync(
      join(cp, 'checkpoints.json'),
      JSON.stringify({
        version: 1,
        files: [
          { path: log, dev: s.dev, ino: s.ino, fingerprint: { length: 8, hash: 'not-this-file' }, offset: 8 },
        ],
      }),
    )
    const sink = collect()
    const { topology, notices } = await start({ include: [log], checkpoints: cp }, sink)
    await vi.waitUntil(() => sink.received.length === 2)
    await topology.stop()
    expect(sink.received).toEqual(['fresh-1', 'fresh-2'])
    expect(notices.some((n) => n.includes('not the file its inode held'))).toBe(true)
  })

  it('tells a file from a later one with the same inode and first line, when it was first read short', async () => {
    const log = join(dir, 'app.log')
    const cp = join(dir, 'cp')
    // First read while it held only its banner: a fingerprint of those few bytes told nothing more.
    writeFileSync(log, lines('BANNER'))
    const sink = collect()
    const first = await start({ include: [log], checkpoints: cp }, sink)
    await vi.waitUntil(() => sink.received.length === 1)
    const old = Array.from({ length: 30 }, (_, i) => `old-${i}-${'o'.repeat(20)}`)
    appendFileSync(log, lines(...old))
    await vi.waitUntil(() => sink.received.length === 31)
    await first.topology.stop()

    // The file is replaced by one that starts with the same banner and reuses the inode (forced
    // here by pointing the checkpoint at the new file's inode), longer than the old checkpoint.
    rmSync(log)
    const fresh = Array.from({ length: 40 }, (_, i) => `new-${i}-${'n'.repeat(20)}`)
    writeFileSync(log, lines('BANNER', ...fresh))
    const s = statSync(log)
    const document = JSON.parse(readFileSync(join(cp, 'checkpoints.json'), 'utf8')) as {
      files: { dev: number; ino: number }[]
    }
    for (const entry of document.files) Object.assign(entry, { dev: s.dev, ino: s.ino })
    writeFileSync(join(cp, 'checkpoints.json'), JSON.stringify(document))
    const again = collect()
    const second = await start({ include: [log], checkpoints: cp }, again)
    await vi.waitUntil(() => again.received.length >= 41 || checkpoint(log) === s.size)
    await second.topology.stop()
    expect(again.received).toEqual(['BANNER', ...fresh])
  })

  it('tells a file from a later one with the same inode and the same first 256 bytes, by its birth time', async () => {
    const log = join(dir, 'app.log')
    const cp = join(dir, 'cp')
    // A header longer than a fingerprint: every file of this log starts with the same 300 bytes.
    const header = `HEADER ${'h'.repeat(300)}`
    const old = Array.from({ length: 30 }, (_, i) => `old-${i}-${'o'.repeat(20)}`)
    writeFileSync(log, lines(header, ...old))
    const born = statSync(log).birthtimeMs
    expect(
      born,
      'this file system keeps no birth time: nothing to test (checked first: the loop below would spin)',
    ).toBeGreaterThan(0)
    const sink = collect()
    const first = await start({ include: [log], checkpoints: cp }, sink)
    await vi.waitUntil(() => sink.received.length === 31)
    await first.topology.stop()

    rmSync(log)
    // A file system whose birth times are coarse could give the new file the old one's: wait
    // until the clock has moved on (it is read off the files, not slept on blindly).
    const fresh = Array.from({ length: 40 }, (_, i) => `new-${i}-${'n'.repeat(20)}`)
    writeFileSync(log, lines(header, ...fresh))
    let s = statSync(log)
    while (s.birthtimeMs === born) {
      await new Promise((resolve) => setTimeout(resolve, 5))
      rmSync(log)
      writeFileSync(log, lines(header, ...fresh))
      s = statSync(log)
    }
    // The inode reused (forced here by pointing the checkpoint at the new file's inode); the new
    // file is longer than the old checkpoint, and its fingerprint matches the old one's.
    const document = JSON.parse(readFileSync(join(cp, 'checkpoints.json'), 'utf8')) as {
      files: { dev: number; ino: number; born?: number }[]
    }
    expect(document.files.map((entry) => entry.born)).toEqual([born])
    for (const entry of document.files) Object.assign(entry, { dev: s.dev, ino: s.ino })
    writeFileSync(join(cp, 'checkpoints.json'), JSON.stringify(document))
    const again = collect()
    const second = await start({ include: [log], checkpoints: cp }, again)
    await vi.waitUntil(() => again.received.length >= 41 || checkpoint(log) === s.size)
    await second.topology.stop()
    expect(again.received).toEqual([header, ...fresh])
    expect(second.notices.some((n) => n.includes('not the file its inode held'))).toBe(true)
  })

  it('never tails its own checkpoint and dead-letter files, when the checkpoint directory is among the included', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('one', 'bad'))
    const sink = collect((m) => (m === 'bad' ? 'rejected' : 'delivered'))
    // The checkpoints live in the very directory whose files are tailed.
    const { topology } = await start({ include: [join(dir, '*')], checkpoints: dir }, sink)
    await vi.waitUntil(
      () => existsSync(join(dir, 'checkpoints.json')) && checkpoint2(log) === statSync(log).size,
    )
    appendFileSync(log, lines('two'))
    await vi.waitUntil(() => sink.received.includes('two'))
    // Rotated, the dead-letter file is still the source's own: its letters are not tailed back.
    renameSync(join(dir, 'dead-letter.ndjson'), join(dir, 'dead-letter.ndjson.1'))
    appendFileSync(log, lines('three'))
    await vi.waitUntil(() => sink.received.includes('three'))
    // A scan after the rename has ended: 'four' is read in a later one than 'three'.
    appendFileSync(log, lines('four'))
    await vi.waitUntil(() => sink.received.includes('four'))
    await topology.stop()
    expect(sink.received).toEqual(['one', 'bad', 'two', 'three', 'four'])
  })

  it('never tails its own files when an include pattern reaches the checkpoint directory by another path (a symbolic link)', async () => {
    const logs = join(dir, 'logs')
    mkdirSync(logs)
    // The checkpoints are kept through a link to the very directory whose files are tailed.
    symlinkSync(logs, join(dir, 'state'))
    const log = join(logs, 'app.log')
    writeFileSync(log, lines('one', 'bad'))
    const sink = collect((m) => (m === 'bad' ? 'rejected' : 'delivered'))
    const { topology } = await start({ include: [join(logs, '*')], checkpoints: join(dir, 'state') }, sink)
    await vi.waitUntil(() => existsSync(join(logs, DEAD_LETTER_FILE)))
    // Two checkpoint writes since the letter: each makes a new checkpoints.json (a rename), which,
    // tailed, came back as an event; so did the letter.
    await twoCheckpointWrites(logs)
    appendFileSync(log, lines('two'))
    await vi.waitUntil(() => sink.received.includes('two'))
    await topology.stop()
    expect(sink.received).toEqual(['one', 'bad', 'two'])
  })

  it('never tails a symbolic or hard link to its own dead-letter or checkpoint file in a tailed directory, and says so once', async () => {
    const logs = join(dir, 'logs')
    const cp = join(dir, 'cp')
    mkdirSync(logs)
    mkdirSync(cp)
    writeFileSync(join(cp, DEAD_LETTER_FILE), '')
    linkSync(join(cp, DEAD_LETTER_FILE), join(logs, 'hard.log'))
    symlinkSync(join(cp, DEAD_LETTER_FILE), join(logs, 'soft.log'))
    symlinkSync(join(cp, 'checkpoints.json'), join(logs, 'checkpoints.log'))
    const log = join(logs, 'app.log')
    writeFileSync(log, lines('one', 'bad'))
    const sink = collect((m) => (m === 'bad' ? 'rejected' : 'delivered'))
    const { topology, notices } = await start({ include: [join(logs, '*.log')], checkpoints: cp }, sink)
    await vi.waitUntil(() => readFileSync(join(cp, DEAD_LETTER_FILE), 'utf8').includes('bad'))
    // Scans and checkpoint writes since the letter: tailed, the links sent it (and the checkpoints) back.
    await twoCheckpointWrites(cp)
    appendFileSync(log, lines('two'))
    await vi.waitUntil(() => sink.received.includes('two'))
    await twoCheckpointWrites(cp)
    await topology.stop()
    expect(sink.received).toEqual(['one', 'bad', 'two'])
    const said = notices.filter((n) => n.includes("the source's own"))
    // The link to the checkpoint file is said once that file exists, after the others.
    expect(said.map((n) => n.split(' is ')[0]).sort()).toEqual([
      `file source: ${join(logs, 'checkpoints.log')}`,
      `file source: ${join(logs, 'hard.log')}`,
      `file source: ${join(logs, 'soft.log')}`,
    ])
  })

  it('never tails a birth-time probe file a crash left in the checkpoint directory, when that directory is among the included', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('one'))
    // A run that crashed while it probed the file system's birth times left its probe file.
    writeFileSync(join(dir, '.birth-probe-4242-k3x9'), lines('probe'))
    const sink = collect()
    const { topology } = await start({ include: [join(dir, '*')], checkpoints: dir }, sink)
    await vi.waitUntil(() => sink.received.includes('one'))
    // A scan after the first has ended: 'two' is read in a later one than 'one'.
    appendFileSync(log, lines('two'))
    await vi.waitUntil(() => sink.received.includes('two'))
    await topology.stop()
    expect(sink.received).toEqual(['one', 'two'])
  })

  it('never tails the lock file of its checkpoint directory, nor the temporary and moved-aside lock files a crash left, when that directory is among the included', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('one'))
    // A crash left a stale lock, its own lock's temporary file, and a lock it moved aside to take over.
    const gone = spawnSync(process.execPath, ['-e', '']).pid!
    writeFileSync(
      join(dir, 'checkpoints.json.lock'),
      `${JSON.stringify({ pid: gone, host: 'h', token: 't' })}\n`,
    )
    writeFileSync(join(dir, 'checkpoints.json.lock.0b4e9d6a-2c1f-4f7e-9a51-3d2a6c8e7f10'), lines('temporary'))
    writeFileSync(
      join(dir, 'checkpoints.json.lock.stale.5e7c1b2d-8f3a-4c6e-b0d9-1a2b3c4d5e6f'),
      lines('aside'),
    )
    const sink = collect()
    const { topology, notices } = await start({ include: [join(dir, '*')], checkpoints: dir }, sink)
    await vi.waitUntil(() => sink.received.includes('one'))
    // Scans and checkpoint writes since: tailed, the files above were sent, and the live lock got a checkpoint.
    await twoCheckpointWrites(dir)
    appendFileSync(log, lines('two'))
    await vi.waitUntil(() => sink.received.includes('two'))
    await twoCheckpointWrites(dir)
    const files = (
      JSON.parse(readFileSync(join(dir, 'checkpoints.json'), 'utf8')) as { files: { path: string }[] }
    ).files
    await topology.stop()
    expect(sink.received).toEqual(['one', 'two'])
    expect(files.map((f) => f.path)).toEqual([log])
    expect(notices.filter((n) => n.includes('took over the lock'))).toHaveLength(1)
  })

  it('says once that a path the include patterns match is a directory, not a file, and tails the files beside it', async () => {
    const logs = join(dir, 'logs')
    mkdirSync(logs)
    writeFileSync(join(logs, 'app.log'), lines('inside'))
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('one'))
    const sink = collect()
    // `logs` meant "the files in it"; `*` matches it too.
    const { topology, notices } = await start(
      { include: [logs, join(dir, '*')], checkpoints: join(dir, 'cp') },
      sink,
    )
    await vi.waitUntil(() => sink.received.length === 1)
    appendFileSync(log, lines('two'))
    await vi.waitUntil(() => sink.received.length === 2)
    appendFileSync(log, lines('three'))
    await vi.waitUntil(() => sink.received.length === 3)
    // The directory becomes a FIFO: what the path is changed, so it is said again.
    rmSync(logs, { recursive: true })
    execFileSync('mkfifo', [logs])
    await vi.waitUntil(() => notices.some((n) => n.includes(`${logs} is not a regular file`)))
    await topology.stop()
    expect(sink.received).toEqual(['one', 'two', 'three'])
    expect(notices.filter((n) => n.includes(logs))).toEqual([
      `file source: ${logs} is a directory, not a file: it is not tailed (to tail the files in it, include ${join(logs, '*')})`,
      `file source: ${logs} is not a regular file (a FIFO): it is not tailed`,
    ])
  })

  it('starts at the end of files present at the first scan with startAt end', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('old'))
    const sink = collect()
    const { topology } = await start({ include: [log], checkpoints: join(dir, 'cp'), startAt: 'end' }, sink)
    await vi.waitUntil(() => checkpoint(log) !== undefined)
    appendFileSync(log, lines('new'))
    await vi.waitUntil(() => sink.received.length === 1)
    await topology.stop()
    expect(sink.received).toEqual(['new'])
  })

  describe('what a crash leaves of the checkpoints: no line of a file a run began to read is skipped by the restart', () => {
    const cp = () => join(dir, 'cp')
    const checkpointFile = () => join(cp(), 'checkpoints.json')
    let saves: MockInstance<Checkpoints['save']>
    beforeEach(() => {
      // Called through: only counted, to tell when a run's first scan is over (a checkpoint follows it).
      saves = vi.spyOn(Checkpoints.prototype, 'save')
    })
    afterEach(() => saves.mockRestore())

    /**
     * Runs the source over `include` (no checkpoint on the interval but the first; every batch
     * delivered at once, but those with a line `holds` picks, which stay in flight) until the
     * batch holding a line `crashAt` picks is sent: the process crashes there. A checkpoint file
     * is replaced whole and fsynced at each write, so what a crash leaves of it is the file as it
     * is at that moment; `crash()` stops the run and puts that back, undoing what was written
     * since (the checkpoint at the stop among it).
     */
    const run = (
      include: string[],
      options: Partial<Parameters<typeof file>[0]> = {},
      crashAt: (message: string) => boolean = () => false,
      holds: (message: string) => boolean = () => false,
    ) => {
      const context = new FakeSourceContext({ id: 'files' })
      const received: string[] = []
      const held: EventArray[] = []
      let image: Buffer | null | undefined
      let savesAtCrash: number | undefined
      context.onBatch = (batch) => {
        const messages = batch.events.map((e) => e.get('message') as string)
        received.push(...messages)
        if (image === undefined && messages.some(crashAt)) {
          image = existsSync(checkpointFile()) ? readFileSync(checkpointFile()) : null
          savesAtCrash = saves.mock.calls.length
        }
        if (messages.some(holds)) held.push(batch)
        else batch.end('delivered')
      }
      const notices: string[] = []
      saves.mockClear()
      const running = file({
        include,
        checkpoints: cp(),
        pollIntervalMs: 10,
        checkpointIntervalMs: 60_000,
        onNotice: (m) => notices.push(m),
        ...options,
      }).run(context)
      // Handled here too: a run that fails before `stop()` awaits it is not an unhandled rejection.
      running.catch(() => {})
      return {
        received,
        notices,
        /** How many checkpoints the run had begun to write when it crashed. */
        savesAtCrash: () => savesAtCrash,
        /** Resolves once the run's first scan is over (its first checkpoint was begun). */
        scanned: () => vi.waitUntil(() => saves.mock.calls.length >= 1),
        async crash() {
          await vi.waitUntil(() => image !== undefined)
          context.stop()
          // Too late to count: the image is taken. Errored, they are not re-sent after a stop.
          for (const batch of held) batch.end('errored')
          await running
          if (image === null) rmSync(checkpointFile(), { force: true })
          else writeFileSync(checkpointFile(), image!)
        },
        async stop() {
          context.stop()
          await running
        },
      }
    }

    /**
     * The restart after the crash, with the same options: once its first scan is over, appends
     * `after` to `log` and stops once that was sent. Resolves to every line it sent.
     */
    const restart = async (
      include: string[],
      log: string,
      options: Partial<Parameters<typeof file>[0]> = {},
    ) => {
      const again = run(include, options)
      await again.scanned()
      appendFileSync(log, lines('after'))
      await vi.waitUntil(() => again.received.includes('after'))
      await again.stop()
      return again.received
    }

    it('sends no line of a new file whose checkpoint cannot be written, and ends the run with that failure', async () => {
      const include = [join(dir, '*.log')]
      writeFileSync(join(dir, 'old.log'), lines('old'))
      await withoutUnhandledRejections(async () => {
        const first = run(include)
        await first.scanned()
        await vi.waitUntil(() => first.received.includes('old'))
        // The checkpoint directory is full from now on: the write before the new file's lines fails.
        saves.mockRejectedValue(
          new FileSourceError('CHECKPOINT_WRITE_FAILED', checkpointFile(), 'cannot write: ENOSPC'),
        )
        const before = saves.mock.calls.length
        writeFileSync(join(dir, 'new.log'), lines('n1'))
        // No write on the interval (60 s): this one is the scan's, for new.log.
        await vi.waitUntil(() => saves.mock.calls.length > before)
        await expect(first.stop()).rejects.toMatchObject({ code: 'CHECKPOINT_WRITE_FAILED' })
        expect(first.received).toEqual(['old'])
      })
    })

    it('names every file a scan found in one checkpoint, written before any of their lines is sent', async () => {
      const logs = ['a', 'b', 'c'].map((name) => join(dir, `${name}.log`))
      for (const log of logs) writeFileSync(log, lines('x'))
      const first = run([join(dir, '*.log')], {}, () => true)
      await first.crash()
      // One write for the three files, not one per file, nor any per line.
      expect(first.savesAtCrash()).toBe(1)
      for (const log of logs) expect(checkpoint(log)).toBe(0)
    })

    it('reads again the lines of a file that appeared during the run (startAt end), sent before any checkpoint named it', async () => {
      writeFileSync(join(dir, 'old.log'), lines('old'))
      const include = [join(dir, '*.log')]
      const log = join(dir, 'new.log')
      const first = run(include, { startAt: 'end' }, (m) => m === 'n1')
      await first.scanned()
      writeFileSync(log, lines('n1', 'n2'))
      await first.crash()
      expect(first.received).toEqual(['n1', 'n2'])
      // Sent, so it was begun: the restart must read it from where it was read, not from its end.
      expect(await restart(include, log, { startAt: 'end' })).toEqual(['n1', 'n2', 'after'])
    })

    it('reads again the lines of the files of a rotation (startAt end): the one renamed away and the new one, though no checkpoint named either', async () => {
      const include = [join(dir, 'app.log*')]
      const log = join(dir, 'app.log')
      // 'a' stays in flight, so its file's checkpoint cannot move past it.
      const first = run(
        include,
        { startAt: 'end' },
        (m) => m === 'b',
        (m) => m === 'a',
      )
      await first.scanned()
      writeFileSync(log, lines('a'))
      await vi.waitUntil(() => first.received.includes('a'))
      renameSync(log, `${log}.1`)
      writeFileSync(log, lines('b'))
      await first.crash()
      expect(first.received).toEqual(['a', 'b'])
      const again = await restart(include, log, { startAt: 'end' })
      expect([...again].sort()).toEqual(['a', 'after', 'b'])
    })

    it('reads again the lines of a file deleted and made again under its name (startAt end)', async () => {
      const include = [join(dir, '*.log')]
      const log = join(dir, 'app.log')
      writeFileSync(log, lines('old'))
      const first = run(include, { startAt: 'end' }, (m) => m === 'r1')
      await first.scanned()
      // Still open in the source, the old file keeps its inode: the new one has another.
      rmSync(log)
      writeFileSync(log, lines('r1', 'r2'))
      await first.crash()
      expect(first.received).toEqual(['r1', 'r2'])
      expect(await restart(include, log, { startAt: 'end' })).toEqual(['r1', 'r2', 'after'])
    })

    it('reads again lines appended to a file present at the first start (startAt end) and sent before the first checkpoint', async () => {
      const include = [join(dir, '*.log')]
      const log = join(dir, 'app.log')
      writeFileSync(log, lines('old'))
      const { ino } = statSync(log)
      // 'new' is appended between the scan that found the file (at its end then) and the read
      // that follows: a busy log does that at any time.
      const probe = await open(dir, 'r')
      const proto = Object.getPrototypeOf(probe) as FileHandle
      await probe.close()
      const stat = proto.stat
      let appended = false
      const spy = vi.spyOn(proto, 'stat').mockImplementation(async function (this: FileHandle, ...args) {
        if (!appended && (await stat.call(this)).ino === ino) {
          appended = true
          appendFileSync(log, lines('new'))
        }
        return stat.apply(this, args)
      } as FileHandle['stat'])
      try {
        const first = run(include, { startAt: 'end' }, (m) => m === 'new')
        await first.crash()
        spy.mockRestore()
        expect(first.received).toEqual(['new'])
        // The end of the file at the first start was 4: what came after it is read.
        expect(await restart(include, log, { startAt: 'end' })).toEqual(['new', 'after'])
      } finally {
        spy.mockRestore()
      }
    })

    it('reads again the new content of a copy-truncated file that starts with the same bytes, sent before a checkpoint of it', async () => {
      const include = [join(dir, '*.log')]
      const log = join(dir, 'app.log')
      // The same first line, longer than a fingerprint (256 bytes), before and after the truncation.
      const header = `header ${'h'.repeat(300)}`
      writeFileSync(log, lines(header, 'old'))
      const before = run(include)
      await vi.waitUntil(() => before.received.includes('old'))
      await before.stop()
      expect(checkpoint(log)).toBe(statSync(log).size)

      const first = run(include, {}, (m) => m === 'new-1')
      await first.scanned()
      truncateSync(log, 0)
      await vi.waitUntil(() => first.notices.some((n) => n.includes('was truncated')))
      appendFileSync(log, lines(header, 'new-1', 'new-2'))
      await first.crash()
      expect(first.received).toEqual([header, 'new-1', 'new-2'])
      // The checkpoint of the old content (past 'old') must not be taken for the new one.
      expect(await restart(include, log)).toEqual([header, 'new-1', 'new-2', 'after'])
    })
  })

  it("keeps one file's checkpoint moving while another's lines keep failing", async () => {
    const slow = join(dir, 'slow.log')
    const fast = join(dir, 'fast.log')
    writeFileSync(slow, lines('s1'))
    writeFileSync(fast, lines('f1', 'f2'))
    const sink = collect((m) => (m.startsWith('s') ? 'errored' : 'delivered'))
    const { topology } = await start(
      {
        include: [join(dir, '*.log')],
        checkpoints: join(dir, 'cp'),
        retry: { initialBackoffMs: 5, maxBackoffMs: 20 },
      },
      sink,
    )
    await vi.waitUntil(() => checkpoint(fast) === statSync(fast).size)
    expect(checkpoint(slow)).toBe(0)
    await topology.stop()
    expect(checkpoint(slow)).toBe(0)
  })

  it('joins lines into records by a start pattern, closing the last one after the timeout', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('ERROR boom', '  at a()', '  at b()', 'INFO ok', 'ERROR again', '  at c()'))
    const sink = collect()
    const { topology } = await start(
      {
        include: [log],
        checkpoints: join(dir, 'cp'),
        multiline: { startPattern: /^[A-Z]+ /, timeoutMs: 30 },
      },
      sink,
    )
    await vi.waitUntil(() => sink.received.length === 3)
    await vi.waitUntil(() => checkpoint(log) === statSync(log).size)
    await topology.stop()
    expect(sink.received).toEqual(['ERROR boom\n  at a()\n  at b()', 'INFO ok', 'ERROR again\n  at c()'])
  })

  it('rejects a multi-line record longer than maxLineBytes like an overlong line, instead of holding it whole however long it grows', async () => {
    const log = join(dir, 'app.log')
    // Without a bound, one start line and endless continuation lines grew one string until the
    // process ran out of memory (or past the longest string, and the source failed on every restart).
    const trace = Array.from({ length: 50 }, (_, i) => `  at frame${i}()`)
    writeFileSync(log, lines('ERROR huge', ...trace, 'INFO ok', 'ERROR small', '  at a()'))
    const sink = collect()
    const { topology } = await start(
      {
        include: [log],
        checkpoints: join(dir, 'cp'),
        maxLineBytes: 100,
        multiline: { startPattern: /^[A-Z]+ /, timeoutMs: 30 },
      },
      sink,
    )
    await vi.waitUntil(() => checkpoint(log) === statSync(log).size)
    await topology.stop()
    expect(sink.received).toEqual(['INFO ok', 'ERROR small\n  at a()'])
    const dead = readFileSync(join(dir, 'cp', DEAD_LETTER_FILE), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { offset: number; reason: string; message: string })
    expect(dead).toHaveLength(1)
    expect(dead[0]).toMatchObject({ file: log, offset: 0, reason: 'record longer than maxLineBytes (100)' })
    expect(dead[0]!.message.startsWith('ERROR huge\n  at frame0()')).toBe(true)
  })

  it('counts a multi-line record as a line is counted, without its last line ending, and dead-letters its first bytes', async () => {
    const log = join(dir, 'app.log')
    // 'Ab\n c' is 5 bytes, as 'Abcde' is: both within 5; 'Ab\n cd' is 6.
    writeFileSync(log, 'Abcde\nAb\n c\nAb\r\n cd\r\nZ\n')
    const sink = collect()
    const { topology } = await start(
      {
        include: [log],
        checkpoints: join(dir, 'cp'),
        maxLineBytes: 5,
        multiline: { startPattern: /^[A-Z]/, timeoutMs: 30 },
      },
      sink,
    )
    await vi.waitUntil(() => checkpoint(log) === statSync(log).size)
    await topology.stop()
    expect(sink.received).toEqual(['Abcde', 'Ab\n c', 'Z'])
    const dead = readFileSync(join(dir, 'cp', DEAD_LETTER_FILE), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { offset: number; reason: string; message: string })
    // The line that passed the limit is in the letter too.
    expect(dead).toEqual([
      expect.objectContaining({
        offset: 12,
        message: 'Ab\n cd',
        reason: 'record longer than maxLineBytes (5)',
      }),
    ])
  })

  it('measures a multi-line record by its bytes in the file, not by its decoded text, when lines are not UTF-8', async () => {
    const log = join(dir, 'app.log')
    // 'Ab\n \xe9\xe9\xe9' is 7 bytes in the file (Latin-1 text read as UTF-8), within 8; decoded,
    // each \xe9 is U+FFFD, 3 bytes in UTF-8: counted that way, the record was 13 bytes and rejected.
    writeFileSync(
      log,
      Buffer.concat([
        Buffer.from('Ab\n '),
        Buffer.from([0xe9, 0xe9, 0xe9]),
        Buffer.from('\nAb\n cdefgh\nZ\n'),
      ]),
    )
    const sink = collect()
    const { topology } = await start(
      {
        include: [log],
        checkpoints: join(dir, 'cp'),
        maxLineBytes: 8,
        multiline: { startPattern: /^[A-Z]/, timeoutMs: 30 },
      },
      sink,
    )
    await vi.waitUntil(() => checkpoint(log) === statSync(log).size)
    await topology.stop()
    expect(sink.received).toEqual(['Ab\n \ufffd\ufffd\ufffd', 'Z'])
    // The record of 10 bytes in the file is still rejected.
    const dead = readFileSync(join(dir, 'cp', DEAD_LETTER_FILE), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { offset: number; reason: string; message: string })
    expect(dead).toEqual([
      expect.objectContaining({
        offset: 8,
        message: 'Ab\n cdefgh',
        reason: 'record longer than maxLineBytes (8)',
      }),
    ])
  })

  it('dead-letters the first bytes of a multi-line record passing maxLineBytes without joining it whole, which could be past the longest string', async () => {
    const log = join(dir, 'app.log')
    // Two lines within maxLineBytes, 5501 bytes together. Joined whole to take its first 1024
    // bytes, the record was one string: with maxLineBytes past half the longest string (2^28), two
    // such lines threw RangeError in the middle of a read.
    writeFileSync(log, lines(`A${'a'.repeat(1999)}`, ` ${'b'.repeat(3499)}`, 'Z'))
    // The longest string lowered to 4000 characters where a string is encoded.
    const from = Buffer.from
    const spy = vi.spyOn(Buffer, 'from').mockImplementation(((...args: Parameters<typeof from>) => {
      if (typeof args[0] === 'string' && args[0].length > 4000) throw new RangeError('Invalid string length')
      return from(...(args as [string]))
    }) as typeof from)
    const sink = collect()
    let notices: string[]
    try {
      let topology: Topology
      ;({ topology, notices } = await start(
        {
          include: [log],
          checkpoints: join(dir, 'cp'),
          maxLineBytes: 5000,
          multiline: { startPattern: /^[A-Z]/, timeoutMs: 30 },
        },
        sink,
      ))
      await vi.waitUntil(() => checkpoint(log) === statSync(log).size || notices.length > 0)
      await topology.stop()
    } finally {
      spy.mockRestore()
    }
    expect(notices).toEqual([])
    expect(sink.received).toEqual(['Z'])
    const dead = readFileSync(join(dir, 'cp', DEAD_LETTER_FILE), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { offset: number; reason: string; message: string })
    expect(dead).toEqual([
      expect.objectContaining({
        offset: 0,
        message: `A${'a'.repeat(1023)}`,
        reason: 'record longer than maxLineBytes (5000)',
      }),
    ])
  })

  it('tests each line on its own with a g or y start pattern (y anchors it at the line start)', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('1 a', '2 b', '  at 3', '4 c', '5 d'))
    for (const startPattern of [/^\d/g, /\d/y]) {
      rmSync(join(dir, 'cp'), { recursive: true, force: true })
      const sink = collect()
      const { topology } = await start(
        { include: [log], checkpoints: join(dir, 'cp'), multiline: { startPattern, timeoutMs: 10 } },
        sink,
      )
      await vi.waitUntil(() => checkpoint(log) === statSync(log).size)
      await topology.stop()
      expect(sink.received).toEqual(['1 a', '2 b\n  at 3', '4 c', '5 d'])
    }
  })

  it('sends the open multi-line record of a file rotated away, once it is no longer read', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('ERROR first', '  at a()'))
    const sink = collect()
    const { topology } = await start(
      {
        include: [log],
        checkpoints: join(dir, 'cp'),
        readRenamedForMs: 0,
        multiline: { startPattern: /^[A-Z]+ /, timeoutMs: 60_000 },
      },
      sink,
    )
    await vi.waitUntil(() => checkpoint(log) !== undefined)
    renameSync(log, join(dir, 'app.log.1'))
    writeFileSync(log, lines('INFO next'))
    await vi.waitUntil(() => sink.received.length === 1)
    await topology.stop()
    expect(sink.received).toEqual(['ERROR first\n  at a()'])
  })

  it('removes a file once every line is finished and it stayed idle, never before', async () => {
    const done = join(dir, 'done.log')
    const failing = join(dir, 'failing.log')
    writeFileSync(done, lines('a', 'b'))
    writeFileSync(failing, lines('x'))
    const sink = collect((m) => (m === 'x' ? 'errored' : 'delivered'))
    const { topology } = await start(
      {
        include: [join(dir, '*.log')],
        checkpoints: join(dir, 'cp'),
        removeAfterIdleMs: 30,
        retry: { initialBackoffMs: 5, maxBackoffMs: 10 },
      },
      sink,
    )
    await vi.waitUntil(() => !existsSync(done))
    // The failing file's line is not finished: it stays, however long it is idle.
    await vi.waitUntil(() => sink.received.filter((m) => m === 'x').length >= 3)
    expect(existsSync(failing)).toBe(true)
    await topology.stop()
    expect(sink.received.filter((m) => m !== 'x')).toEqual(['a', 'b'])
  })

  it('removes a link, not the file it names, and keeps reading that file from its checkpoint', async () => {
    // A symbolic link and a hard link, each matched (and sorted) after the file it names: the
    // source then reads the inode by the link's name, and removing the link leaves the file. Its
    // checkpoint was dropped with the link, and the file was then read again from its start.
    const target = join(dir, 'app.log')
    const other = join(dir, 'data.log')
    writeFileSync(target, lines('one', 'two'))
    writeFileSync(other, lines('three'))
    symlinkSync(target, join(dir, 'current.log'))
    execFileSync('ln', [other, join(dir, 'hard.log')])
    const sink = collect()
    const { topology, notices } = await start(
      { include: [join(dir, '*.log')], checkpoints: join(dir, 'cp'), removeAfterIdleMs: 30 },
      sink,
    )
    // Each name is removed in turn, the links first: then nothing is left to read.
    await vi.waitUntil(() => readdirSync(dir).filter((f) => f.endsWith('.log')).length === 0, {
      timeout: 5000,
    })
    await topology.stop()
    expect(sink.received.sort()).toEqual(['one', 'three', 'two'])
    expect(notices.filter((n) => n.includes('still there under another name'))).toHaveLength(2)
  })

  it('never removes the new file of a rotation it has not seen yet: the old one was finished in the same scan', async () => {
    // The old file's last line is held until the rotation (rename, then a new file under the
    // name) is done: it then finishes before the scan that finds the rotation. Removing by the
    // old tail's path deleted the new file (and called the old one a link).
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('a'))
    const { sink, received, release } = holdingSink((message) => message === 'a')
    const { topology, notices } = await start(
      { include: [log], checkpoints: join(dir, 'cp'), removeAfterIdleMs: 0 },
      sink,
    )
    await vi.waitUntil(() => received.includes('a'))
    renameSync(log, join(dir, 'app.log.1'))
    writeFileSync(log, lines('b'))
    release('delivered')
    // The new file is removed once its own line is finished: by its own tail, which finds it there.
    await vi.waitUntil(() => received.includes('b') && !existsSync(log))
    await topology.stop()
    expect(received).toEqual(['a', 'b'])
    expect(existsSync(join(dir, 'app.log.1'))).toBe(true) // listed no more: never removed
    expect(notices.filter((n) => n.includes('a link') || n.includes('cannot remove'))).toEqual([])
  })

  it('forgets the checkpoint of a file gone for forgetGoneAfterMs, and keeps one still at its path though not listed', async () => {
    // Without a bound, every file deleted or rotated away left its checkpoint behind for good.
    const gone = join(dir, 'gone.log')
    const other = join(dir, 'other.txt')
    writeFileSync(gone, lines('a'))
    writeFileSync(other, lines('b'))
    const cp = join(dir, 'cp')
    const first = await start(
      { include: [join(dir, '*.log'), join(dir, '*.txt')], checkpoints: cp },
      collect(),
    )
    await vi.waitUntil(() => checkpoint(gone) === 2 && checkpoint(other) === 2)
    await first.topology.stop()
    rmSync(gone)
    // The second run lists only *.log: other.txt is not listed, but it is still there.
    const sink = collect()
    const second = await start(
      { include: [join(dir, '*.log')], checkpoints: cp, forgetGoneAfterMs: 50 },
      sink,
    )
    await vi.waitUntil(() => checkpoint(gone) === undefined)
    await second.topology.stop()
    expect(checkpoint(other)).toBe(2)
    expect(sink.received).toEqual([])
    expect(second.notices).toEqual([
      `file source: forgot the checkpoint of ${gone} (offset 2): the file is gone (not listed, not at that path) for forgetGoneAfterMs (50 ms); if it comes back, it is read from its start`,
    ])
  })

  it('forgets the checkpoints of gone files on the interval though a new file appears at every scan', async () => {
    // The checkpoint written before a new file's lines are sent restarted the interval, and the
    // pass for gone files runs only on it: in a directory where files appear more often than
    // checkpointIntervalMs, no checkpoint was ever forgotten, and the file grew for good.
    const cp = join(dir, 'cp')
    mkdirSync(cp)
    const gone = join(dir, 'gone.log')
    writeFileSync(
      join(cp, 'checkpoints.json'),
      JSON.stringify({ version: 1, files: [{ path: gone, dev: 1, ino: 2, fingerprint: null, offset: 7 }] }),
    )
    writeFileSync(join(dir, 'f0.log'), lines('x'))
    vi.useFakeTimers({ toFake: ['Date'] })
    const save = Checkpoints.prototype.save
    let made = 0
    // After each write: a new file for the next scan to find, and 600 ms gone by (less than the interval).
    const saves = vi.spyOn(Checkpoints.prototype, 'save').mockImplementation(async function (
      this: Checkpoints,
      checkpoints,
    ) {
      await save.call(this, checkpoints)
      writeFileSync(join(dir, `f${++made}.log`), lines('x'))
      vi.setSystemTime(Date.now() + 600)
    })
    const context = new FakeSourceContext({ id: 'files' })
    context.onBatch = (batch) => batch.end('delivered')
    const notices: string[] = []
    try {
      const running = file({
        include: [join(dir, '*.log')],
        checkpoints: cp,
        pollIntervalMs: 1,
        checkpointIntervalMs: 1000,
        forgetGoneAfterMs: 0,
        onNotice: (m) => notices.push(m),
      }).run(context)
      // Ten writes: five intervals of 1000 ms went by.
      await vi.waitUntil(() => notices.some((n) => n.includes('forgot')) || saves.mock.calls.length >= 10)
      context.stop()
      await running
    } finally {
      saves.mockRestore()
      vi.useRealTimers()
    }
    expect(notices.filter((n) => n.includes('forgot'))).toEqual([
      expect.stringContaining(`forgot the checkpoint of ${gone} (offset 7)`),
    ])
  })

  it('counts forgetGoneAfterMs from when the file was first found gone, across restarts', async () => {
    // The time it was found gone was kept in memory only: a source restarted more often than
    // forgetGoneAfterMs (a daily deploy, a crash loop) never forgot a checkpoint.
    const gone = join(dir, 'gone.log')
    writeFileSync(gone, lines('a'))
    const cp = join(dir, 'cp')
    const document = () =>
      JSON.parse(readFileSync(join(cp, 'checkpoints.json'), 'utf8')) as {
        files: { path: string; goneAt?: number }[]
      }
    const first = await start({ include: [join(dir, '*.log')], checkpoints: cp }, collect())
    await vi.waitUntil(() => checkpoint(gone) === 2)
    await first.topology.stop()
    rmSync(gone)
    const before = Date.now()
    const second = await start(
      { include: [join(dir, '*.log')], checkpoints: cp, forgetGoneAfterMs: 60_000 },
      collect(),
    )
    await vi.waitUntil(() => document().files[0]?.goneAt !== undefined)
    await second.topology.stop()
    const goneAt = document().files[0]!.goneAt!
    expect(goneAt).toBeGreaterThanOrEqual(before)
    expect(goneAt).toBeLessThanOrEqual(Date.now())
    // A minute passes while the source is down: the next run forgets it at its first pass.
    const doc = document()
    doc.files[0]!.goneAt = goneAt - 60_000
    writeFileSync(join(cp, 'checkpoints.json'), JSON.stringify(doc))
    const third = await start(
      { include: [join(dir, '*.log')], checkpoints: cp, forgetGoneAfterMs: 60_000 },
      collect(),
    )
    await vi.waitUntil(() => checkpoint(gone) === undefined)
    await third.topology.stop()
    expect(third.notices).toEqual([expect.stringContaining(`forgot the checkpoint of ${gone} (offset 2)`)])
  })

  it('neither marks nor forgets a checkpoint whose path cannot be looked at (an error other than its absence)', async () => {
    // ENAMETOOLONG stands for EACCES or EIO (root reads every file here): the file may well be
    // there, on a mount that is down; forgotten, it would be read again from its start.
    const cp = join(dir, 'cp')
    mkdirSync(cp)
    const unknown = join(dir, 'x'.repeat(300))
    writeFileSync(
      join(cp, 'checkpoints.json'),
      JSON.stringify({
        version: 1,
        files: [{ path: unknown, dev: 1, ino: 2, fingerprint: null, offset: 7 }],
      }),
    )
    writeFileSync(join(dir, 'app.log'), lines('a'))
    const { topology, notices } = await start(
      { include: [join(dir, '*.log')], checkpoints: cp, forgetGoneAfterMs: 0 },
      collect(),
    )
    // The listed file's checkpoint is written after passes that looked at the other one.
    await vi.waitUntil(() => checkpoint(join(dir, 'app.log')) === 2)
    await twoCheckpointWrites(cp)
    await topology.stop()
    expect(checkpoint(unknown)).toBe(7)
    expect(notices.filter((n) => n.includes('forgot'))).toEqual([])
  })

  it('reads on from its checkpoint a file renamed away and back while its lines were in flight', async () => {
    // Retired with its line in flight, its checkpoint is known only once the line settles: the
    // file listed again meanwhile was opened at once with none, and read again from its start.
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('one'))
    const { sink, received, release } = holdingSink(
      (message, received) => message === 'one' && received.length === 1,
    )
    const { topology } = await start({ include: [log], checkpoints: join(dir, 'cp') }, sink)
    await vi.waitUntil(() => received.includes('one'))
    renameSync(log, join(dir, 'app.away'))
    // Two checkpoint writes after the rename: the scan between them retired the file.
    await twoCheckpointWrites()
    renameSync(join(dir, 'app.away'), log)
    // Two more: the file was listed again at least once while its line was held.
    await twoCheckpointWrites()
    release('delivered')
    appendFileSync(log, lines('two'))
    await vi.waitUntil(() => received.includes('two'))
    await topology.stop()
    expect(received).toEqual(['one', 'two'])
  })

  it('keeps the checkpoint of a file renamed away and back within forgetGoneAfterMs: it is not read again', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('one'))
    const sink = collect()
    const { topology, notices } = await start(
      { include: [log], checkpoints: join(dir, 'cp'), forgetGoneAfterMs: 60_000 },
      sink,
    )
    await vi.waitUntil(() => checkpoint(log) === 4)
    renameSync(log, join(dir, 'app.away'))
    // Retired and stored, then found gone: each checkpoint write follows a pass that looks for gone
    // files, and the second write after the rename comes after the scan that retired it.
    await twoCheckpointWrites()
    expect(checkpoint(log)).toBe(4)
    renameSync(join(dir, 'app.away'), log)
    appendFileSync(log, lines('two'))
    await vi.waitUntil(() => sink.received.length === 2)
    await topology.stop()
    expect(sink.received).toEqual(['one', 'two'])
    expect(notices.filter((n) => n.includes('forgot'))).toEqual([])
  })

  it('goes on when the directory vanishes, and reads it again when it comes back', async () => {
    const logs = join(dir, 'logs')
    mkdirSync(logs)
    writeFileSync(join(logs, 'a.log'), lines('before'))
    const sink = collect()
    const { topology } = await start({ include: [join(logs, '*.log')], checkpoints: join(dir, 'cp') }, sink)
    await vi.waitUntil(() => sink.received.length === 1)
    rmSync(logs, { recursive: true })
    await vi.waitUntil(() => checkpoint(join(logs, 'a.log')) !== undefined)
    mkdirSync(logs)
    writeFileSync(join(logs, 'b.log'), lines('after'))
    await vi.waitUntil(() => sink.received.length === 2)
    await topology.stop()
    expect(sink.received).toEqual(['before', 'after'])
  })

  it.skipIf(process.getuid?.() === 0)('reports a file it may not read and reads the others', async () => {
    // Skipped as root: root reads a file whatever its mode.
    const locked = join(dir, 'locked.log')
    writeFileSync(join(dir, 'open.log'), lines('visible'))
    writeFileSync(locked, lines('hidden'))
    chmodSync(locked, 0)
    const sink = collect()
    const { topology, notices } = await start(
      { include: [join(dir, '*.log')], checkpoints: join(dir, 'cp') },
      sink,
    )
    await vi.waitUntil(() => sink.received.length === 1)
    await vi.waitUntil(() => notices.some((n) => n.includes(`cannot open ${locked}`)))
    await topology.stop()
    expect(sink.received).toEqual(['visible'])
  })

  it('writes no checkpoint of a restart in the same process before the forced-stopped run wrote its last one', async () => {
    const log = join(dir, 'app.log')
    const cp = join(dir, 'cp')
    writeFileSync(log, lines('a', 'hang'))
    // Which run each save is of, in the order they began and ended.
    const order: string[] = []
    let stopping = false
    let holdLast: Promise<void> | undefined
    let releaseLast = () => {}
    const released = new Promise<void>((resolve) => {
      releaseLast = resolve
    })
    const save = Checkpoints.prototype.save
    const runs = new Map<Checkpoints, string>()
    const saves = vi.spyOn(Checkpoints.prototype, 'save').mockImplementation(async function (
      this: Checkpoints,
      checkpoints,
    ) {
      if (!runs.has(this)) runs.set(this, `run${runs.size + 1}`)
      const run = runs.get(this)!
      // The forced-stopped run's last save is held until the restart has run on far enough.
      if (run === 'run1' && stopping && holdLast === undefined) {
        holdLast = released
        await holdLast
      }
      order.push(`${run} begins`)
      try {
        return await save.call(this, checkpoints)
      } finally {
        order.push(`${run} ends`)
      }
    })
    try {
      const held = holdingSink((m) => m === 'hang')
      const first = await start({ include: [log], checkpoints: cp }, held.sink)
      await vi.waitUntil(() => held.received.includes('hang'))
      stopping = true
      await first.topology.stop({ drainTimeoutMs: 0 })
      const sink = collect()
      const second = await start({ include: [log], checkpoints: cp }, sink)
      // Let the held save go once the restart has saved, or said it waits for the last run.
      await vi.waitUntil(
        () =>
          order.includes('run2 begins') || second.notices.some((n) => n.includes('waits for the run before')),
      )
      releaseLast()
      await vi.waitUntil(() => sink.received.includes('hang'), { timeout: 10_000 })
      await second.topology.stop()
      held.release('delivered')
      const count = (what: string) => order.filter((x) => x === what).length
      await vi.waitUntil(() => count('run1 ends') === count('run1 begins'), { timeout: 10_000 })
      // The first run's last save was held, and made (after the stop, as before), and every save
      // of the restart came after it.
      expect(holdLast).toBeDefined()
      expect(order.lastIndexOf('run1 ends')).toBeLessThan(order.indexOf('run2 begins'))
    } finally {
      releaseLast()
      saves.mockRestore()
    }
  })

  it('fails a second live source given the checkpoint directory of a running one, naming it and the field, and leaves the first reading', async () => {
    const log = join(dir, 'app.log')
    const cp = join(dir, 'cp')
    writeFileSync(log, lines('a'))
    const firstContext = new FakeSourceContext({ id: 'first' })
    firstContext.onBatch = (batch) => batch.end('delivered')
    const notices: string[] = []
    const options = {
      include: [log],
      checkpoints: cp,
      pollIntervalMs: 10,
      checkpointIntervalMs: 20,
      onNotice: (m: string) => notices.push(m),
    }
    const first = file(options).run(firstContext)
    await vi.waitUntil(() => checkpoint(log) === 2)
    const secondContext = new FakeSourceContext({ id: 'second' })
    secondContext.onBatch = (batch) => batch.end('delivered')
    // A misconfiguration: it used to wait, with a notice, for as long as the first ran.
    const second = file({ ...options, checkpoints: join(dir, '.', 'cp') }).run(secondContext)
    const error = await second.then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(FileSourceError)
    expect(error).toMatchObject({
      code: 'CHECKPOINTS_IN_USE',
      component: 'second',
      field: 'checkpoints',
      path: cp,
    })
    expect((error as Error).message).toMatch(/'second'.*checkpoints.*'first'/s)
    expect(notices.filter((n) => n.includes('waits for'))).toEqual([])
    // The first reads on.
    appendFileSync(log, lines('b'))
    await vi.waitUntil(() => checkpoint(log) === 4)
    firstContext.stop()
    await first
    // Once the first ended, the directory is free again.
    const thirdContext = new FakeSourceContext({ id: 'third' })
    thirdContext.onBatch = (batch) => batch.end('delivered')
    const third = file(options).run(thirdContext)
    appendFileSync(log, lines('c'))
    await vi.waitUntil(() => checkpoint(log) === 6)
    thirdContext.stop()
    await third
  })

  it('fails a second live source given the checkpoint directory of a running one by another spelling (a symbolic link, a/../b), naming the first', async () => {
    const log = join(dir, 'app.log')
    const cp = join(dir, 'cp')
    mkdirSync(cp)
    symlinkSync(cp, join(dir, 'link'))
    mkdirSync(join(dir, 'elsewhere'))
    symlinkSync(join(dir, 'elsewhere'), join(dir, 'hop'))
    writeFileSync(log, lines('a'))
    const firstContext = new FakeSourceContext({ id: 'first' })
    firstContext.onBatch = (batch) => batch.end('delivered')
    const options = { include: [log], pollIntervalMs: 10, checkpointIntervalMs: 20, onNotice: () => {} }
    const first = file({ ...options, checkpoints: cp }).run(firstContext)
    await vi.waitUntil(() => checkpoint(log) === 2)
    // `link` names cp itself; `hop/../cp` is cp by the lexical path, `dir/cp`, but the system
    // resolves `hop` first: `elsewhere/../cp` is cp too.
    for (const spelling of [join(dir, 'link'), `${join(dir, 'link')}/`, `${join(dir, 'hop')}/../cp`]) {
      const secondContext = new FakeSourceContext({ id: 'second' })
      secondContext.onBatch = (batch) => batch.end('delivered')
      const error = await file({ ...options, checkpoints: spelling })
        .run(secondContext)
        .then(
          () => undefined,
          (e: unknown) => e,
        )
      expect(error, spelling).toBeInstanceOf(FileSourceError)
      expect(error).toMatchObject({ code: 'CHECKPOINTS_IN_USE', component: 'second', field: 'checkpoints' })
      expect((error as Error).message).toMatch(/'first'/)
    }
    // The first reads on, its checkpoints its own.
    appendFileSync(log, lines('b'))
    await vi.waitUntil(() => checkpoint(log) === 4)
    firstContext.stop()
    await first
  })

  it("fails a source given the checkpoint directory of a live file source of another process, naming the directory and that process's pid; once that process is killed, the next run takes over its stale lock", async () => {
    const log = join(dir, 'app.log')
    const cp = join(dir, 'cp')
    writeFileSync(log, lines('a'))
    const child = spawn(
      process.execPath,
      [
        '--conditions=source',
        '--import',
        'tsx',
        fileURLToPath(new URL('./checkpointLockChild.ts', import.meta.url)),
        log,
        cp,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    )
    // Killed however the test ends: a timeout skips the `finally` below, and the child, left running
    // past the test run (its parent gone), never ends.
    onTestFinished(() => {
      child.kill('SIGKILL')
    })
    let output = ''
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      output += text
    })
    const exited = new Promise<unknown>((resolve) =>
      child.on('exit', (code, signal) => resolve({ code, signal })),
    )
    const options = { include: [log], checkpoints: cp, pollIntervalMs: 10, checkpointIntervalMs: 20 }
    const context = new FakeSourceContext({ id: 'here' })
    context.onBatch = (batch) => batch.end('delivered')
    try {
      // The child reads, so it holds the directory.
      await vi.waitUntil(() => child.exitCode !== null || output.includes('delivered a\n'), {
        timeout: 20_000,
      })
      expect(output).toContain('delivered a\n')
      let settled: { error: unknown } | undefined
      void file({ ...options, onNotice: () => {} })
        .run(context)
        .then(
          () => (settled = { error: undefined }),
          (error: unknown) => (settled = { error }),
        )
      // It used to read on beside the child, the two writing over each other's checkpoints.
      await vi.waitUntil(() => settled !== undefined, { timeout: 10_000 })
      const error = settled!.error
      expect(error).toBeInstanceOf(FileSourceError)
      expect(error).toMatchObject({ code: 'CHECKPOINTS_IN_USE', component: 'here', field: 'checkpoints' })
      expect((error as Error).message).toContain(cp)
      expect((error as Error).message).toContain(`process ${child.pid}`)
      expect(context.records()).toEqual([])
    } finally {
      context.stop()
      child.kill('SIGKILL')
      await exited
    }
    // Killed: its lock stays, stale, and the next run takes it over and reads on from its checkpoint.
    expect(existsSync(join(cp, 'checkpoints.json.lock'))).toBe(true)
    appendFileSync(log, lines('b'))
    const notices: string[] = []
    const next = new FakeSourceContext({ id: 'next' })
    next.onBatch = (batch) => batch.end('delivered')
    const run = file({ ...options, onNotice: (m) => notices.push(m) }).run(next)
    await vi.waitUntil(() => checkpoint(log) === 4, { timeout: 10_000 })
    expect(
      next
        .records()
        .flat()
        .map((r) => r.message),
    ).toContain('b')
    expect(notices.some((n) => n.includes('took over the lock') && n.includes(`process ${child.pid}`))).toBe(
      true,
    )
    next.stop()
    await run
    // Released at the stop.
    expect(existsSync(join(cp, 'checkpoints.json.lock'))).toBe(false)
  })

  it('takes over a stale lock of the checkpoint directory (of a process gone, of this pid from before, not a lock at all), and stops writing checkpoints once another run took the lock over', async () => {
    const log = join(dir, 'app.log')
    const cp = join(dir, 'cp')
    const lock = join(cp, 'checkpoints.json.lock')
    mkdirSync(cp)
    writeFileSync(log, lines('a'))
    const gone = spawnSync(process.execPath, ['-e', '']).pid!
    const stale = [
      JSON.stringify({ pid: gone, host: 'h', token: 't1' }),
      // A container's pid 1 after a restart: this pid, but no run of this process holds it.
      JSON.stringify({ pid: process.pid, host: 'h', token: 't2' }),
      'not a lock',
    ]
    for (const [i, text] of stale.entries()) {
      writeFileSync(lock, text)
      const notices: string[] = []
      const context = new FakeSourceContext({ id: `run${i}` })
      context.onBatch = (batch) => batch.end('delivered')
      const options = { include: [log], checkpoints: cp, pollIntervalMs: 10, checkpointIntervalMs: 20 }
      const run = file({ ...options, onNotice: (m) => notices.push(m) }).run(context)
      appendFileSync(log, lines(`l${i}`))
      // Each run reads on from the one before: 'a' and a line of 3 bytes per run.
      await vi.waitUntil(() => checkpoint(log) === 2 + 3 * (i + 1))
      expect(notices.filter((n) => n.includes('took over the lock'))).toHaveLength(1)
      if (i < stale.length - 1) {
        context.stop()
        await run
        expect(existsSync(lock)).toBe(false)
        continue
      }
      // Taken over by a run that could not tell this one was alive (another host): this run stops.
      writeFileSync(lock, JSON.stringify({ pid: 4_000_000, host: 'other-host', token: 'theirs' }))
      const error = await run.then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(error).toMatchObject({ code: 'CHECKPOINTS_IN_USE', component: `run${i}`, field: 'checkpoints' })
      expect((error as Error).message).toMatch(/taken over by process 4000000 on host other-host/)
      // The lock is the other run's still.
      expect(readFileSync(lock, 'utf8')).toContain('theirs')
    }
  })

  it('fails a restart whose stopped run before it does not end in time (its last checkpoint write hangs), naming both', async () => {
    const log = join(dir, 'app.log')
    const cp = join(dir, 'cp')
    writeFileSync(log, lines('a'))
    let stopping = false
    let holding = false
    let releaseLast = () => {}
    const save = Checkpoints.prototype.save
    const saves = vi.spyOn(Checkpoints.prototype, 'save').mockImplementation(async function (
      this: Checkpoints,
      checkpoints,
    ) {
      // Held once: the save held may be one the interval began as the stop came, and the run's
      // last save, after it, must not be held again (nothing would release it).
      if (stopping && !holding) {
        holding = true
        await new Promise<void>((resolve) => (releaseLast = resolve))
      }
      return save.call(this, checkpoints)
    })
    const options = { include: [log], checkpoints: cp, pollIntervalMs: 10, checkpointIntervalMs: 20 }
    try {
      const firstContext = new FakeSourceContext({ id: 'first' })
      firstContext.onBatch = (batch) => batch.end('delivered')
      const first = file({ ...options, onNotice: () => {} }).run(firstContext)
      await vi.waitUntil(() => checkpoint(log) === 2)
      stopping = true
      firstContext.stop()
      const notices: string[] = []
      const secondContext = new FakeSourceContext({ id: 'second' })
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
      let second: Promise<unknown>
      try {
        second = file({ ...options, onNotice: (m) => notices.push(m) })
          .run(secondContext)
          .then(
            () => undefined,
            (e: unknown) => e,
          )
        await vi.waitUntil(() => notices.some((n) => n.includes('waits for') && n.includes("'first'")))
        // It used to wait for as long as the first run did not end: for ever.
        await vi.advanceTimersByTimeAsync(30_000)
      } finally {
        vi.useRealTimers()
      }
      const error = await second
      expect(error).toBeInstanceOf(FileSourceError)
      expect(error).toMatchObject({ code: 'CHECKPOINTS_IN_USE', component: 'second', field: 'checkpoints' })
      expect((error as Error).message).toMatch(/'first'.*not ended/)
      // Released once held: the first run's last write may come after the second's failure.
      await vi.waitUntil(() => holding)
      releaseLast()
      await first
    } finally {
      releaseLast()
      saves.mockRestore()
    }
  })

  it('keeps a restart waiting for a stopped run whose last checkpoint is still being written, though a run that waited for it was stopped meanwhile', async () => {
    const log = join(dir, 'app.log')
    const cp = join(dir, 'cp')
    writeFileSync(log, lines('a'))
    const order: string[] = []
    let stopping = false
    let releaseLast = () => {}
    const save = Checkpoints.prototype.save
    const runs = new Map<Checkpoints, string>()
    const saves = vi.spyOn(Checkpoints.prototype, 'save').mockImplementation(async function (
      this: Checkpoints,
      checkpoints,
    ) {
      if (!runs.has(this)) runs.set(this, `run${runs.size + 1}`)
      const run = runs.get(this)!
      if (run === 'run1' && stopping) {
        stopping = false
        await new Promise<void>((resolve) => (releaseLast = resolve))
      }
      order.push(`${run} begins`)
      try {
        return await save.call(this, checkpoints)
      } finally {
        order.push(`${run} ends`)
      }
    })
    const notices: string[] = []
    const options = {
      include: [log],
      checkpoints: cp,
      pollIntervalMs: 10,
      checkpointIntervalMs: 20,
      onNotice: (m: string) => notices.push(m),
    }
    const context = (id: string) => {
      const c = new FakeSourceContext({ id })
      c.onBatch = (batch) => batch.end('delivered')
      return c
    }
    try {
      const firstContext = context('first')
      const first = file(options).run(firstContext)
      await vi.waitUntil(() => checkpoint(log) === 2)
      stopping = true
      firstContext.stop()
      // A restart waits for the first run's last checkpoint, and is stopped before it is written.
      const secondContext = context('second')
      const second = file(options).run(secondContext)
      await vi.waitUntil(() => notices.some((n) => n.includes("'second': waits for")))
      secondContext.stop()
      await second
      // The first run still writes: a third must wait for it too (it used to start at once).
      const thirdContext = context('third')
      const third = file(options).run(thirdContext)
      // The second never saved: the third's saves are the only ones not of run1.
      const ofThird = () => order.findIndex((x) => x.endsWith('begins') && !x.startsWith('run1'))
      await vi.waitUntil(() => notices.some((n) => n.includes("'third': waits for")) || ofThird() >= 0)
      releaseLast()
      await first
      appendFileSync(log, lines('b'))
      await vi.waitUntil(() => checkpoint(log) === 4)
      thirdContext.stop()
      await third
      expect(ofThird()).toBeGreaterThan(order.lastIndexOf('run1 ends'))
    } finally {
      releaseLast()
      saves.mockRestore()
    }
  })

  it('closes every file it opened when it cannot write its checkpoint, and rejects naming the checkpoint file', async () => {
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('a'))
    const cp = join(dir, 'cp')
    // A directory where the temporary checkpoint file goes: every write fails (as root too).
    mkdirSync(join(cp, 'checkpoints.json.tmp'), { recursive: true })
    const context = new FakeSourceContext({ id: 'files' })
    context.onBatch = (batch) => batch.end('delivered')
    const run = file({ include: [log], checkpoints: cp, pollIntervalMs: 10, onNotice: () => {} }).run(context)
    await expect(run).rejects.toThrow(FileSourceError)
    await expect(run).rejects.toThrow(/cannot write the checkpoint file .*checkpoints\.json/)
    // Its lock is removed too (nor a temporary one left): the run writes nothing more, and a next
    // run (of another process too) reads on from the last checkpoint written.
    expect(readdirSync(cp).filter((name) => name.startsWith('checkpoints.json.lock'))).toEqual([])
    const open = readdirSync('/proc/self/fd').flatMap((fd) => {
      try {
        return [readlinkSync(join('/proc/self/fd', fd))]
      } catch {
        return []
      }
    })
    expect(open.filter((path) => path.startsWith(dir))).toEqual([])
  })

  it('reports a file it cannot read (EIO) and reads it on, once, from where the read failed', async () => {
    const log = join(dir, 'app.log')
    const all = Array.from({ length: 10_000 }, (_, i) => `line-${i}`)
    writeFileSync(log, lines(...all))
    // The second chunk (64 KiB on) fails once, as a disk that returns EIO does.
    const probe = await open(log, 'r')
    const prototype = Object.getPrototypeOf(probe) as { read: (...args: unknown[]) => Promise<unknown> }
    await probe.close()
    const read = prototype.read
    let failures = 1
    const spy = vi.spyOn(prototype, 'read').mockImplementation(function (this: unknown, ...args: unknown[]) {
      if (args[3] === 64 * 1024 && failures-- > 0) {
        return Promise.reject(Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO' }))
      }
      return read.apply(this, args)
    })
    try {
      const sink = collect()
      const { topology, notices } = await start({ include: [log], checkpoints: join(dir, 'cp') }, sink)
      await vi.waitUntil(() => checkpoint(log) === statSync(log).size, { timeout: 10_000 })
      await topology.stop()
      expect(sink.received).toEqual(all)
      expect(notices.filter((n) => n.includes('cannot read'))).toEqual([
        `file source: cannot read ${log}: EIO: i/o error, read; reading it on at the next scan`,
      ])
    } finally {
      spy.mockRestore()
    }
  })

  it('rejects naming the source, the field and the checkpoint file when it cannot be read (a directory in its place)', async () => {
    const cp = join(dir, 'cp')
    mkdirSync(join(cp, 'checkpoints.json'), { recursive: true })
    const run = file({ include: [join(dir, '*.log')], checkpoints: cp }).run(
      new FakeSourceContext({ id: 'files' }),
    )
    await expect(run).rejects.toThrow(FileSourceError)
    // It named neither (component and field undefined), unlike the dead-letter file's errors.
    await expect(run).rejects.toMatchObject({
      code: 'CHECKPOINT_READ_FAILED',
      path: join(cp, 'checkpoints.json'),
      component: 'files',
      field: 'checkpoints',
      message: `file source 'files': cannot read the checkpoint file ${join(cp, 'checkpoints.json')}: EISDIR: illegal operation on a directory, read`,
    })
  })

  it('rejects naming the source and its dead-letter file when that cannot be opened at start (a directory in its place)', async () => {
    const cp = join(dir, 'cp')
    mkdirSync(join(cp, DEAD_LETTER_FILE), { recursive: true })
    const context = new FakeSourceContext({ id: 'files' })
    const run = file({ include: [join(dir, '*.log')], checkpoints: cp }).run(context)
    await expect(run).rejects.toThrow(FileSourceError)
    await expect(run).rejects.toMatchObject({
      code: 'DEAD_LETTER_OPEN_FAILED',
      path: join(cp, DEAD_LETTER_FILE),
      component: 'files',
      field: 'deadLetter',
      message: `file source 'files': cannot open the dead-letter file ${join(cp, DEAD_LETTER_FILE)}: EISDIR: illegal operation on a directory, open '${join(cp, DEAD_LETTER_FILE)}'`,
      cause: { code: 'EISDIR' },
    })
    expect(context.batches).toEqual([])
  })

  it.skipIf(process.getuid?.() === 0)(
    'rejects naming the source and its dead-letter file when it may not create it at start',
    async () => {
      // Skipped as root: root creates a file in a directory whatever its mode.
      const cp = join(dir, 'cp')
      mkdirSync(cp)
      chmodSync(cp, 0o500)
      try {
        const run = file({ include: [join(dir, '*.log')], checkpoints: cp }).run(
          new FakeSourceContext({ id: 'files' }),
        )
        await expect(run).rejects.toMatchObject({
          name: 'FileSourceError',
          code: 'DEAD_LETTER_OPEN_FAILED',
          path: join(cp, DEAD_LETTER_FILE),
          component: 'files',
          field: 'deadLetter',
          cause: { code: 'EACCES' },
        })
      } finally {
        chmodSync(cp, 0o700)
      }
    },
  )

  // A file even root may not open (mode 0200), where the machine has it.
  const unopenable = '/proc/sys/vm/compact_memory'
  it.skipIf(!existsSync(unopenable))(
    'says once, not at every scan, that it cannot open a file, and reads the others',
    async () => {
      const log = join(dir, 'app.log')
      writeFileSync(log, lines('one'))
      const sink = collect()
      const { topology, notices } = await start(
        { include: [log, unopenable], checkpoints: join(dir, 'cp') },
        sink,
      )
      await vi.waitUntil(() => sink.received.length === 1)
      // Each line below is read by a later scan, and each scan tried the file again.
      for (const line of ['two', 'three', 'four']) {
        appendFileSync(log, lines(line))
        await vi.waitUntil(() => sink.received.includes(line))
      }
      await topology.stop()
      expect(notices.filter((n) => n.includes(unopenable))).toEqual([
        `file source: cannot open ${unopenable}: EACCES: permission denied, open '${unopenable}'; retrying on the next scan (said once until it opens or its error changes)`,
      ])
    },
  )

  it('rejects when it cannot write its checkpoint even while a sink errors every line, rather than wait for them for ever', async () => {
    // A full disk: the checkpoint cannot be written, and the sink keeps erroring meanwhile.
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('a', 'b'))
    const cp = join(dir, 'cp')
    mkdirSync(join(cp, 'checkpoints.json.tmp'), { recursive: true })
    const context = new FakeSourceContext({ id: 'files' })
    context.onBatch = (batch) => batch.end('errored')
    const run = file({
      include: [log],
      checkpoints: cp,
      pollIntervalMs: 10,
      retry: { initialBackoffMs: 5, maxBackoffMs: 20 },
      onNotice: () => {},
    }).run(context)
    await expect(run).rejects.toMatchObject({
      code: 'CHECKPOINT_WRITE_FAILED',
      component: 'files',
      field: 'checkpoints',
    })
    // The lines stay unfinished, to be read again after a restart; the topology was never stopped.
    expect(context.signal.aborted).toBe(false)
  })

  it('refuses a corrupt checkpoint file with an error naming it and the repair', async () => {
    const cp = join(dir, 'cp')
    mkdirSync(cp, { recursive: true })
    writeFileSync(join(cp, 'checkpoints.json'), '{ not json')
    const source = file({ include: [join(dir, '*.log')], checkpoints: cp })
    const context: SourceContext = {
      id: 'files',
      acknowledgements: true,
      signal: new AbortController().signal,
      send: () => Promise.reject(new Error('unused')),
      sendEvents: () => Promise.resolve(),
    }
    const run = source.run(context)
    await expect(run).rejects.toThrow(FileSourceError)
    await expect(run).rejects.toThrow(/checkpoints\.json is corrupt \(not JSON\)\. Repair: move it aside/)
  })

  it.each([
    ['a string', 'monday'],
    ['zero', 0],
    ['negative', -5],
  ])('refuses a checkpoint whose born is %s as corrupt', async (_what, born) => {
    const cp = join(dir, 'cp')
    mkdirSync(cp)
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('a'))
    const s = statSync(log)
    writeFileSync(
      join(cp, 'checkpoints.json'),
      JSON.stringify({
        version: 1,
        files: [{ path: log, dev: s.dev, ino: s.ino, fingerprint: null, born, offset: 2 }],
      }),
    )
    const context = new FakeSourceContext({ id: 'files' })
    const run = file({ include: [log], checkpoints: cp, pollIntervalMs: 10, onNotice: () => {} }).run(context)
    await expect(run).rejects.toThrow(
      '(entry 0 is not { path, dev, ino, fingerprint, born?, offset, goneAt? })',
    )
    expect(context.batches).toEqual([])
  })

  it('resumes a file where Node reads no birth time but the change time (stat without statx), not reading it again', async () => {
    // libuv, where statx is refused (an old kernel, an old container seccomp profile), gives the
    // change time as the birth time on Linux: it moves at every append.
    const probe = await open(join(dir, 'probe'), 'w')
    const proto = Object.getPrototypeOf(probe) as FileHandle
    await probe.close()
    const real = proto.stat
    const spy = vi.spyOn(proto, 'stat').mockImplementation(async function (this: FileHandle) {
      const s = await real.call(this)
      Object.assign(s, { birthtimeMs: s.ctimeMs, birthtime: s.ctime })
      return s
    } as typeof proto.stat)
    try {
      const log = join(dir, 'app.log')
      const cp = join(dir, 'cp')
      writeFileSync(log, lines('a', 'b'))
      const before = statSync(log).ctimeMs
      const sink = collect()
      const first = await start({ include: [log], checkpoints: cp }, sink)
      await vi.waitUntil(() => sink.received.length === 2 && checkpoint(log) === statSync(log).size)
      await first.topology.stop()
      appendFileSync(log, lines('c'))
      // The change time read off the file, not slept on: it must have moved since the first run.
      while (statSync(log).ctimeMs === before) {
        await new Promise((resolve) => setTimeout(resolve, 5))
        chmodSync(log, 0o644)
        chmodSync(log, 0o600)
      }
      const again = collect()
      const second = await start({ include: [log], checkpoints: cp }, again)
      await vi.waitUntil(() => again.received.length >= 3 || checkpoint(log) === statSync(log).size)
      await second.topology.stop()
      expect(again.received).toEqual(['c'])
    } finally {
      spy.mockRestore()
    }
  })

  it('resumes a file at a checkpoint written before birth times were kept (no born)', async () => {
    const cp = join(dir, 'cp')
    mkdirSync(cp)
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('a', 'b'))
    const s = statSync(log)
    writeFileSync(
      join(cp, 'checkpoints.json'),
      JSON.stringify({
        version: 1,
        files: [{ path: log, dev: s.dev, ino: s.ino, fingerprint: null, offset: 2 }],
      }),
    )
    const sink = collect()
    const { topology } = await start({ include: [log], checkpoints: cp }, sink)
    await vi.waitUntil(() => sink.received.length >= 1 && checkpoint(log) === s.size)
    await topology.stop()
    expect(sink.received).toEqual(['b'])
  })

  it('refuses a checkpoint whose goneAt is no time as corrupt', async () => {
    const cp = join(dir, 'cp')
    mkdirSync(cp)
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('a'))
    const s = statSync(log)
    writeFileSync(
      join(cp, 'checkpoints.json'),
      JSON.stringify({
        version: 1,
        files: [{ path: log, dev: s.dev, ino: s.ino, fingerprint: null, offset: 2, goneAt: 'yesterday' }],
      }),
    )
    const context = new FakeSourceContext({ id: 'files' })
    const run = file({ include: [log], checkpoints: cp, pollIntervalMs: 10, onNotice: () => {} }).run(context)
    await expect(run).rejects.toThrow(
      '(entry 0 is not { path, dev, ino, fingerprint, born?, offset, goneAt? })',
    )
    expect(context.batches).toEqual([])
  })

  it('refuses a checkpoint whose entry is null as corrupt, naming the file and the repair', async () => {
    const cp = join(dir, 'cp')
    mkdirSync(cp)
    // What JSON.stringify writes for an entry left undefined.
    writeFileSync(join(cp, 'checkpoints.json'), JSON.stringify({ version: 1, files: [undefined] }))
    const context = new FakeSourceContext({ id: 'files' })
    const error = await file({ include: [join(dir, '*.log')], checkpoints: cp, onNotice: () => {} })
      .run(context)
      .then(
        () => undefined,
        (e: unknown) => e,
      )
    expect(error).toBeInstanceOf(FileSourceError)
    expect(error).toMatchObject({
      code: 'CORRUPT_CHECKPOINT',
      path: join(cp, 'checkpoints.json'),
      component: 'files',
      field: 'checkpoints',
    })
    expect((error as Error).message).toContain(
      `file source 'files': the checkpoint file ${join(cp, 'checkpoints.json')} is corrupt (entry 0 is not { path, dev, ino, fingerprint, born?, offset, goneAt? }). Repair: move it aside`,
    )
    expect(context.batches).toEqual([])
  })

  it('refuses a checkpoint whose fingerprint length is not 1 to 256 bytes as corrupt', async () => {
    const cp = join(dir, 'cp')
    mkdirSync(cp)
    const log = join(dir, 'app.log')
    writeFileSync(log, lines('a', 'b'))
    const s = statSync(log)
    for (const length of [-1, 0, 257, 2 ** 40]) {
      writeFileSync(
        join(cp, 'checkpoints.json'),
        JSON.stringify({
          version: 1,
          files: [{ path: log, dev: s.dev, ino: s.ino, fingerprint: { length, hash: 'x' }, offset: 2 }],
        }),
      )
      const context = new FakeSourceContext({ id: 'files' })
      context.onBatch = (batch) => batch.end('delivered')
      const run = file({ include: [log], checkpoints: cp, pollIntervalMs: 10, onNotice: () => {} }).run(
        context,
      )
      const error = await run.then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(error).toBeInstanceOf(FileSourceError)
      expect(error).toMatchObject({ code: 'CORRUPT_CHECKPOINT', path: join(cp, 'checkpoints.json') })
      expect((error as Error).message).toContain(
        `(entry 0 has a fingerprint length of ${length}, not 1 to 256). Repair: move it aside`,
      )
      expect(context.batches).toEqual([])
    }
  })

  it.each([
    ['a string', { initialBackoffMs: '250' }, 'retry.initialBackoffMs'],
    ['a negative number', { maxBackoffMs: -1 }, 'retry.maxBackoffMs'],
    ['no object', 5, 'retry'],
  ])(
    'reports a retry back-off that is %s, and run() rejects it rather than resend for ever',
    async (_, retry, field) => {
      const options = { include: [join(dir, '*.log')], checkpoints: join(dir, 'cp'), retry: retry as never }
      expect(
        file(options)
          .validate()
          .map((i) => i.field),
      ).toEqual([field])
      const run = file(options).run(new FakeSourceContext({ id: 'files' }))
      await expect(run).rejects.toThrow(`file source 'files': ${field} must be`)
      // An empty key in a config file means the defaults.
      expect(file({ ...options, retry: null as never }).validate()).toEqual([])
    },
  )

  it('reports a multiline startPattern that is not a valid regular expression, and run() rejects it', async () => {
    const options = { include: [join(dir, '*.log')], checkpoints: join(dir, 'cp') }
    expect(file({ ...options, multiline: { startPattern: '(' } }).validate()).toEqual([
      {
        field: 'multiline.startPattern',
        expected: 'a valid regular expression',
        got: '"("',
        message:
          'must be a valid regular expression, got "(": Invalid regular expression: /(/: Unterminated group',
      },
    ])
    expect(
      file({ ...options, multiline: { startPattern: 3 as never } })
        .validate()
        .map((i) => i.field),
    ).toEqual(['multiline.startPattern'])
    expect(file({ ...options, multiline: { startPattern: '^\\d' } }).validate()).toEqual([])
    // Without the builder's validate(), run() rejects (it does not throw) with the same words.
    const context = new FakeSourceContext({ id: 'files' })
    let run: Promise<void> | undefined
    expect(() => {
      run = file({ ...options, multiline: { startPattern: '(' } }).run(context)
    }).not.toThrow()
    await expect(run).rejects.toThrow(
      `file source 'files': multiline.startPattern must be a valid regular expression, got "(": Invalid regular expression`,
    )
    // Through a topology, the builder refuses it naming the source and the field.
    expect(() =>
      new TopologyBuilder({ acknowledgements: true, onWarning: () => {} })
        .source('files', file({ ...options, multiline: { startPattern: '(' } }))
        .sink('out', ['files'], collect())
        .build(),
    ).toThrow(/files \(multiline\.startPattern\): .*must be a valid regular expression/)
  })

  it('reports include and exclude patterns and a checkpoint directory holding a NUL character, which no path can hold', () => {
    // An include pattern with a NUL matched nothing, in silence, for ever (no name holds one, and a
    // directory that holds one cannot be listed, as if missing); an exclude pattern, nothing; the
    // checkpoint directory failed only once running.
    const issues = file({
      include: [join(dir, 'app.log\0')],
      exclude: [join(dir, '\0*.log')],
      checkpoints: join(dir, 'cp\0'),
    }).validate()
    expect(issues.map((i) => [i.field, i.message])).toEqual([
      ['include', expect.stringContaining('without a NUL character')],
      ['exclude', expect.stringContaining('without a NUL character')],
      ['checkpoints', expect.stringContaining('without a NUL character')],
    ])
  })

  it('reports a maxLineBytes past the longest string, which no line that long could be decoded into', () => {
    const options = { include: [join(dir, '*.log')], checkpoints: join(dir, 'cp') }
    // With maxLineBytes 1e9, a line of 576 MiB failed to decode (past the longest string) at every
    // scan, each line appended after it joining it: no line after it was ever sent, the file's
    // checkpoint stayed before it, and a restart failed the same way.
    expect(file({ ...options, maxLineBytes: constants.MAX_STRING_LENGTH + 1 }).validate()).toEqual([
      ConfigIssue.of(
        'maxLineBytes',
        `a whole number of bytes from 1 to ${constants.MAX_STRING_LENGTH} (the longest string)`,
        constants.MAX_STRING_LENGTH + 1,
      ),
    ])
    expect(file({ ...options, maxLineBytes: constants.MAX_STRING_LENGTH }).validate()).toEqual([])
  })

  it('reports a poll interval longer than a timer can wait, and idle and multi-line timeouts that are no number of ms', () => {
    const options = { include: [join(dir, '*.log')], checkpoints: join(dir, 'cp') }
    // 2^31 ms would fire after 1 ms: the files would be polled in a hot loop.
    expect(file({ ...options, pollIntervalMs: 2 ** 31 }).validate()).toEqual([
      {
        field: 'pollIntervalMs',
        expected: 'a whole number of milliseconds from 1 to 2147483647',
        got: '2147483648',
        message: 'must be a whole number of milliseconds from 1 to 2147483647, got 2147483648',
      },
    ])
    expect(file({ ...options, pollIntervalMs: 2 ** 31 - 1 }).validate()).toEqual([])
    // NaN (an unset variable through Number()) made every finished file be deleted at once.
    expect(
      file({
        ...options,
        removeAfterIdleMs: Number.NaN,
        forgetGoneAfterMs: -1,
        readRenamedForMs: Number.NaN,
        multiline: { startPattern: '^x', timeoutMs: -1 },
      })
        .validate()
        .map((i) => i.field),
    ).toEqual(['multiline.timeoutMs', 'removeAfterIdleMs', 'readRenamedForMs', 'forgetGoneAfterMs'])
    expect(
      file({
        ...options,
        removeAfterIdleMs: 0,
        forgetGoneAfterMs: 0,
        multiline: { startPattern: '^x', timeoutMs: 0 },
      }).validate(),
    ).toEqual([])
  })

  it.each([
    ['undefined', undefined, 'undefined'],
    ['null', null, 'null'],
    ['a number', 5, '5'],
  ])(
    'reports options that are %s as no object, and the builder names the source and (options)',
    (_, options, got) => {
      const source = file(options as never)
      expect(source.validate()).toEqual([
        { field: '(options)', expected: 'an object', got, message: `must be an object, got ${got}` },
      ])
      const build = () =>
        new TopologyBuilder({ acknowledgements: true })
          .source('files', source)
          .sink('out', ['files'], collect())
          .build()
      expect(build).toThrow(`files ((options)): file: must be an object, got ${got}`)
    },
  )

  it('reports bad options, each naming its field', () => {
    const issues = file({
      include: ['/a/*/b.log'],
      checkpoints: '',
      startAt: 'middle' as never,
      maxLineBytes: 0,
    }).validate()
    expect(issues.map((i) => i.field)).toEqual(['include', 'checkpoints', 'startAt', 'maxLineBytes'])
  })

  it('reports an onNotice that is no function, which would send every notice elsewhere', () => {
    const issues = file({
      include: [join(dir, '*.log')],
      checkpoints: dir,
      onNotice: 'console' as never,
    }).validate()
    expect(issues).toEqual([
      {
        field: 'onNotice',
        expected: 'a function',
        got: '"console"',
        message: 'must be a function, got "console"',
      },
    ])
  })
})
