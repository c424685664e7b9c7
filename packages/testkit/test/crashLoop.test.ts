// crashLoop: kills each child at the report count it drew, restarts it, reports every round, and
// fails clearly (leaving no child behind) when a child exits early or goes silent. The children
// here are plain JavaScript speaking the line protocol, so each starts in a blink;
// crashLoop.mutation.test.ts runs real topologies with CrashReporter.
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import {
  CrashLoopError,
  type CrashLoopOptions,
  CrashLoopReport,
  CrashReporter,
  crashLoop,
} from '@ackline/testkit'
import { TopologyBuilder } from '@ackline/topology'
import { describe, expect, it, vi } from 'vitest'

const root = fileURLToPath(new URL('../../..', import.meta.url))
const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url))
const counter = {
  script: fixture('counterChild.mjs'),
  cwd: root,
  log: () => {},
} satisfies Partial<CrashLoopOptions>

/** Whether process `pid` still runs (a zombie, killed but not yet reaped, does not). */
const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return false
  }
}

describe('crashLoop', () => {
  it('kills each run at the report count drawn from the seed, restarts it, and reports every round', async () => {
    const logged: string[] = []
    const started: number[] = []
    const report = await crashLoop({
      ...counter,
      args: (round) => (round === 3 ? ['finite', '4'] : ['forever']),
      beforeRound: (round) => {
        started.push(round)
      },
      rounds: 3,
      killAfter: { min: 3, max: 30 },
      seed: 12345,
      log: (line) => logged.push(line),
    })
    expect(report.seed).toBe(12345)
    expect(logged[0]).toContain('seed 12345')
    expect(report.rounds.map((r) => r.ending)).toEqual(['killed', 'killed', 'killed', 'exited'])
    const killed = report.rounds.slice(0, 3)
    for (const r of killed) {
      // The child reports one at a time, so the kill was sent exactly at the drawn count…
      expect(r.killAfter).toBeGreaterThanOrEqual(3)
      expect(r.killAfter).toBeLessThanOrEqual(30)
      expect(r.reportedAtKill).toBe(r.killAfter)
      // …and what it reported before dying (never less) came from this run: a fresh process.
      expect(r.counts.delivered).toBeGreaterThanOrEqual(r.killAfter!)
      expect(r.keys.delivered!.every((k) => k.startsWith(`${r.round}-`))).toBe(true)
      expect(r.checked).toBe(true)
      expect(alive(r.pid)).toBe(false)
    }
    expect(new Set(report.rounds.map((r) => r.pid)).size).toBe(4)
    expect(started).toEqual([0, 1, 2, 3])
    // The same seed draws the same kill points.
    const again = await crashLoop({
      ...counter,
      args: ['forever'],
      rounds: 3,
      killAfter: { min: 3, max: 30 },
      seed: 12345,
      last: false,
    })
    expect(again.rounds.map((r) => r.killAfter)).toEqual(killed.map((r) => r.killAfter))
    // The last run finished its input: 4 keys of round 3, and an `acked` report of another kind.
    expect(report.rounds[3]!.keys.delivered).toEqual(['3-0', '3-1', '3-2', '3-3'])
    expect(report.rounds[3]!.counts.acked).toBe(1)
    expect(report.keys().size).toBe(killed.reduce((n, r) => n + r.counts.delivered!, 4))
    expect(report.describe()[0]).toMatch(/^round 0: killed at \d+ delivered \(kill point \d+\)/)
  }, 30_000)

  it('stops the last run with SIGTERM once `until` holds', async () => {
    const report = await crashLoop({
      ...counter,
      args: ['forever'],
      rounds: 1,
      killAfter: () => 2,
      last: { until: (p) => (p.counts.delivered ?? 0) >= 10 },
    })
    expect(report.rounds.map((r) => r.ending)).toEqual(['killed', 'stopped'])
    expect(report.rounds[1]!.counts.delivered).toBeGreaterThanOrEqual(10)
  }, 30_000)

  it('fails clearly when a child exits before its kill point, naming the round, the count and the seed', async () => {
    const error = await crashLoop({
      ...counter,
      args: ['exit-after', '3'],
      rounds: 2,
      killAfter: { min: 10, max: 10 },
      seed: 7,
    }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(CrashLoopError)
    expect((error as CrashLoopError).code).toBe('CHILD_EXITED')
    expect((error as CrashLoopError).round).toBe(0)
    expect((error as Error).message).toMatch(/seed 7.*reported 3 'delivered' of 10/s)
    expect((error as Error).message).toContain('call CrashReporter.finished() before it exits')
  }, 30_000)

  it('ends a killed round `exited` when its child said its input was finished and exited with code 0 before its kill point', async () => {
    const logged: string[] = []
    const report = await crashLoop({
      ...counter,
      // Round 0 is killed; round 1 finds its input finished (3 left) before its kill point 10.
      args: (round) => (round === 0 ? ['forever'] : ['finished', '3']),
      rounds: 2,
      killAfter: { min: 10, max: 10 },
      seed: 7,
      log: (line) => logged.push(line),
    })
    expect(report.rounds.map((r) => r.ending)).toEqual(['killed', 'exited', 'exited'])
    expect(report.rounds.map((r) => r.finished)).toEqual([false, true, true])
    expect(report.rounds[1]!.counts.delivered).toBe(3)
    expect(report.rounds[1]!.checked).toBe(true)
    expect(report.describe()[1]).toBe(
      'round 1: exited on its own, its input finished before kill point 10; 3 delivered reported, 0 of them again',
    )
    expect(logged.some((line) => line.includes('its input finished before kill point 10'))).toBe(true)
  }, 30_000)

  it('ends a round `exited`, not `killed`, when its child said its input was finished and exited with code 0 before a kill sent late landed', async () => {
    // Round 1's child prints `late <pid>`, then everything at once, and exits; the parent, slow as
    // on a loaded machine, is held on the `late` line until the child has exited (a zombie).
    const script = `
      const { writeSync, writeFileSync } = require('node:fs')
      const round = Number(process.env.ACKLINE_CRASH_ROUND)
      const report = (i) => '@ackline/testkit:crash delivered 1 ["' + round + '-' + i + '"]\\n'
      if (round === 0) {
        let i = 0
        setInterval(() => writeSync(1, report(i++)), 1)
      } else {
        writeSync(1, 'late ' + process.pid + '\\n')
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50)
        let out = ''
        for (let i = 0; i < 20; i++) out += report(i)
        writeSync(1, out + '@ackline/testkit:crash-finished\\n')
        process.on('exit', (code) => writeFileSync(process.argv[1], String(code)))
      }
    `
    const dir = mkdtempSync(join(tmpdir(), 'ackline-crash-late-'))
    const exited = join(dir, 'exit-code')
    const report = await crashLoop({
      command: process.execPath,
      args: ['-e', script, exited],
      rounds: 2,
      killAfter: { min: 10, max: 10 },
      last: false,
      log: () => {},
      onOutput: (line) => {
        if (!line.startsWith('late ')) return
        const pid = Number(line.slice(5))
        const end = Date.now() + 5000
        while (Date.now() < end && alive(pid)); // held until the child has exited
      },
    })
    const code = readFileSync(exited, 'utf8')
    rmSync(dir, { recursive: true, force: true })
    expect(code).toBe('0') // round 1's child exited on its own
    expect(report.rounds.map((r) => r.ending)).toEqual(['killed', 'exited'])
    expect(report.rounds[1]).toMatchObject({ finished: true, reportedAtKill: 10, checked: true })
    expect(report.describe()[1]).toBe(
      'round 1: exited on its own, its input finished, before the kill sent at 10 delivered landed; 20 delivered reported, 0 of them again',
    )
  }, 30_000)

  it('fails CHILD_EXITED, not `killed`, when its child exited on its own before a kill sent late landed', async () => {
    // The child prints `late <pid>`, reports its kill point and exits with code 3 (it failed) or 0
    // (without saying its input was finished); the parent is held on the `late` line until the
    // child has exited, so its SIGKILL reaches a zombie: nothing was crashed.
    for (const code of [3, 0]) {
      const script = `
        const { writeSync } = require('node:fs')
        writeSync(1, 'late ' + process.pid + '\\n@ackline/testkit:crash delivered 5 ["a","b","c","d","e"]\\n')
        process.exitCode = ${code}
      `
      const error = await crashLoop({
        command: process.execPath,
        args: ['-e', script],
        rounds: 1,
        killAfter: { min: 5, max: 5 },
        last: false,
        log: () => {},
        onOutput: (line) => {
          if (!line.startsWith('late ')) return
          const pid = Number(line.slice(5))
          const end = Date.now() + 5000
          while (Date.now() < end && alive(pid)); // held until the child has exited
        },
      }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(CrashLoopError)
      expect((error as CrashLoopError).code).toBe('CHILD_EXITED')
      expect((error as Error).message).toContain(`code ${code} before the kill sent at 5 'delivered' landed`)
    }
  }, 30_000)

  it('fails NO_KILL when no round was killed: every child finished its input before its kill point', async () => {
    const error = await crashLoop({
      ...counter,
      args: ['finished', '3'],
      rounds: 2,
      killAfter: { min: 10, max: 10 },
      seed: 7,
    }).catch((e: unknown) => e)
    expect((error as CrashLoopError).code).toBe('NO_KILL')
    expect((error as CrashLoopError).round).toBe(1)
    expect((error as Error).message).toContain('none of the 2 round(s) was killed')
    expect((error as Error).message).toContain('give the pipeline more input than the largest kill point')
  }, 30_000)

  it('still fails CHILD_EXITED when a child that said its input was finished exits with a failure', async () => {
    const error = await crashLoop({
      ...counter,
      args: ['finished', '3', 'fail'],
      rounds: 1,
      killAfter: { min: 10, max: 10 },
      seed: 7,
    }).catch((e: unknown) => e)
    expect((error as CrashLoopError).code).toBe('CHILD_EXITED')
    expect((error as Error).message).toContain('code 3')
    expect((error as Error).message).toContain('it said its input was finished, but did not exit with code 0')
  }, 30_000)

  it('fails NO_PROGRESS, saying so, when a child said its input was finished and does not exit', async () => {
    // stallMs is counted from the child's start too: in real time, a child slow to start (a loaded
    // machine) reached it before its finished line, and failed for reporting nothing. The loop's
    // clock stands still until the child said its input was finished (its line `hanging` comes
    // right after, on the same stream), then moves by stallMs.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    try {
      let hanging!: () => void
      const saidFinished = new Promise<void>((resolve) => {
        hanging = resolve
      })
      let settled = false
      const failing = crashLoop({
        ...counter,
        args: ['finished', '3', 'hang'],
        rounds: 1,
        killAfter: { min: 10, max: 10 },
        stallMs: 500,
        onOutput: (line) => {
          if (line === 'hanging') hanging()
        },
      })
        .catch((e: unknown) => e)
        .finally(() => {
          settled = true
        })
      await saidFinished
      // Counted from the finished line: not a millisecond sooner.
      await vi.advanceTimersByTimeAsync(499)
      expect(settled).toBe(false)
      await vi.advanceTimersByTimeAsync(1)
      const error = await failing
      expect((error as CrashLoopError).code).toBe('NO_PROGRESS')
      expect((error as Error).message).toContain(
        'said its input was finished, then did not exit within 500 ms',
      )
      expect(alive((error as CrashLoopError).pid!)).toBe(false)
    } finally {
      vi.useRealTimers()
    }
  }, 30_000)

  it('fails when the last run exits before `until` holds', async () => {
    const error = await crashLoop({
      ...counter,
      args: ['finite', '3'],
      rounds: 0,
      killAfter: { min: 1, max: 1 },
      last: { until: (p) => (p.counts.delivered ?? 0) >= 100 },
    }).catch((e: unknown) => e)
    expect((error as CrashLoopError).code).toBe('CHILD_EXITED')
    expect((error as Error).message).toContain('before last.until held')
  })

  it('fails at its timeout when last.until never settles, even once the child has exited on its own', async () => {
    const error = await crashLoop({
      ...counter,
      args: ['finite', '3'],
      rounds: 0,
      killAfter: { min: 1, max: 1 },
      // Ample for the child to finish its 3 reports and exit first, the case that hung.
      last: { until: () => new Promise<boolean>(() => {}), timeoutMs: 2000 },
    }).catch((e: unknown) => e)
    expect((error as CrashLoopError).code).toBe('LAST_RUN_TIMEOUT')
    expect((error as Error).message).toContain('last.until did not settle within 2000 ms')
  })

  it('reads a last report line the child printed without its newline before exiting on its own', async () => {
    const report = await crashLoop({
      command: process.execPath,
      args: ['-e', `process.stdout.write('@ackline/testkit:crash delivered 1 ["last"]')`],
      rounds: 0,
      killAfter: { min: 1, max: 1 },
      log: () => {},
    })
    expect(report.rounds.map((r) => [r.ending, r.keys.delivered])).toEqual([['exited', ['last']]])
    expect(report.lost([])).toEqual(['last'])
  })

  it('counts reports of any word, constructor and toString included, instead of crashing on them', async () => {
    const lines = ['constructor 1 ["a"]', 'toString 2', 'delivered 1 ["k"]']
      .map((line) => `@ackline/testkit:crash ${line}\n`)
      .join('')
    const report = await crashLoop({
      command: process.execPath,
      args: ['-e', `process.stdout.write(${JSON.stringify(lines)})`],
      rounds: 0,
      killAfter: { min: 1, max: 1 },
      log: () => {},
    })
    const [run] = report.rounds
    expect([run!.counts.constructor, run!.counts.toString, run!.keys.constructor]).toEqual([1, 2, ['a']])
    expect([...report.keys('toString')]).toEqual([])
    expect([...report.keys('constructor')]).toEqual(['a'])
  })

  it('compares stored ids with the reported keys as strings, so numeric ids from a database match', async () => {
    const report = new CrashLoopReport(1, 'delivered', [
      {
        round: 0,
        counts: { delivered: 3 },
        keys: { delivered: ['1', '2', '10'] },
        pid: 1,
        killAfter: undefined,
        reportedAtKill: undefined,
        ending: 'exited',
        repeated: 0,
        checked: true,
        finished: false,
      },
    ])
    expect(report.lost([1, 10])).toEqual(['2'])
    expect(() => report.expectNoLoss([1, 2, 10])).not.toThrow()
  })

  it('fails expectNoLoss when no run reported a key of the kind, instead of passing with nothing checked', () => {
    // A child that reported counts without keys (CrashReporter.sink with no 'key'), or a kind
    // misspelt ('deliverd'), left no key to look for: expectNoLoss passed whatever the store held.
    const round = {
      round: 0,
      counts: { delivered: 3 },
      keys: {},
      pid: 1,
      killAfter: 2,
      reportedAtKill: 3,
      ending: 'killed' as const,
      repeated: 0,
      checked: true,
      finished: false,
    }
    const counted = new CrashLoopReport(1, 'delivered', [round])
    expect(() => counted.expectNoLoss([])).toThrow(
      "CrashLoopReport.expectNoLoss: no run reported a key under 'delivered' (3 reported without keys)",
    )
    const keyed = new CrashLoopReport(1, 'delivered', [{ ...round, keys: { delivered: ['a', 'b', 'c'] } }])
    expect(() => keyed.expectNoLoss(['a', 'b', 'c'], 'deliverd')).toThrow(
      "CrashLoopReport.expectNoLoss: no run reported a key under 'deliverd' (0 reported without keys)",
    )
    expect(() => keyed.expectNoLoss(['a', 'b', 'c'])).not.toThrow()
  })

  it('reads output without newlines in bounded pieces, and the report after it', async () => {
    const pieces: number[] = []
    const report = await crashLoop({
      command: process.execPath,
      args: [
        '-e',
        `const b = Buffer.alloc(1 << 20, 120); for (let i = 0; i < 32; i++) require('fs').writeSync(1, b)
         require('fs').writeSync(1, '\\n@ackline/testkit:crash delivered 1 ["k"]\\n')`,
      ],
      rounds: 0,
      killAfter: { min: 1, max: 1 },
      log: () => {},
      onOutput: (line, stream) => {
        if (stream === 'stdout') pieces.push(line.length)
      },
    })
    expect(report.rounds.map((r) => [r.ending, r.keys.delivered])).toEqual([['exited', ['k']]])
    expect(pieces.reduce((a, b) => a + b, 0)).toBe(32 * 2 ** 20)
    expect(Math.max(...pieces)).toBeLessThanOrEqual(9 * 2 ** 20)
  })

  it('fails when a child reports nothing within the bound, and kills it', async () => {
    const output: string[] = []
    const error = await crashLoop({
      ...counter,
      args: ['silent'],
      rounds: 1,
      killAfter: { min: 1, max: 1 },
      stallMs: 1500,
      onOutput: (line) => output.push(line),
    }).catch((e: unknown) => e)
    expect((error as CrashLoopError).code).toBe('NO_PROGRESS')
    expect((error as Error).message).toContain('then nothing for 1500 ms')
    expect((error as CrashLoopError).pid).toBeGreaterThan(0)
    expect(alive((error as CrashLoopError).pid!)).toBe(false)
    // Lines that are not reports reach onOutput.
    expect(output).toContain('some output of the pipeline that is not a report')
  }, 30_000)

  it("fails OUTPUT_HELD with the counts, instead of hanging, when a process outside the child's group keeps its output open after the kill", async () => {
    // The child starts a process in a group of its own that inherits its stdout, then reports its
    // kill point: the kill cannot reach that process, and the output never ends.
    const script = `
      const { spawn } = require('node:child_process')
      const { writeSync } = require('node:fs')
      const escaped = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { detached: true, stdio: ['ignore', 'inherit', 'ignore'] })
      writeSync(1, 'escaped ' + escaped.pid + '\\n@ackline/testkit:crash delivered 3 ["a","b","c"]\\n')
      setInterval(() => {}, 1000)
    `
    let escaped: number | undefined
    // stallMs is counted from the child's start too: in real time, a child slow to start (a loaded
    // machine: node took 800 ms there) failed NO_PROGRESS before its report. The loop's clock
    // stands still until the child reported its kill point (the line naming the escaped process
    // comes in the same write); from then on nothing counts but the wait for the output to end,
    // armed once the killed child exited, and the clock is moved on until the loop fails.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    try {
      let settled = false
      const failing = crashLoop({
        command: process.execPath,
        args: ['-e', script],
        rounds: 1,
        killAfter: { min: 3, max: 3 },
        stallMs: 500,
        last: false,
        log: () => {},
        onOutput: (line) => {
          if (line.startsWith('escaped ')) escaped = Number(line.slice(8))
        },
      })
        .catch((e: unknown) => e)
        .finally(() => {
          settled = true
        })
      while (escaped === undefined && !settled) await sleep(10)
      // The kill, the child's exit and the wait it arms take real time: step the clock meanwhile.
      for (let i = 0; i < 1000 && !settled; i++) {
        await vi.advanceTimersByTimeAsync(50)
        await sleep(10)
      }
      const error = await failing
      expect(error).toBeInstanceOf(CrashLoopError)
      expect((error as CrashLoopError).code).toBe('OUTPUT_HELD')
      expect((error as Error).message).toContain('its output stayed open for 500 ms')
      expect((error as Error).message).toContain('{"delivered":3}')
    } finally {
      vi.useRealTimers()
      if (escaped !== undefined) process.kill(escaped, 'SIGKILL')
    }
  }, 30_000)

  it('kills what the child started along with it', async () => {
    let grandchild = 0
    const report = await crashLoop({
      ...counter,
      args: ['grandchild'],
      rounds: 1,
      killAfter: { min: 5, max: 5 },
      last: false,
      onOutput: (line) => {
        if (line.startsWith('grandchild ')) grandchild = Number(line.slice(11))
      },
    })
    expect(report.rounds[0]!.ending).toBe('killed')
    expect(grandchild).toBeGreaterThan(0)
    expect(alive(report.rounds[0]!.pid)).toBe(false)
    // SIGKILL reached its group; the kernel ends it when it next schedules it (bounded wait).
    const deadline = Date.now() + 5000
    while (alive(grandchild) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
    expect(alive(grandchild)).toBe(false)
  })

  it('kills the child when a signal ends the test process (no exit event comes then)', async () => {
    const parent = spawn(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', fixture('crashLoopParent.ts')],
      {
        cwd: root,
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    )
    let child = 0
    try {
      child = await new Promise<number>((resolve, reject) => {
        let out = ''
        parent.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
          out += chunk
          const m = /child (\d+)/.exec(out)
          if (m !== null) resolve(Number(m[1]))
        })
        parent.once('exit', (code) => reject(new Error(`the parent exited first (${code})`)))
      })
      const exited = new Promise((resolve) => parent.once('exit', (_code, signal) => resolve(signal)))
      parent.kill('SIGTERM')
      expect(await exited).toBe('SIGTERM')
      // SIGKILL reached its group; the kernel ends it when it next schedules it (bounded wait).
      const deadline = Date.now() + 5000
      while (alive(child) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
      expect(alive(child)).toBe(false)
    } finally {
      if (child > 0 && alive(child)) process.kill(child, 'SIGKILL')
      parent.kill('SIGKILL')
    }
  })

  it('rejects options it cannot run, naming the field', async () => {
    await expect(crashLoop({ rounds: 1, killAfter: { min: 1, max: 2 } })).rejects.toThrow(
      /'script' and 'command'/,
    )
    await expect(crashLoop({ ...counter, rounds: 1, killAfter: { min: 0, max: 2 } })).rejects.toThrow(
      /'killAfter'/,
    )
    await expect(crashLoop({ ...counter, rounds: -1, killAfter: { min: 1, max: 2 } })).rejects.toThrow(
      /'rounds'/,
    )
    await expect(
      crashLoop({ ...counter, cwd: '/no/such/dir', rounds: 1, killAfter: { min: 1, max: 2 } }),
    ).rejects.toThrow("crashLoop: 'cwd' must be an existing directory, got '/no/such/dir'")
  })

  it('refuses a bound past what a timer holds (it would fire at once and fail the round), naming the field', async () => {
    const bad = [
      [{ stallMs: 3e9 }, 'stallMs', 1],
      [{ last: { timeoutMs: 2 ** 31 } }, 'last.timeoutMs', 1],
      [{ last: { timeoutMs: Number.NaN } }, 'last.timeoutMs', 1],
      [{ last: { pollMs: -1 } }, 'last.pollMs', 0],
      [{ last: { pollMs: '50' as unknown as number } }, 'last.pollMs', 0],
    ] as const
    for (const [options, field, min] of bad) {
      await expect(
        crashLoop({ ...counter, rounds: 1, killAfter: { min: 1, max: 2 }, ...options }),
      ).rejects.toThrow(`crashLoop: '${field}' must be a number of milliseconds from ${min} to 2147483647`)
    }
  })
})

describe('crashLoop options of the wrong shape', () => {
  it('refuses a killAfter that is neither a range nor a function, and a count no report can carry, naming the field', async () => {
    // killAfter missing or null threw "Cannot read properties of undefined (reading 'min')"; a
    // count that is no word ('two words', '') was taken, and no report could ever reach its kill
    // point: the rounds failed NO_PROGRESS or CHILD_EXITED, blaming the child.
    for (const killAfter of [undefined, null, 3, 'x']) {
      const error = await crashLoop({ ...counter, rounds: 1, killAfter: killAfter as never }).then(
        () => new Error('ran'),
        (e: unknown) => e as Error,
      )
      expect(error.message).toMatch(/^crashLoop: 'killAfter' must be/)
    }
    for (const count of ['two words', '', 'delivered\n', 7]) {
      const error = await crashLoop({
        ...counter,
        rounds: 1,
        killAfter: { min: 1, max: 2 },
        stallMs: 2000,
        count: count as never,
      }).then(
        () => new Error('ran'),
        (e: unknown) => e as Error,
      )
      expect(error).toBeInstanceOf(TypeError)
      expect(error.message).toMatch(/^crashLoop: 'count' must be a word/)
    }
  })
})

describe('crashLoop bounds of 0', () => {
  it('refuses stallMs or last.timeoutMs of 0, which bound nothing and fail a round at its start, naming the field', async () => {
    // Both were taken: a timer of 0 fired before the child's first report (NO_PROGRESS in round
    // 0) or before the last run could exit (LAST_RUN_TIMEOUT), blaming the child for the options.
    const bad = [
      [{ stallMs: 0 }, 'stallMs'],
      [{ last: { timeoutMs: 0 } }, 'last.timeoutMs'],
    ] as const
    for (const [options, field] of bad) {
      const error = await crashLoop({
        ...counter,
        rounds: 1,
        killAfter: { min: 1, max: 2 },
        ...options,
      }).then(
        () => new Error('ran'),
        (e: unknown) => e as Error,
      )
      expect(error).toBeInstanceOf(RangeError)
      expect(error.message).toBe(
        `crashLoop: '${field}' must be a number of milliseconds from 1 to 2147483647, got 0`,
      )
    }
  })
})

describe('CrashReporter', () => {
  it('refuses a kind, count or key the protocol cannot carry, naming the field', () => {
    expect(() => CrashReporter.report('two words', 1)).toThrow(/'kind' must be a word/)
    expect(() => CrashReporter.report('delivered', -1)).toThrow(/count of 'delivered'/)
    expect(() => CrashReporter.delivered([{} as unknown as string])).toThrow(/a key of 'delivered'/)
    expect(() => CrashReporter.sink({ kind: 'x', write: async () => undefined }, { kind: '' })).toThrow(
      /'kind'/,
    )
  })

  it('sink() keeps the concurrency and canAcknowledge of the sink it wraps, own or on its prototype', () => {
    class FireAndForget {
      readonly kind = 'udp'
      get concurrency() {
        return 4
      }
      get canAcknowledge() {
        return false
      }
      async write() {
        return undefined
      }
    }
    const wrapped = CrashReporter.sink(new FireAndForget())
    expect([wrapped.concurrency, wrapped.canAcknowledge]).toEqual([4, false])
    const own = CrashReporter.sink({ kind: 'bus', concurrency: 3, write: async () => undefined })
    expect(own.concurrency).toBe(3)
    // So the builder refuses it where a source waits for confirmations, as it does the sink itself.
    expect(() =>
      new TopologyBuilder({ acknowledgements: true })
        .source('in', { kind: 'list', canAcknowledge: true, run: async () => {} })
        .sink('out', ['in'], wrapped)
        .build(),
    ).toThrow(/ACK_UNSUPPORTED|cannot confirm/)
  })
})
