// The examples of a custom source, sink and transform (examples/custom-*.ts) and of the testkit
// (examples/testkit-*.ts): each one's main(), checked for what it claims to show, and each run as
// the script a reader would run.
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { main as sinkExample } from '../examples/custom-sink.js'
import { main as sourceExample } from '../examples/custom-source.js'
import { main as transformExample } from '../examples/custom-transform.js'
import { main as testkitExample } from '../examples/testkit-sink.js'

const root = fileURLToPath(new URL('..', import.meta.url))

describe('the component examples', () => {
  it('custom source: acknowledges the delivered batch and sends the rejected one back to its queue', async () => {
    expect(await sourceExample()).toEqual({ acked: [0, 1], redelivered: [2, 3] })
  })

  it('custom sink: a retried write stores its records once; the batch with a record too large is rejected', async () => {
    expect(await sinkExample()).toEqual({ stored: 5, statuses: ['delivered', 'rejected'] })
  })

  it('custom transform: redacts every event, drops debug ones, routes errors to their port', async () => {
    expect(await transformExample()).toEqual({
      main: [
        { i: 0, level: 'info' },
        { i: 3, level: 'info' },
        { i: 5, level: 'info' },
      ],
      errors: [{ i: 2, level: 'error' }],
    })
  })

  it('testkit sink: a conforming sink passes the suite, one that ends events fails it, and the properties hold (random topologies with the sink in them too)', async () => {
    const result = await testkitExample()
    expect(result.good).toEqual([])
    expect(result.broken).toContain('sink.never-ends-events')
    expect(result.propertyRuns).toBe(30)
    expect(result.topologiesWithKv).toBeGreaterThan(0)
  })

  it('testkit crash: run as a script, SIGKILLs its own pipeline twice at reported deliveries and loses nothing it reported', async () => {
    // Run as the reader would (it spawns itself as the child); main() is the same code.
    const stdout = await new Promise<string>((resolve, reject) => {
      execFile(
        `${root}node_modules/.bin/tsx`,
        ['--conditions=source', 'examples/testkit-crash.ts'],
        { cwd: root, timeout: 120_000 },
        (error, out, stderr) =>
          error === null ? resolve(out) : reject(new Error(`testkit-crash: ${stderr}`)),
      )
    })
    const result = JSON.parse(stdout) as { kills: number; reported: number; stored: number; lost: string[] }
    expect(result.kills).toBe(2)
    expect(result.reported).toBeGreaterThan(0)
    expect(result.stored).toBe(3000)
    expect(result.lost).toEqual([])
  }, 120_000)

  it('each runs as a script and prints its result', async () => {
    const runs = ['custom-source', 'custom-sink', 'custom-transform', 'testkit-sink'].map(
      (name) =>
        new Promise<string>((resolve, reject) => {
          execFile(
            `${root}node_modules/.bin/tsx`,
            ['--conditions=source', `examples/${name}.ts`],
            { cwd: root, timeout: 60_000 },
            (error, stdout, stderr) =>
              error === null ? resolve(stdout) : reject(new Error(`${name}: ${stderr}`)),
          )
        }),
    )
    const [source, sink, transform, testkit] = await Promise.all(runs)
    expect(JSON.parse(source!)).toEqual({ acked: [0, 1], redelivered: [2, 3] })
    expect(JSON.parse(sink!)).toEqual({ stored: 5, statuses: ['delivered', 'rejected'] })
    expect(JSON.parse(transform!).errors).toEqual([{ i: 2, level: 'error' }])
    expect(JSON.parse(testkit!).good).toEqual([])
  }, 60_000)
})
