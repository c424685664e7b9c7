// Kill-and-restart: a child tails a growing file into a file sink and is SIGKILLed, again and
// again, at a point chosen by how many lines it reported delivered. After the last run every line
// written must be in the sink at least once (none skipped); duplicates are counted and printed.
// Size: ACKLINE_CRASH_KILLS kills (default 20), ACKLINE_CRASH_LINES lines appended per run (default 30).
import { type ChildProcess, spawn } from 'node:child_process'
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'

const KILLS = Number(process.env.ACKLINE_CRASH_KILLS ?? 20)
const PER_RUN = Number(process.env.ACKLINE_CRASH_LINES ?? 30)
const seed = Number(process.env.ACKLINE_SEED ?? Date.now() % 2 ** 31)
let state = seed
const random = (n: number) => {
  state = (state * 1103515245 + 12345) & 0x7fffffff
  return state % n
}

const dir = mkdtempSync(join(tmpdir(), 'ackline-file-crash-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const input = join(dir, 'input.log')
const output = join(dir, 'output.ndjson')
const checkpoints = join(dir, 'cp')
const child = join(import.meta.dirname, 'fileTailChild.ts')

/** Starts the child; `until(delivered)` decides when the returned promise resolves. */
function runChild(until: (delivered: number) => boolean): { proc: ChildProcess; reached: Promise<number> } {
  const proc = spawn(
    process.execPath,
    ['--conditions=source', '--import', 'tsx', child, input, output, checkpoints],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  )
  const reached = new Promise<number>((resolve, reject) => {
    let buffered = ''
    proc.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString()
      const lines = buffered.split('\n')
      buffered = lines.pop()!
      for (const line of lines) {
        const m = /^delivered (\d+)$/.exec(line)
        if (m !== null && until(Number(m[1]))) resolve(Number(m[1]))
      }
    })
    proc.on('exit', (code, signal) => reject(new Error(`child exited early (${code ?? signal})`)))
  })
  return { proc, reached }
}

const kill = (proc: ChildProcess) =>
  new Promise<void>((resolve) => {
    proc.removeAllListeners('exit')
    proc.on('exit', () => resolve())
    proc.kill('SIGKILL')
  })

let written = 0
const append = (n: number) => {
  let text = ''
  for (let i = 0; i < n; i++) text += `line L${String(written++).padStart(6, '0')}\n`
  appendFileSync(input, text)
}

describe('file source under SIGKILL', () => {
  it(`never skips a line across ${KILLS} kills at reported delivery points`, async () => {
    console.log(`file source crash test: seed ${seed}, ${KILLS} kills, ${PER_RUN} lines per run`)
    writeFileSync(input, '')
    const killedAt: number[] = []
    for (let k = 0; k < KILLS; k++) {
      append(PER_RUN)
      // Kill after 1..PER_RUN lines this run reported delivered; more lines arrive meanwhile.
      const target = 1 + random(PER_RUN)
      const { proc, reached } = runChild((delivered) => delivered >= target)
      setTimeout(() => append(random(5)), random(20))
      killedAt.push(await reached)
      await kill(proc)
    }
    // The last run goes until every line written is in the sink, then stops cleanly.
    const count = () => {
      const text = existsSync(output) ? readFileSync(output, 'utf8') : ''
      const seen = new Map<string, number>()
      for (const m of text.matchAll(/L(\d{6})/g)) seen.set(m[1]!, (seen.get(m[1]!) ?? 0) + 1)
      return seen
    }
    // Success is decided by the report; the bound only turns a skipped line into a failure
    // instead of a hang.
    const { proc, reached } = runChild(() => count().size === written)
    await Promise.race([reached, new Promise((resolve) => setTimeout(resolve, 20_000))])
    await new Promise<void>((resolve) => {
      proc.removeAllListeners('exit')
      proc.on('exit', () => resolve())
      proc.kill('SIGTERM')
    })
    const seen = count()
    const missing: number[] = []
    for (let i = 0; i < written; i++) if (!seen.has(String(i).padStart(6, '0'))) missing.push(i)
    let duplicates = 0
    for (const n of seen.values()) duplicates += n - 1
    console.log(
      `file source crash test: ${written} lines written, ${KILLS} kills (after ${killedAt.join(', ')} delivered), ` +
        `${seen.size} distinct lines in the sink, ${duplicates} duplicates, ${missing.length} missing`,
    )
    expect(killedAt).toHaveLength(KILLS)
    expect(missing).toEqual([])
    expect(seen.size).toBe(written)
  }, 600_000)
})
