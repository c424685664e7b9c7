#!/usr/bin/env node
/**
 * `ackline-buffer <dir> [--repair [--break-lock]]`: checks a disk buffer directory and prints its
 * segments, record counts, acknowledged position and any damage, changing nothing; with
 * `--repair`, fixes what it can and says what. A repair refuses a buffer whose lock counts as held
 * (a live process here, a process on another host, an unreadable lock); `--break-lock` removes
 * such a lock first, for an operator who knows its process is gone.
 *
 * Exit status: 0 when the buffer is clean (after repair, when repairing), 1 when problems remain,
 * 2 on a usage error, or when the check could not run or its report could not be printed (a
 * standard output closed early, as by `| head -1`: the report is lost, so success is not claimed).
 * A repair that ran is complete even then.
 *
 * @module
 */
import { statSync } from 'node:fs'
import { BufferCheck } from './BufferCheck.js'

const USAGE = [
  'usage: ackline-buffer <buffer-dir> [--repair] [--break-lock]',
  '  --repair      fix what can be fixed, and say what',
  '  --break-lock  with --repair: remove a lock whose process you know is gone (another host, unreadable)',
].join('\n')

async function main(argv: readonly string[]): Promise<number> {
  const repair = argv.includes('--repair')
  const breakLock = argv.includes('--break-lock')
  const rest = argv.filter((a) => a !== '--repair' && a !== '--break-lock')
  if (rest.length !== 1 || rest[0]!.startsWith('-') || (breakLock && !repair)) {
    console.error(USAGE)
    return 2
  }
  const path = rest[0]!
  if (statSync(path, { throwIfNoEntry: false })?.isDirectory() !== true) {
    console.error(`ackline-buffer: ${path} is not a directory`)
    return 2
  }
  const report = await BufferCheck.run(path, { repair, breakLock })
  console.log(BufferCheck.format(report))
  if (!repair) return report.problems.length === 0 ? 0 : 1
  const after = await BufferCheck.run(path)
  if (after.problems.length === 0) {
    console.log('  after repair: no problems found')
    return 0
  }
  console.log(`  after repair, still (${after.problems.length}):`)
  for (const p of after.problems) console.log(`    - ${p}`)
  return 1
}

// A reader that goes away (`| head -1`) fails the writes with EPIPE, emitted on the stream: with
// no listener that is an uncaught exception and a stack trace.
let outputLost = false
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (outputLost) return
  outputLost = true
  process.exitCode = 2
  console.error(
    `ackline-buffer: cannot print the report: standard output failed (${error.code ?? error.message})`,
  )
})

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = outputLost ? 2 : code
  },
  (error: unknown) => {
    console.error(`ackline-buffer: ${(error as Error).message}`)
    process.exitCode = 2
  },
)
