// User code outside the workspace runs on the built packages (dist/, through the `default` export
// condition), with no `--conditions=source` and no TypeScript loader: `tsc -b` builds them, then a
// plain node process in a directory of its own imports them by name and runs a topology.
import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'

const root = fileURLToPath(new URL('..', import.meta.url))
const user = mkdtempSync(join(tmpdir(), 'ackline-user-'))

afterAll(() => rmSync(user, { recursive: true, force: true }))

const run = (
  file: string,
  args: readonly string[],
  cwd: string,
): Promise<{ stdout: string; stderr: string }> =>
  new Promise((resolve, reject) => {
    // Whatever NODE_OPTIONS the test runner has (conditions, loaders) must not reach the child.
    const { NODE_OPTIONS: _, ...env } = process.env
    execFile(file, args, { cwd, env, timeout: 240_000 }, (error, stdout, stderr) =>
      error === null
        ? resolve({ stdout, stderr })
        : reject(new Error(`${file} ${args.join(' ')}: ${stderr}${stdout}`)),
    )
  })

const program = `
import { TopologyBuilder, perEvent, ComponentError } from '@ackline/topology'
import { generator } from '@ackline/sources'
import { memory } from '@ackline/sinks'
import { filter } from '@ackline/transforms'
import { LogEvent } from '@ackline/core'

const sink = memory()
const receipts = []
const topology = new TopologyBuilder({ acknowledgements: true })
  .source('gen', generator({ count: 10, batchSize: 5, onBatch: (r) => receipts.push(r.status) }))
  .transform('even', ['gen'], filter((e) => e.get('index') % 2 === 0))
  .sink('out', ['even'], sink)
  .build()
await topology.start()
await topology.done
const statuses = await Promise.all(receipts)
console.log(JSON.stringify({
  events: sink.events.length,
  statuses,
  helpers: typeof perEvent === 'function' && typeof ComponentError === 'function' && typeof LogEvent === 'function',
  loadedFrom: import.meta.resolve('@ackline/topology'),
}))
`

describe('the built packages', () => {
  it('run a topology from a project outside the workspace, without --conditions=source', async () => {
    await run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-b'], root)
    mkdirSync(join(user, 'node_modules', '@ackline'), { recursive: true })
    for (const pkg of ['core', 'topology', 'sources', 'sinks', 'transforms']) {
      symlinkSync(join(root, 'packages', pkg), join(user, 'node_modules', '@ackline', pkg), 'dir')
    }
    writeFileSync(join(user, 'package.json'), JSON.stringify({ type: 'module', private: true }))
    writeFileSync(join(user, 'main.js'), program)
    const { stdout } = await run(process.execPath, ['main.js'], user)
    const result = JSON.parse(stdout)
    expect(result).toMatchObject({ events: 5, statuses: ['delivered', 'delivered'], helpers: true })
    expect(result.loadedFrom).toMatch(/\/packages\/topology\/dist\/index\.js$/)
  }, 240_000)
})
