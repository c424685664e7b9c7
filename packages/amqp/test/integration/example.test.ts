import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { main } from '../../../../examples/rabbitmq.js'
import { Admin, BROKER_URL, brokerAvailable, uniqueName } from './broker.js'

const available = await brokerAvailable()

describe.skipIf(!available)('the README example (examples/rabbitmq.ts)', () => {
  let admin: Admin
  beforeAll(async () => {
    admin = await Admin.open()
  })
  afterAll(async () => {
    await admin?.close()
  })

  it('acks the four delivered orders and nacks the one the sink rejects', async () => {
    const queue = uniqueName('example')
    admin.queues.push(queue)
    const { delivered, counters } = await main(BROKER_URL, queue)
    expect(delivered).toEqual([0, 1, 2, 3])
    expect(counters).toMatchObject({ received: 5, acked: 4, rejected: 1, inFlight: 0 })
    expect(await admin.messageCount(queue)).toBe(0)
  })
})
