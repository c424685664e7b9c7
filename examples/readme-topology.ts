// The topology shown in the README, kept here so that `pnpm typecheck` proves it compiles.
// Run it with: npx tsx --conditions=source examples/readme-topology.ts (Ctrl-C stops it).
import { diskBuffer } from '@ackline/buffers'
import { file, memory } from '@ackline/sinks'
import { httpServer } from '@ackline/sources'
import { TopologyBuilder } from '@ackline/topology'
import { remap, route } from '@ackline/transforms'

const topology = new TopologyBuilder({ acknowledgements: true })
  .source('in', httpServer({ address: '127.0.0.1:8686' }))
  .transform(
    'parse',
    ['in'],
    remap((e) => {
      e.set('level', String(e.get('level') ?? 'info'))
    }),
  )
  .transform('split', ['parse'], route({ errors: (e) => e.get('level') === 'error' }))
  .sink('alerts', ['split.errors'], memory(), { authoritative: true })
  .sink('archive', ['parse', 'split._unmatched'], file({ path: './events.ndjson' }), {
    buffer: diskBuffer({ path: './data/archive' }),
  })
  .build() // validates everything at once; throws one TopologyError listing every problem

await topology.start()
process.once('SIGINT', () => void topology.stop({ drainTimeoutMs: 5000 }))
await topology.done
