/**
 * `crashLoop`: crash tests for your own pipeline. Runs it in a child process, SIGKILLs the child
 * once it reported N deliveries (N drawn from a printed seed), restarts it, again for each round,
 * then lets a last run finish, and returns what every run reported so the test can check that
 * nothing the pipeline claimed was lost.
 *
 * Invariant: every kill is decided by what the child reported ({@link CrashReporter}), never by a
 * clock; the only clocks are bounds that turn a stuck child into a clear failure. Every child runs
 * in its own process group and the whole group is killed, so no process outlives a round, a
 * failure, or the test process itself.
 *
 * @module
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { statSync } from 'node:fs'
import { MAX_TIMER_MS } from '@ackline/topology'
import { CrashLoopError } from './CrashLoopError.js'
import { CRASH_FINISHED_LINE, CRASH_REPORT_PREFIX } from './CrashReporter.js'
import { describeThrown } from './internal/describeThrown.js'
import { seededRandom } from './internal/seededRandom.js'

/** What one run of the child reported so far: per kind, the total count and the keys. */
export interface CrashProgress {
  /** The run (0-based; the last run is round `rounds`). */
  readonly round: number
  /** Per kind (`delivered`, `acked`, …), the count the run reported. */
  readonly counts: Readonly<Record<string, number>>
  /** Per kind, the keys the run reported, in report order. */
  readonly keys: Readonly<Record<string, readonly string[]>>
}

/** When and how the last run ends. */
export interface CrashLastRun {
  /**
   * Whether the pipeline is complete (all input in your sink, a queue drained), checked after each
   * report and every `pollMs`; once true the child is sent SIGTERM and must exit cleanly. A child
   * that exits with code 0 first passes if `until` holds then. Omit it when the child finishes its
   * input and exits with code 0 on its own.
   */
  readonly until?: (progress: CrashProgress) => boolean | Promise<boolean>
  /** How often `until` is checked between reports, in milliseconds (default 50; at most 2^31 - 1). */
  readonly pollMs?: number
  /**
   * The bound on the whole last run, in milliseconds (default 60 000; from 1 to 2^31 - 1, what a
   * timer holds): past it the loop fails.
   */
  readonly timeoutMs?: number
}

/** Options of {@link crashLoop}. Give `script` (a Node module) or `command` (any program). */
export interface CrashLoopOptions {
  /** A Node module run as `node ...nodeArgs script ...args` with this process's Node. */
  readonly script?: string
  /** Node's own flags for `script`, such as `['--import', 'tsx']` for a TypeScript module. */
  readonly nodeArgs?: readonly string[]
  /** A program to run instead of a Node module (resolved on `PATH`). */
  readonly command?: string
  /** The child's arguments, the same every run or per round. */
  readonly args?: readonly string[] | ((round: number) => readonly string[])
  /**
   * Extra environment for the child, on top of this process's. The loop adds
   * `ACKLINE_CRASH_ROUND` (0-based; the last run is `rounds`) and `ACKLINE_CRASH_SEED`.
   */
  readonly env?: Readonly<Record<string, string>>
  /** The child's working directory (default: this process's). */
  readonly cwd?: string
  /** How many times the child is killed and restarted before the last run (0 or more). */
  readonly rounds: number
  /**
   * When to kill a run: once it reported this many of `count` (counted per run, from its start).
   * `{ min, max }` draws a whole number in that range per round from the seed; a function gets
   * the round and the seeded generator. Each must be at least 1, so every killed round follows
   * at least one report.
   */
  readonly killAfter:
    | { readonly min: number; readonly max: number }
    | ((round: number, random: () => number) => number)
  /**
   * Runs before each child starts (the last run's too), for input that should arrive per round:
   * lines appended to a file, messages published. `random` is the loop's seeded generator (the
   * kill points are drawn before the first round, so using it does not move them).
   */
  readonly beforeRound?: (round: number, random: () => number) => void | Promise<void>
  /** The kind of report `killAfter` counts (default `'delivered'`): a word, as a report's kind is; else a `TypeError`. */
  readonly count?: string
  /** The seed of the kill points (default: drawn from the clock, and printed). */
  readonly seed?: number
  /**
   * A killed round fails (`NO_PROGRESS`) when its child reports nothing (of any kind) for this long
   * before reaching its kill point, counted from its start and again from each report (and from
   * its finished line, after which it should exit), in milliseconds (default 30 000; from 1 to
   * 2^31 - 1, what a timer holds). Any run fails (`OUTPUT_HELD`) when its output stays open this
   * long after the child exited (a process it started outside its process group holds it).
   */
  readonly stallMs?: number
  /** The last run (default `{}`: the child must exit with code 0 on its own); `false`: none. */
  readonly last?: CrashLastRun | false
  /** Receives every line of the child's output that is not a report (default: dropped). */
  readonly onOutput?: (line: string, stream: 'stdout' | 'stderr', round: number) => void
  /** Where the loop prints its seed and a line per round (default `console.log`). */
  readonly log?: (line: string) => void
}

