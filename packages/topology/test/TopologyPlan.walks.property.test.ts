// Unit test of an internal module (`src/internal/TopologyPlan.ts`), against a model: the walks
// planning makes without recursion (the cycle search, the topological order, which sinks carry
// finalizers and which transforms acknowledge: dad1e94) give on any small graph what the recursive
// walks and the per-component walks they replaced gave (fast-check prints the seed).
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { planTopology } from '../src/internal/TopologyPlan.js'
import type { Sink } from '../src/Sink.js'
import type { Source } from '../src/Source.js'
import type { ComponentDeclaration } from '../src/TopologyBuilder.js'
import type { Transform } from '../src/Transform.js'

interface Shape {
  readonly sources: readonly boolean[] // canAcknowledge of each
  readonly transforms: readonly (readonly number[])[] // producer indexes read by each
  readonly sinks: readonly { readonly inputs: readonly number[]; readonly acks: boolean | undefined }[]
  readonly acknowledgements: boolean | undefined
  readonly cyclic: boolean
}

const shape: fc.Arbitrary<Shape> = fc.record({
  sources: fc.array(fc.boolean(), { minLength: 1, maxLength: 3 }),
  transforms: fc.array(fc.uniqueArray(fc.nat(20), { minLength: 1, maxLength: 3 }), { maxLength: 10 }),
  sinks: fc.array(
    fc.record({
      inputs: fc.uniqueArray(fc.nat(20), { minLength: 1, maxLength: 3 }),
      acks: fc.constantFrom(true, false, undefined),
    }),
    { minLength: 1, maxLength: 4 },
  ),
  acknowledgements: fc.constantFrom(true, false, undefined),
  cyclic: fc.boolean(),
})

/** The declarations of `s`: producer `i` is a source, then a transform; acyclic unless `s.cyclic`. */
function declarationsOf(s: Shape): ComponentDeclaration[] {
  const producers = [...s.sources.map((_, i) => `s${i}`), ...s.transforms.map((_, i) => `t${i}`)]
  // Acyclic: a transform reads only sources and transforms declared before it.
  const inputsOf = (picks: readonly number[], limit: number): string[] => [
    ...new Set(picks.map((p) => producers[p % limit]!)),
  ]
  const decls: ComponentDeclaration[] = []
  s.sources.forEach((canAcknowledge, i) => {
    const component: Source = { kind: 'src', canAcknowledge, run: async () => {} } as unknown as Source
    decls.push({ role: 'source', id: `s${i}`, inputs: [], component })
  })
  s.transforms.forEach((picks, i) => {
    const limit = s.cyclic ? producers.length : s.sources.length + i
    const component: Transform = { kind: 'tr', process: () => undefined } as unknown as Transform
    decls.push({ role: 'transform', id: `t${i}`, inputs: inputsOf(picks, limit), component, options: {} })
  })
  s.sinks.forEach(({ inputs, acks }, i) => {
    const component: Sink = { kind: 'snk', write: async () => {}, canAcknowledge: true } as unknown as Sink
    const options = acks === undefined ? {} : { acknowledgements: acks }
    decls.push({
      role: 'sink',
      id: `k${i}`,
      inputs: inputsOf(inputs, producers.length),
      component,
      options,
    } as ComponentDeclaration)
  })
  return decls
}

// The model: the walks as they were before dad1e94 (recursive, one per sink or transform).

function reachable(starts: readonly string[], next: (id: string) => readonly string[]): Set<string> {
  const seen = new Set<string>(starts)
  const stack = [...starts]
  while (stack.length > 0)
    for (const id of next(stack.pop()!))
      if (!seen.has(id)) {
        seen.add(id)
        stack.push(id)
      }
  return seen
}

function recursiveCycles(ids: readonly string[], next: (id: string) => readonly string[]): string[][] {
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
      } else if (onStack.has(to)) low.set(id, Math.min(low.get(id)!, index.get(to)!))
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

function recursiveOrder(ids: readonly string[], upstreamOf: (id: string) => readonly string[]): string[] {
  const done = new Set<string>()
  const order: string[] = []
  const visit = (id: string): void => {
    if (done.has(id)) return
    done.add(id)
    for (const up of upstreamOf(id)) visit(up)
    order.push(id)
  }
  for (const id of ids) visit(id)
  return order
}

describe('planning walks (property)', () => {
  it('find the same cycles, order and acknowledgements as the recursive, per-component walks', () => {
    fc.assert(
      fc.property(shape, (s) => {
        const decls = declarationsOf(s)
        const ids = decls.map((d) => d.id)
        const consumers = new Map<string, string[]>(ids.map((id) => [id, []]))
        for (const d of decls) for (const input of d.inputs) consumers.get(input)!.push(d.id)
        const downstream = (id: string): readonly string[] => consumers.get(id)!
        const upstreamOf = (id: string): readonly string[] => decls.find((d) => d.id === id)!.inputs

        const { plan, problems } = planTopology(decls, { acknowledgements: s.acknowledgements })
        const cycles = recursiveCycles(ids, downstream)
        expect(problems.filter((p) => p.code === 'CYCLE').map((p) => p.component)).toEqual(cycles.flat())
        if (cycles.length > 0) return
        expect(problems).toEqual([])
        expect(plan).toBeDefined()
        expect(plan!.components.map((d) => d.id)).toEqual(recursiveOrder(ids, upstreamOf))

        const { sourceAcks, sinkAcks } = plan!
        const carries = new Map<string, boolean>()
        for (const sinkId of sinkAcks.keys()) {
          let found = false
          for (const id of reachable([sinkId], upstreamOf)) if (sourceAcks.get(id) === true) found = true
          carries.set(sinkId, found)
        }
        expect(plan!.sinkCarriesFinalizers).toEqual(carries)
        const transformAcks = new Map<string, boolean>()
        for (const d of decls) {
          if (d.role !== 'transform') continue
          let fed = false
          for (const up of reachable([d.id], upstreamOf)) if (sourceAcks.get(up) === true) fed = true
          let matters = false
          if (fed)
            for (const id of reachable(downstream(d.id), downstream)) {
              const role = decls.find((x) => x.id === id)!.role
              if (role === 'transform' || (role === 'sink' && sinkAcks.get(id) === true)) matters = true
            }
          transformAcks.set(d.id, matters)
        }
        expect(plan!.transformAcks).toEqual(transformAcks)
      }),
      { numRuns: 500 },
    )
  })
})
