/**
 * Turns what a zod schema found wrong with a value into {@link ConfigIssue}s of one style:
 * `must be <expected>, got <got>`, one issue per field, every field at once.
 *
 * The expected text is derived from the schema at the issue's path (through its JSON Schema, the
 * same description a config file is checked against), so it says the whole rule ("an integer of at
 * least 1"), not only the part that failed. Values only code can give (functions, streams) carry
 * their expected text in {@link codeOnly}.
 */
import { z } from 'zod'
import type { ConfigIssue } from '../ConfigIssue.js'
import { fastCheck } from './fastCheck.js'
import { hideUrlPasswords, hideUrlPasswordsInValue, isSecretName } from './hideSecrets.js'
import { snapshotOptions } from './snapshotOptions.js'

// Keyed by definition, not by schema: `.describe()` and `.meta()` clone a schema but share its definition.
const codeOnlyDefinitions = new WeakMap<object, string>()

/** Schemas of values only code can give, with what they must be in words. */
export const codeOnly = {
  add(schema: z.core.$ZodType, expected: string): void {
    codeOnlyDefinitions.set(schema._zod.def, expected)
  },
  /** What a value of `schema` must be, when `schema` is code-only (or a clone of one). */
  expected(schema: z.core.$ZodType): string | undefined {
    return codeOnlyDefinitions.get(schema._zod.def)
  },
} as const

/** The field of an issue about the options as a whole. */
export const WHOLE = '(options)'

/**
 * Every problem of `value` under `schema`, one per field, in the order the schema found them.
 * `loose: 'declared'` reads only the declared keys of a loose object (see {@link snapshotOptions}).
 */
export function issuesOf(
  schema: z.ZodType,
  value: unknown,
  loose: 'all' | 'declared' = 'all',
): ConfigIssue[] {
  // Checked as read once: a getter read again could say otherwise, or throw where it did not.
  const read = snapshotOptions(schema, value, undefined, loose)
  const byField = new Map<string, ConfigIssue>()
  for (const issue of read.issues) if (!byField.has(issue.field)) byField.set(issue.field, issue)
  try {
    for (const issue of checked(schema, read.value))
      if (!byField.has(issue.field)) byField.set(issue.field, issue)
  } catch (error) {
    // What the copy kept as given (a record's values, a union's) threw when zod read it.
    if (!byField.has(WHOLE))
      byField.set(WHOLE, issueAt(schema, [], `options that threw when read: ${safeText(error)}`))
  }
  return [...byField.values()]
}

/** The issues of `value`, read once already (see {@link issuesOf}). */
function checked(schema: z.ZodType, value: unknown): ConfigIssue[] {
  // Valid options, the usual case, are told by a plain predicate; zod runs to word the issues.
  if (fastCheck(schema)?.(value) === true) return []
  const result = schema.safeParse(value)
  if (result.success) return []
  const byField = new Map<string, ConfigIssue>()
  for (const issue of result.error.issues) {
    for (const found of toConfigIssues(schema, value, issue)) {
      if (!byField.has(found.field)) byField.set(found.field, found)
    }
  }
  return [...byField.values()]
}

function toConfigIssues(root: z.ZodType, value: unknown, issue: z.core.$ZodIssue): ConfigIssue[] {
  const path = issue.path as readonly PropertyKey[]
  if (issue.code === 'unrecognized_keys') {
    const parent = schemaAt(root, path)
    const known = parent === undefined ? [] : Object.keys(objectShape(parent) ?? {})
    const expected = `absent: it is not an option (the options are ${known.join(', ') || 'none'})`
    const holder = valueAt(value, path) as Record<string, unknown> | undefined
    return issue.keys.map((key) => make([...path, key], expected, showAt([...path, key], holder?.[key])))
  }
  if (issue.code === 'invalid_key') {
    // A record's key broke its key schema: the key is what was given, the key rule what was expected.
    const key = path[path.length - 1]
    const inner = issue.issues[0]
    const keyType = defOf(unwrap(schemaAt(root, path.slice(0, -1)) ?? root)).keyType
    const expected =
      inner?.code === 'custom'
        ? inner.message
        : keyType === undefined
          ? issue.message
          : (expectedOf(keyType) ?? issue.message)
    return [make(path, `a key that is ${expected}`, show(key))]
  }
  const schema = schemaAt(root, path)
  const got = showAt(path, valueAt(value, path))
  if (schema === undefined) return [make(path, issue.message, got)]
  // A refinement's (or a code option's) message says what was expected; otherwise the schema does.
  const expected = issue.code === 'custom' ? issue.message : (expectedOf(schema) ?? 'a valid value')
  return [make(path, expected, got)]
}

