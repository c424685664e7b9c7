// What declaring options as schemas costs `build()`: a topology of 50 components (10 sources,
// 20 transforms, 20 sinks, every one with options, most with builder options too) built over and
// over, and, apart, the components' own `validate()` calls over the same components.
//
// Side by side in one run: set ACKLINE_BENCH_BEFORE to a git revision (for example the commit
// before the options schemas, `ACKLINE_BENCH_BEFORE=e062b67 pnpm bench build`) and that
// revision's packages are extracted to a temporary directory and measured by the same code,
// alternating child processes with the working tree's. Without it, only the working tree runs.
// Run: pnpm bench build   (ACKLINE_BENCH_BUILDS and ACKLINE_BENCH_ROUNDS override the sizes)

import { execFileSync, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable, Writable } from 'node:stream'
import { fileURLToPath, pathToFileURL } from 'node:url'

const BUILDS = Number(process.env.ACKLINE_BENCH_BUILDS ?? 400)
const ROUNDS = Number(process.env.ACKLINE_BENCH_ROUNDS ?? 5)
const PACKAGES = ['core', 'topology', 'buffers', 'sources', 'sinks', 'transforms']

interface Measurement {
  /** Median microseconds of one `build()` (declarations included). */
  readonly buildUs: number
  /** Median microseconds of calling every component's `validate()` once. */
  readonly validateUs: number
  readonly components: number
}

/** Child: loads the packages under `root` (never the working tree's by accident) and measures. */
async function child(root: string): Promise<void> {
  const load = <T>(pkg: string): Promise<T> =>
    import(pathToFileURL(join(root, 'packages', pkg, 'src', 'index.ts')).href) as Promise<T>
  const topology = await load<typeof import('@ackline/topology')>('topology')
  const sources = await load<typeof import('@ackline/sources')>('sources')
  const sinks = await load<typeof import('@ackline/sinks')>('sinks')
  const transforms = await load<typeof import('@ackline/transforms')>('transforms')

  const stream = new Writable({ write: (_chunk, _encoding, done) => done() })
  // The stdin source reads with `for await`: it refuses an input that is no readable stream.
  const input = new Readable({ read() {} })
  const keep = (): boolean => true
  const sourceList = Array.from({ length: 10 }, (_, i) =>
    i < 8
      ? sources.generator({ count: 10, batchSize: 5, ratePerSecond: 100 })
      : sources.stdin({ input, maxBatchLines: 100 }),
  )
  const transformList = Array.from({ length: 20 }, (_, i) => {
    switch (i % 5) {
      case 0:
        return transforms.filter(keep, { dropStatus: 'rejected' })
      case 1:
        return transforms.remap(() => undefined, { dropStatus: 'delivered' })
      case 2:
        return transforms.dedupe({ fields: ['id', 'host'], cacheSize: 100 })
      case 3:
        return transforms.reduce({ groupBy: ['k'], maxEvents: 10, windowMs: 1000, merge: { n: 'sum' } })
      default:
        return transforms.sample({ rate: 2, keyField: 'id' })
    }
  })
  const sinkList = Array.from({ length: 20 }, (_, i) =>
    i % 3 === 0
      ? sinks.blackhole()
      : i % 3 === 1
        ? sinks.memory({ outcome: () => 'delivered' })
        : sinks.console({ stream, format: 'json' }),
  )
  const components = [...sourceList, ...transformList, ...sinkList]

  const build = (): void => {
    const builder = new topology.TopologyBuilder<string>({
      acknowledgements: true,
      ackTimeoutMs: 30_000,
      onWarning: () => {},
    })
    sourceList.forEach((source, i) => {
      builder.source(`s${i}`, source)
    })
    transformList.forEach((transform, i) => {
      builder.transform(
        `t${i}`,
        [`s${i % 10}`],
        transform,
        i % 2 === 0 ? { buffer: { maxEvents: 100, whenFull: 'drop_newest', droppedStatus: 'rejected' } } : {},
      )
    })
    sinkList.forEach((sink, i) => {
      builder.sink(`k${i}`, [`t${i}`], sink, {
        acknowledgements: i % 4 !== 0,
        buffer: { maxEvents: 50 },
        retry: { attempts: 5, initialBackoffMs: 10, maxBackoffMs: 100, multiplier: 2 },
      })
    })
    builder.build()
  }
  const validateAll = (): void => {
    for (const component of components) component.validate?.()
  }

  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  const time = (fn: () => void, times: number): number => {
    const start = process.hrtime.bigint()
    for (let i = 0; i < times; i++) fn()
    return Number(process.hrtime.bigint() - start) / 1000 / times
  }
  time(build, BUILDS) // warm up: compiled code, zod's compiled parsers
  time(validateAll, BUILDS)
  const builds: number[] = []
  const validates: number[] = []
  for (let r = 0; r < 5; r++) {
    builds.push(time(build, BUILDS))
    validates.push(time(validateAll, BUILDS))
  }
  const result: Measurement = {
    buildUs: median(builds),
    validateUs: median(validates),
    components: components.length,
  }
  process.stdout.write(JSON.stringify(result))
}

