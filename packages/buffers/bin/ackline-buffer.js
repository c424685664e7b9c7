#!/usr/bin/env node
// Launcher of the `ackline-buffer` command: runs the built CLI (`dist/cli.js`, made by
// `pnpm typecheck`). In a checkout that was never built, it says how to run it from source.
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const cli = new URL('../dist/cli.js', import.meta.url)
try {
  await import(cli.href)
} catch (error) {
  // Not built is dist/cli.js missing, asked of the file system: the error's message names it also
  // as the importer when something it imports is missing (a dependency not installed, a build cut
  // short), which is that error, not this one. (A path, not the URL's: a space is %20 in a URL.)
  const path = fileURLToPath(cli)
  if (error?.code !== 'ERR_MODULE_NOT_FOUND' || existsSync(path)) throw error
  const source = fileURLToPath(new URL('../src/cli.ts', import.meta.url))
  console.error(
    `ackline-buffer: ${path} is not built yet. Build it with \`pnpm typecheck\` (tsc -b), or run the source:\n` +
      `  npx tsx --conditions=source ${source} <buffer-dir> [--repair]`,
  )
  process.exit(2)
}