/**
 * The issue of the field at `path` under `root`, whose value could not be read or checked: what
 * the schema expects there, and `got` as given (already in words).
 */
export function issueAt(root: z.ZodType, path: readonly PropertyKey[], got: string): ConfigIssue {
  const schema = schemaAt(root, path)
  return make(
    path,
    (schema === undefined ? undefined : expectedOf(schema)) ?? 'a valid value',
    clip(hideUrlPasswords(got)),
  )
}

/** What was thrown, as text; never throws (a `message` getter that throws, an object without a prototype). */
function safeText(error: unknown): string {
  try {
    const message = error instanceof Error ? error.message : error
    return String(message)
  } catch {
    return 'a value that cannot be converted to a string'
  }
}

function make(path: readonly PropertyKey[], expected: string, got: string): ConfigIssue {
  // The one message style; ConfigIssue.of writes the same for checks made by hand.
  return { field: fieldOf(path), expected, got, message: `must be ${expected}, got ${got}` }
}

/**
 * `retry.attempts`, `fields[1]`, `merge["http.status"]`, or {@link WHOLE} for the empty path. A key
 * that is empty or holds a dot or a bracket is written quoted in brackets: joined by a dot, the
 * record key `''` of `merge` read `merge.` and the key `'a.'` read `merge.a.`.
 */
function fieldOf(path: readonly PropertyKey[]): string {
  let field = ''
  for (const key of path) {
    if (typeof key === 'number') field += `[${key}]`
    else if (typeof key === 'string' && /^$|[.[\]]/.test(key)) field += `[${JSON.stringify(key)}]`
    else field += (field === '' ? '' : '.') + String(key)
  }
  return field === '' ? WHOLE : field
}

/** The fields of zod definitions that lead to inner schemas; the rest is not read here. */
export interface Def {
  readonly type: string
  readonly innerType?: z.ZodType
  readonly in?: z.ZodType
  readonly shape?: Record<string, z.ZodType>
  /** An object's schema of the keys its shape does not declare: `never` when strict, `unknown` when loose. */
  readonly catchall?: z.ZodType
  readonly element?: z.ZodType
  readonly keyType?: z.ZodType
  readonly valueType?: z.ZodType
  readonly options?: readonly z.ZodType[]
  readonly getter?: () => z.ZodType
}

export const defOf = (schema: z.ZodType): Def => schema._zod.def as unknown as Def

/** The schema without the wrappers that do not change what a value must be. */
export function unwrap(schema: z.ZodType): z.ZodType {
  let current = schema
  for (let depth = 0; depth < 32; depth++) {
    if (codeOnly.expected(current) !== undefined) return current
    const def = defOf(current)
    const next =
      def.innerType ?? (def.type === 'pipe' ? def.in : def.type === 'lazy' ? def.getter?.() : undefined)
    if (next === undefined) return current
    current = next
  }
  return current
}

function objectShape(schema: z.ZodType): Record<string, z.ZodType> | undefined {
  const def = defOf(unwrap(schema))
  return def.type === 'object' ? def.shape : undefined
}

/** The schema a value at `path` is checked against, when the path leads to one. */
function schemaAt(root: z.ZodType, path: readonly PropertyKey[]): z.ZodType | undefined {
  let schema: z.ZodType | undefined = root
  for (const key of path) {
    if (schema === undefined) return undefined
    const def = defOf(unwrap(schema))
    if (def.type === 'object') schema = def.shape?.[String(key)]
    else if (def.type === 'array') schema = def.element
    else if (def.type === 'record') schema = def.valueType
    else if (def.type === 'union')
      schema = def.options?.map((option) => schemaAt(option, [key])).find((s) => s !== undefined)
    else return undefined
  }
  return schema
}

