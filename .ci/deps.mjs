#!/usr/bin/env node
// The dependency check: fails when a package imports what it must not, or when a cycle of imports
// (type-only imports count) passes through a public module.
//
//   node .ci/deps.mjs [root]     (root defaults to the repository; the test points it at fixtures)
//
// Rules, over every `packages/<pkg>/src/**/*.ts` (tests and benches may import more):
// - dependencies point one way: core imports no @ackline package; the topology does not import
//   the buffers (they plug into it); sources and sinks know nothing of each other;
// - a package imports an @ackline package only if its package.json lists it in `dependencies` or
//   `peerDependencies`, and never another package's `internal/` modules nor its files by a relative
//   path;
// - a module never imports its own package's barrel (`index.ts`);
// - no two packages import each other, directly or through others;
// - no cycle of imports inside a package, type-only imports included, passes through a public
//   module (one outside `src/internal/`): such a cycle makes the load order, and what a reader
//   must understand first, depend on which module a user imports first. One kind of edge does not
//   count: a type-only import from an internal module of the public types it implements.
// Imports are read with TypeScript's own pre-processor, so comments and strings never count.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const ts = createRequire(join(here, '..', 'package.json'))('typescript')

/**
 * Violations allowed for now, each with the reason and who removes it, matched by rule, package
 * and key (the edge `from → to`, or a cycle's public modules). A known violation that no longer
 * occurs is reported too, so this list cannot go stale.
 */
const KNOWN = [
  // Core's model refers to itself: a notifier attaches events, an event's metadata holds
  // finalizers, a finalizer points at its notifier; a receiver is made by the batch state it
  // reads. Only types close these cycles; breaking them means splitting core's model into
  // interface modules, which issue 8's section 1 leaves to core's owner.
  {
    rule: 'public-cycle',
    from: 'core',
    key: 'BatchNotifier.ts, EventFinalizer.ts, EventFinalizers.ts, EventMetadata.ts, LogEvent.ts',
  },
  { rule: 'public-cycle', from: 'core', key: 'BatchStatusReceiver.ts' },
]

/** Package pairs that must never depend on each other, in this direction, and why. */
const FORBIDDEN = [
  { from: 'core', to: '*', why: 'core knows nothing of topologies or plugins' },
  { from: 'topology', to: 'buffers', why: 'buffers plug into the topology, not the reverse' },
  { from: 'sources', to: 'sinks', why: 'sources and sinks know nothing of each other' },
  { from: 'sinks', to: 'sources', why: 'sources and sinks know nothing of each other' },
]

const SCOPE = '@ackline/'

/** Every `.ts` file below `dir`, as absolute paths. */
function tsFiles(dir) {
  if (!existsSync(dir)) return []
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return tsFiles(path)
    return name.endsWith('.ts') && !name.endsWith('.d.ts') ? [path] : []
  })
}

/**
 * The specifiers `file` imports or re-exports, static or dynamic, each with whether every import of
 * it is type-only (`import type`, `export type`, `typeof import(...)`, or only `type` names).
 */
function importsOf(file) {
  const text = readFileSync(file, 'utf8')
  const specifiers = ts.preProcessFile(text, true, true).importedFiles.map((f) => f.fileName)
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false)
  const valueUses = new Map()
  const note = (specifier, typeOnly) => {
    if (!typeOnly) valueUses.set(specifier, true)
    else if (!valueUses.has(specifier)) valueUses.set(specifier, false)
  }
  const visit = (node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause
      const bindings = clause?.namedBindings
      const typeOnly =
        clause !== undefined &&
        (clause.isTypeOnly ||
          (clause.name === undefined &&
            bindings !== undefined &&
            ts.isNamedImports(bindings) &&
            bindings.elements.length > 0 &&
            bindings.elements.every((e) => e.isTypeOnly)))
      note(node.moduleSpecifier.text, typeOnly)
    } else if (
      ts.isExportDeclaration(node) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      const clause = node.exportClause
      const typeOnly =
        node.isTypeOnly ||
        (clause !== undefined &&
          ts.isNamedExports(clause) &&
          clause.elements.length > 0 &&
          clause.elements.every((e) => e.isTypeOnly))
      note(node.moduleSpecifier.text, typeOnly)
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    ) {
      note(node.argument.literal.text, true)
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] !== undefined &&
      ts.isStringLiteral(node.arguments[0])
    ) {
      note(node.arguments[0].text, false)
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  // What the pre-processor found and the walk did not classify counts as a value import.
  return [...new Set(specifiers)].map((specifier) => ({
    specifier,
    typeOnly: valueUses.get(specifier) === false,
  }))
}

