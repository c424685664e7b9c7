// A custom transform: redacts a field, drops debug events, and sends errors to a port of their
// own. `perEvent` does the plumbing (passing the array on whole while nothing changes, emitting
// in order), so the transform is its own logic only.
// Run it: npx tsx --conditions=source examples/custom-transform.ts
import { pathToFileURL } from 'node:url'
import type { LogEvent } from '@ackline/core'
import { memory } from '@ackline/sinks'
import { generator } from '@ackline/sources'
import { perEvent, TopologyBuilder, type Transform } from '@ackline/topology'

/**
 * The transform. Every member of the `Transform` contract is here: `kind` and `process`
 * (required), `outputs` for named ports and `dropStatus` (optional; `validate`, `flush` and
 * `flushIntervalMs` are optional too, for transforms that hold events across calls).
 */
export const redact: Transform<'errors'> = {
  kind: 'redact',
  outputs: ['errors'],
  // A dropped debug event was processed as asked: its batch may still be acknowledged.
  dropStatus: 'delivered',
  process: perEvent(
    (event: LogEvent) => {
      event.remove('password')
      const level = event.get('level')
      // undefined: the event goes on unchanged; anything else goes to the second function.
      return level === 'debug' || level === 'error' ? level : undefined
    },
    (event, level, context) => {
      if (level === 'debug') context.drop(event)
      else context.emit(event, 'errors')
    },
  ),
}

/** Runs the example: six events, two debug ones dropped, one error routed to its own sink. */
export async function main(): Promise<{ main: unknown[]; errors: unknown[] }> {
  const levels = ['info', 'debug', 'error', 'info', 'debug', 'info']
  const all = memory()
  const errors = memory()
  const topology = new TopologyBuilder({ acknowledgements: true })
    .source(
      'gen',
      generator({ count: levels.length, record: (i) => ({ i, level: levels[i]!, password: 'secret' }) }),
    )
    .transform('redact', ['gen'], redact)
    .sink('main', ['redact'], all)
    .sink('errors', ['redact.errors'], errors)
    .build()
  await topology.start()
  await topology.done
  return { main: [...all.events], errors: [...errors.events] }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(JSON.stringify(await main()))
}