function valueAt(value: unknown, path: readonly PropertyKey[]): unknown {
  let current = value
  for (const key of path) {
    if (typeof current !== 'object' || current === null) return undefined
    current = (current as Record<PropertyKey, unknown>)[key]
  }
  return current
}

/** What a value of `schema` must be, in words; `undefined` when the schema cannot say. */
function expectedOf(schema: z.ZodType): string | undefined {
  const inner = unwrap(schema)
  const code = codeOnly.expected(inner)
  if (code !== undefined) return code
  const type = defOf(inner).type
  if (type === 'function') return 'a function'
  if (type === 'custom' || type === 'any' || type === 'unknown') return undefined
  return words(z.toJSONSchema(inner, { io: 'input', unrepresentable: 'any' }) as JsonSchemaNode)
}

interface JsonSchemaNode {
  readonly type?: string | readonly string[]
  readonly enum?: readonly unknown[]
  readonly const?: unknown
  readonly anyOf?: readonly JsonSchemaNode[]
  readonly oneOf?: readonly JsonSchemaNode[]
  readonly minimum?: number
  readonly maximum?: number
  readonly exclusiveMinimum?: number
  readonly exclusiveMaximum?: number
  readonly minLength?: number
  readonly maxLength?: number
  readonly pattern?: string
  readonly format?: string
  readonly minItems?: number
  readonly maxItems?: number
  readonly items?: JsonSchemaNode
  readonly additionalProperties?: JsonSchemaNode | boolean
}

function words(node: JsonSchemaNode): string {
  const alternatives = node.anyOf ?? node.oneOf
  if (alternatives !== undefined) return [...new Set(alternatives.map(words))].join(' or ')
  if (node.enum !== undefined) return oneOf(node.enum.map(show))
  if ('const' in node) return show(node.const)
  if (Array.isArray(node.type)) return node.type.map((type) => words({ ...node, type })).join(' or ')
  switch (node.type) {
    case 'integer':
      return bounded(node, 'an integer', 'a positive integer', 'a non-negative integer', 1)
    case 'number':
      return bounded(node, 'a number', 'a positive number', 'a non-negative number', undefined)
    case 'string': {
      const format =
        node.format === undefined ? undefined : (FORMATS[node.format] ?? `a ${node.format} string`)
      if (format !== undefined) return format
      const base = (node.minLength ?? 0) >= 1 ? 'a non-empty string' : 'a string'
      const limit = node.maxLength === undefined ? '' : ` of at most ${node.maxLength} characters`
      return base + limit + (node.pattern === undefined ? '' : ` matching /${node.pattern}/`)
    }
    case 'boolean':
      return 'true or false'
    case 'null':
      return 'null'
    case 'array': {
      const count =
        node.minItems !== undefined && node.maxItems !== undefined
          ? ` of ${node.minItems} to ${node.maxItems} items`
          : node.minItems !== undefined && node.minItems > 0
            ? ` of at least ${node.minItems} item${node.minItems === 1 ? '' : 's'}`
            : node.maxItems !== undefined
              ? ` of at most ${node.maxItems} items`
              : ''
      return `an array${count}` + (node.items === undefined ? '' : `, each ${words(node.items)}`)
    }
    case 'object':
      return typeof node.additionalProperties === 'object'
        ? `an object whose values are each ${words(node.additionalProperties)}`
        : 'an object'
    default:
      return 'a valid value'
  }
}

/** The string formats of JSON Schema that have a name in words. */
const FORMATS: Readonly<Record<string, string>> = {
  uri: 'a URL',
  email: 'an email address',
  uuid: 'a UUID',
  'date-time': 'an ISO 8601 date and time',
  ipv4: 'an IPv4 address',
  ipv6: 'an IPv6 address',
}