/** One run of the child, as the loop saw it. */
export interface CrashRound extends CrashProgress {
  /** The child's process id. */
  readonly pid: number
  /** The kill point drawn for this round; `undefined` for the last run. */
  readonly killAfter: number | undefined
  /** The run's count of `count` when the loop sent SIGKILL (`>= killAfter`); `undefined` if it sent none. */
  readonly reportedAtKill: number | undefined
  /**
   * How the run ended: `killed` (SIGKILL), `stopped` (SIGTERM once `until` held), `exited` (on its
   * own, code 0: the last run, or a killed round whose child said its input was finished and
   * exited before its kill point, or before a kill sent late landed).
   */
  readonly ending: 'killed' | 'stopped' | 'exited'
  /** Whether the child said it had finished its whole input (`CrashReporter.finished()`). */
  readonly finished: boolean
  /** Keys of `count` this run reported that an earlier run had reported too (redeliveries). */
  readonly repeated: number
  /**
   * Whether the run reported at least one of `count` before it ended: for a killed round, a kill
   * with something to check.
   */
  readonly checked: boolean
}

/**
 * What a crash loop observed: the seed and every run. Check your sink with {@link lost} or
 * {@link expectNoLoss}.
 */
export class CrashLoopReport {
  constructor(
    /** The seed of the kill points. */
    readonly seed: number,
    /** The kind `killAfter` counted. */
    readonly count: string,
    /** Every run in order: the killed rounds, then the last run (if any). */
    readonly rounds: readonly CrashRound[],
  ) {}

  /** Every key reported under `kind` (default: the counted kind) by any run. */
  keys(kind: string = this.count): Set<string> {
    return new Set(this.rounds.flatMap((r) => r.keys[kind] ?? []))
  }

  /**
   * The keys reported under `kind` that are not in `stored` (what your sink holds now), sorted.
   * Keys are compared as strings, as the child reported them: a stored id `7` matches key `'7'`.
   */
  lost(stored: Iterable<string | number>, kind: string = this.count): string[] {
    const have = new Set(Array.from(stored, String))
    return [...this.keys(kind)].filter((key) => !have.has(key)).sort()
  }

  /**
   * Throws a {@link CrashLoopError} (`LOST`) listing the keys reported under `kind` that are not in
   * `stored`, with the seed and the runs; does nothing when every reported key is stored. Throws
   * one (`NOTHING_CHECKED`) when no run reported any key under `kind` (counts without keys, or a
   * kind no run used): a check with nothing to look for would pass whatever the store holds.
   */
  expectNoLoss(stored: Iterable<string | number>, kind: string = this.count): void {
    if (this.keys(kind).size === 0) {
      const counted = this.rounds.reduce((sum, r) => sum + (r.counts[kind] ?? 0), 0)
      throw new CrashLoopError(
        'NOTHING_CHECKED',
        undefined,
        this.seed,
        `CrashLoopReport.expectNoLoss: no run reported a key under '${kind}' (${counted} reported without keys), so there is nothing to look for in the store\n  ${this.describe().join('\n  ')}\n  fix: report keys (CrashReporter.sink's 'key' option, or CrashReporter.report(kind, keys)), and check the kind's spelling`,
      )
    }
    const lost = this.lost(stored, kind)
    if (lost.length === 0) return
    const shown = lost.slice(0, 20).join(', ') + (lost.length > 20 ? `, … (${lost.length} in all)` : '')
    throw new CrashLoopError(
      'LOST',
      undefined,
      this.seed,
      `${lost.length} key(s) a child reported '${kind}' are missing afterwards: ${shown}\n  ${this.describe().join('\n  ')}\n  fix: report only what is durable (after the write/commit/fsync resolved), and acknowledge the source only after that`,
    )
  }

