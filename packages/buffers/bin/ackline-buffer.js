#!/usr/bin/env node
// Launcher of the `ackline-buffer` command: runs the built CLI (`dist/cli.js`, made by
// `pnpm typecheck`). In a checkout that was never built, it says how to run it from source.
import { fileURLToPath } from 'node:url'

const cli = new URL('../dist/cli.js', import.meta.url)
try {
  await import(cli.href)
} catch (error) {
  // Compared as file paths: a URL's path is percent-encoded (a space is %20), the error's message
  // is not, so a checkout under a directory with a space got Node's stack trace instead of this.
  const path = fileURLToPath(cli)
  if (error?.code !== 'ERR_MODULE_NOT_FOUND' || !String(error.message).includes(path)) throw error
  const source = fileURLToPath(new URL('../src/cli.ts', import.meta.url))
  console.error(
    `ackline-buffer: ${path} is not built yet. Build it with \`pnpm typecheck\` (tsc -b), or run the source:\n` +
      `  npx tsx --conditions=source ${source} <buffer-dir> [--repair]`,
  )
  process.exit(2)
}
