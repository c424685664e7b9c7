// A memory channel as the runtime makes one for an edge that blocks when full, for tests of the
// channel and of what feeds it.
import { MemoryChannel } from '../../src/internal/MemoryChannel.js'

const failure = { componentId: 'out', code: 'X', message: 'x' }

/** A channel of `maxEvents` that blocks producers when full and drops nothing. */
export function blockingChannel(maxEvents: number): MemoryChannel {
  return new MemoryChannel({
    maxEvents,
    whenFull: 'block',
    droppedStatus: 'rejected',
    droppedFailure: failure,
    stoppedFailure: failure,
    onDrop: () => {},
  })
}