/** The `.ts` file a relative specifier names (`./X.js` → `X.ts`), or undefined. */
function resolveRelative(from, specifier) {
  const target = resolve(dirname(from), specifier)
  const candidates = [target.replace(/\.js$/, '.ts'), `${target}.ts`, join(target, 'index.ts'), target]
  return candidates.find((c) => c.endsWith('.ts') && existsSync(c))
}

/** The cycles of a directed graph (Tarjan's strongly connected components of more than one node, or a self-loop). */
function cycles(nodes, edges) {
  let index = 0
  const stack = []
  const state = new Map()
  const found = []
  const visit = (node) => {
    const s = { index, low: index, onStack: true }
    index++
    state.set(node, s)
    stack.push(node)
    for (const next of edges.get(node) ?? []) {
      const t = state.get(next)
      if (t === undefined) {
        visit(next)
        s.low = Math.min(s.low, state.get(next).low)
      } else if (t.onStack) s.low = Math.min(s.low, t.index)
    }
    if (s.low !== s.index) return
    const component = []
    let member
    do {
      member = stack.pop()
      state.get(member).onStack = false
      component.push(member)
    } while (member !== node)
    if (component.length > 1 || (edges.get(node) ?? new Set()).has(node)) found.push(component.sort())
  }
  for (const node of nodes) if (!state.has(node)) visit(node)
  return found
}