  /** One line per run: how it ended, at which report count, and (with keys) how many came again. */
  describe(): string[] {
    return this.rounds.map((r) => {
      const n = r.counts[this.count] ?? 0
      const how =
        r.ending === 'killed'
          ? `killed at ${r.reportedAtKill} ${this.count} (kill point ${r.killAfter})`
          : r.ending === 'stopped'
            ? 'stopped once complete'
            : r.killAfter === undefined
              ? 'exited on its own'
              : r.reportedAtKill === undefined
                ? `exited on its own, its input finished before kill point ${r.killAfter}`
                : `exited on its own, its input finished, before the kill sent at ${r.reportedAtKill} ${this.count} landed`
      const again = r.keys[this.count] === undefined ? '' : `, ${r.repeated} of them again`
      return `round ${r.round}: ${how}; ${n} ${this.count} reported${again}`
    })
  }
}

/** Kills the child's whole process group (the child and anything it started). */
function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return
  try {
    process.kill(-child.pid, signal)
  } catch {
    child.kill(signal)
  }
}

const TAIL = 4000

/** The longest line kept whole, in UTF-16 code units: a report of some 100 000 keys. */
const MAX_LINE = 8 * 1024 * 1024

/** Whether a callback returned a promise (typed `void`, an `async` one still returns one). */
const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  typeof (value as PromiseLike<unknown> | undefined)?.then === 'function'

/** The signals that end a test process without an 'exit' event, by default. */
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const

/** Whether `path` is a directory that exists. */
function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}

/** Checks the options a caller passes; a bad one is a programming error, named by its field. */
function validate(options: CrashLoopOptions): void {
  if ((options.script === undefined) === (options.command === undefined))
    throw new TypeError("crashLoop: give exactly one of 'script' and 'command'")
  // A missing working directory fails the spawn as ENOENT of the program, which reads as a bad
  // `script` or `command`: it is named here instead.
  if (options.cwd !== undefined && !isDirectory(options.cwd))
    throw new TypeError(`crashLoop: 'cwd' must be an existing directory, got '${options.cwd}'`)
  if (!Number.isSafeInteger(options.rounds) || options.rounds < 0)
    throw new RangeError(`crashLoop: 'rounds' must be a non-negative integer, got ${options.rounds}`)
  const k = options.killAfter
  if (typeof k !== 'function' && (typeof k !== 'object' || k === null))
    throw new TypeError(
      `crashLoop: 'killAfter' must be { min, max } or a function of the round, got ${k === null ? 'null' : typeof k}`,
    )
  // A kind no report can carry would never reach a kill point: every round would fail, blaming the child.
  if (
    options.count !== undefined &&
    !(typeof options.count === 'string' && /^[A-Za-z][\w-]*$/.test(options.count))
  )
    throw new TypeError(
      `crashLoop: 'count' must be a word (a letter, then letters, digits, '_' or '-'), as reports carry it, got ${JSON.stringify(options.count) ?? typeof options.count}`,
    )
  if (typeof k !== 'function') {
    if (!Number.isSafeInteger(k.min) || !Number.isSafeInteger(k.max) || k.min < 1 || k.max < k.min)
      throw new RangeError(
        `crashLoop: 'killAfter' must be whole numbers with 1 <= min <= max, got { min: ${k.min}, max: ${k.max} }`,
      )
  }
  for (const field of ['stallMs', 'seed'] as const) {
    const value = options[field]
    if (value !== undefined && (!Number.isFinite(value) || value < 0))
      throw new RangeError(`crashLoop: '${field}' must be a non-negative number, got ${value}`)
  }
  // Node fires a timer set past 2^31 - 1 ms at once (with a warning): a bound that large would
  // fail every round at its start, so it is refused here; so is a bound of 0, which fails it the
  // same way (before the child's first report). A poll of 0 only polls often.
  const delays = [
    ['stallMs', options.stallMs, 1],
    ['last.timeoutMs', options.last === false ? undefined : options.last?.timeoutMs, 1],
    ['last.pollMs', options.last === false ? undefined : options.last?.pollMs, 0],
  ] as const
  for (const [field, value, min] of delays) {
    if (value !== undefined && !(typeof value === 'number' && value >= min && value <= MAX_TIMER_MS))
      throw new RangeError(
        `crashLoop: '${field}' must be a number of milliseconds from ${min} to ${MAX_TIMER_MS}, got ${value}`,
      )
  }
}

