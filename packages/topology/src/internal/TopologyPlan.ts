/**
 * Validation and acknowledgement propagation: a pure function from the builder's declarations to
 * a plan the runtime follows, or to the list of every problem found.
 */
import { z } from 'zod'
import type { ConfigIssue } from '../ConfigIssue.js'
import type { EdgeBufferDirectory } from '../EdgeBuffer.js'
import { MemoryBufferOptions } from '../MemoryBufferOptions.js'
import { codeOption } from '../OptionsSchema.js'
import { RetryPolicy } from '../RetryPolicy.js'
import { SinkOptions } from '../SinkOptions.js'
import type { ComponentDeclaration } from '../TopologyBuilder.js'
import type { TopologyProblem, TopologyProblemCode } from '../TopologyError.js'
import { TopologyOptions } from '../TopologyOptions.js'
import type { TopologyWarning } from '../TopologyWarning.js'
import { TransformOptions } from '../TransformOptions.js'
import { textOf } from '../textOf.js'
import { hideUrlPasswordsInValue } from './hideSecrets.js'
import { isEdgeBufferFactory } from './isEdgeBufferFactory.js'
import { issuesOf, show, WHOLE } from './issuesOf.js'
import { MAX_TIMER_MS } from './maxTimerMs.js'
import { snapshotOptions } from './snapshotOptions.js'

/** Where events of one output port go. */
export type PortEdges = ReadonlyMap<string, readonly string[]>

/** What the runtime needs to run a valid topology. */
export interface TopologyPlan {
  readonly options: TopologyOptions
  /** Every component, upstream before downstream. */
  readonly components: readonly ComponentDeclaration[]
  /** Producer id → port (`''` for the default one) → consumer ids, in declaration order. */
  readonly edges: ReadonlyMap<string, PortEdges>
  /** Consumer id → the distinct components that feed it. */
  readonly upstreams: ReadonlyMap<string, readonly string[]>
  /** Whether each source creates batch notifiers. */
  readonly sourceAcks: ReadonlyMap<string, boolean>
  /** Whether each sink acknowledges. */
  readonly sinkAcks: ReadonlyMap<string, boolean>
  /** Whether events reaching each sink may carry finalizers (some acknowledging source feeds it). */
  readonly sinkCarriesFinalizers: ReadonlyMap<string, boolean>
  /**
   * Whether an acknowledging source feeds each transform and its output reaches a sink that
   * acknowledges or another transform: only then can a status for what it emits differ from
   * `delivered` (a transform after it may settle an event `errored` or `rejected`).
   */
  readonly transformAcks: ReadonlyMap<string, boolean>
}

export interface PlanResult {
  readonly plan: TopologyPlan | undefined
  readonly problems: readonly TopologyProblem[]
  readonly warnings: readonly TopologyWarning[]
}

export const TOPOLOGY = '(topology)'

