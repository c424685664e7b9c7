// The core model on its own: a source reads three batches, events fan out to two "sinks", and
// each batch's status prints when its last copy is settled.
import { BatchNotifier, EventArray, LogEvent } from '@ackline/core'

const outcomes = [
  { name: 'all delivered', archive: 'delivered', alerts: 'delivered' },
  { name: 'one copy errored', archive: 'delivered', alerts: 'errored' },
  { name: 'one copy rejected', archive: 'rejected', alerts: 'errored' },
] as const

const pending: Promise<void>[] = []
for (const outcome of outcomes) {
  const { notifier, receiver } = BatchNotifier.create({ sourceId: 'demo' })
  const batch = EventArray.from([1, 2, 3].map((n) => new LogEvent({ n, batch: outcome.name })))
  batch.attach(notifier)
  const copies = batch.clone() // fan-out: a second handle on every event
  batch.end(outcome.archive)
  copies.events.forEach((event, i) => {
    event.end(i === 2 ? outcome.alerts : 'delivered')
  })
  pending.push(receiver.promise.then((status) => console.log(`batch "${outcome.name}": ${status}`)))
}
await Promise.all(pending)
