#!/usr/bin/env node
// The doc check: fails when a name a package exports, or a public member of an exported class or
// interface (an option, a counter, a method), has no doc comment. The brief: every exported name
// has a doc comment that states its contract, and every option is documented.
//
//   node .ci/docs.mjs [root]     (root defaults to the repository; the test points it at fixtures)
//   pnpm check-docs              (as CI runs it)
//
// What counts: the names `packages/<pkg>/src/index.ts` exports (followed through re-exports), and
// for each exported class, interface or type alias of an object type, its own public members
// (not private, `#private`, `@internal`, or inherited). A member documented where it is declared
// first (an interface a class implements, a base it overrides) counts as documented. An
// overload set needs one comment. A declaration merged from several (a class and a namespace, a
// const and a type of one name) needs one comment on any of them.
import { existsSync, readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const ts = createRequire(join(here, '..', 'package.json'))('typescript')
const root = resolve(process.argv[2] ?? join(here, '..'))

const entries = readdirSync(join(root, 'packages'))
  .map((pkg) => join(root, 'packages', pkg, 'src', 'index.ts'))
  .filter((file) => existsSync(file))

const program = ts.createProgram(entries, {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  strict: true,
  noEmit: true,
  skipLibCheck: true,
  customConditions: ['source'],
})
const checker = program.getTypeChecker()

/** Whether a declaration carries a doc comment (`/** … *\/` with text or tags). */
function documented(declaration) {
  const docs = ts.getJSDocCommentsAndTags(declaration)
  if (docs.length > 0) return true
  // A variable's comment sits on its statement.
  if (ts.isVariableDeclaration(declaration)) {
    const statement = declaration.parent?.parent
    return statement !== undefined && ts.getJSDocCommentsAndTags(statement).length > 0
  }
  return false
}

const internal = (declaration) => ts.getJSDocTags(declaration).some((tag) => tag.tagName.text === 'internal')

function where(declaration) {
  const file = declaration.getSourceFile()
  const { line } = file.getLineAndCharacterOfPosition(declaration.getStart())
  return `${relative(root, file.fileName)}:${line + 1}`
}

const problems = []
const seen = new Set()

/** A member is documented when any declaration of it, or of what it overrides or implements, is. */
function memberDocumented(owner, symbol) {
  if ((symbol.declarations ?? []).some(documented)) return true
  const name = symbol.getName()
  const type = checker.getDeclaredTypeOfSymbol(owner)
  const bases = []
  for (const declaration of owner.declarations ?? []) {
    for (const clause of declaration.heritageClauses ?? []) {
      for (const typeNode of clause.types) bases.push(checker.getTypeAtLocation(typeNode))
    }
  }
  if (type.isClassOrInterface?.()) bases.push(...(checker.getBaseTypes(type) ?? []))
  return bases.some((base) => {
    const member = base.getProperty(name)
    return member !== undefined && (member.declarations ?? []).some(documented)
  })
}

function checkMembers(pkg, exportName, symbol) {
  const declarations = symbol.declarations ?? []
  const containers = declarations.filter(
    (d) =>
      ts.isClassDeclaration(d) ||
      ts.isInterfaceDeclaration(d) ||
      (ts.isTypeAliasDeclaration(d) && ts.isTypeLiteralNode(d.type)),
  )
  for (const container of containers) {
    const members = ts.isTypeAliasDeclaration(container) ? container.type.members : container.members
    for (const member of members) {
      if (ts.isConstructorDeclaration(member) || ts.isIndexSignatureDeclaration(member)) continue
      if (member.name === undefined || ts.isPrivateIdentifier(member.name)) continue
      const modifiers = ts.canHaveModifiers(member) ? (ts.getModifiers(member) ?? []) : []
      if (
        modifiers.some(
          (m) => m.kind === ts.SyntaxKind.PrivateKeyword || m.kind === ts.SyntaxKind.ProtectedKeyword,
        )
      )
        continue
      if (internal(member)) continue
      const name = member.name.getText()
      if (name.startsWith('_')) continue
      const key = `${where(container)}#${name}`
      if (seen.has(key)) continue
      seen.add(key)
      const memberSymbol = checker.getSymbolAtLocation(member.name)
      if (memberSymbol !== undefined && memberDocumented(symbol, memberSymbol)) continue
      if (memberSymbol === undefined && documented(member)) continue
      problems.push(`${pkg}: ${exportName}.${name} (${where(member)}) has no doc comment`)
    }
  }
}

for (const entry of entries) {
  const pkg = relative(join(root, 'packages'), entry).split(/[\\/]/)[0]
  const source = program.getSourceFile(entry)
  const moduleSymbol = source && checker.getSymbolAtLocation(source)
  if (moduleSymbol === undefined) {
    problems.push(`${pkg}: ${relative(root, entry)} could not be read`)
    continue
  }
  for (const exported of checker.getExportsOfModule(moduleSymbol)) {
    const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported
    const declarations = (symbol.declarations ?? []).filter((d) => !ts.isSourceFile(d))
    if (declarations.length === 0) continue
    if (declarations.some(internal)) continue
    if (!declarations.some(documented)) {
      problems.push(`${pkg}: ${exported.getName()} (${where(declarations[0])}) has no doc comment`)
    }
    checkMembers(pkg, exported.getName(), symbol)
  }
}

if (problems.length > 0) {
  console.error(
    `${problems.length} exported name(s) without a doc comment:\n${problems.map((p) => `  ${p}`).join('\n')}`,
  )
  process.exit(1)
}
console.log(
  `docs: every exported name of ${entries.length} packages, and every public member, has a doc comment`,
)
