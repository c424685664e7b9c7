/**
 * The README's first command, verified without a human: `examples/quickstart.ts --smoke` starts
 * the quickstart topology, sends one request to itself, prints the answer and exits 0 on a 200.
 */
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = fileURLToPath(new URL('../../../../', import.meta.url))

interface Exit {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

function runQuickstart(args: readonly string[], env: Record<string, string>): Promise<Exit> {
  return new Promise((resolve) => {
    execFile(
      join(root, 'node_modules', '.bin', 'tsx'),
      ['--conditions=source', 'examples/quickstart.ts', ...args],
      { cwd: root, env: { ...process.env, ...env }, timeout: 60_000 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1
        resolve({ code, stdout, stderr })
      },
    )
  })
}

describe('the quickstart', () => {
  it('answers its own request 200 and exits 0 with --smoke', async () => {
    // Port 0: the smoke test must not depend on 8686 being free on the machine that runs it.
    const { code, stdout, stderr } = await runQuickstart(['--smoke'], {
      ACKLINE_QUICKSTART_ADDRESS: '127.0.0.1:0',
    })
    expect({ code, stderr }).toMatchObject({ code: 0 })
    expect(stdout).toMatch(
      /smoke: POST http:\/\/127\.0\.0\.1:\d+\/ answered 200 \{"status":"delivered","events":1/,
    )
    // The console sink printed the enriched event, and the lifecycle stream reported the batch.
    expect(stdout).toContain('"message":"hello from the smoke test","received_at":')
    expect(stderr).toMatch(/ack: batch \S+ from 'http' delivered/)
  }, 60_000)
})
