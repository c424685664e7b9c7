#!/usr/bin/env node
// Launcher of the `ackline-buffer` command: runs the built CLI (`dist/cli.js`, made by
// `pnpm typecheck`). In a checkout that was never built, it says how to run it from source.
import { pathToFileURL } from 'node:url'

const cli = new URL('../dist/cli.js', import.meta.url)
try {
  await import(cli.href)
} catch (error) {
  if (error?.code !== 'ERR_MODULE_NOT_FOUND' || !String(error.message).includes(cli.pathname)) throw error
  const source = new URL('../src/cli.ts', import.meta.url)
  console.error(
    `ackline-buffer: ${cli.pathname} is not built yet. Build it with \`pnpm typecheck\` (tsc -b), or run the source:\n` +
      `  npx tsx --conditions=source ${pathToFileURL(source.pathname).pathname} <buffer-dir> [--repair]`,
  )
  process.exit(2)
}
