import { BatchNotifier, LogEvent } from '@ackline/core'
import { expect, it } from 'vitest'

it('resolves a batch once every handle ended', async () => {
  const { notifier, receiver } = BatchNotifier.create({ sourceId: 's' })
  const a = new LogEvent({ n: 1 })
  notifier.attach(a)
  notifier.release()
  const b = a.clone()
  a.end('delivered')
  expect(receiver.status).toBeUndefined()
  b.end('errored')
  expect(await receiver).toBe('errored')
})
