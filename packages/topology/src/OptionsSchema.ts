/**
 * A component's options, declared once as a schema (zod 4), from which come the checks that
 * `build()` reports, the TypeScript types, the defaults, and a JSON Schema for config files.
 *
 * Invariant: `validate` never throws and reports every problem at once, one {@link ConfigIssue}
 * per field, each `must be <expected>, got <got>`; an option the schema does not declare is a
 * problem too (a misspelt option is never silently ignored). `resolve` only fills in defaults: it
 * checks nothing, so a component may call it in its constructor and leave the checks to `build()`.
 * See `rfcs/0004-component-options.md`.
 *
 * @module
 */
import { z } from 'zod'
import type { ConfigIssue } from './ConfigIssue.js'
import { codeOnly, issuesOf } from './internal/issuesOf.js'

/** A JSON Schema (draft 2020-12) document, as plain data. */
export type JsonSchema = { readonly [key: string]: unknown }

/**
 * The options of one kind of component, declared once. Made by {@link defineOptions}.
 *
 * @example
 * ```ts
 * const BatchOptions = defineOptions({ batchSize: z.int().min(1).default(100).describe('Events per batch.') })
 * type BatchOptions = OptionsOf<typeof BatchOptions>   // { readonly batchSize?: number }
 * BatchOptions.validate({ batchSize: 0 })             // [{ field: 'batchSize', message: 'must be a positive integer, got 0', … }]
 * BatchOptions.resolve({}).batchSize                  // 100
 * ```
 */
export interface OptionsSchema<Input, Resolved> {
  /** The zod schema: a strict object, for composing one component's options into another's. */
  readonly schema: z.ZodType<Resolved, Input>
  /** The default of every option that has one. */
  readonly defaults: Partial<Resolved>
  /** Every problem of `options` (any value, from any caller), one per field; empty when they are fine. */
  validate(options: unknown): ConfigIssue[]
  /**
   * `options` with every unset option given its default, each option read as `validate` reads it
   * (a getter, a value inherited through `Object.create`). Checks nothing: see {@link validate}.
   */
  resolve(options: Input | undefined): Resolved
  /**
   * The options a config file can give, as JSON Schema (draft 2020-12, input side: options with
   * defaults are optional). Options only code can give ({@link codeOption}) are left out.
   */
  jsonSchema(): JsonSchema
}

/**
 * The options a caller gives, as the schema declares them.
 *
 * @example
 * ```ts
 * export type FileSinkOptions = OptionsOf<typeof FileSinkOptions>
 * ```
 */
export type OptionsOf<S> = S extends OptionsSchema<infer Input, infer _> ? Input : never

/**
 * The options once {@link OptionsSchema.resolve} filled in the defaults.
 *
 * @example
 * ```ts
 * const o: ResolvedOptionsOf<typeof BatchOptions> = BatchOptions.resolve(options) // o.batchSize: number
 * ```
 */
export type ResolvedOptionsOf<S> = S extends OptionsSchema<infer _, infer Resolved> ? Resolved : never

/**
 * Declares a component's options from a zod shape: one entry per option, with `.default(...)` for
 * its default and `.describe(...)` for its documentation (carried into the JSON Schema).
 * Options not in the shape are reported by `validate`.
 *
 * @example
 * ```ts
 * import { defineOptions, codeOption } from '@ackline/topology'
 * import { z } from 'zod'
 *
 * export const KafkaSinkOptions = defineOptions({
 *   topic: z.string().min(1).describe('The topic to produce to.'),
 *   acks: z.enum(['all', 'leader']).default('all'),
 *   partitioner: codeOption<(key: string) => number>('a function').optional(),
 * })
 * export type KafkaSinkOptions = OptionsOf<typeof KafkaSinkOptions>
 * ```
 */