export function planTopology(
  asDeclared: readonly ComponentDeclaration[],
  given: TopologyOptions,
): PlanResult {
  const problems: TopologyProblem[] = []
  const problem = (code: TopologyProblemCode, component: string, field: string, message: string): void => {
    problems.push({ code, component, field, message })
  }

  // Every option is read once, here: checked, resolved and run are that one value (a getter read
  // again may say otherwise), and a read that throws is a problem of its field.
  const options = readOnce(problems, TOPOLOGY, TopologyOptions, given) as TopologyOptions
  // Declarations from untyped code that the checks below could not even read (an id that is no
  // string, a component or options that are no object): reported alone, as the rest would be noise.
  if (!isObject(options)) return { plan: undefined, problems, warnings: [] }
  for (const decl of asDeclared) checkShape(decl, problem)
  if (problems.length > 0 && problems.some((p) => p.component !== TOPOLOGY))
    return { plan: undefined, problems, warnings: [] }
  /** What could not be read of each declaration's options, reported in its turn. */
  const unreadable = new Map<ComponentDeclaration, TopologyProblem[]>()
  const declarations = asDeclared.map((decl): ComponentDeclaration => {
    if (decl.role === 'source') return decl
    const own = decl.role === 'transform' ? TransformOptions : SinkOptions
    const found: TopologyProblem[] = []
    const read = { ...decl, options: readOnce(found, decl.id, own, decl.options) } as ComponentDeclaration
    unreadable.set(read, found)
    return read
  })
  // Options whose keys could not even be listed (a proxy whose traps throw) have no copy to check:
  // reported alone, as the shape problems above (read on, the checks threw a TypeError).
  const unlisted = declarations.filter((decl) => decl.role !== 'source' && !isObject(decl.options))
  if (unlisted.length > 0) {
    for (const decl of unlisted) problems.push(...(unreadable.get(decl) ?? []))
    return { plan: undefined, problems, warnings: [] }
  }

  const byId = new Map<string, ComponentDeclaration>()
  /** The first declaration of each component object. */
  const declaredAs = new Map<object, ComponentDeclaration>()
  for (const decl of declarations) {
    if (decl.id === '' || decl.id.includes('.')) {
      problem(
        'INVALID_ID',
        decl.id,
        'id',
        `id '${decl.id}' must be non-empty and contain no '.' (a dot names a port)`,
      )
    }
    if (byId.has(decl.id)) {
      problem('DUPLICATE_ID', decl.id, 'id', `id '${decl.id}' is declared more than once`)
      continue
    }
    byId.set(decl.id, decl)
    // The runtime runs each declaration as a component of its own: one object under two ids was
    // started and stopped twice, and its state (a sink's connection, a reduce's groups) was both's.
    const first = declaredAs.get(decl.component)
    if (first === undefined) declaredAs.set(decl.component, decl)
    else
      problem(
        'DUPLICATE_COMPONENT',
        decl.id,
        decl.role,
        `${decl.role} '${decl.id}' is the same ${textOf(decl.component.kind)} object as ${first.role} '${first.id}': each declaration needs an object of its own (call its factory again), or both would be started and stopped twice and share one state`,
      )
  }

  // Producer → port → consumers, built from the inputs that name something valid.
  const edges = new Map<string, Map<string, string[]>>()
  const upstreams = new Map<string, string[]>()
  for (const decl of byId.values()) upstreams.set(decl.id, [])

  for (const decl of byId.values()) {
    if (decl.role === 'source') {
      if (decl.inputs.length > 0) {
        problem('SOURCE_WITH_INPUTS', decl.id, 'inputs', `source '${decl.id}' cannot have inputs`)
      }
    } else if (decl.inputs.length === 0) {
      problem('NO_INPUTS', decl.id, 'inputs', `${decl.role} '${decl.id}' has no inputs`)
    }
    const seen = new Set<string>()
    decl.inputs.forEach((input, i) => {
      const field = `inputs[${i}]`
      if (seen.has(input)) {
        problem('DUPLICATE_INPUT', decl.id, field, `input '${input}' is listed more than once`)
        return
      }
      seen.add(input)
      const dot = input.indexOf('.')
      const producerId = dot < 0 ? input : input.slice(0, dot)
      const port = dot < 0 ? '' : input.slice(dot + 1)
      const producer = byId.get(producerId)
      if (producer === undefined) {
        problem('UNKNOWN_INPUT', decl.id, field, `input '${input}' names no component`)
        return
      }
      if (producer.role === 'sink') {
        problem('INPUT_IS_SINK', decl.id, field, `input '${input}' is a sink, which has no output`)
        return
      }
      if (dot >= 0) {
        // Not an array (untyped code: `outputs: 'errors'`, `5`): no port is declared, and the
        // member check says what is wrong with it; read as it was, `5` threw a TypeError here.
        const outputs: unknown = producer.role === 'transform' ? producer.component.outputs : undefined
        const declared: readonly unknown[] = Array.isArray(outputs) ? outputs : []
        // A trailing dot names no port: read as the default output, it slipped through, and beside
        // the plain id it made a second edge into the same consumer (every event twice).
        if (port === '') {
          const list =
            declared.length === 0 ? 'no output ports' : declared.map((p) => `'${textOf(p)}'`).join(', ')
          problem(
            'UNDECLARED_OUTPUT',
            decl.id,
            field,
            `input '${input}': the port after the dot is empty; ${producer.role} '${producerId}' declares ${list} (read its default output as '${producerId}')`,
          )
          return
        }
        if (!declared.includes(port)) {
          const list = declared.length === 0 ? 'none' : declared.map((p) => `'${textOf(p)}'`).join(', ')
          problem(
            'UNDECLARED_OUTPUT',
            decl.id,
            field,
            `input '${input}': ${producer.role} '${producerId}' declares no output port '${port}' (declared: ${list})`,
          )
          return
        }
      }
      const ports = edges.get(producerId) ?? new Map<string, string[]>()
      edges.set(producerId, ports)
      const consumers = ports.get(port) ?? []
      ports.set(port, consumers)
      consumers.push(decl.id)
      const ups = upstreams.get(decl.id)!
      if (!ups.includes(producerId)) ups.push(producerId)
    })
    problems.push(...(unreadable.get(decl) ?? []))
    checkOptions(decl, options, problems, problem)
    checkConfig(decl, problems, problem)
  }

  checkDirectories(byId.values(), options, problem)

  const downstream = (id: string): string[] => [...(edges.get(id)?.values() ?? [])].flat()

  for (const cycle of findCycles([...byId.keys()], downstream)) {
    // Each member's problem names the cycle: in full when short, else its first members and a
    // count (naming every one made a generated ring of 20,000 throw RangeError: Invalid string length).
    const named = cycle
      .slice(0, MAX_CYCLE_NAMES)
      .map((id) => `'${id}'`)
      .join(', ')
    const through =
      cycle.length <= MAX_CYCLE_NAMES
        ? `a cycle through ${named}`
        : `a cycle of ${cycle.length} components through ${named} and ${cycle.length - MAX_CYCLE_NAMES} more`
    for (const id of cycle) problem('CYCLE', id, 'inputs', `'${id}' is part of ${through}`)
  }

  const fed = reachable(
    [...byId.values()].filter((d) => d.role === 'source').map((d) => d.id),
    downstream,
  )
  for (const decl of byId.values()) {
    if (decl.role === 'sink' && decl.inputs.length > 0 && !fed.has(decl.id)) {
      problem(
        'UNFED_SINK',
        decl.id,
        'inputs',
        `nothing feeds sink '${decl.id}': no source reaches any of its inputs`,
      )
    }
  }

  // Acknowledgements: a sink's own setting wins over the global one, both ways.
  const sinkAcks = new Map<string, boolean>()
  for (const decl of byId.values()) {
    if (decl.role !== 'sink') continue
    sinkAcks.set(decl.id, decl.options.acknowledgements ?? options.acknowledgements ?? false)
    // Only an explicit `false` on the declaration: a topology's default may be turned on later.
    if (decl.component.canAcknowledge === false && decl.options.acknowledgements !== false) {
      problem(
        'ACK_UNSUPPORTED',
        decl.id,
        'acknowledgements',
        `sink '${decl.id}' (${decl.component.kind}) cannot confirm a delivery (canAcknowledge: false): declare it with acknowledgements: false, or use a sink that confirms`,
      )
    }
  }
  const sourceAcks = new Map<string, boolean>()
  for (const decl of byId.values()) if (decl.role === 'source') sourceAcks.set(decl.id, false)
  const upstreamOf = (id: string): readonly string[] => upstreams.get(id) ?? []
  const warnings: TopologyWarning[] = []
  for (const [sinkId, acks] of sinkAcks) {
    if (!acks) continue
    // One walk per sink over every input of every transform on the way: a diamond reaches a source twice but warns once.
    for (const id of reachable([sinkId], upstreamOf)) {
      const decl = byId.get(id)!
      if (decl.role !== 'source') continue
      if (decl.component.canAcknowledge) {
        sourceAcks.set(id, true)
      } else {
        warnings.push({
          code: 'ACK_UNSUPPORTED',
          source: id,
          sink: sinkId,
          message: `source '${id}' (${decl.component.kind}) cannot acknowledge, but it feeds sink '${sinkId}', which has acknowledgements on: silent data loss could occur`,
        })
      }
    }
  }
  // An authoritative sink records a status for its sources; with acknowledgements off its copies
  // are settled as its buffer takes them (RFC 0002, acks-off sinks), so it records nothing. A
  // warning, not a problem: a topology's default may be turned on later, as for NO_CONSUMERS.
  for (const decl of byId.values()) {
    if (decl.role !== 'sink' || decl.options.authoritative !== true || sinkAcks.get(decl.id) === true)
      continue
    const why =
      decl.options.acknowledgements === false ? 'its own acknowledgements: false' : "the topology's default"
    warnings.push({
      code: 'AUTHORITATIVE_IGNORED',
      sink: decl.id,
      message: `sink '${decl.id}' (${decl.component.kind}) is authoritative, but its acknowledgements are off (${why}): what it reports reaches no source, so it records nothing; turn its acknowledgements on, or remove authoritative`,
    })
  }
  // What some acknowledging source feeds: what it sends or emits carries that source's batches.
  const fedByAcks = reachable(
    [...sourceAcks].filter(([, acks]) => acks).map(([id]) => id),
    downstream,
  )
  // Vector warns of a component without consumers too: its events are dropped, which settles
  // `delivered`, so a forgotten input would acknowledge everything upstream and keep nothing.
  for (const decl of byId.values()) {
    if (decl.role === 'sink' || downstream(decl.id).length > 0) continue
    const what = `everything it ${decl.role === 'source' ? 'sends' : 'emits'} is discarded as dropped`
    // With acknowledgements off for its events nothing is settled: saying a drop acknowledges them
    // upstream would be wrong there (and nothing would change if a sink read them).
    const fate = fedByAcks.has(decl.id)
      ? `${what}, which settles delivered: ${decl.role === 'source' ? 'it acknowledges' : 'the sources that feed it acknowledge'} it upstream though no sink received it`
      : decl.role === 'source'
        ? `${what}, and no sink receives it (acknowledgements are off for it: its batches count as delivered once sent)`
        : `${what}, and no sink receives it (acknowledgements are off for what it reads: no source hears of it)`
    warnings.push({
      code: 'NO_CONSUMERS',
      component: decl.id,
      message: `nothing reads ${decl.role} '${decl.id}' (${decl.component.kind}): ${fate}; give a sink or transform '${decl.id}' as an input, or remove it`,
    })
  }
  // One walk each, not one per sink or per transform (`fedByAcks` above): those cost the square
  // of a generated chain's length (20,000 transforms took minutes to build).
  const sinkCarriesFinalizers = new Map<string, boolean>()
  for (const sinkId of sinkAcks.keys()) sinkCarriesFinalizers.set(sinkId, fedByAcks.has(sinkId))

  // Not only an acknowledging sink can settle what a transform emits otherwise: a transform after
  // it may throw, drop with 'rejected' or refuse at a full channel, and that status reaches the
  // source even when the only sink after it settles on accept.
  const settlers = [...byId.values()]
    .filter((d) => d.role === 'transform' || (d.role === 'sink' && sinkAcks.get(d.id) === true))
    .map((d) => d.id)
  const leadsToSettler = reachable(settlers, upstreamOf)
  const transformAcks = new Map<string, boolean>()
  for (const decl of byId.values()) {
    if (decl.role !== 'transform') continue
    const matters = fedByAcks.has(decl.id) && downstream(decl.id).some((id) => leadsToSettler.has(id))
    transformAcks.set(decl.id, matters)
  }

  if (problems.length > 0) return { plan: undefined, problems, warnings }
  return {
    plan: {
      options: Object.freeze(TopologyOptions.resolve(options)),
      components: topologicalOrder([...byId.values()], upstreamOf).map(asChecked),
      edges,
      upstreams,
      sourceAcks,
      sinkAcks,
      sinkCarriesFinalizers,
      transformAcks,
    },
    problems,
    warnings,
  }
}