/** A number's words: the named cases first (`a positive integer`), then the bounds spelled out. */
function bounded(
  node: JsonSchemaNode,
  base: string,
  positive: string,
  nonNegative: string,
  positiveMinimum: number | undefined,
): string {
  // z.int() bounds every integer by the safe range; that is not worth saying.
  const min = node.minimum !== undefined && node.minimum > Number.MIN_SAFE_INTEGER ? node.minimum : undefined
  const max = node.maximum !== undefined && node.maximum < Number.MAX_SAFE_INTEGER ? node.maximum : undefined
  const { exclusiveMinimum: exMin, exclusiveMaximum: exMax } = node
  if (max === undefined && exMax === undefined) {
    if (
      (exMin === 0 && min === undefined) ||
      (min !== undefined && min === positiveMinimum && exMin === undefined)
    )
      return positive
    if (min === 0 && exMin === undefined) return nonNegative
  }
  // A positive number with an upper bound (a delay a timer can wait): `a positive number of at most …`.
  if (exMin === 0 && min === undefined && max !== undefined && exMax === undefined)
    return `${positive} of at most ${max}`
  if (min !== undefined && max !== undefined) return `${base} from ${min} to ${max}`
  const bounds: string[] = []
  if (min !== undefined) bounds.push(`of at least ${min}`)
  if (exMin !== undefined) bounds.push(`greater than ${exMin}`)
  if (max !== undefined) bounds.push(`of at most ${max}`)
  if (exMax !== undefined) bounds.push(`less than ${exMax}`)
  return bounds.length === 0 ? base : `${base} ${bounds.join(' and ')}`
}

function oneOf(shown: readonly string[]): string {
  if (shown.length <= 1) return shown[0] ?? 'nothing'
  if (shown.length === 2) return `${shown[0]} or ${shown[1]}`
  return `one of ${shown.join(', ')}`
}

const SHOWN_LENGTH = 60

/**
 * A value shown briefly and safely: never throws, never prints a whole stream or a huge string,
 * nor a credential (see `hideSecrets.ts`): the value of a credential-named key of an object or
 * array is `"***"`, and a URL's password `***`.
 */
export function show(value: unknown): string {
  return clip(shown(value))
}

/**
 * The value at `path`, shown: only its kind (`a number`, `a string`) when a key of the path names
 * a credential (`pass`, `auth.token`), whose value a wrongly typed one may well be.
 */
export function showAt(path: readonly PropertyKey[], value: unknown): string {
  return path.some(isSecretName) ? kindOf(value) : show(value)
}

/** What kind of value `value` is, without any of it (`undefined` and `null` are their own kind). */
export function kindOf(value: unknown): string {
  if (value === undefined || value === null) return String(value)
  if (typeof value === 'string') return value === '' ? 'an empty string' : 'a string'
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint')
    return `a ${typeof value}`
  if (typeof value === 'symbol') return 'a symbol'
  if (typeof value === 'function') return 'a function'
  if (Array.isArray(value)) return 'an array'
  return shown(value).startsWith('an instance of ') ? shown(value) : 'an object'
}

/** For `JSON.stringify`: a credential-named key's value as `"***"`, a URL without its password. */
function hidden(key: string, value: unknown): unknown {
  if (isSecretName(key)) return '***'
  return typeof value === 'string' ? hideUrlPasswordsInValue(value) : value
}

function shown(value: unknown): string {
  switch (typeof value) {
    case 'undefined':
      return 'undefined'
    case 'function':
      return 'a function'
    case 'number':
    case 'boolean':
      return String(value)
    case 'bigint':
      return `${value}n`
    case 'symbol':
      return value.toString()
    case 'string':
      return JSON.stringify(hideUrlPasswordsInValue(value))
    case 'object': {
      if (value === null) return 'null'
      const proto = Object.getPrototypeOf(value) as object | null
      if (Array.isArray(value) || proto === Object.prototype || proto === null) {
        try {
          return JSON.stringify(value, hidden) ?? 'an object'
        } catch {
          return Array.isArray(value) ? 'an array' : 'an object'
        }
      }
      const name = (proto as { constructor?: { name?: unknown } }).constructor?.name
      return typeof name === 'string' && name !== '' ? `an instance of ${name}` : 'an object'
    }
  }
}

const clip = (text: string): string =>
  text.length <= SHOWN_LENGTH ? text : `${text.slice(0, SHOWN_LENGTH - 1)}…`
