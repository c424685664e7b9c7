// The topology knows buffers only by its own contract (issue 8): it neither depends on
// @ackline/buffers nor imports any package but core, so a third party can add a buffer kind
// without editing it.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const root = join(import.meta.dirname, '..')

const sources = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sources(join(dir, entry.name))
      : entry.name.endsWith('.ts')
        ? [join(dir, entry.name)]
        : [],
  )

describe('the dependencies of @ackline/topology', () => {
  it('declares no workspace package but core', () => {
    const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>
    }
    const workspace = Object.keys(manifest.dependencies ?? {}).filter((name) => name.startsWith('@ackline/'))
    expect(workspace).toEqual(['@ackline/core'])
  })

  it('imports no workspace package but core in its sources', () => {
    const files = sources(join(root, 'src'))
    expect(files.length).toBeGreaterThan(10)
    const imported = new Set<string>()
    for (const file of files) {
      // Code lines only: doc comments name @ackline/buffers in examples.
      const code = readFileSync(file, 'utf8')
        .split('\n')
        .filter((line) => !/^\s*(\*|\/\/|\/\*)/.test(line))
        .join('\n')
      for (const match of code.matchAll(/(?:from\s*|import\s*\(?\s*)'(@ackline\/[^'/]+)/g))
        imported.add(match[1]!)
    }
    expect([...imported]).toEqual(['@ackline/core'])
  })
})