/** How many members of a cycle its problems name; a longer one is counted beyond them. */
const MAX_CYCLE_NAMES = 10

type Report = (code: TopologyProblemCode, component: string, field: string, message: string) => void

/**
 * `options` read once along `schema` (see {@link snapshotOptions}), a buffer factory kept as
 * given; each option whose read threw is an `INVALID_OPTION` problem of `component`, the others
 * are checked as read.
 */
function readOnce(
  problems: TopologyProblem[],
  component: string,
  schema: typeof TopologyOptions | typeof SinkOptions | typeof TransformOptions,
  options: unknown,
): unknown {
  const read = snapshotOptions(
    schema.schema,
    options,
    (value, path) => path.length === 1 && path[0] === 'buffer' && isEdgeBufferFactory(value as never),
  )
  reportIssues(problems, 'INVALID_OPTION', component, read.issues)
  // The topology's options are checked here; a declaration's with its buffer, in checkOptions.
  if (schema === TopologyOptions) {
    const unreadable = new Set(read.issues.map((issue) => issue.field))
    const issues = schema.validate(read.value).filter((issue) => !unreadable.has(issue.field))
    reportIssues(problems, 'INVALID_OPTION', component, issues)
  }
  return read.value
}

/**
 * The declaration as the runtime reads it, its options copied as `build()` checked them (each
 * declared option read once): the runtime reads them at `start()`, and a caller that changed its
 * objects in between (a config reused for another topology) ran with values never checked, such
 * as a 60 s ack timeout set to -5 that timed every batch out after 1 ms. A buffer factory is kept
 * as given: it checked its own options, and opens from them.
 */
