/**
 * The file source when a name is given to another file between the scan's look at it and its
 * opening (a rotation at that moment): `open` is wrapped so the test can rotate the file there.
 * In a file of its own, as the wrapping is module-wide.
 */
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { file } from '@ackline/sources'
import { afterEach, beforeEach, expect, it, vi } from 'vitest'
import { FakeSourceContext } from '../support/FakeSourceContext.js'

const hooks = vi.hoisted(() => ({ beforeOpen: undefined as ((path: unknown) => void) | undefined }))

vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs/promises')>()
  const open = ((...args: Parameters<typeof real.open>) => {
    hooks.beforeOpen?.(args[0])
    return real.open(...args)
  }) as typeof real.open
  return { ...real, default: { ...real, open }, open }
})

let dir: string
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ackline-file-race-'))
})
afterEach(() => {
  hooks.beforeOpen = undefined
  rmSync(dir, { recursive: true, force: true })
})

const lines = (...xs: string[]) => xs.map((x) => `${x}\n`).join('')

/** Runs the source until `done(received)`, then stops it; resolves to every line it sent. */
const runUntil = async (options: Parameters<typeof file>[0], done: (received: string[]) => boolean) => {
  const context = new FakeSourceContext({ id: 'files' })
  const received: string[] = []
  context.onBatch = (batch) => {
    received.push(...batch.events.map((e) => e.get('message') as string))
    batch.end('delivered')
  }
  const running = file({ pollIntervalMs: 10, checkpointIntervalMs: 20, onNotice: () => {}, ...options }).run(
    context,
  )
  await vi.waitUntil(() => done(received))
  context.stop()
  await running
  return received
}

it('reads the rest of a file rotated between the scan that found it and its opening, and the new file once', async () => {
  // The scan looked the name up (the old file, with a checkpoint), then opened the name, by then
  // the new file: the new file was read under the old one's identity (its checkpoint dropped as
  // not matching), so the old file, found under its rotated name, was taken for the one already
  // open and its last lines never read, and the new file was read twice.
  const log = join(dir, 'app.log')
  const cp = join(dir, 'cp')
  writeFileSync(log, lines('a', 'b'))
  const checkpointOf = () =>
    existsSync(join(cp, 'checkpoints.json'))
      ? (JSON.parse(readFileSync(join(cp, 'checkpoints.json'), 'utf8')) as { files: { offset: number }[] })
          .files[0]?.offset
      : undefined
  await runUntil({ include: [log], checkpoints: cp }, () => checkpointOf() === 4)
  appendFileSyncLine(log, 'c')
  let rotated = false
  hooks.beforeOpen = (path) => {
    if (rotated || path !== log) return
    rotated = true
    renameSync(log, `${log}.1`)
    writeFileSync(log, lines('d'))
  }
  const received = await runUntil({ include: [`${log}*`], checkpoints: cp }, (r) => r.length >= 2)
  expect(rotated).toBe(true)
  expect([...received].sort()).toEqual(['c', 'd'])
})

function appendFileSyncLine(path: string, line: string): void {
  writeFileSync(path, lines(line), { flag: 'a' })
}