interface RunPlan {
  readonly round: number
  /** Kill once the counted kind reaches this; `undefined` for the last run. */
  readonly killAfter: number | undefined
  readonly last: CrashLastRun | undefined
}

/**
 * Runs your pipeline in a child, SIGKILLs it once it reported `killAfter` of `count`, restarts it,
 * `rounds` times, then lets a last run finish; returns what each run reported. Prints the seed
 * first. Fails with a {@link CrashLoopError} — after killing the child — when a child exits on its
 * own before its kill point (unless it said its input was finished, `CrashReporter.finished()`,
 * and exited with code 0: that round ends `exited`), when no round was killed at all (`NO_KILL`),
 * reports nothing for `stallMs`, or a last run does not finish in its `timeoutMs`.
 *
 * Works with any test runner: it only returns a report or throws.
 *
 * @example
 * ```ts
 * const report = await crashLoop({
 *   script: 'test/crash/pipeline.ts', nodeArgs: ['--import', 'tsx'], args: [dir],
 *   rounds: 3, killAfter: { min: 5, max: 50 },
 * })
 * report.expectNoLoss(readIdsFromMyDatabase())
 * ```
 */
export async function crashLoop(options: CrashLoopOptions): Promise<CrashLoopReport> {
  validate(options)
  const seed = options.seed ?? Date.now() % 2 ** 31
  const log = options.log ?? ((line: string) => console.log(line))
  const count = options.count ?? 'delivered'
  const random = seededRandom(seed)
  const draw = (round: number): number => {
    const k = options.killAfter
    const n = typeof k === 'function' ? k(round, random) : k.min + Math.floor(random() * (k.max - k.min + 1))
    if (!Number.isSafeInteger(n) || n < 1)
      throw new RangeError(
        `crashLoop: 'killAfter' returned ${n} for round ${round}; it must be a whole number >= 1`,
      )
    return n
  }
  log(
    `crashLoop: seed ${seed} (pass seed: ${seed} to replay), ${options.rounds} kill(s) after ${count} reports`,
  )

  const live = new Set<ChildProcess>()
  const onExit = (): void => {
    for (const child of live) killGroup(child, 'SIGKILL')
  }
  process.on('exit', onExit)
  // A signal that ends this process (Ctrl-C, a runner's SIGTERM) fires no 'exit', and a child in
  // its own group does not get it: kill the children, then let the signal act as it would have
  // without this listener (re-raised when no other listener is left to decide).
  const onSignal = (signal: NodeJS.Signals): void => {
    for (const s of SIGNALS) process.off(s, onSignal)
    onExit()
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal)
  }
  for (const s of SIGNALS) process.on(s, onSignal)
  const seen = new Set<string>()
  const rounds: CrashRound[] = []
  try {
    const plans: RunPlan[] = Array.from({ length: options.rounds }, (_, round) => ({
      round,
      killAfter: draw(round),
      last: undefined,
    }))
    if (options.last !== false)
      plans.push({ round: options.rounds, killAfter: undefined, last: options.last ?? {} })
    for (const plan of plans) {
      await options.beforeRound?.(plan.round, random)
      const run = await runOnce(plan, options, { seed, count, live })
      const keys = run.keys[count] ?? []
      const repeated = keys.filter((key) => seen.has(key)).length
      for (const key of keys) seen.add(key)
      const round: CrashRound = { ...run, repeated }
      rounds.push(round)
      log(`crashLoop: ${new CrashLoopReport(seed, count, [round]).describe()[0]}`)
      if (plan.round === options.rounds - 1 && !rounds.some((r) => r.ending === 'killed'))
        throw new CrashLoopError(
          'NO_KILL',
          plan.round,
          seed,
          `crashLoop: none of the ${options.rounds} round(s) was killed: every child said its input was finished and exited before its kill point (${rounds.map((r) => r.killAfter).join(', ')} '${count}'); give the pipeline more input than the largest kill point, or lower killAfter`,
        )
    }
  } finally {
    onExit()
    process.off('exit', onExit)
    for (const s of SIGNALS) process.off(s, onSignal)
  }
  return new CrashLoopReport(seed, count, rounds)
}