function asChecked(decl: ComponentDeclaration): ComponentDeclaration {
  if (decl.role === 'source') return decl
  const { buffer, retry } = decl.options as SinkOptions
  const own: Record<string, unknown> =
    decl.role === 'transform'
      ? TransformOptions.resolve(decl.options)
      : SinkOptions.resolve(decl.options as never) // a buffer factory is copied as given
  if (buffer !== undefined && !isEdgeBufferFactory(buffer))
    own.buffer = Object.freeze(MemoryBufferOptions.resolve(buffer))
  if (retry !== undefined) own.retry = Object.freeze(RetryPolicy.resolve(retry))
  return { ...decl, options: Object.freeze(own) } as ComponentDeclaration
}

/** Reports each issue as a problem of `component`; a component's own issues (`kind` given) say the kind first. */
function reportIssues(
  problems: TopologyProblem[],
  code: TopologyProblemCode,
  component: string,
  issues: readonly ConfigIssue[],
  kind?: string,
): void {
  for (const issue of issues) {
    problems.push({
      code,
      component,
      field: issue.field,
      message: kind === undefined ? issue.message : `${textOf(kind)}: ${issue.message}`,
      ...(issue.expected === undefined ? {} : { expected: issue.expected }),
      ...(issue.got === undefined ? {} : { got: issue.got }),
    })
  }
}