/** Extracts `revision`'s packages to a temporary directory that resolves `@ackline/*` to them. */
function extract(revision: string, repo: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'ackline-bench-before-'))
  const archive = execFileSync('git', ['-C', repo, 'archive', revision, 'packages'], {
    maxBuffer: 1 << 28,
  })
  execFileSync('tar', ['-x', '-C', dir], { input: archive })
  const modules = join(dir, 'node_modules')
  mkdirSync(join(modules, '@ackline'), { recursive: true })
  for (const pkg of PACKAGES) symlinkSync(join(dir, 'packages', pkg), join(modules, '@ackline', pkg))
  // Third-party dependencies: the working tree's copies (the revision's lockfile may differ; say so).
  const linked = new Set<string>()
  for (const pkg of PACKAGES) {
    const own = join(repo, 'packages', pkg, 'node_modules')
    let names: string[] = []
    try {
      names = readdirSync(own).filter((n) => !n.startsWith('.') && !n.startsWith('@'))
    } catch {
      continue
    }
    for (const name of names) {
      if (linked.has(name)) continue
      linked.add(name)
      symlinkSync(realpathSync(join(own, name)), join(modules, name))
    }
  }
  return dir
}

function measure(root: string): Measurement {
  const run = spawnSync(
    process.execPath,
    [
      '--expose-gc',
      '--conditions=source',
      '--import',
      'tsx',
      fileURLToPath(import.meta.url),
      '--child',
      root,
    ],
    { cwd: repoRoot, encoding: 'utf8', maxBuffer: 1 << 24 },
  )
  if (run.status !== 0) throw new Error(`the child for ${root} failed:\n${run.stderr}`)
  return JSON.parse(run.stdout) as Measurement
}

const repoRoot = fileURLToPath(new URL('../../..', import.meta.url))

if (process.argv[2] === '--child') {
  await child(process.argv[3]!)
} else {
  const before = process.env.ACKLINE_BENCH_BEFORE
  const beforeRoot = before === undefined ? undefined : extract(before, repoRoot)
  const now: Measurement[] = []
  const then: Measurement[] = []
  try {
    for (let round = 0; round < ROUNDS; round++) {
      // Alternate which goes first, so neither always runs on a cooler or warmer machine.
      if (beforeRoot !== undefined && round % 2 === 1) then.push(measure(beforeRoot))
      now.push(measure(repoRoot))
      if (beforeRoot !== undefined && round % 2 === 0) then.push(measure(beforeRoot))
    }
  } finally {
    if (beforeRoot !== undefined) rmSync(beforeRoot, { recursive: true, force: true })
  }
  const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  const row = (name: string, ms: Measurement[]): string =>
    `| ${name} | ${med(ms.map((m) => m.buildUs)).toFixed(1)} | ${med(ms.map((m) => m.validateUs)).toFixed(1)} | ${ms.map((m) => m.buildUs.toFixed(0)).join(', ')} |`
  console.log(
    `build() of ${now[0]!.components} components, ${BUILDS} builds per sample, 5 samples per process, ${ROUNDS} processes each (medians)\n`,
  )
  console.log("| code | build() µs | components' validate() µs | build() µs per process |")
  console.log('| --- | ---: | ---: | --- |')
  console.log(row('working tree', now))
  if (before !== undefined) {
    console.log(row(`before (${before})`, then))
    const ratio = med(now.map((m) => m.buildUs)) / med(then.map((m) => m.buildUs))
    console.log(`\nbuild(): working tree / before = ${ratio.toFixed(2)}`)
  }
}
