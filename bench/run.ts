// Runs every benchmark of the workspace (`packages/*/bench/*.bench.ts`), each in a process of its
// own so one cannot warm up or pollute the heap of another. Each prints its own report; the
// figures that matter are the ratios within one report, measured side by side.
//   pnpm bench                 every benchmark
//   pnpm bench core            only those whose path contains "core"
import { spawnSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'

const root = new URL('..', import.meta.url).pathname
const filter = process.argv[2]
const files = readdirSync(join(root, 'packages'))
  .flatMap((pkg) => {
    try {
      return readdirSync(join(root, 'packages', pkg, 'bench'))
        .filter((f) => f.endsWith('.bench.ts'))
        .map((f) => join('packages', pkg, 'bench', f))
    } catch {
      return []
    }
  })
  .filter((f) => filter === undefined || f.includes(filter))
  .sort()

let failed = 0
for (const file of files) {
  console.log(`\n## ${file}\n`)
  const run = spawnSync(process.execPath, ['--expose-gc', '--conditions=source', '--import', 'tsx', file], {
    cwd: root,
    stdio: 'inherit',
  })
  if (run.status !== 0) failed++
}
if (files.length === 0) console.log('no benchmark matched')
process.exit(failed === 0 ? 0 : 1)