/**
 * What the runtime reads from a transform beyond `process`: an unknown `dropStatus` from untyped
 * code would otherwise count a discard as delivered, and a `coalesce` or `synchronous` that is
 * not a boolean would be read as `false` without a word.
 */
const TransformMembers = z.looseObject({
  kind: z.string(),
  process: codeOption<unknown>('a function'),
  flush: codeOption<unknown>('a function').optional(),
  outputs: z.array(z.string().min(1)).optional(),
  dropStatus: z.enum(['delivered', 'rejected']).optional(),
  // Longer than a timer can wait: `setInterval` would flush every millisecond instead.
  flushIntervalMs: z.number().positive().max(MAX_TIMER_MS).optional(),
  coalesce: z.boolean().optional(),
  synchronous: z.boolean().optional(),
})

/** What the runtime reads from a source: `run`, and whether to create batch notifiers for it. */
const SourceMembers = z.looseObject({
  kind: z.string(),
  run: codeOption<unknown>('a function'),
  canAcknowledge: z.boolean(),
})

/** What the runtime reads from a sink: `write` and its hooks, how many writes it may overlap, whether it confirms. */
const SinkMembers = z.looseObject({
  kind: z.string(),
  write: codeOption<unknown>('a function'),
  start: codeOption<unknown>('a function').optional(),
  stop: codeOption<unknown>('a function').optional(),
  concurrency: z.int().min(1).optional(),
  canAcknowledge: z.boolean().optional(),
})

/** Whether `value` can be read as an object (a component, a declaration's options). */
function isObject(value: unknown): value is object {
  return typeof value === 'object' && value !== null
}

/** What `value` is, in a message about a declaration from untyped code. */
function shown(value: unknown): string {
  if (typeof value === 'string') {
    // Hidden before the cut: cut first, a URL's password lost its '@' and showed in part.
    const text = hideUrlPasswordsInValue(value)
    return `'${text.length > 40 ? `${text.slice(0, 40)}…` : text}'`
  }
  if (Array.isArray(value)) return 'an array'
  return value === null || typeof value !== 'object' ? String(value) : 'an object'
}