export function defineOptions<const Shape extends z.ZodRawShape>(
  shape: Shape,
): OptionsSchema<Readonly<z.input<z.ZodObject<Shape>>>, Readonly<z.output<z.ZodObject<Shape>>>> {
  type Input = Readonly<z.input<z.ZodObject<Shape>>>
  type Resolved = Readonly<z.output<z.ZodObject<Shape>>>
  const schema = z.strictObject(shape)
  const defaults: Record<string, unknown> = {}
  for (const [key, option] of Object.entries(shape)) {
    const def = option._zod.def as { type: string; defaultValue?: unknown }
    if (def.type === 'default' || def.type === 'prefault') defaults[key] = def.defaultValue
  }
  Object.freeze(defaults)
  const declared = Object.keys(shape)
  let json: JsonSchema | undefined
  return {
    schema: schema as unknown as z.ZodType<Resolved, Input>,
    defaults: defaults as Partial<Resolved>,
    validate: (options) => issuesOf(schema, options),
    resolve(options) {
      const resolved: Record<string, unknown> = { ...defaults }
      if (options !== undefined && options !== null) {
        for (const [key, value] of Object.entries(options)) if (value !== undefined) resolved[key] = value
        // Each option read as `validate` reads it: a getter or an inherited value (options made by
        // `Object.create`) passed the checks, and must not then be replaced by its default.
        for (const key of declared) {
          const value: unknown = (options as Record<string, unknown>)[key]
          if (value !== undefined) resolved[key] = value
        }
      }
      return resolved as Resolved
    },
    jsonSchema() {
      json ??= toJsonSchema(schema)
      // A copy each time: callers may edit what they get (add a title, merge it into a bigger schema).
      return structuredClone(json)
    },
  }
}

/**
 * An option only code can give (a function, a stream, a client object), checked by `check` and
 * described as `expected` in issues ("must be a function, got 3"). It is left out of the JSON
 * Schema. Without `check`, the value must be a function.
 *
 * @example
 * ```ts
 * defineOptions({
 *   predicate: codeOption<(event: LogEvent) => boolean>('a function'),
 *   input: codeOption<NodeJS.ReadableStream>('a readable stream', (v) => typeof (v as { on?: unknown })?.on === 'function').optional(),
 * })
 * ```
 */
export function codeOption<T>(
  expected: string,
  check: (value: unknown) => boolean = (value) => typeof value === 'function',
): z.ZodType<T, T> {
  const schema = z.custom<T>(check, { error: expected })
  codeOnly.add(schema, expected)
  return schema
}

const CODE_ONLY = 'x-ackline-code-only'

function toJsonSchema(schema: z.ZodType): JsonSchema {
  const json = z.toJSONSchema(schema, {
    io: 'input',
    unrepresentable: 'any',
    override: (ctx) => {
      if (codeOnly.expected(ctx.zodSchema) !== undefined) ctx.jsonSchema[CODE_ONLY] = true
    },
  }) as Record<string, unknown>
  dropCodeOnly(json)
  return json
}

/**
 * Removes the options marked code-only from every object of `node`, and from its `required`. A
 * record or array of code-only values (a map of predicates) is itself code-only. Returns whether
 * `node` is code-only.
 */
function dropCodeOnly(node: unknown): boolean {
  if (typeof node !== 'object' || node === null) return false
  if (Array.isArray(node)) {
    for (const item of node) dropCodeOnly(item)
    return false
  }
  const record = node as Record<string, unknown>
  for (const value of Object.values(record)) dropCodeOnly(value)
  const properties = record.properties as Record<string, Record<string, unknown>> | undefined
  if (properties !== undefined) {
    for (const [key, property] of Object.entries(properties)) {
      if (property[CODE_ONLY] === true) {
        delete properties[key]
        if (Array.isArray(record.required)) record.required = record.required.filter((r) => r !== key)
      }
    }
    if (Array.isArray(record.required) && record.required.length === 0) delete record.required
  }
  const inner = (record.additionalProperties ?? record.items) as Record<string, unknown> | undefined
  if (inner?.[CODE_ONLY] === true) record[CODE_ONLY] = true
  return record[CODE_ONLY] === true
}