interface LoopContext {
  readonly seed: number
  readonly count: string
  readonly live: Set<ChildProcess>
}

/** Runs one child to its kill, stop or exit. */
function runOnce(
  plan: RunPlan,
  options: CrashLoopOptions,
  context: LoopContext,
): Promise<Omit<CrashRound, 'repeated'>> {
  const { round, killAfter, last } = plan
  const { seed, count } = context
  const args = typeof options.args === 'function' ? options.args(round) : (options.args ?? [])
  const file = options.script === undefined ? options.command! : process.execPath
  const argv =
    options.script === undefined ? [...args] : [...(options.nodeArgs ?? []), options.script, ...args]
  const child = spawn(file, argv, {
    cwd: options.cwd ?? process.cwd(),
    env: {
      ...process.env,
      ...options.env,
      ACKLINE_CRASH_ROUND: String(round),
      ACKLINE_CRASH_SEED: String(seed),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group, so a kill reaches whatever the child started (a wrapper's Node).
    detached: true,
  })
  context.live.add(child)

  // Without a prototype: a kind is whatever word the child printed, `constructor` or `toString` too.
  const counts: Record<string, number> = Object.create(null)
  const keys: Record<string, string[]> = Object.create(null)
  const progress = (): CrashProgress => ({
    round,
    counts: Object.assign(Object.create(null), counts),
    keys: Object.assign(
      Object.create(null),
      Object.fromEntries(Object.entries(keys).map(([k, v]) => [k, [...v]])),
    ),
  })
  /** running → killing (SIGKILL sent) | stopping (SIGTERM sent) → closed; a failure kills, then rejects. */
  let phase: 'running' | 'killing' | 'stopping' | 'closed' = 'running'
  let failure: CrashLoopError | undefined
  let reportedAtKill: number | undefined
  let stderrTail = ''
  /** Whether the child printed {@link CRASH_FINISHED_LINE}. */
  let finished = false
  const timers: NodeJS.Timeout[] = []
  let stall: NodeJS.Timeout | undefined
  /** Rejects the run with `failure`; set once the run's promise exists. */
  let rejectRun: (() => void) | undefined
  /** Whether `last.until` was called and has not settled yet. */
  let untilPending = false

  const fail = (code: CrashLoopError['code'], message: string): void => {
    if (failure !== undefined) return
    const tail =
      stderrTail.trim() === ''
        ? ''
        : `\n  child stderr (last lines):\n  ${stderrTail.trim().split('\n').join('\n  ')}`
    failure = new CrashLoopError(code, round, seed, `${message}${tail}`, child.pid)
    killGroup(child, 'SIGKILL')
    // Once the child has closed, nothing else ends the run (a last.until that never settles
    // would hold it for ever): the failure ends it now.
    if (phase === 'closed') rejectRun?.()
  }
  const armStall = (): void => {
    if (killAfter === undefined || phase !== 'running') return
    clearTimeout(stall)
    const stallMs = options.stallMs ?? 30_000
    stall = setTimeout(
      () =>
        fail(
          'NO_PROGRESS',
          finished
            ? `the child said its input was finished, then did not exit within ${stallMs} ms (it reported ${counts[count] ?? 0} '${count}' of its kill point ${killAfter})`
            : `the child reported ${counts[count] ?? 0} '${count}', then nothing for ${stallMs} ms before its kill point ${killAfter}: is its input large enough for the kill points, and does it report (CrashReporter)?`,
        ),
      stallMs,
    )
  }

  let checking = false
  const check = async (): Promise<void> => {
    if (last?.until === undefined || phase !== 'running' || failure !== undefined || checking) return
    checking = true
    try {
      if (await until(last.until)) {
        if (phase === 'running' && failure === undefined) {
          phase = 'stopping'
          killGroup(child, 'SIGTERM')
        }
      }
    } catch (error) {
      fail('CALLBACK_FAILED', `last.until threw: ${describeThrown(error, true)}`)
    } finally {
      checking = false
    }
  }

  /** Calls `last.until`, noting while it is pending (for the timeout's message). */
  const until = async (callback: NonNullable<CrashLastRun['until']>): Promise<boolean> => {
    untilPending = true
    try {
      return await callback(progress())
    } finally {
      untilPending = false
    }
  }

  const onReport = (line: string): void => {
    const body = line.slice(line.indexOf(CRASH_REPORT_PREFIX) + CRASH_REPORT_PREFIX.length)
    const m = /^([A-Za-z][\w-]*) (\d+)(?: (.*))?$/.exec(body.trim())
    let list: string[] | undefined
    if (m !== null && m[3] !== undefined) {
      try {
        const parsed: unknown = JSON.parse(m[3])
        if (Array.isArray(parsed) && parsed.length === Number(m[2])) list = parsed.map(String)
      } catch {
        list = undefined
      }
    }
    if (m === null || (m[3] !== undefined && list === undefined)) {
      fail('BAD_REPORT', `the child printed a report line that does not follow the protocol: ${line}`)
      return
    }
    const kind = m[1]!
    counts[kind] = (counts[kind] ?? 0) + Number(m[2])
    if (list !== undefined) {
      const bucket = keys[kind] ?? []
      bucket.push(...list)
      keys[kind] = bucket
    }
    if (kind === count && phase === 'running' && killAfter !== undefined && counts[count]! >= killAfter) {
      phase = 'killing'
      reportedAtKill = counts[count]
      clearTimeout(stall)
      killGroup(child, 'SIGKILL')
      return
    }
    armStall()
    void check()
  }

  const lines = (stream: 'stdout' | 'stderr', readable: NodeJS.ReadableStream) => {
    let pending = ''
    const read = (line: string): void => {
      if (stream === 'stderr') stderrTail = (stderrTail + line + '\n').slice(-TAIL)
      if (stream === 'stdout' && line.includes(CRASH_REPORT_PREFIX)) onReport(line)
      else if (stream === 'stdout' && line.trimEnd().endsWith(CRASH_FINISHED_LINE)) {
        finished = true
        armStall() // counted again from here: the child should now exit
      } else if (options.onOutput !== undefined) {
        const failed = (error: unknown): void =>
          fail('CALLBACK_FAILED', `onOutput threw: ${describeThrown(error, true)}`)
        try {
          // An async onOutput's rejection would otherwise be unhandled: it fails the run as a throw does.
          const returned: unknown = options.onOutput(line, stream, round)
          if (isThenable(returned)) returned.then(undefined, failed)
        } catch (error) {
          failed(error)
        }
      }
    }
    readable.setEncoding('utf8')
    readable.on('data', (chunk: string) => {
      // Only the new chunk is searched: splitting what was pending again at every chunk made
      // output without newlines (binary, a progress bar) cost time quadratic in its length.
      let start = 0
      for (let end = chunk.indexOf('\n'); end !== -1; end = chunk.indexOf('\n', start)) {
        read(pending + chunk.slice(start, end))
        pending = ''
        start = end + 1
      }
      pending += chunk.slice(start) // an unfinished line (a kill may cut it): read once it is whole
      if (pending.length > MAX_LINE) {
        // Too long for a report: read as it is (a report this long fails as BAD_REPORT), not kept.
        const line = pending
        pending = ''
        read(line)
      }
    })
    // At the end of the output, a last line without its newline is whole unless the loop's
    // SIGKILL cut it: a child that printed its last report so and exited is read, not dropped.
    readable.on('end', () => {
      if (pending !== '' && phase !== 'killing') read(pending)
      pending = ''
    })
  }
  lines('stdout', child.stdout!)
  lines('stderr', child.stderr!)

  armStall()
  if (last !== undefined) {
    const timeoutMs = last.timeoutMs ?? 60_000
    timers.push(
      setTimeout(
        () =>
          fail(
            'LAST_RUN_TIMEOUT',
            last.until === undefined
              ? `the last run did not exit within ${timeoutMs} ms (without last.until, the child must finish its input and exit on its own)`
              : untilPending
                ? `last.until did not settle within ${timeoutMs} ms${phase === 'closed' ? ' (the child had exited)' : ''}; the run reported ${JSON.stringify(counts)}`
                : phase === 'stopping'
                  ? `the last run did not exit within ${timeoutMs} ms after SIGTERM`
                  : `last.until did not hold within ${timeoutMs} ms; the run reported ${JSON.stringify(counts)}`,
          ),
        timeoutMs,
      ),
    )
    if (last.until !== undefined) {
      const poll = setInterval(() => void check(), last.pollMs ?? 50)
      timers.push(poll)
      void check()
    }
  }

  return new Promise((resolve, reject) => {
    rejectRun = () => finish(failure)
    let settled = false
    const finish = (error: CrashLoopError | undefined, ending?: CrashRound['ending']): void => {
      if (settled) return
      settled = true
      clearTimeout(stall)
      for (const t of timers) clearTimeout(t)
      context.live.delete(child)
      if (error !== undefined || ending === undefined) {
        reject(error)
        return
      }
      resolve({
        ...progress(),
        pid: child.pid!,
        killAfter,
        reportedAtKill,
        ending,
        checked: (counts[count] ?? 0) > 0,
        finished,
      })
    }
    child.once('error', (error) => {
      if (child.pid === undefined)
        finish(new CrashLoopError('SPAWN_FAILED', round, seed, `cannot start '${file}': ${error.message}`))
    })
    // Whatever the child started dies with it (and lets go of the output pipes 'close' waits for).
    child.once('exit', (code, signal) => {
      killGroup(child, 'SIGKILL')
      // A process the child started outside its group (its own session) outlives that kill and
      // may hold the output open for ever: 'close' would never come, and the loop would hang.
      const stallMs = options.stallMs ?? 30_000
      const held = setTimeout(() => {
        fail(
          'OUTPUT_HELD',
          `the child exited (${signal === null ? `code ${code}` : `signal ${signal}`}), but its output stayed open for ${stallMs} ms: a process it started outside its process group holds it and outlives every kill; it reported ${JSON.stringify(counts)}`,
        )
        child.stdout?.destroy()
        child.stderr?.destroy()
      }, stallMs)
      timers.push(held)
    })
    /** Whether `last.until` holds once the child exited on its own (it may have finished first). */
    const holdsAtExit = async (): Promise<boolean> => {
      if (last?.until === undefined) return true
      try {
        return await until(last.until)
      } catch (error) {
        fail('CALLBACK_FAILED', `last.until threw: ${describeThrown(error, true)}`)
        return false
      }
    }
    const closed = async (code: number | null, signal: NodeJS.Signals | null): Promise<void> => {
      const how = signal === null ? `code ${code}` : `signal ${signal}`
      const before = phase
      phase = 'closed'
      if (failure !== undefined) finish(failure)
      else if (before === 'killing' && signal === 'SIGKILL') finish(undefined, 'killed')
      // The child exited on its own before a kill sent late landed: nothing was crashed. Only a
      // child that said its input was finished and exited with code 0 may do so.
      else if (before === 'killing') {
        if (finished && code === 0) finish(undefined, 'exited')
        else
          fail(
            'CHILD_EXITED',
            `the child exited with ${how} before the kill sent at ${reportedAtKill} '${count}' landed: nothing was crashed${finished ? ' (it said its input was finished, but did not exit with code 0)' : '; if its input can run out first, have it call CrashReporter.finished() before it exits'}`,
          )
      } else if (before === 'stopping') {
        if (code === 0 || signal === 'SIGTERM') finish(undefined, 'stopped')
        else fail('CHILD_FAILED', `the last run exited with ${how} after SIGTERM`)
      } else if (last !== undefined && code === 0) {
        if (await holdsAtExit()) finish(undefined, 'exited')
        else
          fail(
            'CHILD_EXITED',
            `the last run exited with ${how} before last.until held; it reported ${JSON.stringify(counts)}`,
          )
      } else if (last !== undefined) fail('CHILD_FAILED', `the last run exited with ${how}`)
      else if (finished && code === 0) finish(undefined, 'exited')
      else
        fail(
          'CHILD_EXITED',
          `the child exited with ${how} before its kill point: it reported ${counts[count] ?? 0} '${count}' of ${killAfter}${finished ? ' (it said its input was finished, but did not exit with code 0)' : '; if its input can run out first, have it call CrashReporter.finished() before it exits'}`,
        )
      if (!settled && failure !== undefined) finish(failure)
    }
    // 'close' comes after the exit and after the child's output was read to its end.
    child.once('close', (code, signal) => void closed(code, signal))
  })
}