/** The members of a component that planning reads outside the member check, by role. */
const READ_MEMBERS = {
  source: ['kind', 'canAcknowledge', 'validate'],
  transform: ['kind', 'outputs', 'validate'],
  sink: ['kind', 'canAcknowledge', 'validate'],
} as const

/** What was thrown, for a message: an error's message, else the value itself. */
function messageOf(error: unknown): unknown {
  try {
    return error instanceof Error ? error.message : error
  } catch {
    return error // a `message` getter that throws
  }
}

/**
 * Checks what the rest of the planning reads without looking: the id is a string, the component
 * and the options are objects, the inputs an array of strings.
 */
function checkShape(decl: ComponentDeclaration, problem: Report): void {
  const id: unknown = decl.id
  const component = typeof id === 'string' ? id : shown(id)
  if (typeof id !== 'string')
    problem('INVALID_ID', component, 'id', `an id must be a string, got ${shown(id)}`)
  if (!isObject(decl.component))
    problem(
      'INVALID_CONFIG',
      component,
      decl.role,
      `must be a ${decl.role} object, got ${shown(decl.component)}`,
    )
  else {
    // What planning reads of the component without looking: a getter that throws (untyped code, a
    // proxy) threw out of build() raw, naming neither the component nor the member.
    for (const member of READ_MEMBERS[decl.role]) {
      try {
        void (decl.component as unknown as Record<string, unknown>)[member]
      } catch (error) {
        problem(
          'INVALID_CONFIG',
          component,
          member,
          `${decl.role} '${component}': reading its ${member} threw: ${textOf(messageOf(error))}`,
        )
      }
    }
  }
  if (decl.role !== 'source' && !isObject(decl.options))
    problem('INVALID_OPTION', component, WHOLE, `must be an object, got ${shown(decl.options)}`)
  const inputs: unknown = decl.inputs
  if (!Array.isArray(inputs)) {
    problem(
      'UNKNOWN_INPUT',
      component,
      'inputs',
      `must be an array of inputs (component ids), got ${shown(inputs)}`,
    )
    return
  }
  inputs.forEach((input: unknown, i) => {
    if (typeof input !== 'string')
      problem(
        'UNKNOWN_INPUT',
        component,
        `inputs[${i}]`,
        `an input must be a string (a component id, or id.port), got ${shown(input)}`,
      )
  })
}

function checkOptions(
  decl: ComponentDeclaration,
  options: TopologyOptions,
  problems: TopologyProblem[],
  problem: Report,
): void {
  if (decl.role === 'source') return
  const buffer = decl.options.buffer
  const own = decl.role === 'transform' ? TransformOptions : SinkOptions
  if (buffer === undefined || buffer === null || !isEdgeBufferFactory(buffer)) {
    const type = (buffer as { type?: unknown } | null | undefined)?.type
    if (type !== undefined && type !== 'memory') {
      // A config from before buffers were factories (`{ type: 'disk' }`) must not run in memory.
      problem(
        'INVALID_OPTION',
        decl.id,
        'buffer.type',
        `buffer type '${textOf(type)}' is not built in: only the in-memory channel is given by options; other kinds are factories (a disk buffer: buffer: diskBuffer({ … }) from @ackline/buffers)`,
      )
      reportIssues(problems, 'INVALID_OPTION', decl.id, own.validate(withoutBuffer(own, decl.options)))
      return
    }
    reportIssues(problems, 'INVALID_OPTION', decl.id, own.validate(decl.options))
    return
  }
  // Another kind of buffer checks its own options; the topology only files what it says.
  reportIssues(problems, 'INVALID_OPTION', decl.id, own.validate(withoutBuffer(own, decl.options)))
  if (decl.role === 'transform') {
    problem(
      'INVALID_OPTION',
      decl.id,
      'buffer',
      `a transform reads from the in-memory channel; a ${buffer.kind} buffer can only stand in front of a sink`,
    )
    return
  }
  let returned: unknown = []
  try {
    // Not `?? []`: a validate() that forgot its return is reported, as a component's is.
    if (buffer.validate !== undefined)
      returned = buffer.validate({ componentId: decl.id, dataDir: options.dataDir })
  } catch (error) {
    returned = [{ field: '', message: `the ${buffer.kind} buffer's validate() threw: ${textOf(error)}` }]
  }
  const { issues, wrong } = readIssues(returned)
  for (const text of wrong)
    issues.push({ field: '', message: `the ${textOf(buffer.kind)} buffer's validate() returned ${text}` })
  for (const issue of issues) {
    // A buffer's options as a whole (not an object) are the `buffer` field itself.
    const whole = issue.field === '' || issue.field === WHOLE
    problem('INVALID_OPTION', decl.id, whole ? 'buffer' : `buffer.${issue.field}`, issue.message)
  }
}