/** Every violation in the workspace at `root`, each `{ rule, from, to, file, message }`. */
export function check(root) {
  const packagesDir = join(root, 'packages')
  const packages = readdirSync(packagesDir).filter((name) =>
    existsSync(join(packagesDir, name, 'package.json')),
  )
  const byName = new Map()
  for (const dir of packages) {
    const manifest = JSON.parse(readFileSync(join(packagesDir, dir, 'package.json'), 'utf8'))
    byName.set(manifest.name, dir)
  }
  const violations = []
  /** Package → the @ackline packages its source imports, for the check of cycles between packages. */
  const packageEdges = new Map(packages.map((dir) => [dir, new Set()]))
  for (const dir of packages) {
    const pkgRoot = join(packagesDir, dir)
    const src = join(pkgRoot, 'src')
    const manifest = JSON.parse(readFileSync(join(pkgRoot, 'package.json'), 'utf8'))
    const declared = new Set([
      ...Object.keys(manifest.dependencies ?? {}),
      ...Object.keys(manifest.peerDependencies ?? {}),
    ])
    const barrel = join(src, 'index.ts')
    const internal = join(src, 'internal') + sep
    const files = tsFiles(src)
    const edges = new Map()
    for (const file of files) {
      const where = relative(root, file)
      const local = new Set()
      edges.set(file, local)
      const add = (rule, to, message) =>
        violations.push({ rule, from: dir, key: `${dir} → ${to}`, file: where, message })
      for (const { specifier, typeOnly } of importsOf(file)) {
        if (specifier.startsWith('.')) {
          const target = resolveRelative(file, specifier)
          if (target === undefined) continue // the typecheck reports an import that resolves to nothing
          if (!target.startsWith(src + sep)) {
            const to = relative(packagesDir, target).split(sep)[0]
            add('relative-escape', to, `imports ${specifier}, outside its package: import it by name`)
            continue
          }
          if (target === barrel && file !== barrel)
            add('own-barrel', dir, `imports its own barrel (${specifier})`)
          // An internal module may import the public types it implements: that edge closes no cycle.
          if (!(typeOnly && file.startsWith(internal) && !target.startsWith(internal))) local.add(target)
          continue
        }
        if (specifier === manifest.name || specifier.startsWith(`${manifest.name}/`)) {
          add('own-barrel', dir, `imports its own package by name (${specifier})`)
          continue
        }
        if (!specifier.startsWith(SCOPE)) continue
        const name = specifier.split('/').slice(0, 2).join('/')
        const to = byName.get(name) ?? name.slice(SCOPE.length)
        packageEdges.get(dir).add(to)
        for (const rule of FORBIDDEN) {
          if (rule.from === dir && (rule.to === '*' || rule.to === to)) {
            add('forbidden-edge', to, `imports ${specifier}: ${dir} must not depend on ${to} (${rule.why})`)
          }
        }
        if (!declared.has(name)) {
          add('undeclared', to, `imports ${name}, which ${dir}/package.json does not list in dependencies`)
        }
        if (specifier.slice(name.length).startsWith('/internal')) {
          add('internal', to, `imports ${specifier}: another package's internals are not public`)
        }
      }
    }
    // A dependency in package.json that the source never imports is not an error (a peer may be
    // needed at run time only), but a forbidden one is, even if unused.
    for (const name of declared) {
      if (!name.startsWith(SCOPE)) continue
      const to = byName.get(name) ?? name.slice(SCOPE.length)
      for (const rule of FORBIDDEN) {
        if (rule.from === dir && (rule.to === '*' || rule.to === to)) {
          violations.push({
            rule: 'forbidden-edge',
            from: dir,
            key: `${dir} → ${to}`,
            file: relative(root, join(pkgRoot, 'package.json')),
            message: `lists ${name}: ${dir} must not depend on ${to} (${rule.why})`,
          })
        }
      }
    }
    for (const cycle of cycles(files, edges)) {
      const publicMembers = cycle.filter((file) => !file.startsWith(internal))
      if (publicMembers.length === 0) continue
      violations.push({
        rule: 'public-cycle',
        from: dir,
        key: publicMembers.map((f) => relative(src, f)).join(', '),
        file: relative(root, publicMembers[0]),
        message: `a cycle of imports passes through public module(s) ${publicMembers
          .map((f) => relative(src, f))
          .join(', ')}: ${cycle.map((f) => relative(src, f)).join(' → ')}`,
      })
    }
  }
  for (const cycle of cycles(packages, packageEdges)) {
    violations.push({
      rule: 'package-cycle',
      from: cycle[0],
      key: cycle.join(', '),
      file: 'packages',
      message: `packages import each other in a cycle: ${cycle.join(', ')}`,
    })
  }
  return violations
}

const same = (k, v) => k.rule === v.rule && k.from === v.from && k.key === v.key

function main() {
  const repository = resolve(here, '..')
  const root = resolve(process.argv[2] ?? repository)
  // The known violations are this repository's; any other tree (a test's fixture) gets none.
  const allowed = root === repository ? KNOWN : []
  const isKnown = (v) => allowed.some((k) => same(k, v))
  const violations = check(root)
  const known = violations.filter(isKnown)
  const errors = violations.filter((v) => !isKnown(v))
  const stale = allowed.filter((k) => !violations.some((v) => same(k, v)))
  for (const v of known) console.log(`known  ${v.file}: ${v.message}`)
  for (const v of errors) console.error(`error  ${v.file}: ${v.message}`)
  for (const k of stale) {
    console.error(
      `stale  the known ${k.rule} (${k.from}: ${k.key}) no longer occurs: remove it from KNOWN in .ci/deps.mjs`,
    )
  }
  const failed = errors.length + stale.length
  console.log(
    failed === 0
      ? `dependency check passed (${known.length} known violation(s) allowed)`
      : `dependency check failed: ${errors.length} violation(s), ${stale.length} stale known violation(s)`,
  )
  process.exit(failed === 0 ? 0 : 1)
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main()
