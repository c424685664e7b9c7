/**
 * Validation and acknowledgement propagation: a pure function from the builder's declarations to
 * a plan the runtime follows, or to the list of every problem found.
 */
import type { ComponentDeclaration, TopologyOptions, TopologyWarning } from '../TopologyBuilder.js'
import type { TopologyProblem, TopologyProblemCode } from '../TopologyError.js'
import { isEdgeBufferFactory } from './isEdgeBufferFactory.js'

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
}

export interface PlanResult {
  readonly plan: TopologyPlan | undefined
  readonly problems: readonly TopologyProblem[]
  readonly warnings: readonly TopologyWarning[]
}

export const TOPOLOGY = '(topology)'

export function planTopology(
  declarations: readonly ComponentDeclaration[],
  options: TopologyOptions,
): PlanResult {
  const problems: TopologyProblem[] = []
  const problem = (code: TopologyProblemCode, component: string, field: string, message: string): void => {
    problems.push({ code, component, field, message })
  }

  checkTopologyOptions(options, problem)

  const byId = new Map<string, ComponentDeclaration>()
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
      if (port !== '') {
        const declared = producer.role === 'transform' ? (producer.component.outputs ?? []) : []
        if (!declared.includes(port)) {
          const list = declared.length === 0 ? 'none' : declared.map((p) => `'${p}'`).join(', ')
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
    checkOptions(decl, options, problem)
    checkConfig(decl, problem)
  }

  const downstream = (id: string): string[] => [...(edges.get(id)?.values() ?? [])].flat()

  for (const cycle of findCycles([...byId.keys()], downstream)) {
    const members = cycle.map((id) => `'${id}'`).join(', ')
    for (const id of cycle) problem('CYCLE', id, 'inputs', `'${id}' is part of a cycle through ${members}`)
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
    if (decl.role === 'sink')
      sinkAcks.set(decl.id, decl.options.acknowledgements ?? options.acknowledgements ?? false)
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
  const sinkCarriesFinalizers = new Map<string, boolean>()
  for (const sinkId of sinkAcks.keys()) {
    let carries = false
    for (const id of reachable([sinkId], upstreamOf)) if (sourceAcks.get(id) === true) carries = true
    sinkCarriesFinalizers.set(sinkId, carries)
  }

  if (problems.length > 0) return { plan: undefined, problems, warnings }
  return {
    plan: {
      options,
      components: topologicalOrder([...byId.values()], upstreamOf),
      edges,
      upstreams,
      sourceAcks,
      sinkAcks,
      sinkCarriesFinalizers,
    },
    problems,
    warnings,
  }
}

type Report = (code: TopologyProblemCode, component: string, field: string, message: string) => void

const isPositiveInteger = (n: unknown): boolean => typeof n === 'number' && Number.isInteger(n) && n > 0
const isPositive = (n: unknown): boolean => typeof n === 'number' && Number.isFinite(n) && n > 0
const isNonNegative = (n: unknown): boolean => typeof n === 'number' && Number.isFinite(n) && n >= 0

function checkTopologyOptions(options: TopologyOptions, problem: Report): void {
  if (options.ackTimeoutMs !== undefined && !isPositive(options.ackTimeoutMs)) {
    problem(
      'INVALID_OPTION',
      TOPOLOGY,
      'ackTimeoutMs',
      'ackTimeoutMs must be a positive number of milliseconds',
    )
  }
}

function checkOptions(decl: ComponentDeclaration, options: TopologyOptions, problem: Report): void {
  if (decl.role === 'source') return
  const buffer = decl.options.buffer
  if (buffer !== undefined) {
    if (isEdgeBufferFactory(buffer) && decl.role === 'transform') {
      problem(
        'INVALID_OPTION',
        decl.id,
        'buffer',
        `a transform reads from the in-memory channel; a ${buffer.kind} buffer can only stand in front of a sink`,
      )
    } else if (isEdgeBufferFactory(buffer)) {
      // Another kind of buffer checks its own options; the topology only files what it says.
      let issues: readonly { field: string; message: string }[]
      try {
        issues = buffer.validate?.({ componentId: decl.id, dataDir: options.dataDir }) ?? []
      } catch (error) {
        issues = [{ field: '', message: `the ${buffer.kind} buffer's validate() threw: ${String(error)}` }]
      }
      for (const issue of issues) {
        problem(
          'INVALID_OPTION',
          decl.id,
          issue.field === '' ? 'buffer' : `buffer.${issue.field}`,
          issue.message,
        )
      }
    } else if (buffer.type !== undefined && buffer.type !== 'memory') {
      // A config from before buffers were factories (`{ type: 'disk' }`) must not run in memory.
      problem(
        'INVALID_OPTION',
        decl.id,
        'buffer.type',
        `buffer type '${String(buffer.type)}' is not built in: only the in-memory channel is given by options; other kinds are factories (a disk buffer: buffer: diskBuffer({ … }) from @ackline/buffers)`,
      )
    } else if (buffer.maxEvents !== undefined && !isPositiveInteger(buffer.maxEvents)) {
      problem('INVALID_OPTION', decl.id, 'buffer.maxEvents', 'maxEvents must be a positive integer')
    }
  }
  if (decl.role === 'sink') {
    const retry = decl.options.retry
    if (retry?.attempts !== undefined && !isPositiveInteger(retry.attempts)) {
      problem(
        'INVALID_OPTION',
        decl.id,
        'retry.attempts',
        'attempts must be a positive integer (1 = no retry)',
      )
    }
    for (const field of ['initialBackoffMs', 'maxBackoffMs'] as const) {
      if (retry?.[field] !== undefined && !isNonNegative(retry[field])) {
        problem('INVALID_OPTION', decl.id, `retry.${field}`, `${field} must be a non-negative number`)
      }
    }
  } else {
    const interval = decl.component.flushIntervalMs
    if (interval !== undefined && !isPositive(interval)) {
      problem('INVALID_CONFIG', decl.id, 'flushIntervalMs', 'flushIntervalMs must be a positive number')
    }
  }
}

function checkConfig(decl: ComponentDeclaration, problem: Report): void {
  if (decl.component.validate === undefined) return
  try {
    for (const issue of decl.component.validate()) {
      problem('INVALID_CONFIG', decl.id, issue.field, `${decl.component.kind}: ${issue.message}`)
    }
  } catch (error) {
    problem(
      'INVALID_CONFIG',
      decl.id,
      '(validate)',
      `${decl.component.kind}: validate() threw: ${String(error)}`,
    )
  }
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

/** The strongly connected components that form a cycle (Tarjan's algorithm). */
function findCycles(ids: readonly string[], next: (id: string) => readonly string[]): string[][] {
  let counter = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const onStack = new Set<string>()
  const stack: string[] = []
  const cycles: string[][] = []
  const visit = (id: string): void => {
    index.set(id, counter)
    low.set(id, counter++)
    stack.push(id)
    onStack.add(id)
    for (const to of next(id)) {
      if (!index.has(to)) {
        visit(to)
        low.set(id, Math.min(low.get(id)!, low.get(to)!))
      } else if (onStack.has(to)) {
        low.set(id, Math.min(low.get(id)!, index.get(to)!))
      }
    }
    if (low.get(id) === index.get(id)) {
      const scc: string[] = []
      let member: string
      do {
        member = stack.pop()!
        onStack.delete(member)
        scc.push(member)
      } while (member !== id)
      if (scc.length > 1 || next(id).includes(id)) cycles.push(scc.reverse())
    }
  }
  for (const id of ids) if (!index.has(id)) visit(id)
  return cycles
}

function topologicalOrder(
  decls: readonly ComponentDeclaration[],
  upstreamOf: (id: string) => readonly string[],
): ComponentDeclaration[] {
  const done = new Set<string>()
  const order: ComponentDeclaration[] = []
  const byId = new Map(decls.map((d) => [d.id, d]))
  const visit = (decl: ComponentDeclaration): void => {
    if (done.has(decl.id)) return
    done.add(decl.id)
    for (const up of upstreamOf(decl.id)) visit(byId.get(up)!)
    order.push(decl)
  }
  for (const decl of decls) visit(decl)
  return order
}