/**
 * A declaration's options without its `buffer`, every other option read as `validate` reads it: a
 * spread kept only the own enumerable ones, so beside a buffer factory an option given by a getter
 * or inherited through `Object.create` went unchecked, and the runtime (which reads it) ran with it.
 */
function withoutBuffer(
  own: typeof SinkOptions | typeof TransformOptions,
  options: SinkOptions | TransformOptions,
): Record<string, unknown> {
  const copy: Record<string, unknown> = { ...own.resolve(options as never) }
  // Unknown options too, inherited ones as zod finds them (`for…in`), so a misspelt one is reported.
  for (const key in options)
    if (!Object.hasOwn(copy, key)) copy[key] = (options as Record<string, unknown>)[key]
  copy.buffer = undefined
  return copy
}

/**
 * Buffers that would write in one directory (sinks `a` and `a/dead-letter` under one `dataDir`:
 * the second one's records would land in the first one's dead-letter queue), each reported on the
 * sink declared later, naming the one declared first.
 */
function checkDirectories(
  decls: Iterable<ComponentDeclaration>,
  options: TopologyOptions,
  problem: Report,
): void {
  const owners = new Map<string, { readonly sink: string; readonly holds: string }>()
  for (const decl of decls) {
    const buffer = decl.role === 'sink' ? decl.options.buffer : undefined
    if (buffer === undefined || buffer === null || !isEdgeBufferFactory(buffer)) continue
    let directories: readonly EdgeBufferDirectory[]
    try {
      directories = buffer.directories?.({ componentId: decl.id, dataDir: options.dataDir }) ?? []
    } catch (error) {
      problem(
        'INVALID_OPTION',
        decl.id,
        'buffer',
        `the ${buffer.kind} buffer's directories() threw: ${textOf(error)}`,
      )
      continue
    }
    for (const dir of directories) {
      const owner = owners.get(dir.path)
      if (owner === undefined) {
        owners.set(dir.path, { sink: decl.id, holds: dir.holds })
      } else if (owner.sink !== decl.id) {
        problem(
          'INVALID_OPTION',
          decl.id,
          `buffer.${dir.field}`,
          `its ${buffer.kind} buffer would keep ${dir.holds} in ${dir.path}, where the buffer of sink '${owner.sink}' keeps ${owner.holds}: two buffers writing in one directory take each other's files for their own; give this buffer a path of its own`,
        )
      }
    }
  }
}

/**
 * The component's own issues, then the members the runtime reads from it, unless its own
 * `validate()` already reported that field (a dropping transform checks its `dropStatus` too).
 */
function checkConfig(decl: ComponentDeclaration, problems: TopologyProblem[], problem: Report): void {
  const first = problems.length
  const { kind } = decl.component
  if (decl.component.validate !== undefined) {
    let returned: unknown = []
    try {
      returned = decl.component.validate()
    } catch (error) {
      problem('INVALID_CONFIG', decl.id, '(validate)', `${textOf(kind)}: validate() threw: ${textOf(error)}`)
    }
    const { issues, wrong } = readIssues(returned)
    reportIssues(problems, 'INVALID_CONFIG', decl.id, issues, kind)
    for (const text of wrong)
      problem('INVALID_CONFIG', decl.id, '(validate)', `${textOf(kind)}: validate() returned ${text}`)
  }
  const members =
    decl.role === 'source' ? SourceMembers : decl.role === 'transform' ? TransformMembers : SinkMembers
  const reported = new Set(problems.slice(first).map((p) => p.field))
  // Only the members the runtime reads: a component's other getters may throw until start().
  const fresh = issuesOf(members, decl.component, 'declared').filter((issue) => !reported.has(issue.field))
  reportIssues(problems, 'INVALID_CONFIG', decl.id, fresh, kind)
}

