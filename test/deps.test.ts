// The dependency check (.ci/deps.mjs), run as CI runs it, on fixture workspaces written here.
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'

const script = fileURLToPath(new URL('../.ci/deps.mjs', import.meta.url))
const roots: string[] = []

afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true })
})

type Tree = Record<string, string>

/** A workspace of packages; `deps` per package, `files` by path under `packages/`. */
function workspace(deps: Record<string, string[]>, files: Tree): string {
  const root = mkdtempSync(join(tmpdir(), 'ackline-deps-'))
  roots.push(root)
  for (const [pkg, list] of Object.entries(deps)) {
    const manifest = {
      name: `@ackline/${pkg}`,
      dependencies: Object.fromEntries(list.map((d) => [`@ackline/${d}`, 'workspace:*'])),
    }
    mkdirSync(join(root, 'packages', pkg, 'src'), { recursive: true })
    writeFileSync(join(root, 'packages', pkg, 'package.json'), JSON.stringify(manifest))
  }
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, 'packages', path)), { recursive: true })
    writeFileSync(join(root, 'packages', path), text)
  }
  return root
}

function run(root: string): { status: number | null; output: string } {
  const child = spawnSync(process.execPath, [script, root], { encoding: 'utf8' })
  return { status: child.status, output: child.stdout + child.stderr }
}

/** A workspace that keeps every rule. */
const clean = (): Tree => ({
  'core/src/index.ts': "export { LogEvent } from './LogEvent.js'\n",
  'core/src/LogEvent.ts': "import { copy } from './internal/copy.js'\nexport class LogEvent { x = copy() }\n",
  'core/src/internal/copy.ts':
    "import type { LogEvent } from '../LogEvent.js'\nexport const copy = (e?: LogEvent) => e\n",
  'topology/src/index.ts': "import { LogEvent } from '@ackline/core'\nexport const t = new LogEvent()\n",
  'sinks/src/index.ts':
    "// import { s } from '@ackline/sources' (a comment does not count)\nimport '@ackline/topology'\n",
  'sources/src/index.ts': 'export const s = \'import x from "@ackline/sinks"\'\n',
})
const deps = { core: [], topology: ['core'], sinks: ['core', 'topology'], sources: ['core', 'topology'] }

describe('the dependency check', () => {
  it('passes a workspace that keeps every rule (comments, strings and internal type imports do not count)', () => {
    const { status, output } = run(workspace(deps, clean()))
    expect(output).toContain('dependency check passed')
    expect(status).toBe(0)
  })

  it('fails when core imports an @ackline package', () => {
    const { status, output } = run(
      workspace(deps, {
        ...clean(),
        'core/src/LogEvent.ts': "import type { Sink } from '@ackline/topology'\nexport class LogEvent {}\n",
      }),
    )
    expect(status).toBe(1)
    expect(output).toMatch(
      /error {2}packages\/core\/src\/LogEvent\.ts: imports @ackline\/topology: core must not depend on topology/,
    )
  })

  it('fails when a sink imports a source, naming both and the file', () => {
    const { status, output } = run(
      workspace(
        { ...deps, sinks: [...deps.sinks, 'sources'] },
        { ...clean(), 'sinks/src/internal/x.ts': "export const y = await import('@ackline/sources')\n" },
      ),
    )
    expect(status).toBe(1)
    expect(output).toContain(
      'packages/sinks/src/internal/x.ts: imports @ackline/sources: sinks must not depend on sources',
    )
    expect(output).toContain('packages/sinks/package.json: lists @ackline/sources')
  })

  it('fails when the topology imports the buffers, even in a type', () => {
    const root = workspace(
      { ...deps, buffers: ['core'], topology: ['core', 'buffers'] },
      {
        ...clean(),
        'buffers/src/index.ts': 'export {}\n',
        'topology/src/x.ts': "export type B = typeof import('@ackline/buffers')\n",
      },
    )
    const { status, output } = run(root)
    // (The repository's own edge is allowed by the script's list of known violations until h/topo
    // removes it; a fixture gets no such allowance.)
    expect(status).toBe(1)
    expect(output).toMatch(/error {2}packages\/topology\/src\/x\.ts: imports @ackline\/buffers/)
  })

  it('fails when a package imports a sibling its package.json does not list', () => {
    const { status, output } = run(
      workspace(deps, {
        ...clean(),
        'sources/src/index.ts': "import { x } from '@ackline/sinks'\nexport const s = x\n",
      }),
    )
    expect(status).toBe(1)
    expect(output).toContain(
      'imports @ackline/sinks, which sources/package.json does not list in dependencies',
    )
  })

  it("fails on another package's internals, a relative path out of the package, and its own barrel", () => {
    const { status, output } = run(
      workspace(deps, {
        ...clean(),
        'topology/src/a.ts': "import { copy } from '@ackline/core/internal/copy.js'\nexport const a = copy\n",
        'topology/src/b.ts':
          "import { LogEvent } from '../../core/src/LogEvent.js'\nexport const b = LogEvent\n",
        'topology/src/c.ts': "import { t } from './index.js'\nexport const c = t\n",
      }),
    )
    expect(status).toBe(1)
    expect(output).toContain(
      "imports @ackline/core/internal/copy.js: another package's internals are not public",
    )
    expect(output).toContain('imports ../../core/src/LogEvent.js, outside its package')
    expect(output).toContain('packages/topology/src/c.ts: imports its own barrel')
  })

  it('fails on a cycle of type imports through public modules, not on an internal module importing public types', () => {
    const { status, output } = run(
      workspace(deps, {
        ...clean(),
        'topology/src/A.ts': "import type { B } from './B.js'\nexport interface A { b: B }\n",
        'topology/src/B.ts': "import type { A } from './A.js'\nexport interface B { a: A }\n",
      }),
    )
    expect(status).toBe(1)
    expect(output).toContain('a cycle of imports passes through public module(s) A.ts, B.ts')
    expect(output).not.toContain('LogEvent.ts, ')
  })

  it('fails on packages that import each other', () => {
    const { status, output } = run(
      workspace(
        { ...deps, core: [], topology: ['core', 'sinks'] },
        { ...clean(), 'topology/src/x.ts': "import '@ackline/sinks'\n" },
      ),
    )
    expect(status).toBe(1)
    expect(output).toContain('packages import each other in a cycle: sinks, topology')
  })

  it('passes the repository itself', () => {
    const { status, output } = run(fileURLToPath(new URL('..', import.meta.url)))
    expect(output).toContain('dependency check passed')
    expect(status).toBe(0)
  })
})
