// The doc check (.ci/docs.mjs), run as CI runs it, on fixture workspaces written here.
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'

const script = fileURLToPath(new URL('../.ci/docs.mjs', import.meta.url))
const roots: string[] = []

afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true })
})

/** A workspace of one package `a` with these files under `packages/a/src/`. */
function workspace(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'ackline-docs-'))
  roots.push(root)
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, 'packages', 'a', 'src', path)), { recursive: true })
    writeFileSync(join(root, 'packages', 'a', 'src', path), text)
  }
  return root
}

function run(root: string): { status: number | null; output: string } {
  const child = spawnSync(process.execPath, [script, root], { encoding: 'utf8' })
  return { status: child.status, output: child.stdout + child.stderr }
}

/** Every kind of declaration the check reads, each documented, some only where it is declared first. */
const documented = {
  'index.ts': [
    "export { Base, Thing, make, Pair, Merged, type Shape, type Options } from './thing.js'",
    "export * from './more.js'",
  ].join('\n'),
  'thing.ts': `
/** A base. */
export interface Base {
  /** Its size. */
  readonly size: number
  /** Runs it. */
  run(): void
}
/** A thing. */
export class Thing implements Base {
  readonly size = 1
  run(): void {}
  /** @internal */
  secret = 1
  private hidden = 2
  #own = 3
  _conventional = 4
  /** Its name. */
  get name(): string { return String(this.#own + this.hidden) }
}
/** Makes one (one comment for the overload set). */
export function make(a: string): Thing
export function make(a: number): Thing
export function make(_a: string | number): Thing { return new Thing() }
/** A pair. */
export const Pair = { of: (a: number) => [a, a] }
/** Merged: a const and a type of one name need one comment. */
export const Merged = 1
export type Merged = number
/** A shape. */
export type Shape = {
  /** Its width. */
  readonly width: number
}
/** Options. */
export interface Options extends Base {
  /** A flag. */
  readonly flag?: boolean
}
`,
  'more.ts': `
/** More. */
export const more = 1
/** An error. */
export class MoreError extends Error {
  /** Its class name. */
  override readonly name = 'MoreError'
}
`,
}

describe('the doc check', () => {
  it('passes when every exported name and public member has a doc comment, where it is declared first', () => {
    const { status, output } = run(workspace(documented))
    expect(output).toContain('has a doc comment')
    expect(status).toBe(0)
  })

  it('names each exported name and each public member without a doc comment, with its file and line', () => {
    const { status, output } = run(
      workspace({
        ...documented,
        'more.ts': `
export const more = 1
/** An error. */
export class MoreError extends Error {
  override readonly name = 'MoreError'
  readonly code = 'X'
}
/** Settings. */
export interface Settings {
  readonly path: string
  /** Documented. */
  readonly mode: string
  check(): void
}
`,
      }),
    )
    expect(status).toBe(1)
    const lines = output.trim().split('\n')
    expect(lines[0]).toBe('5 exported name(s) without a doc comment:')
    expect(lines.slice(1).map((l) => l.trim())).toEqual(
      expect.arrayContaining([
        'a: more (packages/a/src/more.ts:2) has no doc comment',
        'a: MoreError.name (packages/a/src/more.ts:5) has no doc comment',
        'a: MoreError.code (packages/a/src/more.ts:6) has no doc comment',
        'a: Settings.path (packages/a/src/more.ts:10) has no doc comment',
        'a: Settings.check (packages/a/src/more.ts:13) has no doc comment',
      ]),
    )
  })
})