/**
 * The issues in what a `validate()` returned, and, worded, each value in it that is no issue
 * (untyped code: a message string, or `undefined` from a forgotten `return`): filed as it was,
 * such a value became a problem of no field whose message read `undefined`.
 */
function readIssues(returned: unknown): { issues: ConfigIssue[]; wrong: string[] } {
  if (!Array.isArray(returned))
    return { issues: [], wrong: [`${show(returned)} where an array of issues ({ field, message }) is due`] }
  const issues: ConfigIssue[] = []
  const wrong: string[] = []
  for (const issue of returned as unknown[]) {
    const { field, message } = isObject(issue) ? (issue as Partial<Record<keyof ConfigIssue, unknown>>) : {}
    if (typeof field === 'string' && typeof message === 'string') issues.push(issue as ConfigIssue)
    else wrong.push(`${show(issue)} where an issue ({ field, message }) is due`)
  }
  return { issues, wrong }
}

/** Every id reachable from `starts` (included) following `next`. */
function reachable(starts: readonly string[], next: (id: string) => readonly string[]): Set<string> {
  const seen = new Set<string>(starts)
  const stack = [...starts]
  while (stack.length > 0) {
    for (const id of next(stack.pop()!)) {
      if (!seen.has(id)) {
        seen.add(id)
        stack.push(id)
      }
    }
  }
  return seen
}

/**
 * The strongly connected components that form a cycle (Tarjan's algorithm). Iterative, with a
 * stack of its own: a generated chain of thousands of components overflowed the call stack.
 */
function findCycles(ids: readonly string[], next: (id: string) => readonly string[]): string[][] {
  let counter = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const onStack = new Set<string>()
  const stack: string[] = []
  const cycles: string[][] = []
  /** The walk's path: each component, its successors, and how many of them it has looked at. */
  const path: { readonly id: string; readonly to: readonly string[]; i: number }[] = []
  const enter = (id: string): void => {
    index.set(id, counter)
    low.set(id, counter++)
    stack.push(id)
    onStack.add(id)
    path.push({ id, to: next(id), i: 0 })
  }
  for (const root of ids) {
    if (index.has(root)) continue
    enter(root)
    while (path.length > 0) {
      const frame = path[path.length - 1]!
      const { id } = frame
      if (frame.i < frame.to.length) {
        const to = frame.to[frame.i++]!
        if (!index.has(to)) enter(to)
        else if (onStack.has(to)) low.set(id, Math.min(low.get(id)!, index.get(to)!))
        continue
      }
      path.pop()
      const parent = path[path.length - 1]
      if (parent !== undefined) low.set(parent.id, Math.min(low.get(parent.id)!, low.get(id)!))
      if (low.get(id) === index.get(id)) {
        const scc: string[] = []
        let member: string
        do {
          member = stack.pop()!
          onStack.delete(member)
          scc.push(member)
        } while (member !== id)
        if (scc.length > 1 || frame.to.includes(id)) cycles.push(scc.reverse())
      }
    }
  }
  return cycles
}

/** `decls`, each after every component that feeds it; iterative, as {@link findCycles}. */
function topologicalOrder(
  decls: readonly ComponentDeclaration[],
  upstreamOf: (id: string) => readonly string[],
): ComponentDeclaration[] {
  const done = new Set<string>()
  const order: ComponentDeclaration[] = []
  const byId = new Map(decls.map((d) => [d.id, d]))
  for (const root of decls) {
    if (done.has(root.id)) continue
    done.add(root.id)
    const path: { readonly decl: ComponentDeclaration; readonly ups: readonly string[]; i: number }[] = [
      { decl: root, ups: upstreamOf(root.id), i: 0 },
    ]
    while (path.length > 0) {
      const frame = path[path.length - 1]!
      if (frame.i < frame.ups.length) {
        const up = frame.ups[frame.i++]!
        if (done.has(up)) continue
        done.add(up)
        const decl = byId.get(up)!
        path.push({ decl, ups: upstreamOf(up), i: 0 })
        continue
      }
      path.pop()
      order.push(frame.decl)
    }
  }
  return order
}
